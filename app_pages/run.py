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
from app_pages import charts
from app_pages.common import choose_run, clear_caches, db_url, metric_docs, page, q
from sim.store.store import Store

SOCIAL = ["perolat_efficiency", "perolat_equality", "perolat_sustainability", "perolat_peace"]


def _zip_tables(url: str, run_id: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, frame in run_frames(Store(url), run_id).items():
            zf.writestr(f"{name}.csv", frame.to_csv(index=False))
    return buf.getvalue()


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    detail = q("get_run", run, run["run_id"])
    if detail is None:
        st.warning(f"Run {run['run_id']} is no longer in the store.")
        return
    st.title(f"Run {run['run_id']}")
    cols = st.columns(6)
    cols[0].metric("scenario", run["scenario"])
    cols[1].metric("status", run["status"])
    cols[2].metric("ticks", f"{run['ticks']}")
    cols[3].metric("seed", run["seed"])
    cols[4].metric("backend", run["backend"])
    cols[5].metric("seconds", f"{detail.get('duration_s') or 0:.2f}")
    if run.get("reason"):
        st.caption(f"ended: {run['reason']}")
    if run["status"] == "running":
        c1, c2 = st.columns([4, 1])
        c1.info(f"Still running: {run['ticks']} ticks committed so far.")
        if c2.button("Refresh"):
            clear_caches()
            st.rerun()

    ticks = q("tick_frame", run, run["run_id"])
    # only the open tab runs: the agents' aggregates scan every agent step of the run
    tabs = st.tabs(list(TABS), key="run_tab", on_change="rerun")
    for tab, show in zip(tabs, TABS.values()):
        if tab.open is not False:
            with tab:
                show(run, detail, ticks)


def _metrics(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    if ticks.empty:
        st.info("No tick committed yet.")
        return
    docs = metric_docs(run)
    metric_cols = [c for c in ticks.columns if c not in ("tick", "tick_seconds") and not c.startswith("state.")]
    social = [c for c in SOCIAL if c in metric_cols]
    own = [c for c in metric_cols if c not in social and not c.startswith("norm_")]
    if social:
        st.altair_chart(charts.lines(ticks, social, title="Social metrics (Perolat et al. 2017), so far", independent=True),
                        width="stretch")
    chosen = st.multiselect("Scenario metrics", metric_cols, default=own[:8],
                            help="; ".join(f"{k}: {v}" for k, v in docs.items() if k in own))
    if chosen:
        st.altair_chart(charts.lines(ticks, chosen, title=f"{run['scenario']} metrics", independent=len(chosen) > 1),
                        width="stretch")
    with st.expander("What the metrics mean"):
        st.dataframe(pd.DataFrame([{"metric": k, "meaning": v} for k, v in docs.items() if k in metric_cols]),
                     hide_index=True, width="stretch")


def _trajectories(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    state_cols = [c for c in ticks.columns if c.startswith("state.")]
    if not state_cols:
        st.info("This run's state snapshots hold no numbers to plot.")
        return
    chosen = st.multiselect("State fields (resource, prices, opinions...)", state_cols, default=state_cols[:6])
    if chosen:
        st.altair_chart(charts.lines(ticks, chosen, title="World state after each tick", independent=len(chosen) > 1),
                        width="stretch")


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
    last = int(stats["tick"].max())
    tick = st.slider("Payoffs at tick", 1, last, last) if last > 1 else last
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


TABS = {"Metrics": _metrics, "Trajectories": _trajectories, "Agents": _agents, "Final metrics": _final,
        "Config": _config, "Download": _download}


page(render)
