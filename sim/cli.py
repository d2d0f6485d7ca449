"""The `societas` command line: run, list, show, export, replay, scenarios.

Bad input exits with code 2 and one line on stderr naming the problem; nothing is written.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from sim.errors import UsageError

DEFAULT_DB = "sqlite:///runs.db"
app = typer.Typer(add_completion=False, no_args_is_help=True, help="societas: societies of LLM-driven agents on Mesa.")
out = Console()
err = Console(stderr=True)

DbOption = typer.Option(None, "--db", help=f"database URL (default: $SOCIETAS_DB or {DEFAULT_DB}, i.e. runs.db in the current directory)")
JsonOption = typer.Option(False, "--json", help="print JSON on stdout instead of tables")


def _db(url: Optional[str]) -> str:
    return url or os.environ.get("SOCIETAS_DB") or DEFAULT_DB


def _store(url: Optional[str], *, create: bool = True):
    """The store at `url`; read-only commands pass create=False so that reading never creates one.

    It is closed when the command exits (however it exits, short of SIGKILL): SQLite then folds its
    write-ahead log into the file, so a user who copies `runs.db` alone after a run copies all of it.
    """
    from sim.store import Store

    store = Store(_db(url), create=create)
    atexit.register(store.close)
    return store


def _version(value: bool) -> None:
    if value:
        import importlib.metadata as md

        try:
            version = md.version("societas")
        except md.PackageNotFoundError:
            version = "unknown"
        print(f"societas {version}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version and exit")) -> None:
    """societas: societies of LLM-driven agents on Mesa."""


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _fmt(v: Any) -> str:
    """A metric for a table: 4 significant digits; a missing value as `null`, the word its docs and --json use."""
    if v is None:
        return "null"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


@app.command()
def run(
    scenario: str = typer.Argument(..., help="registered scenario name (see `societas scenarios`), or your own class: "
                                   "path/to/file.py:Class or package.module:Class"),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML file of config fields (and seed, policy, llm)"),
    set_: list[str] = typer.Option([], "--set", help="override a config field: key=value (repeatable)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="seed of all randomness (default 0)"),
    policy: Optional[str] = typer.Option(None, "--policy", help="who decides: scripted or llm"),
    ticks: Optional[int] = typer.Option(None, "--ticks", help="override the scenario's horizon"),
    model: Optional[str] = typer.Option(None, "--model", help="local model: a model directory or .gguf file (default: embedded SmolLM2)"),
    llm: Optional[str] = typer.Option(None, "--llm", help="a LangChain chat model class, module:Class"),
    llm_arg: list[str] = typer.Option([], "--llm-arg", help="constructor argument for --llm: key=value (repeatable)"),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Run a scenario and store it; prints a summary (or one JSON object with --json)."""
    from sim.config import build_spec, parse_sets
    from sim.runner import RunFailed, RunInterrupted, execute

    llm_over: dict[str, Any] = {}
    if model:
        llm_over.update(provider="local", model=model)
    if llm:
        llm_over.update(provider="langchain", cls=llm)
    if llm_arg:
        llm_over["args"] = parse_sets(llm_arg)
    spec = build_spec(scenario, config_file=str(config) if config else None, sets=set_, seed=seed,
                      policy=policy, ticks=ticks, llm=llm_over)
    from scenarios import get_scenario
    from sim.runner import needs_llm

    if needs_llm(spec, get_scenario(spec.scenario)):  # a model or chat class that cannot be used is bad input: before any write
        from agents.llm.factory import preflight

        preflight(spec)
    store = _store(db)

    total = int(spec.config[get_scenario(spec.scenario).horizon_field])
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[info]}"), console=err, transient=as_json, disable=as_json and not err.is_terminal)
    with bar:
        task = bar.add_task(f"{scenario} seed {spec.seed}", total=total, info="")

        def progress(tick: int, total_ticks: int, record: Any) -> None:
            info = " ".join(f"{k}={_fmt(record.metrics[k])}" for k in list(record.metrics)[:2])
            bar.update(task, completed=tick, info=info)

        try:
            result = execute(spec, store, progress=progress)
        except RunInterrupted as exc:
            _fail(f"run {exc.run_id} {exc.reason}; its committed ticks are kept (status failed)", code=exc.exit_code)
        except RunFailed as exc:
            _fail(f"run {exc.run_id} failed: {exc.reason} (committed ticks are kept)", code=1)
    if as_json:
        print(json.dumps(result.to_json()))
        return
    table = Table(title=f"{scenario} — run {result.run_id}: {result.status}, {result.ticks} ticks, {result.duration_s:.1f}s "
                        "(final metrics: whole run)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in result.metrics.items():
        table.add_row(k, _fmt(v))
    out.print(table)
    if result.fallbacks:
        out.print(f"fallback decisions: {result.fallbacks} (see `societas show {result.run_id}`)")
    if result.reason:
        out.print(f"ended: {result.reason}", soft_wrap=True)
    from analysis.summary import run_summary

    summary = run_summary(store, result.run_id)
    usage = summary["llm"]
    if usage["calls"]:
        out.print(f"LLM: {usage['calls']} calls ({usage['cache_hits']} from the cache), tokens in/out "
                  f"{usage['tokens_in']}/{usage['tokens_out']}, {summary['fallbacks']} fallback decisions",
                  soft_wrap=True)
    out.print(f"stored in {store.url} — see: societas show {result.run_id}" + (f" --db {db}" if db else ""), soft_wrap=True)


@app.command("list")
def list_(db: Optional[str] = DbOption, as_json: bool = JsonOption) -> None:
    """List stored runs: status (stale when its process is gone), who decided, where a run came from."""
    from analysis.summary import run_row

    rows = [run_row(r) for r in _store(db, create=False).list_runs()]
    if as_json:
        print(json.dumps(rows))
        return
    cells = []
    for row in rows:
        origin = row["origin"] + (f" of {row['parent_id']}" if row["parent_id"] else "") + (" (cached)" if row["cached"] else "")
        cells.append((row["run_id"], row["scenario"], row["status_text"], row["decided_by"], origin, str(row["seed"]),
                      str(row["ticks"]), row["created_at"][:16].replace("T", " ")))
    headers = ("run_id", "scenario", "status", "decided by", "origin", "seed", "ticks", "created")
    table = Table(title=f"{len(rows)} runs", box=box.SIMPLE_HEAD, pad_edge=False, padding=0, show_edge=False)
    for col, width in zip(headers, fit_widths(headers, cells, out.width, shrink=(1, 2, 3, 4, 7))):
        table.add_column(col, overflow="fold", width=width)
    for c in cells:
        table.add_row(*c)
    out.print(table)


def fit_widths(headers: Sequence[str], cells: Sequence[Sequence[str]], width: int, shrink: Sequence[int]) -> list[int]:
    """Column widths for a table with one space between columns, to fit `width` characters.

    Each column starts as wide as its longest cell; where the table is too wide, the widest of the
    `shrink` columns give way one character at a time, first down to their longest word (a narrow
    terminal then wraps a cell between words, never inside one: "commo/ns"), and only then further
    (a file-path scenario, a stale run's host name fold), before any column is cut off at the edge.
    """
    natural, words = [], []
    for i, header in enumerate(headers):
        column = [header, *(row[i] for row in cells)]
        natural.append(max(map(len, column)))
        words.append(max(len(w) for text in column for w in text.split() or [""]))
    widths = list(natural)
    for floor in (words, [6] * len(headers)):
        while sum(widths) + len(widths) - 1 > width:
            fits = [i for i in shrink if widths[i] > floor[i]]
            if not fits:
                break
            widths[max(fits, key=lambda i: widths[i])] -= 1
    return widths


@app.command()
def show(
    run_id: Optional[str] = typer.Argument(None, help="run id or unique prefix"),
    tick: Optional[int] = typer.Option(None, "--tick", help="also print what agents said in this tick (messages, posts)"),
    sweep_id: Optional[str] = typer.Option(None, "--sweep", help="show a sweep's cells (mean and 95% CI over seeds)"),
    metric: list[str] = typer.Option([], "--metric", help="with --sweep: final metrics to show (repeatable)"),
    compare_parent: bool = typer.Option(False, "--compare-parent", help="a fork beside its parent, tick by tick"),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Show a run: spec, status, every final and per-tick metric, fallbacks, LLM usage, a tick's messages.

    With --sweep: a sweep's cells; with --compare-parent: a fork beside its parent.
    """
    from analysis.summary import run_summary, tick_messages

    if sweep_id is not None:
        return show_sweep(sweep_id, db, as_json, metric)
    if run_id is None:
        _fail("give a RUN_ID (or --sweep SWEEP_ID)")
    if compare_parent:
        return show_compare(run_id, db, as_json)

    store = _store(db, create=False)
    summary = run_summary(store, store.get_run(run_id).id)
    messages = tick_messages(store, summary["run_id"], tick) if tick is not None else None
    if as_json:
        if messages is not None:
            summary["messages"] = messages
        print(json.dumps(summary, default=str))
        return
    out.print(f"[bold]run {summary['run_id']}[/] {summary['scenario']} seed {summary['seed']} policy {summary['policy']} "
              f"(decided by {summary['decided_by']}): {summary['status_text']} after {summary['ticks']} ticks "
              f"({summary['duration_s']:.1f}s)", soft_wrap=True)
    if summary["origin"] != "run":
        out.print(f"origin: {summary['origin']}" + (f" of {summary['parent_id']}" if summary["parent_id"] else "")
                  + (f" at tick {summary['branch_tick']}" if summary.get("branch_tick") is not None else ""))
    if summary.get("reason"):
        out.print(f"reason: {summary['reason']}", soft_wrap=True)
    out.print("config: " + ", ".join(f"{k}={v}" for k, v in summary["config"].items() if v is not None), soft_wrap=True)
    final = Table(title="final metrics (whole run)")
    final.add_column("metric")
    final.add_column("value", justify="right")
    final.add_column("meaning", overflow="fold")
    docs = summary["metric_docs"]["final"]
    for k, v in summary["final_metrics"].items():
        final.add_row(k, _fmt(v), docs.get(k, ""))
    out.print(final)
    per_tick = summary["per_tick"]
    if per_tick:
        shown = per_tick if len(per_tick) <= 8 else per_tick[:3] + per_tick[-5:]
        title = "per-tick metrics" + ("" if len(shown) == len(per_tick) else f" (ticks {', '.join(str(t['tick']) for t in shown)}; --json has all)")
        table = Table(title=title)
        table.add_column("metric", overflow="fold")
        for t in shown:
            table.add_column(str(t["tick"]), justify="right")
        keys = list(dict.fromkeys(k for t in per_tick for k in t["metrics"]))
        for k in keys:
            table.add_row(k, *(_fmt(t["metrics"].get(k)) for t in shown))
        out.print(table)
    if summary.get("reference"):
        ref = Table(title="beside published values")
        for col in ("metric", "this run", "published", "source"):
            ref.add_column(col, overflow="fold")
        for row in summary["reference"]:
            ref.add_row(row["metric"], _fmt(row["value"]), _fmt(row["published"]), row["source"])
        out.print(ref)
    out.print(f"fallback decisions: {summary['fallbacks']}")
    llm = summary["llm"]
    if llm["calls"]:
        out.print(f"LLM: {llm['calls']} calls, {llm['cache_hits']} cache hits, tokens in/out {llm['tokens_in']}/{llm['tokens_out']}, "
                  f"latency {llm['latency_s']:.2f}s", soft_wrap=True)
        t2 = Table(title="LLM calls by backend / agent")
        for col in ("backend", "agent", "calls", "cache hits", "tokens in", "tokens out", "latency s", "fallbacks"):
            t2.add_column(col, overflow="fold")
        for row in llm["by_agent"]:
            t2.add_row(row["backend"], str(row["agent_id"]), str(row["calls"]), str(row["cache_hits"]), str(row["tokens_in"]),
                       str(row["tokens_out"]), f"{row['latency_s']:.2f}", str(row["fallbacks"]))
        out.print(t2)
    if messages is not None:
        out.print(f"[bold]tick {tick}: {len(messages)} messages[/]")
        for m in messages:
            who = f"agent {m['actor']}" if m["actor"] is not None else "world"
            to = f" → agent {m['target']}" if m["target"] is not None else ""
            out.print(f"  [{m['kind']}] {who}{to}: {m['text']}", soft_wrap=True, highlight=False, markup=False)


@app.command()
def export(
    run_id: str,
    format: str = typer.Option("csv", "--format", help="csv or parquet"),
    out_dir: Path = typer.Option(..., "--out", help="directory to write the tables into"),
    db: Optional[str] = DbOption,
) -> None:
    """Export a run's tables (runs, ticks, agent_steps, events, llm_calls) as CSV or Parquet."""
    from analysis.frames import export_run

    if format not in ("csv", "parquet"):
        _fail(f"bad value for '--format': {format!r}; valid: csv, parquet")
    store = _store(db, create=False)
    paths = export_run(store, store.get_run(run_id).id, out_dir, format)
    for p in paths:
        out.print(str(p))


@app.command()
def replay(run_id: str, db: Optional[str] = DbOption, as_json: bool = JsonOption) -> None:
    """Re-run a stored run from the LLM cache (no model needed) and report whether every stored tick matched.

    An unfinished run (interrupted, failed, killed) is replayed for the ticks it has, and said to be incomplete.
    """
    from analysis.replay import replay_run

    store = _store(db, create=False)
    report = replay_run(store, store.get_run(run_id).id)
    if as_json:
        print(json.dumps(report))
    else:
        verdict = "[green]every tick matched[/]" if report["matched"] else "[red]MISMATCH[/]"
        out.print(f"replay of {report['run_id']} as {report['replay_run_id']}: {report['ticks']} ticks, {verdict}")
        if report.get("incomplete"):
            out.print(f"  the original run is incomplete ({report['incomplete']}): only its {report['ticks']} stored ticks were compared",
                      soft_wrap=True)
        for m in report["mismatches"][:10]:
            out.print(f"  tick {m['tick']}: {m['what']}", soft_wrap=True)
    if not report["matched"]:
        raise typer.Exit(1)


@app.command()
def scenarios(
    names: list[str] = typer.Argument(None, help="scenarios to describe (default: every registered one): names or "
                                                 "references path/to/file.py:Class, package.module:Class"),
    as_json: bool = JsonOption,
) -> None:
    """List registered scenarios: config fields (type, default, bounds), llm.* keys, and every metric documented."""
    from scenarios import REGISTRY, get_scenario
    from sim.contracts import LLMSpec
    from sim.model import BASE_FINAL_DOCS, BASE_TICK_DOCS

    data = []
    chosen = [(n, get_scenario(n)) for n in names] if names else sorted(REGISTRY.items())
    for name, cls in chosen:
        data.append({"name": name, "description": cls.description, "horizon": cls.horizon_field,
                     "strategies": sorted(cls.strategies), "fields": _fields(cls.Config),
                     "tick_metrics": {**dict(cls.tick_metric_docs), **BASE_TICK_DOCS},
                     "final_metrics": {**dict(cls.final_metric_docs), **BASE_FINAL_DOCS}})
    llm_fields = [{**f, "name": f"llm.{f['name']}"} for f in _fields(LLMSpec)]
    if as_json:
        print(json.dumps([dict(s, llm_fields=llm_fields) for s in data], default=str))
        return
    for s in data:
        table = Table(title=f"{s['name']}: {s['description']} (strategies: {', '.join(s['strategies'])}; horizon: {s['horizon']})")
        for col in ("field", "type", "default", "bounds", "help"):
            table.add_column(col, overflow="fold")
        for f in s["fields"]:
            table.add_row(f["name"], f["type"], str(f["default"]), f["bounds"], f["help"])
        out.print(table)
        for kind, title in (("final_metrics", "final metrics (whole run: `run --json`, `show`)"), ("tick_metrics", "per-tick metrics (the ticks table)")):
            t = Table(title=f"{s['name']}: {title}")
            t.add_column("metric")
            t.add_column("meaning", overflow="fold")
            for k, v in s[kind].items():
                t.add_row(k, v)
            out.print(t)
    table = Table(title="llm.* keys (YAML `llm:` block or --set llm.key=value; apply to LLM agents)")
    for col in ("field", "type", "default", "bounds", "help"):
        table.add_column(col, overflow="fold")
    for f in llm_fields:
        table.add_row(f["name"], f["type"], str(f["default"]), f["bounds"], f["help"])
    out.print(table)


def _fields(model: Any) -> list[dict[str, Any]]:
    """Name, type, default, bounds and help of a pydantic model's fields."""
    rows = []
    for fname, f in model.model_fields.items():
        bounds = []
        for m in f.metadata:
            for attr, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("pattern", "~")):
                if getattr(m, attr, None) is not None:
                    bounds.append(f"{sym} {getattr(m, attr)}")
        rows.append({"name": fname, "type": _type_name(f.annotation), "default": f.get_default(call_default_factory=True),
                     "bounds": ", ".join(bounds), "help": f.description or ""})
    return rows


def _type_name(annotation: Any) -> str:
    """`int`, `a|b|c` for a Literal, `X?` for an Optional."""
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "|".join(map(str, args))
    if origin is typing.Union and type(None) in args:
        return _type_name(next(a for a in args if a is not type(None))) + "?"
    if origin is list:
        return f"list[{_type_name(args[0])}]" if args else "list"
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


# ----- scale and durability: resume, fork, db upgrade, sweeps ---------------------------------------------
def _bar(label: str, total: int, quiet: bool) -> tuple[Progress, Any]:
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[info]}"), console=err, transient=quiet, disable=quiet and not err.is_terminal)
    return bar, bar.add_task(label, total=total, info="")


