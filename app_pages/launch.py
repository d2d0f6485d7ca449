"""Launch: a run from a form built from any registered scenario's Config fields (LLM options when its policy
is llm), a run from a YAML config, a sweep from a sweep file, or a fork of the open run. Each goes into a
background process; a progress bar follows it and links to its run. The page never waits.

Only in an app started with --allow-write; code references typed here (a scenario, a chat model class, a
template, a strategy) are limited to those the store's runs used unless it was started with --allow-code
(app_pages/common.py)."""

from __future__ import annotations

import shutil
from typing import Any, Optional

import pandas as pd
import streamlit as st

from app_pages.common import access, clear_caches, db_url, engine, page, read_only_note, runs, url_value
from runner import launcher
from scenarios.registry import REGISTRY, get_scenario, is_reference
from sim.core.errors import UsageError
from sim.core.spec import POLICIES
from sim.store import queries
from sim.tick.config import ScenarioConfig

TABS = ["Form", "YAML config", "Sweep", "Fork the open run"]


def _widget(f: launcher.FormField, key: str) -> Any:
    """One config field's widget, by its kind."""
    label, help_ = f.name, f.help or None
    if f.kind == "bool":
        return st.checkbox(label, value=bool(f.default), help=help_, key=key)
    if f.kind == "choice":
        options = list(f.options)
        if f.optional and None not in options:
            options = [None, *options]
        return st.selectbox(label, options, index=options.index(f.default) if f.default in options else 0, help=help_,
                            key=key, format_func=lambda o: "default" if o is None else str(o))
    if f.kind == "int":
        lo = int(f.lo) if f.lo is not None else None
        hi = int(f.hi) if f.hi is not None else None
        return st.number_input(label, min_value=lo, max_value=hi, value=int(f.default), step=1, help=help_, key=key)
    if f.kind == "float":
        lo = float(f.lo) if f.lo is not None else None
        hi = float(f.hi) if f.hi is not None else None
        return st.number_input(label, min_value=lo, max_value=hi, value=float(f.default), help=help_, key=key,
                               format="%g")  # (100 and 0.25, not 100.00 and 0.25; nor 0.001 as 0.00)
    if f.kind == "text":
        return st.text_input(label, value=str(f.default or ""), help=help_, key=key)
    return st.text_input(label, value=f.default or "", help=(help_ or "") + " (YAML; blank = default)", key=key,
                         placeholder="blank = default")


def _started(item: launcher.Launch) -> None:
    """Keep a launch for the progress list and say what was started."""
    st.session_state.setdefault("launches", []).append(item)
    st.success(f"Started {item.label} in the background: `societas {' '.join(item.command()[:2])} …`")


def _link(state: launcher.LaunchState, item: launcher.Launch) -> None:
    """A link to the launched run (or to the Runs list of the sweep) once it exists."""
    if state.run_id:
        st.page_link("app_pages/run.py", label=f"Open run {state.run_id}", icon=":material/monitoring:",
                     query_params={"run": state.run_id})
    elif item.kind == "sweep" and state.done:
        st.page_link("app_pages/runs.py", label=f"Runs of sweep {item.sweep_id}", icon=":material/table_rows:",
                     query_params={"q": item.sweep_id})


@st.fragment(run_every=1.0)
def _progress() -> None:
    """Every launch of this session: a progress bar, an error if its process stopped short, a link once it exists."""
    launches = st.session_state.get("launches", [])
    if not launches:
        return
    st.subheader("Started here")
    moved = False
    for item in reversed(launches):
        state = launcher.follow(item, engine(item.db_url))
        name = item.label + (f" · run {state.run_id}" if state.run_id else "")
        st.progress(min(1.0, state.done / max(1, state.total)),
                    text=f"{name}: {state.status}, {state.done}/{state.total} {state.unit}")
        if state.error:
            st.error(state.error)
        _link(state, item)
        if item.returncode() == 0 and not item.seen_done:
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


