"""Token ids of a batch of prompts with their common beginning tokenised once, and only each prompt's rest per row.

A batch's prompts share most of their text (the system message, the situation every agent sees): 1,000 harvest
prompts of ~209 tokens share ~145. Tokenising that once and only the rests cuts the tokenizer's work by about
two thirds, with the same ids, because the text is cut where a byte-level BPE tokenizer cuts it anyway:

- the cut is right after a newline that follows a non-blank character and precedes one (`x\\nY`), inside the
  batch's common text;
- GPT-2's pre-tokenizer (byte level, its own pattern) ends a piece there whatever follows: no alternative of its
  pattern matches across a newline that sits between two non-blank characters, the newline is a piece of its own
  both in the whole text and at the end of the head (`\\s+(?!\\S)` or `\\s+`), and the pattern looks neither behind
  nor further ahead than the next character, which the head and the whole text share;
- BPE merges only within a piece, so the ids of the whole are the head's followed by the rest's.

That holds for a tokenizer made of exactly those parts: no normaliser, GPT-2's byte-level pre-tokenizer without an
added prefix space, a BPE model without dropout, no truncation or padding, and special tokens that strip nothing
around them and hold no newline, so none spans the cut (SmolLM2's, the embedded model's). Any other tokenizer, or a batch without such a cut, is tokenised
whole, row by row as before (a fast tokenizer that fails the check says why on stderr, once). Each batch's first
prompt is also tokenised whole and compared: a difference turns the split off for good and says so. `status()` says
in words whether the cut applied (benchmarks print it).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, Optional

#: a common beginning shorter than this (characters) is not worth a separate call
MIN_SHARED_CHARS = 64


def split_problem(tokenizer: Any) -> Optional[str]:
    """Why ids of a cut text may differ from the whole's for this tokenizer (None: the module's argument holds)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "encode_batch"):
        return "not a fast (Rust) tokenizer"
    try:
        pre = json.loads(backend.pre_tokenizer.__getstate__()) if backend.pre_tokenizer is not None else None
        model = backend.model
        added = list(backend.get_added_tokens_decoder().values())
    except Exception as exc:  # noqa: BLE001 - a tokenizer build without these accessors
        return f"its parts cannot be read ({type(exc).__name__})"
    if backend.normalizer is not None:
        return "it normalises text"
    if not (isinstance(pre, dict) and pre.get("type") == "ByteLevel" and pre.get("use_regex") and not pre.get("add_prefix_space")):
        return f"its pre-tokenizer is not GPT-2's byte-level one ({(pre or {}).get('type')})"
    if type(model).__name__ != "BPE" or getattr(model, "dropout", None):
        return "its model is not a BPE without dropout"
    if backend.truncation is not None or backend.padding is not None:
        return "it truncates or pads"
    if any(getattr(t, "lstrip", False) or getattr(t, "rstrip", False) or getattr(t, "single_word", False) for t in added):
        return "a special token strips the text around it"
    if any("\n" in str(getattr(t, "content", "")) for t in added):
        return "a special token holds a newline (a cut could fall inside it)"
    return None


def cut_point(texts: Sequence[str]) -> int:
    """Where to cut every text of the batch: the last position c inside their common beginning with text[c - 1] a
    newline between two non-blank characters (0: no such place, or too short a beginning to be worth it)."""
    if len(texts) < 2:
        return 0
    common = os.path.commonprefix([min(texts), max(texts)])
    end = len(common) - 1  # the character after the cut must be common too
    while end >= MIN_SHARED_CHARS:
        nl = common.rfind("\n", 0, end)
        if nl < 1 or nl + 1 < MIN_SHARED_CHARS:
            return 0
        if not common[nl - 1].isspace() and not common[nl + 1].isspace():
            return nl + 1
        end = nl
    return 0


class PrefixEncoder:
    """`encode(texts)`: the ids `tokenizer` gives each text (special tokens as text, none added), the batch's common
    beginning tokenised once where the tokenizer allows it (see the module's docstring)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.problem = split_problem(tokenizer)  # None: the split is open
        self.counters = {"batches_split": 0, "batches_whole": 0, "head_tokens_saved": 0}
        if self.problem is not None and getattr(tokenizer, "backend_tokenizer", None) is not None:
            # a fast tokenizer the argument does not cover: said once, so that a benchmark shows why the cut is off
            print(f"societas: the prompts' common beginning is not cut off their ids ({self.problem})", file=sys.stderr)

    def status(self) -> str:
        """Whether the cut applied, in words: how many batches took it (and the tokens it saved), or why it is off."""
        if self.problem is not None:
            return f"off: {self.problem}"
        c = self.counters
        return (f"applied in {c['batches_split']} of {c['batches_split'] + c['batches_whole']} batches "
                f"({c['head_tokens_saved']:,} head tokens not tokenised again)")

    def whole(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text tokenised whole, in one batch by the fast tokenizer's backend (its own threads)."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        batch = getattr(backend, "encode_batch_fast", None) or getattr(backend, "encode_batch", None)
        if batch is None:  # a slow (Python) tokenizer
            return [self.tokenizer.encode(t, add_special_tokens=False) for t in texts]
        return [e.ids for e in batch(list(texts), add_special_tokens=False)]

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's ids."""
        cut = cut_point(texts) if self.problem is None else 0
        if not cut:
            self.counters["batches_whole"] += 1
            return self.whole(texts)
        head, *rests = self.whole([texts[0][:cut]] + [t[cut:] for t in texts])
        out = [head + rest for rest in rests]
        if out[0] != self.whole(texts[:1])[0]:
            self.problem = "a prompt's ids differed when its common beginning was tokenised apart"
            print(f"societas: prompts are tokenised whole ({self.problem})", file=sys.stderr)
            self.counters["batches_whole"] += 1
            return self.whole(texts)
        self.counters["batches_split"] += 1
        self.counters["head_tokens_saved"] += len(head) * (len(texts) - 1)
        return out
