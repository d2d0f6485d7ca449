"""Untrusted text in prompts: what an agent or a data file wrote never changes a prompt's structure.

A message, a post, a business's name or description, a customer's request, a written strategy: any
of them may hold newlines, quotes, chat-template tokens or lines that look like roles ("SYSTEM:",
"Assistant:"). `quote` is the one way such text enters a prompt: on one line, between double quotes
that it cannot close, with role markers and template tokens defused. Its words are kept, so a
manipulative description still says what it says (the manipulation experiments measure that); only
the framing cannot be broken. `one_line` does the same without the quotes, for labels a model must
answer with (a Choice option).
"""

from __future__ import annotations

import functools
import re
from typing import Optional

#: chat-template and instruction tokens (ChatML, Llama, Mistral, Gemma ...): removed
_TOKENS = re.compile(r"<\|[^|<>]{0,40}\|>|</?s>|\[/?INST\]|<</?SYS>>|<start_of_turn>|<end_of_turn>", re.I)
#: a role name followed by a colon ("SYSTEM:", "assistant :"): the colon becomes " -", so it reads as text
_ROLE = re.compile(r"\b(system|assistant|user|human|developer|instructions?)\s*:", re.I)
#: double quotes of every kind, and backticks: a quoted text cannot close its quotes
_QUOTES = str.maketrans({'"': "'", "\u201c": "'", "\u201d": "'", "\u201e": "'", "\u00ab": "'", "\u00bb": "'",
                         "`": "'", "\uff02": "'"})


def one_line(text: str, limit: Optional[int] = None) -> str:
    """`text` made safe for a line of a prompt: whitespace runs (newlines included) become one space, control and
    format characters (bidi overrides, zero-width) go, double quotes and backticks become single quotes, template
    tokens are removed and role markers defused; cut to `limit` characters ("..." marks the cut).

    Remembered per (text, limit): a tick's prompts quote the same posts in many members' feeds (a 1,000-member
    social tick spent most of its time outside the LLM here)."""
    return _one_line(text if type(text) is str else str(text), limit)


@functools.lru_cache(maxsize=1 << 15)
def _one_line(text: str, limit: Optional[int]) -> str:
    """`one_line`'s work, for a string."""
    text = _TOKENS.sub(" ", text)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = " ".join(text.split()).translate(_QUOTES)
    text = _ROLE.sub(lambda m: f"{m.group(1)} -", text)
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 3)].rstrip() + "..."
    return text


def quote(text: str, limit: Optional[int] = None) -> str:
    """Untrusted text as it enters a prompt: `one_line`, between double quotes it cannot close."""
    return f'"{one_line(text, limit)}"'


def code_block(code: str, max_lines: int = 200, max_chars: int = 12_000) -> str:
    """Program text an LLM wrote, as it enters a later prompt: a fenced ```python block it cannot close.

    Lines are kept (code needs them); backticks become single quotes, template tokens are removed, role
    markers at a line's start are defused and control characters dropped; at most `max_lines` lines and
    `max_chars` characters ("# ..." marks a cut).
    """
    lines = []
    for line in str(code).splitlines()[:max_lines]:
        line = _TOKENS.sub(" ", line)
        line = "".join(ch if ch.isprintable() or ch == "\t" else " " for ch in line).replace("`", "'")
        lines.append(_ROLE.sub(lambda m: f"{m.group(1)} -", line))
    text = "\n".join(lines)
    cut = len(str(code).splitlines()) > max_lines or len(text) > max_chars
    text = text[:max_chars]
    return "```python\n" + text + ("\n# ..." if cut else "") + "\n```"
