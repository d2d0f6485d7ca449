"""Runs: every stored run with its scenario, status, seed, policy, backend, ticks, the config fields that differ
between the listed runs, and key metrics; filter (kept in the URL: ?scenario=&status=&q=), sort, open one,
delete with confirmation (only in an app started with --allow-write)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis import configs
from app_pages.common import access, clear_caches, db_url, page, read_only_note, set_url, url_list, url_value
from sim.store.store import Store

KEY_METRICS = 6


def _from_url(key: str, url_key: str, options: list[str]) -> None:
    """Seed a multiselect's state from the URL (`?scenario=a,b`) the first time; keep only values it offers."""
    if key not in st.session_state:
        st.session_state[key] = [v for v in url_list(url_key) if v in options]
    else:
        st.session_state[key] = [v for v in st.session_state[key] if v in options]


def _haystack(view: pd.DataFrame) -> pd.Series:
    """What the search matches, per run: its id, scenario, policy, backend, reason, sweep and parent, config values."""
    parts = [view[c].fillna("").astype(str) for c in ("run_id", "scenario", "policy", "backend", "reason",
                                                     "sweep_id", "parent_id") if c in view]
    hay = parts[0]
    for p in parts[1:]:
        hay = hay + " " + p
    return hay + " " + view["config"].map(configs.config_text)


def render(table: pd.DataFrame) -> None:
    """The filtered, sorted list of runs; open one; delete some."""
    st.title("Runs")
    c1, c2, c3 = st.columns([2, 2, 3])
    scenario_options = sorted(table["scenario"].unique())
    status_options = sorted(table["status"].unique())
    _from_url("runs.scenario", "scenario", scenario_options)
    _from_url("runs.status", "status", status_options)
    if "runs.q" not in st.session_state:
        st.session_state["runs.q"] = url_value("q") or ""
    scenarios = c1.multiselect("Scenario", scenario_options, key="runs.scenario")
    statuses = c2.multiselect("Status", status_options, key="runs.status")
    text = c3.text_input("Search (run id, backend, reason, config values: e.g. strategy=greedy)", key="runs.q").strip()
    set_url("scenario", scenarios)
    set_url("status", statuses)
    set_url("q", text or None)
    view = table
    if scenarios:
        view = view[view["scenario"].isin(scenarios)]
    if statuses:
        view = view[view["status"].isin(statuses)]
    if text:
        view = view[_haystack(view).str.contains(text, case=False, regex=False)]
    config_cols = configs.varying_config(view["config"].tolist(), skip=("reward_mode",))
    config_cols.index = view.index
    view = pd.concat([view, config_cols], axis=1)

    metric_cols = [c for c in view.columns if c.startswith("m.") and view[c].notna().any()]
    shown = ["run_id", "scenario", "status", "seed", "policy", "backend", "ticks", "reward_mode", "created_at", "duration_s"]
    shown += [c for c in ("sweep_id", "parent_id") if c in view and view[c].notna().any()]
    shown += list(config_cols.columns)
    shown += metric_cols[:KEY_METRICS] if len(set(view["scenario"])) != 1 else metric_cols
    s1, s2 = st.columns([3, 1])
    sort_by = s1.selectbox("Sort by", shown, index=shown.index("created_at"))
    ascending = s2.toggle("Ascending", value=False)
    view = view.sort_values(sort_by, ascending=ascending, na_position="last")
    st.caption(f"{len(view)} of {len(table)} runs")
    st.dataframe(view[shown], hide_index=True, width="stretch",
                 column_config={"created_at": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD HH:mm:ss"),
                                "duration_s": st.column_config.NumberColumn("seconds", format="%.2f")})

    ids = view["run_id"].tolist()
    if not ids:
        return
    o1, o2 = st.columns([3, 1])
    chosen = o1.selectbox("Open a run", ids, format_func=lambda i: f"{i} · {table.set_index('run_id').at[i, 'scenario']}")
    if o2.button("Open", type="primary", width="stretch"):
        st.session_state["run_id"] = chosen
        st.query_params["run"] = chosen
        st.switch_page("app_pages/run.py")

    if not access().write:
        st.caption("Deleting runs needs the app started with `societas app --allow-write`.")
        return
    with st.expander("Delete runs"):
        doomed = st.multiselect("Runs to delete", ids, key="doomed")
        if st.button("Delete…", disabled=not doomed):
            st.session_state["confirm_delete"] = list(doomed)
        pending = st.session_state.get("confirm_delete")
        if pending:
            status = table.set_index("run_id")["status"]
            running = [i for i in pending if status.get(i) == "running"]
            st.warning(f"Delete {len(pending)} run(s) and all their ticks, agent steps, events and LLM calls? "
                       f"This cannot be undone: {', '.join(pending)}"
                       + (f" — {', '.join(running)} still running." if running else ""))
            y, n = st.columns(2)
            if y.button(f"Yes, delete {len(pending)}", type="primary"):
                if not access().write:  # (checked again where it writes)
                    read_only_note("deleting runs")
                    return
                store = Store(db_url())
                deleted = sum(store.delete_run(i) for i in pending)
                st.session_state.pop("confirm_delete", None)
                st.session_state.pop("doomed", None)
                if st.session_state.get("run_id") in pending:
                    st.session_state.pop("run_id", None)
                    st.query_params.pop("run", None)
                clear_caches()
                st.toast(f"Deleted {deleted} run(s)")
                st.rerun()
            if n.button("Cancel"):
                st.session_state.pop("confirm_delete", None)
                st.rerun()


page(render)
