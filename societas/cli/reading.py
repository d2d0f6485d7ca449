"""`societas list`, `show`, `export`, `replay` and `scenarios`: commands that read the store and the registry."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich import box
from rich.table import Table

from scenarios.registry import REGISTRY, get_scenario
from sim.store.urls import default_url
from societas.cli.app import DbOption, JsonOption, PricesOption, app, fail, fit_widths, fmt, open_store, out, reference_table

if TYPE_CHECKING:  # pragma: no cover - for type checkers
    from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]  # the checkout: app.py and .streamlit/ are there


@app.command("list")
def list_(db: Optional[str] = DbOption, as_json: bool = JsonOption) -> None:
    """List stored runs: status (stale when its process is gone), who decided, where a run came from."""
    from analysis.summary import run_row

    rows = [run_row(r) for r in open_store(db, create=False).list_runs()]
    if as_json:
        print(json.dumps(rows))
        return
    cells = []
    for row in rows:
        origin = row["origin"] + (f" of {row['parent_id']}" if row["parent_id"] else "") + (" (cached)" if row["cached"] else "")
        cells.append((row["run_id"], row["scenario"], row["status_text"], row["decided_by"], origin, str(row["seed"]),
                      str(row["ticks"]), row["created_at"][:16].replace("T", " ")))
    headers = ("run_id", "scenario", "status", "decided by", "origin", "seed", "ticks", "created")
    table = Table(title=f"{len(rows)} run{'' if len(rows) == 1 else 's'}", box=box.SIMPLE_HEAD, pad_edge=False, padding=0, show_edge=False)
    for col, width in zip(headers, fit_widths(headers, cells, out.width, shrink=(1, 2, 3, 4, 7))):
        table.add_column(col, overflow="fold", width=width)
    for c in cells:
        table.add_row(*c)
    out.print(table)


@app.command()
def show(
    run_id: Optional[str] = typer.Argument(None, help="run id or unique prefix"),
    tick: Optional[int] = typer.Option(None, "--tick", help="also print what agents said in this tick (messages, posts)"),
    sweep_id: Optional[str] = typer.Option(None, "--sweep", help="show a sweep's cells (mean and 95% CI over seeds)"),
    metric: list[str] = typer.Option([], "--metric", help="with --sweep: final metrics to show (repeatable)"),
    compare_parent: bool = typer.Option(False, "--compare-parent", help="a fork beside its parent, tick by tick"),
    prices: Optional[str] = PricesOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Show a run: spec, status, every final and per-tick metric, fallbacks, LLM usage per group and model and its
    cost, a tick's messages.

    With --sweep: a sweep's cells (with each cell's cost); with --compare-parent: a fork beside its parent.
    """
    from analysis.model_usage import load_prices
    from analysis.summary import run_summary, tick_messages

    if sweep_id is not None:
        if run_id is not None or tick is not None or compare_parent:
            fail("--sweep shows a sweep's cells: give no RUN_ID, --tick or --compare-parent with it")
        return show_sweep(sweep_id, db, as_json, metric, prices)
    if metric:
        fail("--metric chooses the metrics of --sweep SWEEP_ID; a run shows every metric")
    if run_id is None:
        fail("give a RUN_ID (or --sweep SWEEP_ID)")
    if compare_parent:
        if tick is not None:
            fail("--tick and --compare-parent do not go together")
        return show_compare(run_id, db, as_json)

    store = open_store(db, create=False)
    run = store.get_run(run_id)
    if tick is not None and not 1 <= tick <= run.ticks:
        fail(f"bad value for '--tick': {tick}; run {run.id} has committed ticks 1..{run.ticks}" if run.ticks
             else f"bad value for '--tick': {tick}; run {run.id} has no committed tick")
    summary = run_summary(store, run.id, load_prices(prices))
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
    if summary["sandbox"]:
        out.print(f"sandbox: {summary['sandbox']['level']} — {summary['sandbox']['guarantees']}", soft_wrap=True,
                  highlight=False)
    final = Table(title="final metrics (whole run)")
    final.add_column("metric")
    final.add_column("value", justify="right")
    final.add_column("meaning", overflow="fold")
    docs = summary["metric_docs"]["final"]
    for k, v in summary["final_metrics"].items():
        final.add_row(k, fmt(v), docs.get(k, ""))
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
            table.add_row(k, *(fmt(t["metrics"].get(k)) for t in shown))
        out.print(table)
    if summary.get("reference"):
        out.print(reference_table(summary["reference"]))
    out.print(f"fallback decisions: {summary['fallbacks']}")
    llm = summary["llm"]
    if llm["calls"]:
        out.print(f"LLM: {llm['calls']} calls, {llm['cache_hits']} cache hits, tokens in/out {llm['tokens_in']}/{llm['tokens_out']}, "
                  f"latency {llm['latency_s']:.2f}s", soft_wrap=True)
        usage_table(llm["by_model"], llm["cost"])
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


