"""A sweep file: a grid of config overrides x seeds, every combination run once into one store.

A sweep file (YAML)::

    scenario: commons
    base: {months: 12, fishers: 5}        # config fields for every run
    grid: {sanctions: [false, true], strategy: [sustainable, greedy]}   # key -> values
    seeds: 5                               # a count (0..n-1) or a list of seeds
    policy: scripted                       # optional; also optional: llm: {...}, ticks: N

This module reads a sweep file into its definition and expands it into RunSpecs. The sweep id is a
hash of the parsed content (not of comments or layout), and every run's id is a hash of (sweep id,
run spec), so running the same file again finds its runs (`runner.sweeps.backlog`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from runner.backends import preflight
from runner.config import absolute_refs, check_population, cut, deep_merge, describe_error, load_yaml, validate_config
from runner.data import absolute_paths
from runner.limits import MAX_RUNS, MAX_RUNS_CONFIRMED
from scenarios.registry import REGISTRY, get_scenario, is_reference, reference_of
from sim.core.errors import UsageError
from sim.core.profiles import CONTRACT
from sim.core.spec import POLICIES, LLMSpec, RunSpec

KEYS = ("scenario", "base", "grid", "seeds", "policy", "llm", "ticks")


# ----- the sweep file -------------------------------------------------------------------------------------
def load_sweep(path: str | Path, max_runs: int = MAX_RUNS) -> dict[str, Any]:
    """Read and validate a sweep file; UsageError naming the file and the key otherwise."""
    return parse_sweep(load_yaml(path), str(path), base_dir=Path(path).parent, max_runs=max_runs)


def parse_sweep(data: dict[str, Any], where: str = "sweep", base_dir: Optional[Path] = None,
                max_runs: int = MAX_RUNS) -> dict[str, Any]:
    """The normalised definition: every key present, seeds as a list, grid values as lists.

    `scenario` is a registered name or a reference (`module:Class`, `file.py:Class`: a relative
    path is taken from `base_dir`, the sweep file's folder); it is stored as `scenarios.reference_of` makes it.
    A sweep of more than `max_runs` runs (cells x seeds, counted before anything is built) is refused.
    """
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(KEYS)}")
    scenario = data.get("scenario")
    if not isinstance(scenario, str) or (scenario not in REGISTRY and not is_reference(scenario)):
        raise UsageError(f"{where}: bad value for 'scenario': {scenario!r}; valid: {', '.join(sorted(REGISTRY))}, "
                         "or a reference module:Class or path/to/file.py:Class")
    try:
        scenario = reference_of(scenario, base=base_dir)
    except UsageError as exc:
        raise UsageError(f"{where}: bad value for 'scenario': {exc}") from None
    base = data.get("base") or {}
    grid = data.get("grid") or {}
    if not isinstance(base, dict):
        raise UsageError(f"{where}: 'base' must be a mapping of config field: value")
    if not isinstance(grid, dict) or any(not isinstance(v, list) or not v for v in grid.values()):
        raise UsageError(f"{where}: 'grid' must map each config field to a non-empty list of values")
    seeds = data.get("seeds", 1)
    if isinstance(seeds, int) and not isinstance(seeds, bool) and 1 <= seeds <= 100_000:
        seeds = list(range(seeds))
    if (not isinstance(seeds, list) or not seeds or len(seeds) > 100_000
            or any(not isinstance(s, int) or isinstance(s, bool) or not 0 <= s < 2**63 for s in seeds)
            or len(set(seeds)) != len(seeds)):
        raise UsageError(f"{where}: bad value for 'seeds': a count (1..100000) or a list of at most 100000 distinct "
                         "integers from 0 to 2**63-1")
    runs = math.prod(len(v) for v in grid.values()) * len(seeds)
    if runs > max_runs:
        raise UsageError(f"{where}: the sweep has {runs:,} runs ({runs // len(seeds):,} cells x {len(seeds):,} seeds), more "
                         f"than {max_runs:,}: shrink the grid or the seeds" +
                         (f", or pass --yes to allow up to {MAX_RUNS_CONFIRMED:,}" if max_runs < MAX_RUNS_CONFIRMED else ""))
    policy = data.get("policy", "scripted")
    if policy not in POLICIES:
        raise UsageError(f"{where}: bad value for 'policy': {policy!r}; valid: {', '.join(POLICIES)}")
    # strategy and template references, and data paths, in the file are relative to the file, like its scenario
    cls = get_scenario(scenario)
    base = absolute_paths(cls, absolute_refs(base, base_dir), base_dir)
    grid = {k: [absolute_paths(cls, absolute_refs(_nest({k: v}), base_dir), base_dir) for v in values]
            for k, values in grid.items()}
    grid = {k: [_get_path(v, k) for v in values] for k, values in grid.items()}
    llm_block = data.get("llm") or {}
    if not isinstance(llm_block, dict):
        raise UsageError(f"{where}: bad value for 'llm': must be a mapping of llm settings (e.g. llm: {{temperature: 0}}), "
                         f"got {cut(llm_block)}")
    llm_block = absolute_refs({"llm": llm_block}, base_dir)["llm"]
    definition = {"scenario": scenario, "base": base, "grid": grid, "seeds": seeds, "policy": policy,
                  "llm": llm_block, "ticks": data.get("ticks")}
    expand(definition, where)  # every cell validates now, before anything is written
    return definition


def preflight_llm(definition: dict[str, Any], where: str = "sweep") -> None:
    """Refuse, before the sweep stores anything, a model, device or chat class that cannot be used here,
    as `societas run` does, instead of letting every run of the sweep fail in turn. For runs on this
    machine (a remote Ray cluster's workers have their own models and devices: not checked)."""
    checked: set[str] = set()
    for spec in expand(definition, where):
        llm = spec.llm  # what preflight reads: sampling settings (a grid over temperature) need no second check
        key = json.dumps([llm.provider, llm.model, llm.device, llm.cls, llm.args], sort_keys=True, default=str)
        if key in checked or not spec.uses_llm:
            continue
        checked.add(key)
        try:
            preflight(spec)
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from None


def uses_replicas(definition: dict[str, Any], where: str = "sweep") -> bool:
    """Whether some run of the sweep asks for engine replicas (`llm.replicas`)."""
    return any(spec.llm.replicas and spec.uses_llm for spec in expand(definition, where))


def sweep_id(definition: dict[str, Any]) -> str:
    """A stable id for the sweep's content: the same file (even reformatted) gives the same id."""
    text = json.dumps(definition, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cells(definition: dict[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in the file's key order."""
    keys = list(definition["grid"])
    return [dict(zip(keys, combo)) for combo in itertools.product(*(definition["grid"][k] for k in keys))]


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    """`{"llm.temperature": 0}` -> `{"llm": {"temperature": 0}}` (grid keys may be dotted)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        out = deep_merge(out, _set_path(key, value))
    return out


def _get_path(data: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        data = data[part]
    return data


def _set_path(key: str, value: Any) -> dict[str, Any]:
    node: dict[str, Any] = {}
    root = node
    parts = key.split(".")
    for part in parts[:-1]:
        node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    return root


def spec_for(definition: dict[str, Any], cell: dict[str, Any], seed: int, where: str = "sweep",
             contract: int = CONTRACT) -> RunSpec:
    """The RunSpec of one (cell, seed): base, then the cell's overrides; validated like `societas run`.

    `contract` is the sweep's decision contract: the current one for a new sweep, the one it started
    under for a sweep being continued (its runs must stay comparable and keep their ids)."""
    cls = get_scenario(definition["scenario"])
    data = deep_merge(_nest(definition["base"]), _nest(cell))
    llm = deep_merge(definition["llm"], data.pop("llm", {}) or {})
    for key in ("seed", "policy", "scenario", "ticks"):
        if key in data and key not in cls.Config.model_fields:  # (social's horizon is a field named `ticks`)
            raise UsageError(f"{where}: {key!r} is a sweep key, not a config field (put it at the top level)")
    if definition["ticks"] is not None:
        data[cls.horizon_field] = definition["ticks"]
    try:
        config = validate_config(cls.Config, data)
    except UsageError as exc:
        raise UsageError(f"{where}, cell {cell}: {exc}") from None
    try:
        llm_spec = LLMSpec.model_validate(llm)
    except ValidationError as exc:
        raise UsageError(f"{where}: {describe_error(exc, LLMSpec, 'llm.')}") from None
    check_population(cls, config, definition["policy"])
    return RunSpec(scenario=definition["scenario"], config=config.model_dump(mode="json"), seed=seed,
                   policy=definition["policy"], llm=llm_spec, contract=contract)


def expand(definition: dict[str, Any], where: str = "sweep", contract: int = CONTRACT) -> list[RunSpec]:
    """Every run of the sweep, once each (duplicate cells collapse)."""
    specs: dict[str, RunSpec] = {}
    for cell in cells(definition):
        for seed in definition["seeds"]:
            spec = spec_for(definition, cell, seed, where, contract)
            specs.setdefault(spec.digest(), spec)
    return list(specs.values())


def run_id_for(sid: str, spec: RunSpec) -> str:
    return hashlib.sha256(f"{sid}:{spec.digest()}".encode()).hexdigest()[:12]
