"""Exports of a package imported when first named: a scenario package names its model class without loading Mesa
until someone uses it, so a reader of its config or metric docs alone (`societas show`) starts fast."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562) for `package`: exported name -> the submodule that defines it, imported on
    first use; any other name is an AttributeError, as for a plain module."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