@app.command("app")
def open_app(
    db: Optional[str] = DbOption,
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="the port to serve the app on"),
    address: str = typer.Option("127.0.0.1", "--address", help="the address to listen on (default: this machine "
                                "only; 0.0.0.0 serves every interface: anyone who reaches the port opens the app)"),
    allow_write: bool = typer.Option(False, "--allow-write", help="let the app's pages launch, fork and delete runs, "
                                     "and open another store from the sidebar (default: it only reads)"),
    allow_code: bool = typer.Option(False, "--allow-code", help="let the Launch page import any code reference typed "
                                    "into it (module:Class, path/file.py:Class); default: only those the store's runs "
                                    "already used"),
) -> None:
    """Open the Streamlit app on the store (read-only unless --allow-write) on this machine: http://127.0.0.1:PORT."""
    from sim.store.schema import absolute_url

    script = ROOT / "app.py"
    if not script.is_file():
        fail(f"the app runs from a societas checkout: {script} is not there")
    if not address.strip() or any(c.isspace() for c in address):
        fail(f"bad value for '--address': {address!r}; an IP address or host name (127.0.0.1, 0.0.0.0, ::1)")
    url = absolute_url(default_url(db))
    host = f"[{address}]" if ":" in address else address
    local = address in ("127.0.0.1", "localhost", "::1")
    mode = "read-only" if not allow_write else "launch, fork and delete allowed"
    mode += "; any code reference allowed" if allow_code else ""
    say = (f"the app on {url} ({mode}): http://{host}:{port} — listening on {address}"
           + (" only (--address 0.0.0.0 serves other machines)" if local
              else ": anyone who can reach this machine's port can open it"))
    flags = (["--allow-write"] if allow_write else []) + (["--allow-code"] if allow_code else [])
    os.chdir(ROOT)  # streamlit reads .streamlit/config.toml from where it starts
    # (app_pages.serve imports what the pages import, says `say`, then runs streamlit: a first visit finds it warm)
    os.execv(sys.executable, [sys.executable, "-m", "app_pages.serve", "--say", say, str(script), "--server.port",
                              str(port), "--server.address", address, "--", "--db", url, *flags])


def usage_table(rows: list[dict[str, Any]], cost: Optional[float]) -> None:
    """A run's LLM usage per group and model (`analysis.model_usage`), with what it cost."""
    table = Table(title="LLM usage by group and model" + (f" (cost {cost:.4g})" if cost is not None else " (cost: a model "
                                                                                                       "has no price)"))
    for col in ("backend", "group", "model", "calls", "cache hits", "tokens in", "tokens out", "latency s",
                "s per call", "fallbacks", "cost"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["backend"], r["group"], r["model"], str(r["calls"]), str(r["cache_hits"]), str(r["tokens_in"]),
                      str(r["tokens_out"]), f"{r['latency_s']:.2f}", fmt(r["latency_per_call_s"]), str(r["fallbacks"]),
                      "no price" if r["cost"] is None else f"{r['cost']:.4g}")
    out.print(table)


