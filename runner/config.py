"""Config at the boundary: YAML files and `--set key=value` pairs into a validated, bound RunSpec.

A run resolves itself once: `build_spec` looks its scenario up, validates its config and plans its
population, and returns a `BoundSpec` (the spec with those three) that `execute` trusts; a spec made
another way (by hand, read from the store) is bound once by `bind`. Every problem becomes a
`UsageError` with one line that names the field and the valid values.
"""

from __future__ import annotations

import reprlib
import typing
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import BaseModel, PrivateAttr, ValidationError

from agents.llm.prompts import get_template
from runner.data import absolute_paths
from scenarios.registry import get_scenario, resolve
from sim.core.errors import UsageError
from sim.core.fields import NumberError
from sim.core.profiles import CONTRACT, profile
from sim.core.refs import absolute, is_reference
from sim.core.spec import POLICIES, LLMSpec, RunSpec, policies_used
from sim.reward.components import COMMON_COMPONENTS, DEFAULT_WEIGHTS, unknown_weights
from sim.tick.config import ScenarioConfig
from sim.tick.model import SocietyModel
from sim.tick.population import Population, plan_population

RESERVED = ("scenario", "seed", "policy", "llm", "ticks")


MAX_CONFIG_BYTES = 1_000_000
MAX_NODES = 100_000  # scalars + containers after alias expansion: a config is small; an alias bomb is not
MAX_INT_DIGITS = 30


def cut(value: Any, limit: int = 60) -> str:
    """`repr(value)` cut to `limit` characters: messages never echo a whole (possibly huge) value."""
    text = reprlib_repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reprlib_repr(value: Any) -> str:
    """`repr(value)` with long strings, lists, mappings and nesting elided."""
    r = reprlib.Repr()
    r.maxstring, r.maxother, r.maxlist, r.maxdict, r.maxlevel = 60, 60, 6, 6, 3
    return r.repr(value)


def check_size(data: Any, what: str) -> None:
    """Refuse data whose alias-expanded size exceeds MAX_NODES (YAML alias bombs), or absurd integers.

    Counts nodes as a consumer would see them (a list referenced twice counts twice) and stops
    counting at the limit, so the check itself is bounded.
    """
    budget = [MAX_NODES]

    def walk(node: Any, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0 or depth > 50:
            raise UsageError(f"{what} is too large or too deeply nested once YAML aliases are expanded "
                             f"(more than {MAX_NODES} values or 50 levels)")
        if isinstance(node, dict):
            for k, v in node.items():
                walk(k, depth + 1)
                walk(v, depth + 1)
        elif isinstance(node, (list, tuple, set)):
            for v in node:
                walk(v, depth + 1)
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) >= 10 ** MAX_INT_DIGITS:
            raise UsageError(f"{what} holds an integer of more than {MAX_INT_DIGITS} digits")

    walk(data, 0)


def safe_yaml(text: str, what: str) -> Any:
    """`yaml.safe_load` with every failure as a UsageError and the result's size bounded."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UsageError(f"malformed YAML in {what}{where}: {getattr(exc, 'problem', None) or cut(str(exc), 120)}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # e.g. an integer past Python's digit limit
        raise UsageError(f"cannot read {what}: {cut(str(exc), 120)}") from None
    check_size(data, what)
    return data


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, or raise a UsageError saying what is wrong with the file."""
    p = Path(path)
    what = repr(str(p))
    if not p.exists():
        raise UsageError(f"config file {what} does not exist")
    if not p.is_file():
        raise UsageError(f"config file {what} is not a file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read config file {what}: {exc.strerror}") from None
    return yaml_mapping(raw, f"config file {what}")


