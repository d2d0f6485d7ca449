"""Config at the boundary: YAML files and `--set key=value` pairs into a validated RunSpec.

Every problem becomes a `UsageError` with one line that names the field and the valid values.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import BaseModel, ValidationError

from sim.contracts import LLMSpec, RunSpec
from sim.errors import UsageError

RESERVED = ("scenario", "seed", "policy", "llm", "ticks")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, or raise a UsageError saying what is wrong with the file."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"config file {str(p)!r} does not exist")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UsageError(f"malformed YAML in {str(p)!r}{where}: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"config file {str(p)!r} must hold a mapping of field: value, not {type(data).__name__}")
    return data


def parse_sets(items: typing.Iterable[str]) -> dict[str, Any]:
    """`key=value` pairs (values parsed as YAML scalars; dotted keys nest) into a dict."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set expects key=value, got {item!r}")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key:
            raise UsageError(f"--set expects key=value, got {item!r}")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UsageError(f"--set {key}: {part!r} is not a mapping")
        node[parts[-1]] = value
    return out


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def describe_error(exc: ValidationError, model: type[BaseModel], prefix: str = "") -> str:
    """The first validation error as one line naming the field and what is allowed."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    field = f"{prefix}{loc}" if loc else prefix.rstrip(".") or "config"
    if err["type"] == "extra_forbidden":
        valid = ", ".join(model.model_fields)
        return f"unknown config field {field!r}; valid fields: {valid}"
    got = err.get("input")
    got_text = "" if isinstance(got, dict) else f" (got {got!r})"
    return f"bad value for {field!r}: {err['msg']}{got_text}"


def validate_config(config_cls: type[BaseModel], data: dict[str, Any]) -> BaseModel:
    try:
        return config_cls.model_validate(data)
    except ValidationError as exc:
        raise UsageError(describe_error(exc, config_cls)) from None


def build_spec(
    scenario: str,
    *,
    config_file: Optional[str] = None,
    sets: typing.Sequence[str] = (),
    seed: Optional[int] = None,
    policy: Optional[str] = None,
    ticks: Optional[int] = None,
    llm: Optional[dict[str, Any]] = None,
) -> RunSpec:
    """Merge file, `--set` pairs and flags (later wins), validate, and return a frozen RunSpec."""
    from scenarios import get_scenario

    cls = get_scenario(scenario)
    data = load_yaml(config_file) if config_file else {}
    data = _deep_merge(data, parse_sets(sets))
    if "scenario" in data and data.pop("scenario") != scenario:
        raise UsageError(f"config file is for another scenario than {scenario!r}")
    seed = seed if seed is not None else data.pop("seed", 0)
    data.pop("seed", None)
    policy = policy or data.pop("policy", "scripted")
    data.pop("policy", None)
    ticks = ticks if ticks is not None else data.pop("ticks", None)
    data.pop("ticks", None)
    llm_data = _deep_merge(data.pop("llm", None) or {}, llm or {})
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise UsageError(f"bad value for 'seed': must be a non-negative integer (got {seed!r})")
    if policy not in ("scripted", "llm"):
        raise UsageError(f"bad value for 'policy': {policy!r}; valid: scripted, llm")
    if ticks is not None:
        if not isinstance(ticks, int) or isinstance(ticks, bool) or ticks < 1:
            raise UsageError(f"bad value for 'ticks': must be a positive integer (got {ticks!r})")
        data[cls.horizon_field] = ticks
    config = validate_config(cls.Config, data)
    try:
        llm_spec = LLMSpec.model_validate(llm_data)
    except ValidationError as exc:
        raise UsageError(describe_error(exc, LLMSpec, "llm.")) from None
    _check_population(cls, config, policy)
    return RunSpec(scenario=scenario, config=config.model_dump(mode="json"), seed=seed, policy=policy, llm=llm_spec)


def _check_population(cls: Any, config: Any, policy: str) -> None:
    population = getattr(config, "population", None)
    strategies = sorted(cls.strategies)
    if population:
        for group in population:
            if group.strategy is not None and group.strategy not in strategies:
                raise UsageError(f"bad value for 'population.strategy': {group.strategy!r}; valid: {', '.join(strategies)}")