def show_sweep(sweep_id: str, db: Optional[str], as_json: bool, metrics: list[str], prices: Optional[str] = None) -> None:
    """`show --sweep ID`: one row per cell, mean and 95% CI of final metrics over seeds (and of each run's cost)."""
    from analysis.model_usage import load_prices
    from analysis.sweeps import cell_table, sweep_frame

    store = open_store(db, create=False)
    frame, keys = sweep_frame(store, sweep_id, load_prices(prices))
    if not metrics and not as_json:  # a readable table: the first metrics (choose others with --metric), and the cost
        metrics = [m for m in frame.attrs["metrics"] if m != "cost"][:4] + (["cost"] if "cost" in frame.columns else [])
    cells = cell_table(frame, keys, metrics or None)
    if as_json:
        print(cells.to_json(orient="records"))
        return
    out.print(f"[bold]sweep {frame.attrs['sweep_id']}[/]: {len(frame)} runs, mean [95% interval] over seeds"
              + ("" if len(frame) else " (no run of it is stored yet)"), soft_wrap=True)
    table = Table()
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
    if len(cells):
        out.print("intervals: Wilson for 0/1 rates, else a percentile bootstrap of the mean (never past a metric's range)",
                  soft_wrap=True, highlight=False)


def show_compare(run_id: str, db: Optional[str], as_json: bool) -> None:
    """`show FORK --compare-parent`: per-tick metrics of a fork and its parent side by side."""
    from analysis.sweeps import compare_runs

    store = open_store(db, create=False)
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
                      *(fmt(row[side].get(k)) if row[side] else "" for k in keys for side in ("parent", "fork")))
    out.print(table)
    out.print("* ticks copied from the parent; final metrics parent -> fork: " + ", ".join(
        f"{k} {fmt(report['final']['parent'].get(k))} -> {fmt(report['final']['fork'].get(k))}" for k in keys),
        soft_wrap=True, highlight=False)


