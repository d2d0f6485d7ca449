"""What an observation may hand out: plain data or read-only views of the world, never the world itself.

A run replays because everything that changes its world is recorded (the seed, the config, every
decision). Code that reads an observation and could write it back (a policy outside the process, behind
the PettingZoo environment; a program in the sandbox) would change the world in a way no record holds,
so a replay would part from the run. Hence two tools:

- `View`: a scenario that puts a window on its live world in an observation (the grid games' `GridView`,
  read by their scripted strategies at every step) subclasses it: the window reads, never writes, and
  `as_data()` gives the same content as a copy in plain data;
- `plain_copy(value)`: a deep copy of an observation as plain data (dicts, lists, tuples, sets, numbers,
  strings, numpy arrays; a `View` as its `as_data()`), sharing nothing with the world. The environment
  hands its agents such copies, so that PettingZoo's seed test compares them as data.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np

from sim.core.spaces import Choice, Number, Text

_ATOMS = (type(None), bool, int, float, complex, str, bytes)
_ATOM_TYPES = frozenset(_ATOMS)
#: frozen, and holding only numbers and strings (a Choice's options are made a tuple of str): such an object is its
#: own copy (a Form may hold a dict of fields, and is copied)
_IMMUTABLE = frozenset({Number, Text, Choice})


class View(ABC):
    """A read-only window on a live world inside an observation; `as_data()` is its content as plain data (a copy)."""

    @abstractmethod
    def as_data(self) -> Any:
        """The view's content as plain data (dicts, lists, numbers, strings, numpy arrays), sharing nothing."""


def plain_copy(value: Any) -> Any:
    """A deep copy of `value` as plain data: containers rebuilt, arrays copied, a `View` as its `as_data()`.

    An action space that cannot change (a Number, Text or Choice: frozen, of numbers and strings) is handed out
    as it is; anything else (a Form, an enum, an object of a user's scenario) is deep-copied, so a write to the
    copy never reaches what it was copied from.
    """
    kind = type(value)  # (the common types first, by exact type: an env copies every observation at every step)
    if kind in _ATOM_TYPES or kind in _IMMUTABLE:
        return value
    if kind is dict:
        return {k if type(k) in _ATOM_TYPES else plain_copy(k): v if type(v) in _ATOM_TYPES else plain_copy(v)
                for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOM_TYPES else plain_copy(v) for v in value]
    if isinstance(value, _ATOMS):
        return value
    if isinstance(value, View):
        return plain_copy(value.as_data())
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return np.array([plain_copy(v) for v in value.ravel().tolist()], dtype=object).reshape(value.shape)
        return value.copy()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {plain_copy(k): plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_copy(v) for v in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(plain_copy(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return type(value)(plain_copy(v) for v in value) if type(value) in (set, frozenset) else copy.deepcopy(value)
    return copy.deepcopy(value)


def read_only(array: np.ndarray) -> np.ndarray:
    """A view of `array` that cannot be written (`view[...] = x` raises ValueError) nor made writeable again; it
    follows the array's changes. (A contiguous array is viewed through a read-only buffer, whose flag cannot be
    turned back; any other through a plain view with the flag off.)"""
    if array.flags.c_contiguous:
        return np.frombuffer(memoryview(array).toreadonly(), dtype=array.dtype).reshape(array.shape)
    view = array.view()
    view.flags.writeable = False
    return view


__all__ = ["View", "plain_copy", "read_only"]
