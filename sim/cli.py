"""The `societas` command line: run, list, show, export, replay, scenarios.

Bad input exits with code 2 and one line on stderr naming the problem; nothing is written.
"""

from __future__ import annotations

import json
import os
import sys
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
    """The store at `url`; read-only commands pass create=False so that reading never creates one."""
    from sim.store import Store

    return Store(_db(url), create=create)


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
    return f"{v:.4g}" if isinstance(v, float) else str(v)


@app.command()
def run(
    scenario: str = typer.Argument(..., help="registered scenario name (see `societas scenarios`)"),
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

    if needs_llm(spec, get_scenario(scenario)):  # a model or chat class that cannot be used is bad input: before any write
        from agents.llm.factory import preflight

        preflight(spec)
    store = _store(db)

    total = int(spec.config[get_scenario(scenario).horizon_field])
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
    table = Table(title=f"{len(rows)} runs", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("run_id", "scenario", "status", "decided by", "origin", "seed", "ticks", "created"):
        table.add_column(col, overflow="fold", no_wrap=col in ("run_id", "created"))
    for row in rows:
        origin = row["origin"] + (f" of {row['parent_id']}" if row["parent_id"] else "") + (" (cached)" if row["cached"] else "")
        table.add_row(row["run_id"], row["scenario"], row["status_text"], row["decided_by"], origin, str(row["seed"]),
                      str(row["ticks"]), row["created_at"][:16].replace("T", " "))
    out.print(table)


@app.command()
def show(
    run_id: str,
    tick: Optional[int] = typer.Option(None, "--tick", help="also print what agents said in this tick (messages, posts)"),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Show a run: spec, status, every final and per-tick metric, fallbacks, LLM usage, a tick's messages."""
    from analysis.summary import run_summary, tick_messages

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
def scenarios(as_json: bool = JsonOption) -> None:
    """List registered scenarios: config fields (type, default, bounds), llm.* keys, and every metric documented."""
    from scenarios import REGISTRY
    from sim.contracts import LLMSpec
    from sim.model import BASE_FINAL_DOCS, BASE_TICK_DOCS

    data = []
    for name, cls in sorted(REGISTRY.items()):
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
