"""A pydantic model's fields described once: for `societas scenarios`, the docs and the app's Launch form.

`describe_fields(Config)` gives each field's name, type (Optional unwrapped), default, bounds,
pattern, Literal options and help text, read from the model's own declarations.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Optional

from pydantic import BaseModel

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