def _continue(kind: str, as_json: bool, db: Optional[str], call: Any) -> None:
    """Run a resume or fork under a progress bar and print its result like `run` does."""
    from sim.runner import RunFailed, RunInterrupted

    shown: list[tuple[Progress, Any]] = []  # the bar appears with the first tick: bad input is one line, no empty bar

    def progress(tick: int, total_ticks: int, record: Any) -> None:
        if not shown:
            shown.append(_bar(kind, total_ticks, as_json))
            shown[0][0].start()
        bar, task = shown[0]
        bar.update(task, completed=tick, total=total_ticks)

    try:
        result = call(progress)
    except RunInterrupted as exc:
        _fail(f"run {exc.run_id} {exc.reason}; its committed ticks are kept (status failed)", code=exc.exit_code)
    except RunFailed as exc:
        _fail(f"run {exc.run_id} failed: {exc.reason} (committed ticks are kept; `societas resume {exc.run_id}` "
              "continues it)", code=1)
    finally:
        if shown:
            shown[0][0].stop()
    if as_json:
        print(json.dumps(result.to_json()))
        return
    out.print(f"{kind} {result.run_id}: {result.status} after {result.ticks} ticks — see: societas show {result.run_id}"
              + (f" --db {db}" if db else ""), soft_wrap=True)


