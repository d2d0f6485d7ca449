"""Run: where it comes from (a fork of which run at which tick, which sweep), metric time series (Perolat's four and
the scenario's own: a click on a point opens that tick's conversation, decisions and prompts, as GovSim's viewer
opens a month), state trajectories (resource, prices, opinions: whatever numbers the scenario's state holds),
agents' payoffs over time, the final metrics, the config, and downloads."""

from __future__ import annotations

import io
import json
import zipfile

import pandas as pd
import streamlit as st

from analysis.frames import run_frames
from app_pages import charts, export, tick_view
from app_pages.common import (as_int, choose_run, clear_caches, counted, db_url, lineage_note, metric_docs, noun,
                              one_of, page, q, sandbox_note, scenario_class, set_url, tick_picker, unit_of, url_tabs,
                              url_value)
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
    lineage_note(run, detail)
    sandbox_note(run)
    cols = st.columns(4)
    cols[0].metric(f"{noun(run['scenario'])}s", f"{run['ticks']}")
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

    ticks = counted(q("tick_frame", run, run["run_id"]))
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


#: the click selection on a metric chart's points, and where the clicked tick is kept
PICK, OPENED = "pick", "run_opened_tick"


def _grid(run: dict, ticks: pd.DataFrame, chosen: list[str], units: dict, lines: dict, key: str) -> None:
    """One chart per series, three to a row, each with its unit and reference lines, each exportable; a click on a
    point opens that tick below the charts."""
    cols = st.columns(min(3, len(chosen)))
    unit_of_time = noun(run["scenario"])
    for i, name in enumerate(chosen):
        with cols[i % len(cols)]:
            chart_key = f"{key}-{name}"
            export.chart(charts.metric(ticks, name, unit=unit_of(units, name), lines=lines.get(name, ()), noun=unit_of_time,
                                       select=PICK),
                         f"{run['run_id']}-{name}", key=chart_key,
                         on_select=tick_view.opener(chart_key, PICK, OPENED, run["run_id"]))


def _opened(run: dict) -> None:
    """The tick a click opened (GovSim's month view): what was said, the decisions, the prompts; in the URL as
    `?open=TICK`, so a link opens it too."""
    wanted = as_int(url_value("open"))
    if OPENED not in st.session_state and wanted is not None:
        st.session_state[OPENED] = {"tick": wanted, "run_id": run["run_id"]}
    opened = st.session_state.get(OPENED)
    if not opened or opened.get("run_id") != run["run_id"] or not 1 <= int(opened["tick"]) <= int(run["ticks"] or 0):
        set_url("open", None)
        st.caption(f"Click a point of a chart to open that {noun(run['scenario'])}: what was said, every decision and "
                   "the LLM's prompts and answers.")
        return
    set_url("open", int(opened["tick"]))
    with st.container(border=True):
        tick_view.show(run, int(opened["tick"]))
        if st.button("Close", key="run-close-tick"):
            st.session_state.pop(OPENED, None)
            set_url("open", None)
            st.rerun()


#: the Metrics tab's sections: the scenario's own metrics (first: the resource and its reference lines) or Perolat's
#: four; one is drawn at a time (a browser draws each chart on the first view: ten at once took it past 3 s)
SOCIAL_SECTION, SECTION = "Social metrics (Perolat et al. 2017)", "run_metrics_section"
#: the scenario's metrics charted on first view (the multiselect adds any other)
SHOWN = 4


def _metrics(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    if ticks.empty:
        st.info("No tick committed yet.")
        return
    _opened(run)
    docs = metric_docs(run)
    units, lines, clock = guides(run, detail)
    metric_cols = [c for c in ticks.columns if c not in ("tick", "tick_seconds") and not c.startswith("state.") and c not in clock]
    social = [c for c in SOCIAL if c in metric_cols]
    own = [c for c in metric_cols if c not in social and not c.startswith("norm_")]
    sections = ([f"{run['scenario']} metrics"] if metric_cols else []) + ([SOCIAL_SECTION] if social else [])
    if not own:  # (nothing of the scenario's own to draw first: Perolat's four)
        sections.reverse()
    section = one_of("Charts", sections, SECTION, url="charts", label_visibility="collapsed")
    if clock:
        st.caption(f"{', '.join(sorted(clock))}: the scenario's clock, not plotted (they are in the CSV download).")
    if section == SOCIAL_SECTION:
        st.subheader("Social metrics (Perolat et al. 2017), so far")
        _grid(run, ticks, social, units, lines, "social")
    elif section is not None:
        chosen = st.multiselect("Scenario metrics", metric_cols, default=own[:SHOWN],
                                help="; ".join(f"{k}: {v}" for k, v in docs.items() if k in own))
        if chosen:
            st.subheader(f"{run['scenario']} metrics")
            _grid(run, ticks, chosen, units, lines, "metric")
    with st.expander("What the metrics mean"):
        st.dataframe(pd.DataFrame([{"metric": k, "unit": unit_of(units, k), "meaning": v} for k, v in docs.items()
                                   if k in metric_cols]), hide_index=True, width="stretch")


def _trajectories(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    state_cols = [c for c in ticks.columns if c.startswith("state.")]
    if not state_cols:
        st.info("This run's state snapshots hold no numbers to plot.")
        return
    units, lines, _ = guides(run, detail)
    _opened(run)
    chosen = st.multiselect("State fields (resource, prices, opinions...)", state_cols, default=state_cols[:6])
    if chosen:
        _grid(run, ticks, chosen, units, lines, "state")


def _agents(run: dict, detail: dict, ticks: pd.DataFrame) -> None:
    stats = q("agent_tick_stats", run, run["run_id"])
    if stats.empty:
        st.info("No agent steps stored.")
        return
    unit, unit_of_time = guides(run, detail)[0].get("payoff", ""), noun(run["scenario"])
    export.chart(charts.band(stats, mid="payoff_mean", lo="payoff_min", hi="payoff_max", unit=unit, noun=unit_of_time,
                             title="Payoff per agent: mean and min-max over agents"), f"{run['run_id']}-payoff-band",
                 key="run-payoff-band")
    c1, c2 = st.columns(2)
    with c1:
        export.chart(charts.lines(stats, ["reward_mean"], title="Mean reward per agent", noun=unit_of_time),
                     f"{run['run_id']}-reward", key="run-reward")
    with c2:
        export.chart(charts.lines(stats, ["fallbacks"], title=f"Fallback decisions per {unit_of_time}", unit="decisions",
                                  noun=unit_of_time), f"{run['run_id']}-fallbacks", key="run-fallbacks")
    tick = tick_picker(run, f"Payoffs after {unit_of_time}") or int(stats["tick"].max())
    pays = q("payoffs_at", run, run["run_id"], tick)
    if not pays.empty:
        export.chart(charts.histogram(pays, "payoff", unit=unit,
                                      title=f"Payoff distribution at {unit_of_time} {tick} ({len(pays)} agents)"),
                     f"{run['run_id']}-payoffs-{tick}", key="run-payoff-hist")


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
        blocks += [charts.metric(ticks, n, unit=unit_of(units, n), lines=lines.get(n, ()), noun=noun(run["scenario"]))
                   for n in names[:12]]
    blocks += ["Config", pd.DataFrame([{"field": k, "value": json.dumps(v, default=str)} for k, v in (detail.get("config") or {}).items()])]
    return blocks


TABS = {"Metrics": _metrics, "Trajectories": _trajectories, "Agents": _agents, "Final metrics": _final,
        "Config": _config, "Download": _download}


page(render)
