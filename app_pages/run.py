"""Run: the config, metric time series (Perolat's four and the scenario's own), state
trajectories (resource, prices, opinions: whatever numbers the scenario's state holds),
agents' payoffs over time, the final metrics, and downloads."""

from __future__ import annotations

import io
import json
import zipfile

import pandas as pd
import streamlit as st

from analysis.frames import run_frames
from app_pages import charts, export
from app_pages.common import (choose_run, clear_caches, db_url, metric_docs, page, q, sandbox_note, scenario_class,
                              tick_picker, url_tabs)
from sim.store.store import Store

SOCIAL = ["perolat_efficiency", "perolat_equality", "perolat_sustainability", "perolat_peace"]


def _zip_tables(url: str, run_id: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, frame in run_frames(Store(url, create=False), run_id).items():
            zf.writestr(f"{name}.csv", frame.to_csv(index=False))
    return buf.getvalue()


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    detail = q("get_run", run, run["run_id"])
    if detail is None:
        st.warning(f"Run {run['run_id']} is no longer in the store.")
        return
    st.title(f"Run {run['run_id']}")
    st.text(f"{run['scenario']} · {run['status']} · {run['backend']}")  # (plain text: a model path is not markdown)
    sandbox_note(run)
    cols = st.columns(4)
    cols[0].metric("ticks", f"{run['ticks']}")
    cols[1].metric("seed", run["seed"])
    cols[2].metric("agents", q("agent_count", run, run["run_id"]))
    cols[3].metric("seconds", f"{detail.get('duration_s') or 0:.2f}")
    reason = run.get("reason")
    if isinstance(reason, str) and reason.strip():
        st.caption(f"ended: {reason}")
    if run["status"] == "running":
        c1, c2 = st.columns([4, 1])
        c1.info(f"Still running: {run['ticks']} ticks committed so far.")
        if c2.button("Refresh"):
            clear_caches()
            st.rerun()

    ticks = q("tick_frame", run, run["run_id"])
    # only the open tab runs: the agents' aggregates scan every agent step of the run
    tabs = url_tabs(list(TABS), "run_tab")
    for tab, show in zip(tabs, TABS.values()):
        if tab.open is not False:
            with tab:
                show(run, detail, ticks)


def guides(run: dict, detail: dict) -> tuple[dict[str, str], dict[str, list[tuple[float, str]]], frozenset[str]]:
    """The scenario's units, reference lines (from this run's config) and clock metrics (not plotted)."""
    cls = scenario_class(run["scenario"])
    if cls is None:
        return {}, {}, frozenset()
    return (dict(getattr(cls, "metric_units", {}) or {}), cls.reference_lines(detail.get("config") or {}),
            frozenset(getattr(cls, "clock_metrics", ()) or ()))


def _grid(run: dict, ticks: pd.DataFrame, chosen: list[str], units: dict, lines: dict, key: str) -> None:
    """One chart per series, three to a row, each with its unit and reference lines, each exportable."""
    cols = st.columns(min(3, len(chosen)))
    for i, name in enumerate(chosen):
        with cols[i % len(cols)]:
            export.chart(charts.metric(ticks, name, unit=units.get(name, ""), lines=lines.get(name, ())),
                         f"{run['run_id']}-{name}", key=f"{key}-{name}")


def _metrics(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    if ticks.empty:
        st.info("No tick committed yet.")
        return
    docs = metric_docs(run)
    units, lines, clock = guides(run, detail)
    metric_cols = [c for c in ticks.columns if c not in ("tick", "tick_seconds") and not c.startswith("state.") and c not in clock]
    social = [c for c in SOCIAL if c in metric_cols]
    own = [c for c in metric_cols if c not in social and not c.startswith("norm_")]
    if social:
        st.subheader("Social metrics (Perolat et al. 2017), so far")
        _grid(run, ticks, social, units, lines, "social")
    if clock:
        st.caption(f"{', '.join(sorted(clock))}: the scenario's clock, not plotted (they are in the CSV download).")
    chosen = st.multiselect("Scenario metrics", metric_cols, default=own[:6],
                            help="; ".join(f"{k}: {v}" for k, v in docs.items() if k in own))
    if chosen:
        st.subheader(f"{run['scenario']} metrics")
        _grid(run, ticks, chosen, units, lines, "metric")
    with st.expander("What the metrics mean"):
        st.dataframe(pd.DataFrame([{"metric": k, "unit": units.get(k, ""), "meaning": v} for k, v in docs.items()
                                   if k in metric_cols]), hide_index=True, width="stretch")


def _trajectories(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    state_cols = [c for c in ticks.columns if c.startswith("state.")]
    if not state_cols:
        st.info("This run's state snapshots hold no numbers to plot.")
        return
    units, lines, _ = guides(run, detail)
    chosen = st.multiselect("State fields (resource, prices, opinions...)", state_cols, default=state_cols[:6])
    if chosen:
        _grid(run, ticks, chosen, units, lines, "state")


def _agents(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    stats = q("agent_tick_stats", run, run["run_id"])
    if stats.empty:
        st.info("No agent steps stored.")
        return
    st.altair_chart(charts.band(stats, x="tick", mid="payoff_mean", lo="payoff_min", hi="payoff_max",
                                title="Payoff per agent: mean and min-max"), width="stretch")
    c1, c2 = st.columns(2)
    c1.altair_chart(charts.lines(stats, ["reward_mean"], title="Mean reward"), width="stretch")
    c2.altair_chart(charts.lines(stats, ["fallbacks"], title="Fallback decisions per tick"), width="stretch")
    tick = tick_picker(run, "Payoffs after tick") or int(stats["tick"].max())
    pays = q("payoffs_at", run, run["run_id"], tick)
    if not pays.empty:
        st.altair_chart(charts.histogram(pays, "payoff", title=f"Payoff distribution at tick {tick} ({len(pays)} agents)"),
                        width="stretch")


def _final(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    final = detail.get("final_metrics") or {}
    if not final:
        st.info("No final metrics (the run is still going, or it failed before its end).")
        return
    docs = metric_docs(run, final=True)
    st.dataframe(pd.DataFrame([{"metric": k, "value": v, "meaning": docs.get(k, "")} for k, v in final.items()]),
                 hide_index=True, width="stretch")


def _config(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    c1, c2 = st.columns(2)
    c1.subheader("Config")
    c1.json(detail.get("config") or {})
    c2.subheader("Spec and versions")
    c2.json({k: v for k, v in (detail.get("spec") or {}).items() if k != "config"} | {"versions": detail.get("versions")},
            expanded=False)


def _download(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    st.download_button("Per-tick metrics (CSV)", ticks.to_csv(index=False), file_name=f"{run['run_id']}-ticks.csv",
                       mime="text/csv")
    st.download_button("Final metrics and config (JSON)", json.dumps({"run": run["run_id"], "config": detail.get("config"),
                                                                      "final_metrics": detail.get("final_metrics")}, default=str),
                       file_name=f"{run['run_id']}.json", mime="application/json")
    url, run_id = db_url(), run["run_id"]
    st.download_button("All tables (ZIP of CSVs: runs, ticks, agent_steps, events, llm_calls)",
                       data=lambda: _zip_tables(url, run_id), file_name=f"{run_id}-tables.zip", mime="application/zip")
    st.caption("The ZIP is built when you click; for very large runs prefer `societas export RUN_ID --format parquet`.")
    export.report_button(f"Run {run['run_id']}", lambda: _report(run, detail, ticks), file_name=f"{run['run_id']}-report",
                         key="run-report", subtitle=f"{run['scenario']} · seed {run['seed']} · {run['backend']} · "
                                                    f"{run['status']} after {run['ticks']} ticks")


def _report(run: dict, detail: dict, ticks: pd.DataFrame) -> list:
    """The run on one page: what it is, its final metrics, its metrics over time, its config."""
    units, lines, clock = guides(run, detail)
    blocks: list = []
    reason = run.get("reason")
    if isinstance(reason, str) and reason:
        blocks.append(("text", f"Ended: {reason}"))
    final = detail.get("final_metrics") or {}
    if final:
        docs = metric_docs(run, final=True)
        blocks += ["Final metrics", pd.DataFrame([{"metric": k, "value": v, "meaning": docs.get(k, "")} for k, v in final.items()])]
    if not ticks.empty:
        blocks.append("Metrics over time")
        names = [c for c in ticks.columns if c not in ("tick", "tick_seconds") and not c.startswith("state.")
                 and c not in clock and not c.startswith("norm_")]
        blocks += [charts.metric(ticks, n, unit=units.get(n, ""), lines=lines.get(n, ())) for n in names[:12]]
    blocks += ["Config", pd.DataFrame([{"field": k, "value": json.dumps(v, default=str)} for k, v in (detail.get("config") or {}).items()])]
    return blocks


TABS = {"Metrics": _metrics, "Trajectories": _trajectories, "Agents": _agents, "Final metrics": _final,
        "Config": _config, "Download": _download}


page(render)