def yaml_mapping(text: str | bytes, what: str, *, if_empty: Optional[str] = None) -> dict[str, Any]:
    """A YAML mapping from a file's bytes or from text (uploaded or pasted in the app): checked for size, UTF-8, NUL
    bytes, malformed YAML and alias bombs (`safe_yaml`), and for being a mapping; UsageError naming `what` otherwise.
    Empty YAML is {} unless `if_empty` says why it is refused."""
    if isinstance(text, bytes):
        if len(text) > MAX_CONFIG_BYTES:
            raise UsageError(f"{what} is {len(text)} bytes; a config is at most {MAX_CONFIG_BYTES}")
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise UsageError(f"{what} is not UTF-8 text (binary, or another encoding such as UTF-16)") from None
    elif len(text) > MAX_CONFIG_BYTES:
        raise UsageError(f"{what} is {len(text)} characters; a config is at most {MAX_CONFIG_BYTES}")
    if "\x00" in text:
        raise UsageError(f"{what} is not UTF-8 text (it holds NUL bytes)")
    data = safe_yaml(text, what)
    if data is None:
        if if_empty is not None:
            raise UsageError(f"{what} {if_empty}")
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{what} must hold a mapping of field: value, not {type(data).__name__}")
    return data


def llm_overrides(model: Optional[str], llm: Optional[str], llm_arg: list[str]) -> dict[str, Any]:
    """The LLM settings the --model / --llm / --llm-arg flags give (the CLI's and the app's Launch page's)."""
    over: dict[str, Any] = {}
    if model:
        over.update(provider="local", model=model)
    if llm:
        over.update(provider="langchain", cls=llm)
    if llm_arg:
        over["args"] = parse_sets(llm_arg, "--llm-arg")
    return over


def parse_sets(items: typing.Iterable[str], flag: str = "--set") -> dict[str, Any]:
    """`key=value` pairs (values parsed as YAML scalars; dotted keys nest) into a dict; errors name `flag`."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"{flag} expects key=value, got {item!r}")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key:
            raise UsageError(f"{flag} expects key=value, got {item!r}")
        if len(raw) > 100_000:
            raise UsageError(f"{flag} {key}: the value is {len(raw)} characters; at most 100000")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        except (ValueError, RecursionError) as exc:
            raise UsageError(f"{flag} {key}: cannot read the value: {cut(str(exc), 100)}") from None
        check_size(value, f"{flag} {key}")
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UsageError(f"{flag} {key}: {part!r} is not a mapping")
        node[parts[-1]] = value
    return out


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with `extra` merged in, mappings merged key by key (later wins)."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def describe_error(exc: ValidationError, model: type[BaseModel], prefix: str = "") -> str:
    """The first validation error as one line naming the field and what is allowed."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    number = (err.get("ctx") or {}).get("error")
    if isinstance(number, NumberError):  # (raised for the whole model: its field is in the error)
        return f"bad value for {prefix + (loc + '.' if loc else '') + number.field!r}: {number.problem}"
    field = f"{prefix}{loc}" if loc else prefix.rstrip(".") or "config"
    if err["type"] == "extra_forbidden":
        valid = ", ".join(model.model_fields)
        return f"unknown config field {field!r}; valid fields: {valid}"
    got = err.get("input")
    got_text = "" if isinstance(got, dict) else f" (got {cut(got)})"
    msg = str(err["msg"]).removeprefix("Value error, ")
    msg = msg if len(msg) <= 300 else msg[:297] + "..."
    if not loc and not prefix:  # a rule across fields (a model validator): no one field to name
        return f"bad config: {msg}"
    return f"bad value for {field!r}: {msg}{got_text}"


def validate_config(config_cls: type[BaseModel], data: dict[str, Any]) -> BaseModel:
    """`config_cls` validated from `data`; a UsageError naming the first bad field otherwise."""
    try:
        return config_cls.model_validate(data)
    except ValidationError as exc:
        raise UsageError(describe_error(exc, config_cls)) from None