def _llm_settings(scenario: str) -> dict[str, Any]:
    """The LLM options of `societas run` (inside the form): provider, --model, --llm, --llm-arg, other settings."""
    key = f"launch.{scenario}.__llm"
    st.markdown("**LLM** — the options of `societas run`: `--model`, `--llm`, `--llm-arg`, and `--set llm.KEY=VALUE`")
    c1, c2, c3 = st.columns(3)
    out: dict[str, Any] = {
        "provider": c1.selectbox("provider", list(launcher.PROVIDERS), key=f"{key}.provider",
                                 help="local: the embedded SmolLM2 or a local model (--model); langchain: a chat model "
                                      "class (--llm) with its arguments (--llm-arg)"),
        "model": c2.text_input("model (--model)", key=f"{key}.model", placeholder="blank = the embedded SmolLM2",
                               help="local: a model directory or .gguf file"),
        "cls": c3.text_input("chat model class (--llm)", key=f"{key}.cls", placeholder="module:Class",
                             help="langchain: a LangChain chat model class, module:Class"),
        "args": st.text_area("constructor arguments (--llm-arg)", key=f"{key}.args", height=68,
                             placeholder="model=gpt-4o-mini (one key=value per line)"),
    }
    cols = st.columns(3)
    values = {}
    for i, f in enumerate(launcher.llm_fields()):
        with cols[i % 3]:
            values[f.name] = _widget(f, f"{key}.{f.name}")
    out["values"] = values
    return out


