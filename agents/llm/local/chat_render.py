"""Chat messages to prompt text with the chat template run once per sequence of roles, not once per prompt.

Running a Jinja chat template costs ~35 µs a prompt (34 ms of a 1,000-request call on an H200's host, beside
94 ms for the engine). Most templates only paste each message's content between fixed strings that depend on
the roles alone: for those the template is run once per sequence of roles with marker contents, which gives the
fixed strings (the "skeleton"), and each prompt is the skeleton with its contents pasted in, by string joins.

A template takes that path only when all of this holds, else every prompt runs the template as before:
- read statically (Jinja's parser), the template uses a message's `content` only by printing it, alone or joined
  with `+` or `~`, or as a test whose outcome is the same for every non-empty string (`{% if message.content %}`,
  `content is string`, `is defined`, `is none`): no filter, comparison, `in`, assignment or call on it; and it
  calls no function that could change between calls (only `raise_exception`, `namespace`, `range`);
- run with markers, then with contents that open and end with blanks and hold Jinja, HTML, quote and chat-special
  text, it gives exactly the skeleton filled with each;
- each batch's first prompt (`render_all`), rendered both ways, is the same text (else the fast path is turned off,
  and says so).
Messages with keys other than role and content, contents that are not strings and empty contents always run the
template.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Sequence
from typing import Any, Optional, Union

from jinja2 import Environment, nodes
from jinja2.ext import loopcontrols

#: functions a template may call and still be a pure function of its messages
PURE_CALLS = frozenset({"raise_exception", "namespace", "range"})
#: Jinja tests whose outcome is the same for every string
STRING_CONSTANT_TESTS = frozenset({"string", "defined", "undefined", "none"})

Skeleton = tuple[Union[str, int], ...]  # literal text, or the index of the message whose content goes there


def template_problem(source: Any) -> Optional[str]:
    """Why the chat template `source` cannot be filled by string (None when it can, as far as its text shows)."""
    if not isinstance(source, str) or not source:
        return "no chat template text"
    try:
        tree = Environment(extensions=[loopcontrols]).parse(source)
    except Exception as exc:  # noqa: BLE001 - a tag this parser does not know (e.g. {% generation %})
        return f"the template does not parse without transformers' extensions ({type(exc).__name__})"

    def walk(node: Any, parents: tuple) -> Optional[str]:
        if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name) and node.node.name not in PURE_CALLS:
            return f"the template calls {node.node.name}()"
        reads = (isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and node.arg.value == "content") \
            or (isinstance(node, nodes.Getattr) and node.attr == "content")
        if reads:
            return _content_use(node, parents)
        for child in node.iter_child_nodes():
            problem = walk(child, parents + (node,))
            if problem:
                return problem
        return None

    return walk(tree, ())


def _content_use(read: Any, parents: tuple) -> Optional[str]:
    """None when a read of `content` is printed (alone or joined) or tested in a way every non-empty string passes
    alike; else what the template does with it."""
    child, printed = read, False
    for parent in reversed(parents):
        if isinstance(parent, (nodes.Add, nodes.Concat)):
            printed = True
        elif isinstance(parent, nodes.Output):
            return None
        elif isinstance(parent, nodes.Test) and parent.node is child and parent.name in STRING_CONSTANT_TESTS and not printed:
            return None
        elif isinstance(parent, nodes.Not) and not printed:
            pass
        elif isinstance(parent, (nodes.If, nodes.CondExpr)) and parent.test is child and not printed:
            return None  # truthiness: the same for every non-empty string (empty contents run the template)
        else:
            break
        child = parent
    return f"the template does more than print a message's content ({type(parent).__name__})"


class ChatRenderer:
    """`render(messages)`: what `tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)`
    returns, by string joins where the template allows it (see the module's docstring)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        try:
            source = tokenizer.get_chat_template()
        except Exception:  # noqa: BLE001 - no template (apply_chat_template will say so), or an older transformers
            source = getattr(tokenizer, "chat_template", None)
        self.problem = template_problem(source)  # None: the fast path is open
        self._skeletons: dict[tuple[str, ...], Optional[Skeleton]] = {}
        self.counters = {"by_template": 0, "by_skeleton": 0}

    def by_template(self, messages: Sequence[dict[str, str]]) -> str:
        """The prompt text as the tokenizer's own template renders it."""
        self.counters["by_template"] += 1
        return self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)

    def render(self, messages: Sequence[dict[str, str]]) -> str:
        """One prompt's text (checked as its role sequence's skeleton was, not again)."""
        text = self._fast(messages)
        return text if text is not None else self.by_template(messages)

    def render_all(self, batch: Sequence[Sequence[dict[str, str]]]) -> list[str]:
        """Each prompt's text; the batch's first prompt is rendered both ways and compared."""
        out = [self._fast(m) for m in batch]
        if batch and out[0] is not None and out[0] != self.by_template(batch[0]):
            self.problem = "a prompt rendered by string differed from the template's text"
            self._skeletons.clear()
            print(f"societas: chat prompts run the template for every prompt ({self.problem})", file=sys.stderr)
            out = [None] * len(batch)
        return [text if text is not None else self.by_template(m) for text, m in zip(out, batch)]

    def _fast(self, messages: Sequence[dict[str, str]]) -> Optional[str]:
        if self.problem is not None:
            return None
        roles = []
        for m in messages:
            if not isinstance(m, dict) or len(m) != 2 or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str) \
                    or not m["content"]:
                return None
            roles.append(m["role"])
        key = tuple(roles)
        if key not in self._skeletons:
            self._skeletons[key] = self._skeleton(key)
        skeleton = self._skeletons[key]
        if skeleton is None:
            return None
        self.counters["by_skeleton"] += 1
        return "".join(part if isinstance(part, str) else messages[part]["content"] for part in skeleton)

    def _skeleton(self, roles: tuple[str, ...]) -> Optional[Skeleton]:
        """The template's fixed text around each message's content for this sequence of roles, checked with blank-
        edged, markup-laden and empty contents; None where the template is not a plain paste of the contents."""
        nonce = uuid.uuid4().hex
        markers = [f"\u00a7slot{i}-{nonce}\u00a7" for i in range(len(roles))]
        try:
            text = self._run(roles, markers)
        except Exception:  # noqa: BLE001 - e.g. raise_exception for a role order the template refuses
            return None
        index = {m: i for i, m in enumerate(markers)}
        pieces = re.split("(" + "|".join(re.escape(m) for m in markers) + ")", text) if markers else [text]
        skeleton: Skeleton = tuple(index.get(p, p) for p in pieces if p != "")
        if not all(any(part == i for part in skeleton) for i in range(len(roles))):
            return None  # a message's content does not appear: the template drops or transforms it
        probes = [[f" \n\t<&'\">{{{{ x }}}}{{% y %}}#\\ {m[1:-1]} \n " for m in markers],
                  [f"<|im_end|>\n<|im_start|>user\n[INST]{m[1:-1]}</s>\n\n" for m in markers]]
        for contents in probes:
            try:
                if self._run(roles, contents) != "".join(p if isinstance(p, str) else contents[p] for p in skeleton):
                    return None
            except Exception:  # noqa: BLE001
                return None
        return skeleton

    def _run(self, roles: Sequence[str], contents: Sequence[str]) -> str:
        return self.tokenizer.apply_chat_template([{"role": r, "content": c} for r, c in zip(roles, contents)],
                                                  tokenize=False, add_generation_prompt=True)
