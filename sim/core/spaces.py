"""Typed action spaces: what a decision may be.

Every backend (scripted or LLM) must return a value inside the request's space.
Spaces are frozen and validated at construction, so a malformed space fails where
it is declared, not deep inside a batch.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Union


class SpaceError(ValueError):
    """A value does not belong to an action space."""


@dataclass(frozen=True)
class Choice:
    """Pick one of a fixed list of string options."""

    options: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(str(o) for o in self.options))
        if not self.options:
            raise SpaceError("Choice needs at least one option")
        if len(set(self.options)) != len(self.options):
            raise SpaceError(f"Choice options must be unique: {self.options}")

    def validate(self, value: Any) -> str:
        """Return `value` as an option, or raise SpaceError."""
        try:
            text = str(value).strip()
        except Exception as exc:  # noqa: BLE001 - a value that cannot be printed (a 5,000-digit int) is no option
            raise SpaceError(f"{shown(value)} is not one of {list(self.options)}") from exc
        if text in self.options:
            return text
        lowered = {o.lower(): o for o in self.options}
        if text.lower() in lowered:
            return lowered[text.lower()]
        raise SpaceError(f"{shown(value)} is not one of {list(self.options)}")

    def describe(self) -> str:
        return "one of: " + ", ".join(self.options)

    def spec(self) -> dict[str, Any]:
        return {"type": "choice", "options": list(self.options)}


@dataclass(frozen=True)
class Number:
    """A number in [lo, hi], snapped to a multiple of `step` from `lo` (step 0: continuous)."""

    lo: float
    hi: float
    step: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)):
            raise SpaceError("Number bounds must be finite")
        if self.hi < self.lo:
            raise SpaceError(f"Number needs lo <= hi, got [{self.lo}, {self.hi}]")
        if self.step < 0:
            raise SpaceError("Number step must be >= 0")

    def validate(self, value: Any) -> float:
        """Return `value` as a float in range on the grid, or raise SpaceError."""
        if isinstance(value, bool):
            raise SpaceError(f"{value!r} is not a number")
        try:
            x = float(value)
        except OverflowError as exc:  # an integer past the floats (10**400)
            raise SpaceError(f"{shown(value)} is not a finite number") from exc
        except (TypeError, ValueError) as exc:
            raise SpaceError(f"{shown(value)} is not a number") from exc
        if not math.isfinite(x):
            raise SpaceError(f"{shown(value)} is not a finite number")
        if x < self.lo - 1e-9 or x > self.hi + 1e-9:
            raise SpaceError(f"{x:g} is outside [{self.lo:g}, {self.hi:g}]")
        return self.snap(x)

    def snap(self, x: float) -> float:
        """Clip to the range and round to the grid."""
        x = float(min(max(x, self.lo), self.hi))
        if self.step == 1 and x.is_integer() and float(self.lo).is_integer():
            return x  # the common case (whole units from a whole lower bound): already on the grid
        if self.step:
            k = math.floor((x - self.lo) / self.step + 0.5)
            x = float(min(self.lo + k * self.step, self.hi))
            if self.step >= 1 and float(self.step).is_integer() and float(self.lo).is_integer():
                x = float(round(x))
        return x

    def grid(self) -> list[float]:
        """Every admissible value (only for stepped spaces)."""
        if not self.step:
            raise SpaceError("a continuous Number has no grid")
        n = int(math.floor((self.hi - self.lo) / self.step + 1e-9)) + 1
        return [self.snap(self.lo + i * self.step) for i in range(n)]

    def describe(self) -> str:
        step = f" in steps of {self.step:g}" if self.step else ""
        return f"a number from {self.lo:g} to {self.hi:g}{step}"

    def spec(self) -> dict[str, Any]:
        return {"type": "number", "lo": self.lo, "hi": self.hi, "step": self.step}


@dataclass(frozen=True)
class Text:
    """Free text, at most `max_tokens` tokens (approximated by words for non-LLM backends).

    `label` says what the text is where a prompt names the space ("a Python program ..."); empty: a short
    message. It enters the space's spec (and so cache keys) only when set.
    """

    max_tokens: int = 48
    label: str = ""

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise SpaceError("Text max_tokens must be >= 1")

    def validate(self, value: Any) -> str:
        if not isinstance(value, str):
            raise SpaceError(f"{shown(value)} is not text")
        return value.strip()

    def describe(self) -> str:
        return f"{self.label or 'a short message'} (at most {self.max_tokens} tokens)"

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "text", "max_tokens": self.max_tokens}
        if self.label:
            out["label"] = self.label
        return out


@dataclass(frozen=True)
class Form:
    """Named fields, each a Choice, Number or Text."""

    fields: tuple[tuple[str, "Space"], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        fields = self.fields.items() if isinstance(self.fields, dict) else self.fields
        object.__setattr__(self, "fields", tuple((str(k), v) for k, v in fields))
        if not self.fields:
            raise SpaceError("Form needs at least one field")
        for name, sub in self.fields:
            if isinstance(sub, Form):
                raise SpaceError(f"Form field {name!r} cannot itself be a Form")

    def validate(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise SpaceError(f"{shown(value)} is not a mapping of fields")
        missing = [k for k, _ in self.fields if k not in value]
        if missing:
            raise SpaceError(f"missing fields {missing}")
        return {k: sub.validate(value[k]) for k, sub in self.fields}

    def describe(self) -> str:
        return "; ".join(f"{k}: {sub.describe()}" for k, sub in self.fields)

    def spec(self) -> dict[str, Any]:
        return {"type": "form", "fields": {k: sub.spec() for k, sub in self.fields}}


Space = Union[Choice, Number, Text, Form]


def shown(value: Any, limit: int = 80) -> str:
    """`repr(value)` for an error message, cut to `limit` characters; by its type when it cannot be printed."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value from outside may refuse to print (an int of 5,000 digits)
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def space_key(space: Space) -> str:
    """A stable string for hashing (cache keys); spaces are frozen, so it is memoised.

    Memoised by the space *and* its repr: equal spaces may print differently (`Number(0, 100, 1)` equals
    `Number(0, 100.0, 1)`, and hashes the same, but its spec says 100, not 100.0), and a cache keyed by
    equality alone gave a space the key of the first equal one the process had seen, so a key depended on
    what the process ran before (a replay in a fresh process missed the cache).
    """
    return _space_key(space, repr(space))


@lru_cache(maxsize=4096)
def _space_key(space: Space, _text: str) -> str:
    return json.dumps(space.spec(), sort_keys=True)