@app.command("compare-runs")
def compare_runs(
    run_a: str = typer.Argument(..., help="run id or unique prefix (e.g. the run with archetypes)"),
    run_b: str = typer.Argument(..., help="the run to compare it with (e.g. the same run without them)"),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Two runs of one scenario side by side: the divergence of A's per-tick metrics from B's (per metric, the mean
    over ticks of |a - b| / max(|a|, |b|); overall, the mean over metrics: docs/archetypes.md), and each run's LLM
    calls and decisions."""
    from analysis.compare import clock_metrics
    from analysis.divergence import divergence

    store = open_store(db, create=False)
    a, b = store.get_run(run_a), store.get_run(run_b)
    if a.scenario != b.scenario:
        fail(f"runs {a.id} ({a.scenario}) and {b.id} ({b.scenario}) are of different scenarios: nothing to compare")
    ticks = [{t.tick: t.metrics for t in store.ticks(r.id)} for r in (a, b)]
    report = divergence(ticks[0], ticks[1], skip=clock_metrics(a.scenario) if a.scenario in REGISTRY else ())
    calls = {r.id: _calls(store, r) for r in (a, b)}
    report = {"run_a": a.id, "run_b": b.id, "scenario": a.scenario, **report, "llm": calls}
    if as_json:
        print(json.dumps(report, default=str))
        return
    out.print(f"run {a.id} vs {b.id} ({a.scenario}), {report['ticks']} ticks compared: divergence "
              f"{fmt(report['divergence'])} (mean over {len(report['metrics'])} metrics)", soft_wrap=True, highlight=False)
    for r in (a, b):
        c = calls[r.id]
        out.print(f"  {r.id}: {c['calls']} LLM calls for {c['decisions']} LLM decisions"
                  + (" (archetypes)" if c["archetypes"] else ""), highlight=False)
    table = Table(title="divergence per metric (mean relative difference over ticks)")
    table.add_column("metric")
    table.add_column("divergence", justify="right")
    for name, value in sorted(report["metrics"].items(), key=lambda kv: -kv[1]):
        table.add_row(name, fmt(value))
    out.print(table)


def _calls(store: Any, run: Any) -> dict[str, Any]:
    """A run's LLM calls (stored call rows, cache hits included) and decisions: an archetype run's from its final
    summary, any other's are its calls (one per decision)."""
    rows = store.llm_usage([run.id])
    stored = int(sum(r["calls"] for r in rows))
    final = run.final_metrics or {}
    if final.get("archetype_calls") is not None:
        return {"calls": int(final["archetype_calls"]), "decisions": int(final["archetype_decisions"]), "archetypes": True}
    return {"calls": stored, "decisions": stored, "archetypes": False}


@app.command()
def export(
    run_id: str,
    format: str = typer.Option("csv", "--format", help="csv, parquet, or trajectories (one row per decision for training)"),
    out_dir: Path = typer.Option(..., "--out", help="directory to write the tables into"),
    gamma: float = typer.Option(1.0, "--gamma", help="trajectories: the discount of return_to_go (0..1)"),
    decisions: str = typer.Option("all", "--decisions", help="trajectories: all (scripted ones with the prompt an LLM "
                                                             "in their seat would read) or llm (the LLM agents' only)"),
    prices: Optional[str] = PricesOption,
    db: Optional[str] = DbOption,
) -> None:
    """Export a run's tables (runs, ticks, agent_steps, events, llm_calls, and llm_usage: calls, tokens, latency,
    fallbacks and cost per group and model) as CSV or Parquet, or its trajectories: one row per decision (a scripted
    one with the prompt an LLM in its seat would have been sent) with prompt, completion, token ids,
    log-probabilities, reward vector, reward and return to go (`trajectories.parquet` and `trajectories.jsonl`;
    columns in docs/learning.md)."""
    from analysis.frames import export_run
    from analysis.model_usage import load_prices
    from analysis.trajectories import export_trajectories

    if format not in ("csv", "parquet", "trajectories"):
        fail(f"bad value for '--format': {format[:40]!r}; valid: csv, parquet, trajectories")
    store = open_store(db, create=False)
    if format == "trajectories":
        paths = export_trajectories(store, store.get_run(run_id).id, out_dir, gamma=gamma, decisions=decisions)
    else:
        paths = export_run(store, store.get_run(run_id).id, out_dir, format, prices=load_prices(prices))
    for p in paths:
        out.print(str(p))


@app.command()
def replay(run_id: str, db: Optional[str] = DbOption, as_json: bool = JsonOption,
           keep: bool = typer.Option(False, "--store", help="store the replay as a run of its own (origin replay); "
                                                            "by default it is compared and nothing is written")) -> None:
    """Re-run a stored run from the LLM cache (no model needed) and report whether every stored tick matched.

    Nothing is written unless --store. An unfinished run (interrupted, failed, killed) is replayed for the ticks it
    has, and said to be incomplete.
    """
    from runner.replay import replay_run

    store = open_store(db, create=False)
    report = replay_run(store, store.get_run(run_id).id, keep=keep)
    if as_json:
        print(json.dumps(report))
    else:
        verdict = "[green]every tick matched[/]" if report["matched"] else "[red]MISMATCH[/]"
        stored = f" as {report['replay_run_id']}" if report["replay_run_id"] else ""
        out.print(f"replay of {report['run_id']}{stored}: {report['ticks']} ticks, {verdict}")
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
    from sim.core.spec import LLMSpec
    from sim.reward.components import COMMON_COMPONENTS

    data = []
    chosen = [(n, get_scenario(n)) for n in names] if names else sorted(REGISTRY.items())
    for name, cls in chosen:
        docs = cls.metric_docs()
        data.append({"name": name, "description": cls.description, "horizon": cls.horizon_field,
                     "strategies": sorted(cls.strategies), "fields": field_rows(cls.Config),
                     "tick_metrics": docs["tick"], "final_metrics": docs["final"],
                     "reward_components": {**cls.component_docs, **COMMON_COMPONENTS}})
    llm_fields = [{**f, "name": f"llm.{f['name']}"} for f in field_rows(LLMSpec)]
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
        for kind, title in (("final_metrics", "final metrics (whole run: `run --json`, `show`)"), ("tick_metrics", "per-tick metrics (the ticks table)"),
                            ("reward_components", "reward components (what reward_weights weighs; stored with every agent step)")):
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


def field_rows(model: type[BaseModel]) -> list[dict[str, Any]]:
    """Name, type, default, bounds and help of a pydantic model's fields, as `scenarios` prints them."""
    from sim.core.fields import describe_fields

    return [{"name": f.name, "type": f.type_name, "default": f.default, "bounds": f.bounds, "help": f.help}
            for f in describe_fields(model)]