@app.command()
def resume(
    run_id: str,
    force: bool = typer.Option(False, "--force", help="resume a `running` run even if its owner looks alive"),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Continue an unfinished run (killed or failed) in the same run row.

    The committed ticks are replayed (scripted decisions recomputed from the seed, LLM
    decisions from the cache only) and checked against the store, then the run goes on live.
    """
    from sim.resume import resume_run

    store = _store(db)
    _continue("resume", as_json, db, lambda progress: resume_run(store, run_id, force=force, progress=progress))


@app.command()
def fork(
    run_id: str,
    at: int = typer.Option(..., "--at", help="last tick taken from the parent (0..its committed ticks)"),
    set_: list[str] = typer.Option([], "--set", help="config field to change after tick AT: key=value (repeatable)"),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """A new run identical to RUN_ID up to tick AT, then continuing under the changed config."""
    from sim.resume import fork_run

    store = _store(db)
    _continue("fork", as_json, db, lambda progress: fork_run(store, run_id, at, set_, progress=progress))


db_app = typer.Typer(no_args_is_help=True, help="Store administration.")
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(db: Optional[str] = DbOption) -> None:
    """Migrate the store's schema to the version this societas needs (Alembic)."""
    from sim.dbadmin import upgrade

    out.print(f"{_db(db)}: {upgrade(_db(db))}", soft_wrap=True, highlight=False)


@app.command()
def sweep(
    sweep_file: Path = typer.Argument(..., help="sweep YAML: scenario, base, grid, seeds, policy"),
    executor: str = typer.Option("local", "--executor", help="local (process pool) or ray"),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: a local Ray instance)"),
    workers: Optional[int] = typer.Option(None, "--workers", help="runs at once (default: CPU count)"),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Run every (grid cell x seed) once into one store; re-running the same file resumes the sweep."""
    from sim import sweep as sw

    if executor not in ("local", "ray"):
        _fail(f"bad value for '--executor': {executor!r}; valid: local, ray")
    if workers is not None and workers < 1:
        _fail(f"bad value for '--workers': {workers}; must be at least 1")
    if address and executor != "ray":
        _fail("--address is for --executor ray")
    definition = sw.load_sweep(sweep_file)
    if address is None:  # runs on this machine: an unusable model or device is bad input, found before any write
        sw.preflight_llm(definition, str(sweep_file))
    store = _store(db)
    plan = sw.prepare(store, definition, source=str(sweep_file))
    bar, task = _bar(f"sweep {plan.sweep_id}", plan.total, as_json)
    with bar:
        bar.update(task, completed=plan.done_before, info=f"{plan.done_before} done before")

        def progress(done: int, outcome: Any) -> None:
            bar.update(task, completed=done, info=f"last: {outcome.status}")

        try:
            report = sw.run_sweep(store, plan, executor=executor, address=address, workers=workers, progress=progress)
        except KeyboardInterrupt:
            _fail(f"sweep {plan.sweep_id} interrupted; run `societas sweep {sweep_file}` again to resume it", code=130)
    if as_json:
        print(json.dumps(report))
    else:
        out.print(f"sweep {report['sweep_id']}: {report['ran']} runs now, {report['skipped']} done before; "
                  f"statuses {report['statuses']}; {report['runs_per_s']:.2f} runs/s — see: societas show --sweep "
                  f"{report['sweep_id']}" + (f" --db {db}" if db else ""), soft_wrap=True, highlight=False)
    if report["failed"]:
        raise typer.Exit(1)


@app.command("sweep-status")
def sweep_status(sweep_id: str, db: Optional[str] = DbOption, as_json: bool = JsonOption) -> None:
    """A sweep's progress: runs by status out of its total."""
    from sim.sweep import status

    report = status(_store_ro(db), sweep_id)
    if as_json:
        print(json.dumps(report))
        return
    done = report["statuses"].get("finished", 0) + report["statuses"].get("collapsed", 0)
    out.print(f"sweep {report['sweep_id']} ({report['scenario']}, {report['source']}): {done}/{report['total']} done; "
              + ", ".join(f"{k} {v}" for k, v in sorted(report["statuses"].items())) + f"; {report['pending']} not started",
              soft_wrap=True, highlight=False)


def _store_ro(url: Optional[str]):
    return _store(url, create=False)


def show_sweep(sweep_id: str, db: Optional[str], as_json: bool, metrics: list[str]) -> None:
    """`show --sweep ID`: one row per cell, mean and 95% CI of final metrics over seeds."""
    from analysis.sweeps import cell_table, sweep_frame

    store = _store_ro(db)
    frame, keys = sweep_frame(store, sweep_id)
    if not metrics and not as_json:  # a readable table: the first metrics (choose others with --metric)
        metrics = frame.attrs["metrics"][:4]
    cells = cell_table(frame, keys, metrics or None)
    if as_json:
        print(cells.to_json(orient="records"))
        return
    table = Table(title=f"sweep {frame.attrs['sweep_id']}: {len(frame)} runs, mean [95% CI] over seeds")
    cols = list(keys) + ["n"] + [c[:-5] for c in cells.columns if c.endswith("_mean")]
    for c in cols:
        table.add_column(c, justify="right")
    for _, row in cells.iterrows():
        vals = [str(row[k]) for k in keys] + [str(int(row["n"]))]
        for c in cols[len(keys) + 1:]:
            m, lo, hi = row[f"{c}_mean"], row[f"{c}_lo"], row[f"{c}_hi"]
            vals.append("—" if m != m else f"{m:.4g} [{lo:.4g}, {hi:.4g}]" if lo == lo else f"{m:.4g}")
        table.add_row(*vals)
    out.print(table)


def show_compare(run_id: str, db: Optional[str], as_json: bool) -> None:
    """`show FORK --compare-parent`: per-tick metrics of a fork and its parent side by side."""
    from analysis.sweeps import compare_runs

    store = _store_ro(db)
    report = compare_runs(store, run_id)
    if as_json:
        print(json.dumps(report, default=str))
        return
    out.print(f"fork {report['run_id']} of {report['parent_id']} at tick {report['branch_tick']}; changed: "
              + ", ".join(f"{k}={v}" for k, v in report["changed"].items()), soft_wrap=True, highlight=False)
    keys = report["metrics"][:4]
    table = Table(title="per-tick metrics: parent | fork")
    table.add_column("tick")
    for k in keys:
        table.add_column(f"{k} parent", justify="right")
        table.add_column(f"{k} fork", justify="right")
    for row in report["ticks"]:
        table.add_row(str(row["tick"]) + (" *" if row["tick"] <= (report["branch_tick"] or 0) else ""),
                      *(_fmt(row[side].get(k)) if row[side] else "" for k in keys for side in ("parent", "fork")))
    out.print(table)
    out.print("* ticks copied from the parent; final metrics parent -> fork: " + ", ".join(
        f"{k} {_fmt(report['final']['parent'].get(k))} -> {_fmt(report['final']['fork'].get(k))}" for k in keys),
        soft_wrap=True, highlight=False)


def main() -> None:
    """Console-script entry: usage errors become one line and exit code 2; a closed pipe (`| head`) exits 0."""
    try:
        app(standalone_mode=True)
    except UsageError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except BrokenPipeError:
        _quiet_broken_pipe()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
        _flush_or_quiet()
        raise


def _flush_or_quiet() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()


def _quiet_broken_pipe() -> None:
    """The reader went away (`societas list | head`): stop quietly with exit 0, as Unix tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


if __name__ == "__main__":
    main()
