"""Parse a chat model's free-text answer into a value of the action space."""

from __future__ import annotations

import json
import re
from typing import Any

from sim.core.spaces import Choice, Form, Number, Space, SpaceError, Text

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_JSON = re.compile(r"\{.*\}", re.S)


def parse_answer(text: str, space: Space) -> Any:
    """The value in `text` for `space`, or raise SpaceError saying why not."""
    text = (text or "").strip()
    data = _json(text)
    if isinstance(space, Form):
        if not isinstance(data, dict):
            raise SpaceError("no JSON object found")
        return space.validate(data)
    if isinstance(data, dict) and len(data) == 1:
        text = str(next(iter(data.values())))
    if isinstance(space, Text):
        if not text:
            raise SpaceError("empty answer")
        return space.validate(text)
    if isinstance(space, Number):
        match = _NUMBER.search(text.replace(",", ""))
        if not match:
            raise SpaceError(f"no number in {text[:60]!r}")
        return space.validate(match.group(0))
    if isinstance(space, Choice):
        try:
            return space.validate(text.strip(" .!\"'"))
        except SpaceError:
            lowered = text.lower()
            hits = [o for o in space.options if re.search(rf"\b{re.escape(o.lower())}\b", lowered)]
            if len(hits) == 1:
                return hits[0]
            raise SpaceError(f"{text[:60]!r} names {'no' if not hits else 'several'} of {list(space.options)}") from None
    raise SpaceError(f"unsupported space {type(space).__name__}")


def _json(text: str) -> Any:
    match = _JSON.search(text)
    if not match:
        return None
    try:
        return json.loads(match.group(0))
    except json.JSONDecodeError:
        return None


# --- strict parsing (served models without a constraint, and constrained answers alike) -------

_MARKED = re.compile(r"^\s*(?:\*\*)?\s*(?:final\s+)?answer\s*(?:\*\*)?\s*[:=]\s*(?:\*\*)?(.*?)(?:\*\*)?\s*$", re.I | re.M)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_STRICT_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


def parse_strict(text: str, space: Space) -> Any:
    """The value of `text` for `space` only when the answer IS the value, or marks it clearly.

    Accepted: the whole answer is the value (whitespace, quotes, a final period, `**bold**` and a
    ```json fence stripped); a JSON object that is the whole answer (a Form's fields, or one key
    such as {"answer": 7}); one line `ANSWER: <value>` (all such lines agreeing). Anything else
    raises SpaceError: a number fished out of a ramble is not a decision.
    """
    text = (text or "").strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text:
        raise SpaceError("empty answer")
    try:
        return _whole(text, space)
    except SpaceError as whole_error:
        marked = {m.strip() for m in _MARKED.findall(text)}
        if len(marked) == 1:
            return _whole(marked.pop(), space)
        if len(marked) > 1:
            raise SpaceError(f"several different marked answers {sorted(marked)[:3]}") from None
        raise whole_error


def _whole(text: str, space: Space) -> Any:
    data = None
    if text.startswith("{") and text.endswith("}"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise SpaceError(f"malformed JSON {text[:60]!r}") from None
    if isinstance(space, Form):
        if not isinstance(data, dict):
            raise SpaceError(f"the answer is not a JSON object: {text[:60]!r}")
        return space.validate(data)
    if isinstance(data, dict):
        if len(data) != 1:
            raise SpaceError(f"expected one value, got keys {list(data)[:5]}")
        value = next(iter(data.values()))
        if isinstance(space, Number) and isinstance(value, (int, float)) and not isinstance(value, bool):
            return space.validate(value)
        text = str(value).strip()
    bare = text.strip().strip("*").strip().strip("\"'`").strip()
    if isinstance(space, Text):
        if not bare:
            raise SpaceError("empty answer")
        if len(bare) > 8 * space.max_tokens:
            raise SpaceError(f"text longer than {space.max_tokens} tokens allow")
        return space.validate(bare)
    bare = bare.rstrip(".").strip()
    if isinstance(space, Number):
        if not _STRICT_NUMBER.fullmatch(bare):
            raise SpaceError(f"the answer is not a number: {text[:60]!r}")
        return space.validate(bare)
    if isinstance(space, Choice):
        return space.validate(bare)
    raise SpaceError(f"unsupported space {type(space).__name__}")


_ANSWER_CUE = re.compile(r"answer\s*(?:\*\*)?\s*[:=]", re.I)
_UNIT = re.compile(r"^\**\$?([+-]?\d[\d,]*(?:\.\d+)?)\**(?:\s+[A-Za-z][A-Za-z .]*)?$")


def reasoned_answer(text: str, space: Space) -> Any:
    """The value after the last "Answer:" of a reasoned answer (GovSim's "Answer: N tons": a Number's
    unit word is dropped), read strictly (parse_strict); raise SpaceError when there is none."""
    cues = list(_ANSWER_CUE.finditer(text or ""))
    if not cues:
        raise SpaceError('no "Answer:" after the reasoning')
    rest = text[cues[-1].end():].strip()  # after the last cue, to the end of its line
    last = rest.splitlines()[0].strip() if rest else ""
    if isinstance(space, Number):  # "12 tons", "$12", "**12**", "1,000": the number alone
        unit = _UNIT.match(last.rstrip("."))
        if unit:
            last = unit.group(1).replace(",", "")
    return parse_strict(last, space)


def cut_reasoning(text: str) -> str:
    """A local model's reasoning up to (not including) its own "Answer:", which is then decoded under the constraint."""
    match = re.search(r"answer\s*[:=]", text or "", re.I)
    return (text[:match.start()] if match else (text or "")).rstrip()