def build_spec(
    scenario: Any,
    *,
    config_file: Optional[str] = None,
    sets: typing.Sequence[str] = (),
    seed: Optional[int] = None,
    policy: Optional[str] = None,
    ticks: Optional[int] = None,
    llm: Optional[dict[str, Any]] = None,
    overrides: Optional[typing.Mapping[str, Any]] = None,
) -> BoundSpec:
    """Merge file, `--set` pairs, `overrides` (fields given from code) and flags (later wins), validate,
    and return the frozen RunSpec bound to what it resolved to (a `BoundSpec`: `execute` trusts it).

    `scenario` is a registered name, a `module:Class` / `path/to/file.py:Class` reference or a class;
    the spec holds what `scenarios.reference_of` makes of it (built-in names unchanged, file paths
    absolute), so that a later process can load the class again.
    """
    given = scenario if isinstance(scenario, str) else None
    scenario, cls = resolve(scenario)
    if config_file:
        folder = Path(config_file).parent
        data = absolute_paths(cls, absolute_refs(load_yaml(config_file), folder), folder)
    else:
        data = {}
    set_data = parse_sets(sets)
    data = deep_merge(data, absolute_paths(cls, absolute_refs(set_data)))
    if overrides:
        data = deep_merge(data, absolute_paths(cls, absolute_refs(dict(overrides))))
    if llm is not None and not isinstance(llm, typing.Mapping):
        raise UsageError(f"bad value for 'llm': must be a mapping of llm settings (e.g. {{'temperature': 0}}), got {cut(llm)}")
    if llm:
        llm = absolute_refs({"llm": dict(llm)})["llm"]
    if "scenario" in data and data.pop("scenario") not in (scenario, given, cls.name):
        raise UsageError(f"config file is for another scenario than {scenario!r}")
    seed = seed if seed is not None else data.pop("seed", 0)
    data.pop("seed", None)
    policy = policy or data.pop("policy", "scripted")
    data.pop("policy", None)
    ticks = ticks if ticks is not None else data.pop("ticks", None)
    data.pop("ticks", None)
    llm_block = data.pop("llm", None)
    if llm_block is not None and not isinstance(llm_block, dict):
        raise UsageError(f"bad value for 'llm': must be a mapping of llm settings (e.g. llm: {{temperature: 0}}), got {cut(llm_block)}")
    llm_data = deep_merge(llm_block or {}, llm or {})
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise UsageError(f"bad value for 'seed': must be an integer from 0 to 2**63-1 (got {cut(seed)})")
    if not isinstance(policy, str) or policy not in POLICIES:
        raise UsageError(f"bad value for 'policy': {cut(policy)}; valid: {', '.join(POLICIES)}")
    if ticks is not None:
        if not isinstance(ticks, int) or isinstance(ticks, bool) or not 1 <= ticks <= 10_000_000:
            raise UsageError(f"bad value for 'ticks': must be an integer from 1 to 10000000 (got {cut(ticks)})")
        data[cls.horizon_field] = ticks
    config = validate_config(cls.Config, data)
    try:
        llm_spec = LLMSpec.model_validate(llm_data)
    except ValidationError as exc:
        raise UsageError(describe_error(exc, LLMSpec, "llm.")) from None
    check_weights(cls, config)
    population = plan_population(cls, config, policy)
    if llm_spec.template is not None:
        get_template(llm_spec.template)  # a template that cannot be loaded is bad input, said now
    if "llm" not in policies_used(config.population, policy) and isinstance(set_data.get("llm"), dict):
        first = next(iter(set_data["llm"]))
        raise UsageError(f"--set llm.{first} only applies to LLM agents, and this run has none: add --policy llm "
                         "(or a population group with policy: llm)")
    if llm and "llm" not in policies_used(config.population, policy):
        flags = (("--model", "model"), ("--llm", "cls"), ("--llm-arg", "args"), ("--replicas", "replicas"))
        given = [f for f, k in flags if k in llm] or [f"llm.{next(iter(llm))}"]
        verb = "applies" if len(given) == 1 else "apply"
        raise UsageError(f"{' and '.join(given)} only {verb} to LLM agents, and this run has none: add --policy llm "
                         "(or a population group with policy: llm)")
    spec = RunSpec(scenario=scenario, config=config.model_dump(mode="json"), seed=seed, policy=policy, llm=llm_spec,
                   contract=CONTRACT)
    return BoundSpec.of(spec, cls, config, population)


