"""Parse a chat model's free-text answer into a value of the action space."""

from __future__ import annotations

import json
import re
from typing import Any

from sim.spaces import Choice, Form, Number, Space, SpaceError, Text

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
