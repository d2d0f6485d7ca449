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


def _store(url: Optional[str]):
    from sim.store import Store

    return Store(_db(url))


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
    store = _store(db)
    from scenarios import get_scenario

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
            _fail(f"run {exc.run_id} interrupted; its committed ticks are kept (status failed)", code=130)
        except RunFailed as exc:
            _fail(f"run {exc.run_id} failed: {exc.reason} (committed ticks are kept)", code=1)
    if as_json:
        print(json.dumps(result.to_json()))
        return
    table = Table(title=f"{scenario} — run {result.run_id}: {result.status}, {result.ticks} ticks, {result.duration_s:.1f}s")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in result.metrics.items():
        table.add_row(k, _fmt(v))
    out.print(table)
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
    """List stored runs."""
    runs = _store(db).list_runs()
    rows = [{"run_id": r.id, "scenario": r.scenario, "status": r.status, "seed": r.seed, "ticks": r.ticks,
             "policy": r.policy, "created_at": r.created_at.isoformat()} for r in runs]
    if as_json:
        print(json.dumps(rows))
        return
    table = Table(title=f"{len(rows)} runs")
    for col in ("run_id", "scenario", "status", "seed", "ticks", "policy", "created_at"):
        table.add_column(col)
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("run_id", "scenario", "status", "seed", "ticks", "policy", "created_at")))
    out.print(table)


@app.command()
def show(run_id: str, db: Optional[str] = DbOption, as_json: bool = JsonOption) -> None:
    """Show a run: spec, status, final metrics, per-tick metrics, fallbacks and LLM usage."""
    from analysis.summary import run_summary

    store = _store(db)
    summary = run_summary(store, store.get_run(run_id).id)
    if as_json:
        print(json.dumps(summary, default=str))
        return
    out.print(f"[bold]run {summary['run_id']}[/] {summary['scenario']} seed {summary['seed']} policy {summary['policy']}: "
              f"{summary['status']} after {summary['ticks']} ticks ({summary['duration_s']:.1f}s)")
    if summary.get("reason"):
        out.print(f"reason: {summary['reason']}")
    out.print("config: " + ", ".join(f"{k}={v}" for k, v in summary["config"].items() if v is not None))
    table = Table(title="per-tick metrics")
    keys = list(summary["final_metrics"])[:8]
    table.add_column("tick")
    for k in keys:
        table.add_column(k, justify="right")
    for t in summary["per_tick"]:
        table.add_row(str(t["tick"]), *(_fmt(t["metrics"].get(k)) for k in keys))
    out.print(table)
    out.print(f"fallback decisions: {summary['fallbacks']}")
    llm = summary["llm"]
    if llm["calls"]:
        out.print(f"LLM: {llm['calls']} calls, {llm['cache_hits']} cache hits, tokens in/out {llm['tokens_in']}/{llm['tokens_out']}, "
                  f"latency {llm['latency_s']:.2f}s")
        t2 = Table(title="LLM calls by backend / agent")
        for col in ("backend", "agent", "calls", "cache hits", "tokens in", "tokens out", "latency s", "fallbacks"):
            t2.add_column(col)
        for row in llm["by_agent"]:
            t2.add_row(row["backend"], str(row["agent_id"]), str(row["calls"]), str(row["cache_hits"]), str(row["tokens_in"]),
                       str(row["tokens_out"]), f"{row['latency_s']:.2f}", str(row["fallbacks"]))
        out.print(t2)


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
    store = _store(db)
    paths = export_run(store, store.get_run(run_id).id, out_dir, format)
    for p in paths:
        out.print(str(p))


@app.command()
def replay(run_id: str, db: Optional[str] = DbOption, as_json: bool = JsonOption) -> None:
    """Re-run a stored run from the LLM cache (no model needed) and report whether every tick matched."""
    from analysis.replay import replay_run

    store = _store(db)
    report = replay_run(store, store.get_run(run_id).id)
    if as_json:
        print(json.dumps(report))
    else:
        verdict = "[green]every tick matched[/]" if report["matched"] else "[red]MISMATCH[/]"
        out.print(f"replay of {report['run_id']} as {report['replay_run_id']}: {report['ticks']} ticks, {verdict}")
        for m in report["mismatches"][:10]:
            out.print(f"  tick {m['tick']}: {m['what']}")
    if not report["matched"]:
        raise typer.Exit(1)


@app.command()
def scenarios(as_json: bool = JsonOption) -> None:
    """List registered scenarios with their config fields and defaults."""
    from scenarios import REGISTRY

    data = []
    for name, cls in sorted(REGISTRY.items()):
        fields = []
        for fname, f in cls.Config.model_fields.items():
            default = f.get_default(call_default_factory=True)
            fields.append({"name": fname, "type": _type_name(f.annotation), "default": default, "help": f.description or ""})
        data.append({"name": name, "description": cls.description, "horizon": cls.horizon_field,
                     "strategies": sorted(cls.strategies), "fields": fields})
    if as_json:
        print(json.dumps(data, default=str))
        return
    for s in data:
        table = Table(title=f"{s['name']}: {s['description']} (strategies: {', '.join(s['strategies'])})")
        for col in ("field", "type", "default", "help"):
            table.add_column(col)
        for f in s["fields"]:
            table.add_row(f["name"], f["type"], str(f["default"]), f["help"])
        out.print(table)


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
    """Console-script entry: usage errors become one line and exit code 2."""
    try:
        app(standalone_mode=True)
    except UsageError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
