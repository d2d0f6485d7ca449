"""A pydantic model's fields described once: for `societas scenarios`, the docs and the app's Launch form; and the
rule every number of a config obeys.

`describe_fields(Config)` gives each field's name, type (Optional unwrapped), default, bounds,
pattern, Literal options and help text, read from the model's own declarations. `StrictNumbers`, a base of
every config model, refuses what pydantic would take for a number but is not one (`true`, `"1"`), wherever the
number sits (a field, an optional one, a list's items, a mapping's values such as `reward_weights`), and any
number past `MAX_MAGNITUDE`: a finite value that large overflows the sums and products of a run (a reward
weight of 1e308 made rewards infinite), so it is refused at the boundary.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Any, Optional

from pydantic import BaseModel, model_validator

_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("pattern", "~"))


@dataclass(frozen=True)
class FieldDoc:
    """One field: `annotation` is the declared type, `kind` the same with Optional unwrapped."""

    name: str
    annotation: Any
    kind: Any
    optional: bool
    default: Any
    help: str
    lo: Optional[float] = None  # from ge / gt
    hi: Optional[float] = None  # from le / lt
    options: tuple[Any, ...] = ()  # a Literal's values
    bounds: str = ""  # ">= 1, <= 100", as printed

    @property
    def type_name(self) -> str:
        """`int`, `a|b|c` for a Literal, `X?` for an Optional, `list[X]`."""
        return type_name(self.annotation)


def describe_fields(model: type[BaseModel]) -> list[FieldDoc]:
    """Every field of `model`, in declaration order."""
    out = []
    for name, f in model.model_fields.items():
        kind, optional = f.annotation, False
        args = typing.get_args(kind)
        if typing.get_origin(kind) is typing.Union and type(None) in args:
            rest = [a for a in args if a is not type(None)]
            optional = True
            kind = rest[0] if len(rest) == 1 else kind
        lo = hi = None
        bounds = []
        for m in f.metadata:
            for attr, sym in _BOUNDS:
                value = getattr(m, attr, None)
                if value is None:
                    continue
                bounds.append(f"{sym} {value}")
                if attr in ("ge", "gt"):
                    lo = value
                elif attr in ("le", "lt"):
                    hi = value
        options = tuple(typing.get_args(kind)) if typing.get_origin(kind) is typing.Literal else ()
        out.append(FieldDoc(name=name, annotation=f.annotation, kind=kind, optional=optional,
                            default=f.get_default(call_default_factory=True), help=f.description or "", lo=lo, hi=hi,
                            options=options, bounds=", ".join(bounds)))
    return out


def type_name(annotation: Any) -> str:
    """`int`, `a|b|c` for a Literal, `X?` for an Optional, `list[X]`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "|".join(map(str, args))
    if origin is typing.Union and type(None) in args:
        return type_name(next(a for a in args if a is not type(None))) + "?"
    if origin is list:
        return f"list[{type_name(args[0])}]" if args else "list"
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


#: the largest magnitude a config number may have: far beyond any meaningful setting, and far enough below the
#: floats' limit (1.8e308) that a run's sums and products (weights x payoffs x agents x ticks) stay finite
MAX_MAGNITUDE = 1e12


def loose_number(annotation: Any, value: Any, *, size: bool = False) -> Optional[str]:
    """Why `value` is no number for a field declared `annotation`, looking into Optional, lists, tuples and mappings:
    a bool or a string (e.g. ".payoff must be a number, not true"), or with `size` a magnitude past MAX_MAGNITUDE.
    None when it is one, or when the field holds no number."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in (int, float):
        if isinstance(value, (bool, str)):
            shown = str(value).lower() if isinstance(value, bool) else repr(value[:40])
            return f" must be a number, not {shown}"
        big = abs(value) > MAX_MAGNITUDE if isinstance(value, int) else (
            isinstance(value, float) and math.isfinite(value) and abs(value) > MAX_MAGNITUDE)  # (inf, nan: pydantic's)
        if size and big:
            return f" must be at most {MAX_MAGNITUDE:g} in magnitude (larger values overflow a run's sums)"
        return None
    if origin is typing.Union:
        numeric = [a for a in args if a is not type(None)]
        if value is None or len(numeric) != 1:
            return None
        return loose_number(numeric[0], value, size=size)
    if origin in (list, tuple) and isinstance(value, (list, tuple)) and args:
        for i, item in enumerate(value):
            inner = args[0] if origin is list or (len(args) == 2 and args[1] is Ellipsis) else (
                args[i] if i < len(args) else None)
            why = loose_number(inner, item, size=size) if inner is not None else None
            if why:
                return f".{i}{why}"
        return None
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        for key, item in value.items():
            why = loose_number(args[1], item, size=size)
            if why:
                return f".{key}{why}"
    return None


class StrictNumbers(BaseModel):
    """A model whose numbers are numbers (`loose_number`): a bool is never one, nor a string that spells one (checked
    before pydantic would convert them), and none is larger than MAX_MAGNITUDE (checked after the fields' own bounds,
    whose messages name the field)."""

    @model_validator(mode="before")
    @classmethod
    def _strict_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                f = cls.model_fields.get(name)
                _refuse(name, loose_number(f.annotation, value) if f is not None else None)
        return data

    @model_validator(mode="after")
    def _bounded_numbers(self) -> "StrictNumbers":
        for name, f in type(self).model_fields.items():
            _refuse(name, loose_number(f.annotation, getattr(self, name), size=True))
        return self


class NumberError(ValueError):
    """A value that is no number where the field (`field`, dotted into lists and mappings) holds numbers."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field!r} {problem}")
        self.field, self.problem = field, problem


def _refuse(name: str, why: Optional[str]) -> None:
    if why:
        path, _, rest = why.partition(" ")
        raise NumberError(f"{name}{path}", rest)