def _form_tab() -> None:
    """A run from the scenario's Config fields."""
    names = sorted(REGISTRY) + _stored_references()
    typed = st.text_input("Your own scenario (optional; else pick one below)",
                          placeholder="module:Class or path/to/file.py:Class",
                          help="a SocietyModel subclass of yours, as `societas run` takes it (see docs/tutorial.md); "
                               "one this store's runs used, or any with the app started with --allow-code",
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
    policy = st.selectbox("policy", list(POLICIES) if cls.synthesis else ["scripted", "llm"],
                          key=f"launch.{scenario}.__policy",
                          help="llm: every agent is played by an LLM (the embedded one is slow on a CPU)")
    with st.form(f"launch-{scenario}"):
        seed = st.number_input("seed", min_value=0, value=0, step=1, key=f"launch.{scenario}.__seed")
        cols = st.columns(3)
        values = {}
        for i, f in enumerate(fields):
            with cols[i % 3]:
                values[f.name] = _widget(f, f"launch.{scenario}.{f.name}")
        llm = _llm_settings(scenario) if policy == "llm" else None
        submitted = st.form_submit_button("Start run", type="primary")
    if submitted:
        try:
            config = launcher.config_from_form(fields, values)
            choice = launcher.llm_choice(**llm) if llm is not None else None
            _started(launcher.launch(scenario, config, seed=int(seed), policy=policy, db_url=db_url(), llm=choice))
        except UsageError as exc:
            st.error(str(exc))


def _upload_or_paste(kind: str, label: str, example: str) -> tuple[Optional[bytes | str], str]:
    """An uploaded YAML file (it wins) or pasted text, and how a message names it."""
    upload = st.file_uploader(f"{label}: upload", type=["yaml", "yml"], key=f"launch.{kind}.file")
    text = st.text_area("or paste it", key=f"launch.{kind}.text", height=180, placeholder=example)
    if upload is not None:
        return upload.getvalue(), f"{kind} file {upload.name!r}"
    return (text if text.strip() else None), f"the pasted {kind}"


def _yaml_tab() -> None:
    """A run from a YAML config, as `societas run SCENARIO --config FILE` reads it."""
    st.caption("A run config as `societas run SCENARIO --config FILE.yaml` reads it (see scenarios/*/configs/): config "
               "fields, and seed, policy, ticks, llm. A `scenario:` key in it wins over the choice below.")
    names = sorted(REGISTRY)
    scenario = st.selectbox("Scenario", names, index=names.index("commons") if "commons" in names else 0,
                            key="launch.yaml.scenario")
    text, what = _upload_or_paste("config", "YAML run config", "policy: scripted\nseed: 0\nfishers: 5\nmonths: 12")
    if st.button("Start run from YAML", key="launch.yaml.start", type="primary"):
        if text is None:
            st.error("No config: upload a YAML file or paste one.")
            return
        try:
            _started(launcher.launch_yaml(text, scenario=scenario, db_url=db_url(), what=what))
        except UsageError as exc:
            st.error(str(exc))


def _sweep_tab() -> None:
    """A sweep from a sweep file, as `societas sweep FILE` reads it."""
    st.caption("A sweep file as `societas sweep FILE` reads it: scenario, base, grid, seeds, policy (and llm, ticks); "
               "e.g. scenarios/commons/configs/norms_2x2.sweep.yaml. Its progress: ended runs out of its total.")
    text, what = _upload_or_paste("sweep", "Sweep file",
                                  "scenario: commons\nseeds: 2\nbase: {months: 12}\ngrid: {sanctions: [false, true]}")
    workers = st.number_input("workers (--workers)", min_value=0, value=0, step=1, key="launch.sweep.workers",
                              help="runs at once; 0 = as many as CPUs")
    if st.button("Start sweep", key="launch.sweep.start", type="primary"):
        if text is None:
            st.error("No sweep file: upload one or paste it.")
            return
        try:
            _started(launcher.launch_sweep(text, db_url=db_url(), what=what, workers=int(workers) or None))
        except UsageError as exc:
            st.error(str(exc))


def _fork_tab() -> None:
    """A fork of the open run (?run= or the run picked on another page) at a tick, with changed fork-able fields."""
    run_id = url_value("run") or st.session_state.get("run_id")
    if not run_id:
        st.info("Open a run (the Runs page, or `?run=ID` in the URL) to fork it here.")
        return
    e = engine(db_url())
    run = queries.get_run(e, str(run_id)) if e is not None and queries.has_schema(e) else None
    if run is None:
        st.info(f"No run {run_id!r} in the store `{db_url()}` to fork.")
        return
    cls = REGISTRY.get(run["scenario"])
    if cls is None:
        st.info(f"Run {run['id']} is of scenario {run['scenario']!r}, which this install cannot load: it cannot be forked here.")
        return
    ticks = int(run.get("ticks") or 0)
    st.caption(f"Run **{run['id']}** ({run['scenario']}, {run['status']}, {ticks} committed ticks): a new run identical "
               f"to it up to the branch tick, then under the changed fields (`societas fork`).")
    fields = launcher.fork_form_fields(cls, run["config"])
    with st.form(f"fork-{run['id']}"):
        at = st.number_input("branch tick (--at)", value=ticks // 2, step=1, key=f"launch.fork.{run['id']}.__at",
                             help=f"the last tick taken from the run: 0..{ticks}")
        cols = st.columns(3)
        values = {}
        for i, f in enumerate(fields):
            with cols[i % 3]:
                values[f.name] = _widget(f, f"launch.fork.{run['id']}.{f.name}")
        submitted = st.form_submit_button("Start fork", type="primary")
    if submitted:
        try:
            changes = launcher.fork_changes(fields, values, run["config"])
            _started(launcher.launch_fork(run["id"], int(at), changes, db_url=db_url()))
        except UsageError as exc:
            st.error(str(exc))


def render(table: pd.DataFrame) -> None:
    """The four ways to start something, then what was started here."""
    st.title("Launch a run")
    if not access().write:
        read_only_note("launching runs, sweeps and forks")
        return
    if not REGISTRY:
        st.info("No scenario is registered.")
        return
    form, from_yaml, sweep, fork = st.tabs(TABS)
    with form:
        _form_tab()
    with from_yaml:
        _yaml_tab()
    with sweep:
        _sweep_tab()
    with fork:
        _fork_tab()
    _progress()


page(render, needs_runs=False)
