"""The scenario registry: a stable name for every scenario class, and user scenarios by reference.

Adding a scenario to the package = one package with a `SocietyModel` subclass, plus one line in
`BUILTIN_REFS` below (its name and `module:Class`) and one in `BUILTIN_DESCRIPTIONS` (its `Description`:
config and metric docs from modules that import no Mesa, what readers of stored runs need). The registry
names scenarios without loading them: a built-in class is imported the first time it is used (`societas
--help` and `list` load no scenario, `show RUN` only the run's description). A scenario of your own needs
no change here:

- decorate its class with `@register` (also `sim.register`): `get_scenario("its name")` finds it
  in the process that imported it (a script, a notebook);
- or name it by reference, `package.module:Class` or `path/to/file.py:Class`: `societas run`,
  `societas scenarios`, sweep files and `sim.run` import it. A run stores the reference (a file
  path made absolute), so replay, resume, fork, show, export and the app load the class again.

`register_strategy(scenario, name)` adds a scripted strategy to a scenario class from user code.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union, overload

from sim.core import refs
from sim.core.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover - for type checkers: the class is imported when a scenario is checked
    from sim.tick.model import SocietyModel

__all__ = ["REGISTRY", "BUILTIN", "BUILTIN_REFS", "BUILTIN_DESCRIPTIONS", "Description", "describe", "get_scenario",
           "find_scenario", "reference_of", "resolve", "register", "register_strategy", "is_reference"]

M = TypeVar("M", bound="type[SocietyModel]")
F = TypeVar("F", bound=Callable[..., Any])

#: the scenarios shipped with the package, by reference: each is imported the first time it is used
BUILTIN_REFS: dict[str, str] = {
    "commons": "scenarios.commons.model:CommonsModel",
    "donor": "scenarios.donor.model:DonorModel",
    "market": "scenarios.market.model:MarketModel",
    "social": "scenarios.social.model:SocialModel",
    "gathering": "scenarios.grid.model:GatheringModel",
    "cleanup": "scenarios.grid.model:CleanupModel",
}

#: what readers of a built-in's stored runs need of it, without its world (no Mesa): each a `Description`
BUILTIN_DESCRIPTIONS: dict[str, str] = {
    "commons": "scenarios.commons.describe:DESCRIPTION",
    "donor": "scenarios.donor.describe:DESCRIPTION",
    "market": "scenarios.market.describe:DESCRIPTION",
    "social": "scenarios.social.describe:DESCRIPTION",
    "gathering": "scenarios.grid.describe:GATHERING",
    "cleanup": "scenarios.grid.describe:CLEANUP",
}


@dataclass(frozen=True)
class Description:
    """A scenario as a reader of its stored runs sees it (`show`, usage and cost): its config class, its metric docs
    and the published values its runs are compared with. A built-in's lives in a module that imports no Mesa (its
    class reads the same config and report modules); any scenario class answers the same attribute names."""

    Config: type
    tick_metric_docs: Mapping[str, str]
    final_metric_docs: Mapping[str, str]
    reference: Mapping[str, Any] = field(default_factory=dict)


class _Registry(dict):
    """name -> scenario class. A built-in is held as its `module:Class` reference until first read (`[]`, `get`,
    `items`, `values`), then as its class; names (`in`, `sorted`, `len`) never import anything. `.get(ref)` also
    resolves a `module:Class` / `file.py:Class` reference (None when it cannot be loaded), so readers of stored
    runs (summaries, the app) find user scenarios."""

    def __getitem__(self, key: Any) -> Any:
        value = dict.__getitem__(self, key)
        if isinstance(value, str):  # a built-in not loaded yet (its module is ours: an error in it is a bug, not bad input)
            module, _, name = value.partition(":")
            value = getattr(importlib.import_module(module), name)
            dict.__setitem__(self, key, value)
        return value

    def __iter__(self) -> Iterator[Any]:  # defined so that dict(REGISTRY) and {**REGISTRY} read through __getitem__
        return dict.__iter__(self)

    def get(self, key: Any, default: Any = None) -> Any:  # noqa: D102
        if dict.__contains__(self, key):
            return self[key]
        if isinstance(key, str) and is_reference(key):
            try:
                return _load_reference(key)
            except UsageError:
                return default
        return default

    def items(self) -> Any:  # noqa: D102 - every class loaded (a listing of all scenarios)
        for key in list(dict.keys(self)):
            self[key]
        return dict.items(self)

    def values(self) -> Any:  # noqa: D102
        return dict(self.items()).values()


REGISTRY: dict[str, type[SocietyModel]] = _Registry(BUILTIN_REFS)
#: the names shipped with the package: never replaced by `register`
BUILTIN = frozenset(BUILTIN_REFS)


def _society_model() -> type[SocietyModel]:
    """The scenarios' base class, imported when a class is checked: by then the class in hand has loaded it (a
    class cannot subclass what was never imported), so naming scenarios alone loads no Mesa."""
    from sim.tick.model import SocietyModel

    return SocietyModel


def _is_scenario_class(obj: Any) -> bool:
    base = _society_model()
    return isinstance(obj, type) and issubclass(obj, base) and obj is not base


# ----- registration -------------------------------------------------------------------------------------------
@overload
def register(cls: M) -> M: ...
@overload
def register(cls: None = None, *, name: Optional[str] = None) -> Callable[[M], M]: ...


def register(cls: Any = None, *, name: Optional[str] = None) -> Any:
    """Class decorator: put a `SocietyModel` subclass in `REGISTRY` under its `name` (or `name=`).

        @register
        class PublicGoods(SocietyModel):
            name = "public_goods"
            ...

    Registering the same name again replaces the earlier class (re-running a notebook cell);
    a built-in scenario's name is refused. Returns the class unchanged.
    """

    def apply(klass: Any) -> Any:
        if not _is_scenario_class(klass):
            raise TypeError(f"@register takes a SocietyModel subclass, not {klass!r}")
        key = name or klass.name
        if not key or not isinstance(key, str):
            raise ValueError(f"{klass.__qualname__} has no `name`: set the class attribute `name = \"...\"` or use @register(name=...)")
        if is_reference(key):
            raise ValueError(f"scenario name {key!r} may not contain ':' (that marks a module:Class reference)")
        if key in BUILTIN and REGISTRY.get(key) is not klass:
            raise ValueError(f"{key!r} is a built-in scenario; give {klass.__qualname__} another `name`")
        if name and klass.name != name:
            klass.name = name
        REGISTRY[key] = klass
        return klass

    return apply if cls is None else apply(cls)


def register_strategy(scenario: Union[str, type[SocietyModel]], name: str) -> Callable[[F], F]:
    """Decorator: add a scripted strategy `(request, rng) -> value` to a scenario class.

        @register_strategy("commons", "cautious")
        def cautious(request, rng):
            ...

    The class gets a new `strategies` dict (its parents' are untouched). The strategy exists in
    this process only: to use it from the CLI or to replay such runs later, define it in a
    subclass in a file and run that by reference (see docs/tutorial.md).
    """
    cls = get_scenario(scenario) if isinstance(scenario, str) else scenario

    def apply(fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"a strategy is a callable (request, rng) -> value, not {fn!r}")
        cls.strategies = {**dict(cls.strategies), name: fn}
        return fn

    return apply


# ----- lookup -------------------------------------------------------------------------------------------------
def is_reference(ref: str) -> bool:
    """Whether `ref` names a class by `module:Class` or `path/to/file.py:Class` (not a registered name)."""
    return refs.is_reference(ref)


def get_scenario(ref: Union[str, type[SocietyModel]]) -> type[SocietyModel]:
    """The scenario class for a registered name or a `module:Class` / `file.py:Class` reference.

    Raises a one-line UsageError for an unknown name, a missing file, module or class, a class
    that is not a SocietyModel, or an error raised while importing the user's file.
    """
    if isinstance(ref, type):
        if _is_scenario_class(ref):
            return ref
        raise UsageError(f"{ref.__qualname__} is not a SocietyModel subclass")
    if not isinstance(ref, str):
        raise UsageError(f"a scenario is a name or a module:Class reference, not {type(ref).__name__}")
    if dict.__contains__(REGISTRY, ref):
        return REGISTRY[ref]
    if is_reference(ref):
        return _load_reference(ref)
    raise UsageError(f"unknown scenario {ref!r}; valid: {', '.join(sorted(REGISTRY))}, "
                     "or a reference module:Class or path/to/file.py:Class")


def describe(ref: str) -> Optional[Any]:
    """What a reader of stored runs needs of scenario `ref` (a `Description`'s attributes): a built-in's without
    importing its world, any other scenario's class (loaded by reference); None when it cannot be loaded here."""
    if ref in BUILTIN:  # (a built-in's name is never given to another class: see `register`)
        module, _, name = BUILTIN_DESCRIPTIONS[ref].partition(":")
        return getattr(importlib.import_module(module), name)
    return REGISTRY.get(ref)


def find_scenario(ref: str) -> Optional[type[SocietyModel]]:
    """`get_scenario(ref)`, or None when it cannot be found or loaded (for readers of stored runs)."""
    try:
        return get_scenario(ref)
    except UsageError:
        return None


def reference_of(scenario: Union[str, type[SocietyModel]], *, base: Optional[Path] = None) -> str:
    """What a RunSpec stores for `scenario`, so that a later process can load the class again (see `resolve`); a
    built-in's name without importing it."""
    if isinstance(scenario, str) and scenario in BUILTIN:
        return scenario
    return resolve(scenario, base=base)[0]


def resolve(scenario: Union[str, type[SocietyModel]], *, base: Optional[Path] = None) -> tuple[str, type[SocietyModel]]:
    """(what a RunSpec stores for `scenario`, its class), looked up once.

    A built-in name stays as it is. A `file.py:Class` reference gets an absolute path (a relative one
    is taken from `base`, else the current directory); `module:Class` stays as given. A class (or the
    name it was registered under) becomes `/abs/file.py:Class` when it comes from a top-level module or
    file, `package.module:Class` from a package, and stays its registered name when it has no file
    (defined in `__main__`, a notebook): such runs can be replayed only where the name is registered.
    UsageError (see `get_scenario`) when it cannot be found or loaded.
    """
    if isinstance(scenario, str):
        if dict.__contains__(REGISTRY, scenario):
            cls = REGISTRY[scenario]  # (a built-in is imported here, the first time it is used)
            return (scenario if scenario in BUILTIN else _class_reference(cls, scenario)), cls
        if is_reference(scenario) and refs.is_path(scenario.rpartition(":")[0]):
            ref = refs.absolute(scenario, base)
            return ref, _load_reference(ref, shown=scenario)
        return scenario, get_scenario(scenario)  # a module:Class reference (or an unknown name: raises)
    cls = get_scenario(scenario)
    qualified = f"{cls.__module__}:{cls.__qualname__}"
    for key, value in dict.items(REGISTRY):  # the values as held: a built-in not loaded yet is its reference
        if key in BUILTIN and (value is cls or value == qualified):
            return key, cls
    return _class_reference(cls, cls.name), cls


def _class_reference(cls: type[SocietyModel], fallback: str) -> str:
    module = sys.modules.get(cls.__module__)
    qual = cls.__qualname__
    if "<locals>" in qual or module is None or cls.__module__ == "__main__":
        if fallback and dict.get(REGISTRY, fallback) is cls:
            return fallback
        raise UsageError(f"{qual} cannot be named for a later run: define it at the top level of a module or file, "
                         "or decorate it with @register")
    loaded = refs.file_of_module(cls.__module__)
    if loaded is not None:
        return f"{loaded}:{qual}"
    if "." in cls.__module__:
        return f"{cls.__module__}:{qual}"
    source = getattr(module, "__file__", None)
    if source and source.endswith(".py"):
        return f"{os.path.abspath(source)}:{qual}"
    return f"{cls.__module__}:{qual}"


# ----- loading references -------------------------------------------------------------------------------------
def _load_reference(ref: str, shown: Optional[str] = None) -> type[SocietyModel]:
    """The class `ref` names; error messages quote `shown` (what the user wrote) when given."""
    shown = shown or ref
    module, obj = refs.load_object(ref, "scenario", shown)
    cls_name = ref.rpartition(":")[2]
    if obj is None:
        found = sorted(n for n, v in vars(module).items() if _is_scenario_class(v))
        raise UsageError(f"{shown.rpartition(':')[0]} has no class {cls_name!r}; scenario classes there: "
                         f"{', '.join(found) or 'none'}")
    if not _is_scenario_class(obj):
        kind = ("SocietyModel itself: name your subclass" if obj is _society_model()
                else "a class" if isinstance(obj, type) else f"a {type(obj).__name__}")
        raise UsageError(f"{shown} is not a SocietyModel subclass (it is {kind})")
    return obj