class BoundSpec(RunSpec):
    """A RunSpec resolved once: its scenario class, its validated config and its population, planned and checked.

    `build_spec` returns one and `execute` trusts it; `bind` makes one of any other RunSpec. It is the RunSpec in
    every other way (stored, hashed and compared as one). A copy with changes (`model_copy(update=...)`) is another
    spec: a plain RunSpec, bound again when it runs.
    """

    _scenario_class: type[SocietyModel] = PrivateAttr()
    _settings: ScenarioConfig = PrivateAttr()
    _population: Population = PrivateAttr()

    @classmethod
    def of(cls, spec: RunSpec, scenario_class: type[SocietyModel], settings: ScenarioConfig,
           population: Population) -> "BoundSpec":
        """`spec` with what it resolved to (the caller has validated and checked them)."""
        bound = cls.model_construct(_fields_set=spec.model_fields_set, **dict(spec))
        bound._scenario_class, bound._settings, bound._population = scenario_class, settings, population
        return bound

    @property
    def scenario_class(self) -> type[SocietyModel]:
        """The scenario's class."""
        return self._scenario_class

    @property
    def settings(self) -> ScenarioConfig:
        """The config, validated (`config` is its plain data, as stored)."""
        return self._settings

    @property
    def population(self) -> Population:
        """Who plays, checked (sim.tick.population)."""
        return self._population

    def model_copy(self, *, update: Optional[typing.Mapping[str, Any]] = None, deep: bool = False) -> RunSpec:
        """A copy: this bound spec itself when nothing changes, else a plain RunSpec (with the changes)."""
        if not update and not deep:
            return self
        return RunSpec.model_construct(_fields_set=self.model_fields_set, **dict(self)).model_copy(update=update, deep=deep)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RunSpec):
            return dict(self) == dict(other)
        return NotImplemented

    __hash__ = RunSpec.__hash__

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled (a process pool, Ray) as the plain spec: the other process binds it again."""
        return RunSpec.model_validate, (self.model_dump(mode="json"),)


def bind(spec: RunSpec) -> BoundSpec:
    """`spec` resolved once: its scenario looked up, its config validated (as a config file is) and its population
    checked, so that a spec built by hand or read from the store is bad input (UsageError) before anything is
    written. A BoundSpec is returned as it is."""
    if not isinstance(spec, BoundSpec):
        cls = get_scenario(spec.scenario)
        config = validate_config(cls.Config, spec.config)
        check_weights(cls, config, spec.contract)
        spec = BoundSpec.of(spec, cls, config, plan_population(cls, config, spec.policy))
    return spec


def absolute_refs(data: dict[str, Any], base: Optional[Path] = None) -> dict[str, Any]:
    """`data` with the file references it names (strategies, llm.template) made absolute from `base` (default: cwd),
    so that the stored spec loads the same files from any directory."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    if is_reference(out.get("strategy")):
        out["strategy"] = absolute(out["strategy"], base)
    if isinstance(out.get("population"), list):
        out["population"] = [{**g, "strategy": absolute(g["strategy"], base)}
                             if isinstance(g, dict) and is_reference(g.get("strategy")) else g
                             for g in out["population"]]
    if isinstance(out.get("llm"), dict) and is_reference(out["llm"].get("template")):
        out["llm"] = {**out["llm"], "template": absolute(out["llm"]["template"], base)}
    return out


def check_weights(cls: type[SocietyModel], config: Any, contract: int = CONTRACT) -> None:
    """Every `reward_weights` name is a reward component of the scenario (UsageError naming the valid ones), and a run
    made under a decision contract without components keeps the default weights."""
    weights = dict(getattr(config, "reward_weights", DEFAULT_WEIGHTS))
    bad = unknown_weights(weights, cls.component_docs)
    if bad:
        valid = ", ".join(sorted(set(COMMON_COMPONENTS) | set(cls.component_docs)))
        raise UsageError(f"bad value for 'reward_weights': {cut(', '.join(bad))} is not a reward component of "
                         f"{cls.name or cls.__qualname__}; valid: {valid}")
    if weights != DEFAULT_WEIGHTS and not profile(contract).reward_components:
        raise UsageError(f"bad value for 'reward_weights': runs of decision contract {contract} have no reward components; "
                         "only the default {payoff: 1} applies")


def check_population(cls: type[SocietyModel], config: Any, policy: str, contract: int = CONTRACT) -> None:
    """A config's reward weights (`check_weights`) and population (sim.tick.population) are good for scenario `cls`
    under `policy`; UsageError naming the field otherwise."""
    check_weights(cls, config, contract)
    plan_population(cls, config, policy)
