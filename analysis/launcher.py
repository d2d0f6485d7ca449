"""Start runs, forks and sweeps in the background from the app, and follow them; the Runs list's config columns.

The app's Launch page describes a scenario's `Config` as form fields (`form_fields`), or takes a
YAML run config or sweep file, validates it with the CLI's own code (`build_spec`, `parse_sweep`,
`fork_spec`: bad input is one UsageError and nothing starts), and starts `python -m sim.cli run |
fork | sweep ... --json` as a subprocess so that no page ever waits. `follow` reads a launch's progress.

Before anything is validated (validating imports code), every code reference the launch names (scenario,
chat model class, template, strategies: `sim.core.refs.references_in`) must be one the caller's context may
import (`sim.core.refs.check_permitted`: the app limits it to what its store's runs used unless started with
--allow-code), since the launched process imports them all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

import yaml

from analysis import queries
from scenarios.registry import get_scenario
from sim.core.errors import UsageError
from sim.core.fields import describe_fields
from sim.core.refs import check_permitted, references_in
from sim.core.spec import LLMSpec, RunSpec
from sim.runner.backends import preflight
from sim.runner.config import build_spec, llm_overrides, parse_sets, validate_config, yaml_mapping
from sim.runner.data import DATA_KEY, check_data
from sim.runner.execution import horizon
from sim.runner.probing import refuse_probe_run
from sim.runner.resume import fork_fields as scenario_fork_fields, fork_spec
from sim.runner.sweeps.spec import KEYS as SWEEP_KEYS, MAX_RUNS, expand, load_sweep, parse_sweep, preflight_llm, sweep_id
from sim.store.store import Store

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class FormField:
    """One config field as a form widget: kind is bool, choice, int, float, text or yaml."""

    name: str
    kind: str
    default: Any
    help: str = ""
    lo: Optional[float] = None
    hi: Optional[float] = None
    options: tuple[Any, ...] = ()
    optional: bool = False


def form_fields(config_cls: type) -> list[FormField]:
    """The scenario Config's fields as widgets, in declaration order, from their types, bounds and descriptions."""
    out = []
    for f in describe_fields(config_cls):
        ann, optional, default, lo, hi = f.kind, f.optional, f.default, f.lo, f.hi
        common = {"name": f.name, "default": default, "help": f.help, "optional": optional}
        if ann is bool:
            out.append(FormField(kind="bool", **common))
        elif f.options:
            out.append(FormField(kind="choice", options=f.options, **common))
        elif ann is int and not optional:
            out.append(FormField(kind="int", lo=lo, hi=hi, **common))
        elif ann is float and not optional:
            out.append(FormField(kind="float", lo=lo, hi=hi, **common))
        elif ann is str and not optional:
            out.append(FormField(kind="text", **common))
        else:
            out.append(FormField(kind="yaml", **{**common, "default": None if default is None else
                                                  yaml.safe_dump(_plain(default), default_flow_style=True).strip()}))
    return out


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def config_from_form(fields: list[FormField], values: dict[str, Any]) -> dict[str, Any]:
    """Form values into config data: YAML fields parsed, blank optional ones left out."""
    data: dict[str, Any] = {}
    for f in fields:
        v = values.get(f.name, f.default)
        if f.kind == "yaml":
            if v is None or str(v).strip() == "":
                continue
            try:
                v = yaml.safe_load(str(v))
            except yaml.YAMLError as exc:
                raise UsageError(f"bad value for {f.name!r}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
        data[f.name] = v
    return data


@dataclass
class Launch:
    """A run, fork or sweep started in the background: its process, what it is followed by in the store, its logs.

    A run or fork is found by its spec `digest` among the runs created since `started_at`; a sweep by `sweep_id`.
    """

    kind: str  # run, fork or sweep
    label: str
    scenario: str
    started_at: datetime
    process: subprocess.Popen
    workdir: Path
    total: int
    db_url: str = ""
    spec: Optional[RunSpec] = None
    digest: Optional[str] = None
    sweep_id: Optional[str] = None
    run_id: Optional[str] = None
    seen_done: bool = False
    logs: dict[str, Path] = field(default_factory=dict)

    def returncode(self) -> Optional[int]:
        """The process's exit code, None while it runs."""
        return self.process.poll()

    def error_tail(self, chars: int = 800) -> str:
        """The end of what the process wrote on stderr (its one-line error, or a traceback's end)."""
        path = self.logs.get("stderr")
        if not path or not path.exists():
            return ""
        return path.read_text(errors="replace")[-chars:].strip()

    def command(self) -> list[str]:
        """The `societas` command line it runs (after `python -m sim.cli`)."""
        return [str(a) for a in self.process.args[3:]]


def check_references(data: Any) -> None:
    """UsageError for the first code reference in `data` that this context may not import (see the module's docstring)."""
    for ref in sorted(references_in(data)):
        check_permitted(ref, "code reference")


def _start(kind: str, label: str, scenario: str, args: list[str], workdir: Path, total: int, db_url: str,
           **follow: Any) -> Launch:
    """Start `python -m sim.cli ARGS --db URL --json` in its own session, output into `workdir`; never waits."""
    logs = {"stdout": workdir / "stdout.json", "stderr": workdir / "stderr.txt"}
    started = datetime.now(timezone.utc) - timedelta(seconds=1)
    cmd = [sys.executable, "-m", "sim.cli", *args, "--db", db_url, "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    try:
        with open(logs["stdout"], "w") as out, open(logs["stderr"], "w") as err:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
    except Exception:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return Launch(kind, label, scenario, started, proc, workdir, total, db_url=db_url, logs=logs, **follow)


def _start_run(spec: RunSpec, db_url: str, flags: list[str]) -> Launch:
    """Start `societas run` of a validated spec: its config, seed, policy and LLM in a file, `flags` passed on."""
    preflight(spec)  # a model or chat class that cannot be used is bad input: refused before anything starts
    total = horizon(spec, get_scenario(spec.scenario))
    workdir = Path(tempfile.mkdtemp(prefix="societas-launch-"))
    body: dict[str, Any] = {**spec.config, "seed": spec.seed, "policy": spec.policy}
    llm = spec.llm.model_dump(mode="json", exclude_defaults=True)
    if llm:
        body["llm"] = llm
    cfg = workdir / "config.yaml"
    cfg.write_text(yaml.safe_dump(body))
    label = f"{spec.scenario} seed {spec.seed}"
    return _start("run", label, spec.scenario, ["run", spec.scenario, "--config", str(cfg), *flags], workdir, total,
                  db_url, spec=spec, digest=spec.digest())


# ----- a run: from the form, or from a YAML config -------------------------------------------------------
def launch(scenario: str, config: dict[str, Any], *, seed: int, policy: str, db_url: str,
           ticks: Optional[int] = None, llm: Optional[LLMChoice] = None) -> Launch:
    """Validate as `societas run` does (UsageError on bad input, nothing started) and start it in a subprocess;
    `llm` (policy llm) gives its --model / --llm / --llm-arg options and `--set llm.KEY=VALUE` settings."""
    llm = llm or LLMChoice()
    check_references({"scenario": scenario, **config, "llm": {"cls": llm.cls, **dict(llm.settings)}})
    spec = build_spec(scenario, seed=seed, policy=policy, ticks=ticks, overrides=config, sets=llm.sets(),
                      llm=llm.overrides() or None)
    return _start_run(spec, db_url, llm.flags())


def read_yaml_text(text: str | bytes, what: str) -> dict[str, Any]:
    """A YAML mapping from uploaded or pasted text, checked as `societas` checks a config file (`yaml_mapping`: size,
    UTF-8, malformed YAML, alias bombs); empty text or anything but a mapping is refused too."""
    return yaml_mapping(text, what, if_empty="is empty: it holds no field: value (e.g. `months: 12`)")


def launch_yaml(text: str | bytes, *, scenario: Optional[str], db_url: str, what: str = "the config") -> Launch:
    """A run from a YAML config as `societas run SCENARIO --config FILE` reads it (config fields, seed, policy, ticks,
    llm; a `scenario:` key wins over `scenario`), validated by the CLI's code, then started in a subprocess."""
    data = read_yaml_text(text, what)
    try:
        check_references({**data, "scenario": data.get("scenario") or scenario})
    except UsageError as exc:
        raise UsageError(f"{what}: {exc}") from None
    named = data.pop("scenario", None)
    if named is not None and (not isinstance(named, str) or not named.strip()):
        raise UsageError(f"{what}: bad value for 'scenario': {named!r}; a scenario name or module:Class reference")
    target = named or scenario
    if not target:
        raise UsageError(f"{what} names no scenario: add `scenario: NAME` or choose one")
    try:
        spec = build_spec(target, overrides=data)
        return _start_run(spec, db_url, [])
    except UsageError as exc:
        raise UsageError(f"{what}: {exc}") from None


# ----- LLM settings of `societas run` ---------------------------------------------------------------------
#: LLMSpec fields `societas run` sets with its own options: --model (provider local), --llm and --llm-arg (langchain)
LLM_OPTIONS = ("provider", "model", "cls", "args")
#: providers a launched run may use (env: a policy outside, driving the PettingZoo environment, is no launched run)
PROVIDERS = ("local", "langchain")


def llm_fields() -> list[FormField]:
    """The other LLM settings (sampling, retries, device...): LLMSpec's fields, set with `--set llm.KEY=VALUE`."""
    return [f for f in form_fields(LLMSpec) if f.name not in LLM_OPTIONS]


def cli_value(value: Any) -> str:
    """`value` as the text of a `--set key=value` that parses back to it (values are read as YAML)."""
    if isinstance(value, str):
        try:
            if yaml.safe_load(value) == value and "\n" not in value:
                return value
        except yaml.YAMLError:
            pass
        return json.dumps(value)
    text = json.dumps(value)
    if isinstance(value, float) and yaml.safe_load(text) != value:  # 1e-05: YAML 1.1 floats need a dot
        mantissa, _, exp = repr(value).partition("e")
        text = f"{mantissa}.0e{exp}" if "." not in mantissa else text
    return text


@dataclass(frozen=True)
class LLMChoice:
    """The LLM options of `societas run`: --model (a local model), --llm and --llm-arg (a LangChain chat model),
    and other LLM settings given as `--set llm.KEY=VALUE`."""

    model: str = ""
    cls: str = ""
    args: tuple[str, ...] = ()
    settings: tuple[tuple[str, Any], ...] = ()

    def sets(self) -> list[str]:
        """The `--set llm.KEY=VALUE` values."""
        return [f"llm.{k}={cli_value(v)}" for k, v in self.settings]

    def overrides(self) -> dict[str, Any]:
        """What the run command makes of --model, --llm and --llm-arg (its own code)."""

        return llm_overrides(self.model or None, self.cls or None, list(self.args))

    def flags(self) -> list[str]:
        """The options on the launched command line."""
        out = ["--model", self.model] if self.model else []
        out += ["--llm", self.cls] if self.cls else []
        for a in self.args:
            out += ["--llm-arg", a]
        for s in self.sets():
            out += ["--set", s]
        return out


def llm_choice(provider: str, model: str = "", cls: str = "", args: str = "",
               values: Optional[dict[str, Any]] = None) -> LLMChoice:
    """The LLM form's values (provider; model; class; `key=value` lines; llm_fields' values) as run options; only
    settings that differ from LLMSpec's defaults are kept. UsageError for options of the other provider."""
    if provider not in PROVIDERS:
        raise UsageError(f"bad value for 'llm.provider': {provider!r}; valid: {', '.join(PROVIDERS)}")
    model, cls = (model or "").strip(), (cls or "").strip()
    pairs = tuple(line.strip() for line in (args or "").splitlines() if line.strip())
    if provider == "local" and (cls or pairs):
        raise UsageError("--llm and --llm-arg are for provider langchain (a LangChain chat model); provider local "
                         "takes --model")
    if provider == "langchain":
        if model:
            raise UsageError("--model is for provider local; a LangChain chat model takes its model name as "
                             "--llm-arg model=NAME")
        if not cls:
            raise UsageError("provider langchain needs a chat model class: --llm module:Class")
    parse_sets(pairs, "--llm-arg")  # each one key=value, said now
    if model:
        model = str(Path(model).expanduser().absolute())  # the run's process starts elsewhere: no relative path
    data = config_from_form(llm_fields(), values or {})
    defaults = LLMSpec().model_dump(mode="json")
    settings = tuple((k, v) for k, v in data.items() if v != defaults.get(k))
    return LLMChoice(model=model, cls=cls, args=pairs, settings=settings)


# ----- a fork of a stored run -----------------------------------------------------------------------------
def fork_form_fields(cls: type, config: dict[str, Any]) -> list[FormField]:
    """The fields a fork of a `cls` run may change (`sim.runner.resume.fork_fields`), defaulting to the run's values."""
    may = scenario_fork_fields(cls)
    out = []
    for f in form_fields(cls.Config):
        if f.name not in may:
            continue
        value = config.get(f.name, f.default) if f.kind != "yaml" else (
            yaml.safe_dump(_plain(config[f.name]), default_flow_style=True).strip()
            if config.get(f.name) is not None else f.default)
        out.append(replace(f, default=value))
    return out


def fork_changes(fields: list[FormField], values: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The fork form's fields whose value differs from the run's `config`."""
    data = config_from_form(fields, values)
    return {k: v for k, v in data.items() if v != config.get(k)}


def launch_fork(run_id: str, at: int, changes: dict[str, Any], *, db_url: str) -> Launch:
    """Validate `societas fork RUN --at AT --set k=v...` with the CLI's code (UsageError: nothing started), then start it."""
    if queries.open_reader(db_url) is None:
        raise UsageError(f"no store at {db_url}: nothing to fork")
    if isinstance(at, bool) or not isinstance(at, int):
        raise UsageError(f"bad value for '--at': {at!r}; a tick is a whole number")
    sets = [f"{k}={cli_value(v)}" for k, v in changes.items()]
    store = Store(db_url, create=False)
    try:
        parent = store.get_run(run_id)
        check_references([parent.spec, changes])  # (a run of another store opened in the app names its own code)
        refuse_probe_run(parent, "fork")
        if at < 0:
            raise UsageError(f"bad value for '--at': {at}; a branch tick is 0..{parent.ticks} (run {parent.id}'s "
                             "committed ticks; 0: from the start)")
        spec, _ = fork_spec(store, parent, at, sets)
        cls = get_scenario(spec.scenario)
        check_data((parent.versions or {}).get(DATA_KEY), validate_config(cls.Config, parent.spec["config"]))
        parent_id = parent.id
    finally:
        store.close()
    workdir = Path(tempfile.mkdtemp(prefix="societas-fork-"))
    args = ["fork", parent_id, "--at", str(at)]
    for s in sets:
        args += ["--set", s]
    label = f"fork of {parent_id} at tick {at}" + (f" ({', '.join(sets)})" if sets else "")
    return _start("fork", label, spec.scenario, args, workdir, horizon(spec, cls), db_url, spec=spec,
                  digest=spec.digest())


# ----- a sweep --------------------------------------------------------------------------------------------
def launch_sweep(text: str | bytes, *, db_url: str, what: str = "the sweep file", workers: Optional[int] = None,
                 base_dir: Optional[Path] = None) -> Launch:
    """Validate a sweep file as `societas sweep` does (relative references from `base_dir`, default the current
    directory), then start `societas sweep FILE` on it; its progress is its ended runs out of its total."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise UsageError(f"bad value for '--workers': {workers!r}; must be at least 1")
    data = read_yaml_text(text, what)
    try:
        check_references(data)
    except UsageError as exc:
        raise UsageError(f"{what}: {exc}") from None
    definition = parse_sweep(data, what, base_dir=base_dir or Path.cwd(), max_runs=MAX_RUNS)
    preflight_llm(definition, what)
    workdir = Path(tempfile.mkdtemp(prefix="societas-sweep-"))
    path = workdir / "sweep.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in definition.items() if k in SWEEP_KEYS and v is not None},
                                   sort_keys=False))
    try:
        final = load_sweep(path)  # what `societas sweep` reads: its id is the one its runs carry
        sid, total = sweep_id(final), len(expand(final, str(path)))
    except Exception:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    args = ["sweep", str(path)] + (["--workers", str(workers)] if workers else [])
    label = f"sweep {sid} of {final['scenario']}"
    return _start("sweep", label, final["scenario"], args, workdir, total, db_url, sweep_id=sid)


# ----- following a launch ---------------------------------------------------------------------------------
#: statuses of a run that will not change
ENDED = ("finished", "collapsed")


@dataclass(frozen=True)
class LaunchState:
    """Where a launch stands: `done` of `total` `unit` (ticks of a run or fork; ended runs of a sweep), its status,
    its run once stored, and an error line when its process stopped short."""

    done: int
    total: int
    unit: str
    status: str
    run_id: Optional[str] = None
    error: str = ""


def follow(item: Launch, engine: Any) -> LaunchState:
    """Read `item`'s progress from the store behind `engine` (None: no store yet); finds its run the first time."""
    code = item.returncode()
    ready = engine is not None and queries.has_schema(engine)
    if item.kind == "sweep":
        done = 0
        if ready:
            table = queries.list_runs(engine)
            if "sweep_id" in table.columns and len(table):
                mine = table[table["sweep_id"] == item.sweep_id]
                done = int(mine["status"].isin(ENDED).sum())
        status = "running" if code is None else ("finished" if code == 0 else "failed")
        unit, run_id = "runs", None
    else:
        if item.run_id is None and ready and item.digest:
            item.run_id = queries.find_run_by_digest(engine, item.digest, item.started_at)
        state = queries.progress(engine, item.run_id) if ready and item.run_id else None
        done = int(state["ticks"]) if state else 0
        status = state["status"] if state else ("starting" if code is None else "not started")
        unit, run_id = "ticks", item.run_id
    error = ""
    if code not in (None, 0) and status in ("starting", "not started", "running", "failed"):
        error = f"{item.label} stopped (exit {code}): {item.error_tail() or 'no message'}"
    return LaunchState(done, item.total, unit, status, run_id, error)

