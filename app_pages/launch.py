"""Launch: a form built from any registered scenario's Config fields; the run goes into a
background process and a progress bar follows the ticks it commits. The page never waits."""

from __future__ import annotations

import shutil

import pandas as pd
import streamlit as st

from analysis import launcher, queries
from app_pages.common import clear_caches, db_url, engine, page, runs
from scenarios.registry import REGISTRY, get_scenario, is_reference
from sim.core.errors import UsageError
from sim.core.spec import POLICIES
from sim.tick.config import ScenarioConfig


def _widget(f: launcher.FormField, key: str):
    label, help_ = f.name, f.help or None
    if f.kind == "bool":
        return st.checkbox(label, value=bool(f.default), help=help_, key=key)
    if f.kind == "choice":
        options = list(f.options)
        return st.selectbox(label, options, index=options.index(f.default) if f.default in options else 0, help=help_, key=key)
    if f.kind == "int":
        lo = int(f.lo) if f.lo is not None else None
        hi = int(f.hi) if f.hi is not None else None
        return st.number_input(label, min_value=lo, max_value=hi, value=int(f.default), step=1, help=help_, key=key)
    if f.kind == "float":
        lo = float(f.lo) if f.lo is not None else None
        hi = float(f.hi) if f.hi is not None else None
        return st.number_input(label, min_value=lo, max_value=hi, value=float(f.default), help=help_, key=key)
    if f.kind == "text":
        return st.text_input(label, value=str(f.default or ""), help=help_, key=key)
    return st.text_input(label, value=f.default or "", help=(help_ or "") + " (YAML; blank = default)", key=key,
                         placeholder="blank = default")


@st.fragment(run_every=1.0)
def _progress() -> None:
    launches = st.session_state.get("launches", [])
    if not launches:
        return
    st.subheader("Runs started here")
    moved = False
    for item in reversed(launches):
        e = engine(item.db_url)
        code = item.returncode()
        if item.run_id is None and e is not None and queries.has_schema(e):
            item.run_id = queries.find_run_by_digest(e, item.digest, item.started_at)
        state = queries.progress(e, item.run_id) if (e is not None and item.run_id) else None
        done = int(state["ticks"]) if state else 0
        status = state["status"] if state else ("starting" if code is None else "not started")
        name = f"{item.scenario} seed {item.spec.seed}" + (f" · run {item.run_id}" if item.run_id else "")
        st.progress(min(1.0, done / max(1, item.total)), text=f"{name}: {status}, {done}/{item.total} ticks")
        if code not in (None, 0) and status in ("starting", "not started", "running", "failed"):
            st.error(f"{name} stopped (exit {code}): {item.error_tail() or 'no message'}")
        elif code == 0 and not item.seen_done:
            item.seen_done = moved = True
            shutil.rmtree(item.workdir, ignore_errors=True)  # its config and logs are no longer needed
    if moved:
        clear_caches()


def _stored_references() -> list[str]:
    """User scenarios (module:Class, file.py:Class) that runs in this store were made with and that still load."""
    try:  # this page renders without a store; a store that cannot be read only lists no references
        table = runs() if engine(db_url()) is not None else None
    except Exception:  # noqa: BLE001
        table = None
    if table is None or "scenario" not in table.columns:
        return []
    refs = {s for s in table["scenario"].dropna().unique() if isinstance(s, str) and is_reference(s)}
    return sorted(r for r in refs if REGISTRY.get(r) is not None)


def render(table: pd.DataFrame) -> None:
    st.title("Launch a run")
    if not REGISTRY:
        st.info("No scenario is registered.")
        return
    names = sorted(REGISTRY) + _stored_references()
    typed = st.text_input("or your own scenario", placeholder="module:Class or path/to/file.py:Class",
                          help="a SocietyModel subclass of yours, as `societas run` takes it (see docs/tutorial.md)",
                          key="launch.__reference").strip()
    if typed and typed not in names:
        try:
            get_scenario(typed)
        except UsageError as exc:
            st.error(str(exc))
            return
        names.append(typed)
    first = names.index("commons") if "commons" in names else 0  # the platform's first scenario, whatever sorts first
    scenario = st.selectbox("Scenario", names, index=names.index(typed) if typed else first,
                            format_func=lambda n: f"{n} — {REGISTRY.get(n).description}")
    cls = REGISTRY.get(scenario)
    fields = launcher.form_fields(cls.Config)
    # the scenario's own fields first, then the reward layer's and memory's (shared by every scenario)
    fields.sort(key=lambda f: f.name in ScenarioConfig.model_fields)
    st.caption(f"Strategies: {', '.join(sorted(cls.strategies))}. The horizon is `{cls.horizon_field}`.")
    with st.form(f"launch-{scenario}"):
        c1, c2 = st.columns(2)
        seed = c1.number_input("seed", min_value=0, value=0, step=1, key=f"launch.{scenario}.__seed")
        policy = c2.selectbox("policy", list(POLICIES) if cls.synthesis else ["scripted", "llm"], key=f"launch.{scenario}.__policy",
                              help="llm: every agent is played by the embedded LLM (slow on a CPU)")
        cols = st.columns(3)
        values = {}
        for i, f in enumerate(fields):
            with cols[i % 3]:
                values[f.name] = _widget(f, f"launch.{scenario}.{f.name}")
        submitted = st.form_submit_button("Start run", type="primary")
    if submitted:
        try:
            config = launcher.config_from_form(fields, values)
            item = launcher.launch(scenario, config, seed=int(seed), policy=policy, db_url=db_url())
            st.session_state.setdefault("launches", []).append(item)
            st.success(f"Started {scenario} (seed {item.spec.seed}) in the background: "
                       f"`{' '.join(item.process.args[2:5])} …`")
        except UsageError as exc:
            st.error(str(exc))
    _progress()


page(render, needs_runs=False)
