"""What every page shares: the store URL, what the app may do, the cached engine and queries, the run picker, errors.

Pages read only through `q(...)` (sim.store.queries, cached by run and its progress) and
`runs()`; nothing here or in a page writes SQL.

What the app may do is fixed on its command line (`societas app`, or after `--` of `streamlit run app.py`),
never by a visitor: by default it only reads the store it was given. `--allow-write` lets its pages launch,
fork and delete runs and open another store from the sidebar; `--allow-code` lets them import code references
(`module:Class`, `path/file.py:Class`: scenarios, strategies, templates, chat model classes) beyond those the
given store's runs already used (`permitted_reference`).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional

import pandas as pd
import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

from agents.sandbox.levels import DEFAULT_LEVEL
from agents.sandbox.levels import of_run as sandbox_of_run
from analysis import usage, vectors
from scenarios.registry import REGISTRY
from sim.core.errors import UsageError
from sim.core.refs import absolute, is_reference, only_references, references_in
from sim.reward.docs import scenario_metric_docs
from sim.store import event_queries as events, queries
from sim.store.schema import default_url
from sim.store.store import Store
#: slug, page file, title, icon: the app's navigation, in order
PAGES = [
    ("runs", "app_pages/runs.py", "Runs", ":material/table_rows:"),
    ("run", "app_pages/run.py", "Run", ":material/monitoring:"),
    ("agents", "app_pages/agents.py", "Agents", ":material/person:"),
    ("network", "app_pages/network.py", "Network", ":material/hub:"),
    ("norms", "app_pages/norms.py", "Norms", ":material/gavel:"),
    ("conversations", "app_pages/conversations.py", "Conversations", ":material/forum:"),
    ("events", "app_pages/events.py", "Event log", ":material/list_alt:"),
    ("replay", "app_pages/replay.py", "Replay", ":material/replay:"),
    ("policies", "app_pages/policies.py", "Policies", ":material/code:"),
    ("compare", "app_pages/compare.py", "Compare", ":material/compare_arrows:"),
    ("launch", "app_pages/launch.py", "Launch", ":material/rocket_launch:"),
]


def configured_db() -> str:
    """`--db URL` after `--` on the streamlit command line, else $SOCIETAS_DB, else sqlite:///runs.db."""
    args = sys.argv[1:]
    for i, arg in enumerate(args):
        if arg == "--db" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--db="):
            return arg.split("=", 1)[1]
    return default_url()


@dataclass(frozen=True)
class Access:
    """What the app was started to allow (its command line): `write` (launch, fork, delete, another store) and
    `code` (any code reference typed into a page)."""

    write: bool = False
    code: bool = False


WRITE_FLAG, CODE_FLAG = "--allow-write", "--allow-code"


def access() -> Access:
    """The app's flags, after `--` on the streamlit command line (`societas app --allow-write` passes them)."""
    args = sys.argv[1:]
    return Access(write=WRITE_FLAG in args, code=CODE_FLAG in args)


def db_url() -> str:
    """The store this session looks at: the one the app was given, or (with --allow-write) the sidebar's."""
    if not access().write:
        return configured_db()
    return st.session_state.get("db_url") or configured_db()


def sidebar_store() -> None:
    """The store's URL in the sidebar: editable with --allow-write, else shown only."""
    if not access().write:
        st.sidebar.text_input("Store", value=configured_db(), disabled=True, key="db_url_shown",
                              help=f"the store the app was started on; start it with {WRITE_FLAG} to open another")
        return
    if "db_url" not in st.session_state:
        st.session_state["db_url"] = configured_db()
    st.sidebar.text_input("Store", key="db_url", help="database URL: --db after `--`, $SOCIETAS_DB, or sqlite:///runs.db")


def read_only_note(what: str) -> None:
    """Say that `what` needs the app started with --allow-write."""
    st.info(f"This app only reads: {what} needs it started with `societas app {WRITE_FLAG}`.")


@st.cache_data(ttl=5, show_spinner=False)
def _used_references(url: str) -> frozenset[str]:
    e = _engine(url)
    if e is None or not queries.has_schema(e):
        _engine.clear()
        return frozenset()
    return frozenset(ref for spec in queries.stored_specs(e) for ref in references_in(spec))


def permitted_reference(ref: str) -> bool:
    """Whether the app may import code reference `ref`: any with --allow-code, else only one that a run of the store
    it was started on already used (a file reference compared by its absolute path)."""
    if access().code or not is_reference(ref):
        return True
    used = _used_references(configured_db())
    return ref in used or absolute(ref) in used


@contextmanager
def guarded() -> Iterator[None]:
    """Run a page with code references limited to `permitted_reference` (sim.core.refs.only_references)."""
    with only_references(None if access().code else permitted_reference):
        yield


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Any:
    return queries.open_reader(url)


def engine(url: Optional[str] = None) -> Any:
    """The cached read engine, or None while the store does not exist (that absence is not cached)."""
    url = url or db_url()
    e = _engine(url)
    if e is None:
        _engine.clear()
    return e


@st.cache_data(ttl=2, show_spinner=False)
def _runs(url: str) -> pd.DataFrame:
    e = engine(url)
    if e is None or not queries.has_schema(e):
        return pd.DataFrame()
    return queries.list_runs(e)


def runs() -> pd.DataFrame:
    """Every stored run (cached for two seconds, so running runs move on), read afresh when the URL names a run the
    cached table lacks: a link to a run made a moment ago (a fork's "Compare with its parent") opens that run, not the
    table of two seconds before without it."""
    url = db_url()
    table = _runs(url)
    if not table.empty and _names_unknown_runs(table):
        _runs.clear(url)
        table = _runs(url)
    return table


def _names_unknown_runs(table: pd.DataFrame) -> bool:
    """Whether the URL's `?run=` (an id or its prefix) or Compare's `?runs=` names a run that `table` lacks."""
    ids = set(table["run_id"].astype(str))
    named = {*url_list("runs"), *([url_value("run")] if url_value("run") else [])}
    return any(n not in ids and not any(i.startswith(n) for i in ids) for n in named)


#: the modules whose queries pages call through `q`, `eq`, `vq` and `over_usage`
_QUERY_MODULES = {"queries": queries, "events": events, "usage": usage, "vectors": vectors}


@st.cache_resource(show_spinner=False)
def _store(url: str) -> Store:
    return Store(url, create=False)


@st.cache_data(show_spinner=False, max_entries=256)
def _query(url: str, module: str, name: str, version: Any, args: tuple, kwargs: tuple) -> Any:
    source = _store(url) if module == "vectors" else engine(url)  # (reward vectors come through the store's reading)
    return getattr(_QUERY_MODULES[module], name)(source, *args, **dict(kwargs))


def _cached(module: str, name: str, run: Optional[dict[str, Any]], args: tuple, kwargs: dict[str, Any]) -> Any:
    version = (run.get("run_id"), run.get("ticks"), run.get("status")) if run else None
    return _query(db_url(), module, name, version, args, tuple(sorted(kwargs.items())))


def q(name: str, run: Optional[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
    """`sim.store.queries.NAME(engine, *args, **kwargs)`, cached until the run commits another tick."""
    return _cached("queries", name, run, args, kwargs)


def eq(name: str, run: Optional[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
    """`sim.store.event_queries.NAME(engine, *args, **kwargs)` (the Conversations and Event log queries), cached as `q`."""
    return _cached("events", name, run, args, kwargs)


def over_usage(run: dict[str, Any], config: dict[str, Any]) -> Optional[pd.DataFrame]:
    """`analysis.usage.over_usage` of `run` (its scenario's rule, counted in SQL), cached as `q`."""
    return _cached("usage", "over_usage", run, (run["run_id"], run["scenario"], config), {})


def vq(name: str, run: Optional[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
    """`analysis.vectors.NAME(store, *args, **kwargs)` (reward vectors, read through the store), cached as `q`."""
    return _cached("vectors", name, run, args, kwargs)


#: state fields that count agents by kind (`state.strategies.greedy`: the fishers who use `greedy`)
COUNTS = ("state.strategies.",)


def counted(ticks: pd.DataFrame) -> pd.DataFrame:
    """A run's tick frame with every count of agents by kind (`COUNTS`) that a tick lacks set to 0, on each tick that
    counted some kind: a scenario's state names only the kinds in use (the fishery's drops a strategy no fisher uses
    any more), so a strategy given up after month 1 would be one point, not a line down to 0. The kinds are those the
    run's ticks name; the stored state stays as it is (replays compare it)."""
    out = ticks
    for prefix in COUNTS:
        group = [c for c in ticks.columns if c.startswith(prefix)]
        if not group:
            continue
        counting = ticks[group].notna().any(axis=1)
        if out is ticks:
            out = ticks.copy()
        out.loc[counting, group] = ticks.loc[counting, group].fillna(0)
    return out


def clear_caches() -> None:
    _runs.clear()
    _query.clear()


def page(render: Callable[[pd.DataFrame], None], *, needs_runs: bool = True) -> None:
    """Run a page: the store's empty states and any error become a message, never a traceback."""
    try:
        url = db_url()
        if needs_runs:
            if engine(url) is None:
                st.info(f"No store at `{url}` yet. Start a run on the **Launch** page, or with "
                        f"`societas run commons --db {url}`.")
                return
            table = runs()
            if table.empty:
                st.info(f"The store `{url}` has no runs yet. Start one on the **Launch** page, or with "
                        f"`societas run commons --db {url}`.")
                return
        else:
            table = pd.DataFrame()
        render(table)
    except UsageError as exc:
        st.error(str(exc))
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", exc)).splitlines()[0]
        st.error(f"The store `{db_url()}` cannot be read: {first}")
    except Exception as exc:  # noqa: BLE001 - a page shows a message, not a traceback
        st.error(f"This page failed: {type(exc).__name__}: {exc}")
        with st.expander("details"):
            st.code(traceback.format_exc())


def _label(row: pd.Series) -> str:
    return f"{row['run_id']} · {row['scenario']} · {row['status']} · seed {row['seed']} · {row['ticks']} ticks"


# ----- what the URL holds: page, run, tab, tick, agent, Compare's selections --------------------------------------
def url_value(key: str) -> Optional[str]:
    """A query parameter of the page's URL (`?run=...&tick=...`), or None."""
    value = st.query_params.get(key)
    return None if value in (None, "") else str(value)


def set_url(key: str, value: Any) -> None:
    """Put `value` in the URL under `key` (None removes it), so a copied link opens the same view."""
    if value is None or value == "" or value == []:
        if key in st.query_params:
            del st.query_params[key]
        return
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    if st.query_params.get(key) != text:
        st.query_params[key] = text


def url_list(key: str) -> list[str]:
    """A comma-separated list from the URL (Compare's runs, a page's chosen kinds), [] when absent."""
    value = url_value(key)
    return [v for v in value.split(",") if v] if value else []


def url_tabs(names: list[str], key: str) -> list[Any]:
    """`st.tabs` whose open tab is in the URL (`?tab=NAME`) and in session_state[key]; only the open one runs. A `?tab=`
    this page did not write (a link followed, later in the session too) opens that tab."""
    wanted, written = url_value("tab"), f"{key}_url"
    if wanted in names and (key not in st.session_state or wanted != st.session_state.get(written)):
        st.session_state[key] = wanted
    tabs = st.tabs(names, key=key, on_change="rerun")
    current = st.session_state.get(key)
    st.session_state[written] = current if current in names and current != names[0] else None
    set_url("tab", st.session_state[written])
    return tabs


def choose_run(table: pd.DataFrame) -> Optional[dict[str, Any]]:
    """The run this session looks at, picked in the sidebar (also `?run=ID` in the URL; an id prefix works)."""
    ids = table["run_id"].tolist()
    wanted = st.query_params.get("run") or st.session_state.get("run_id")
    if wanted and wanted not in ids:
        matches = [i for i in ids if i.startswith(str(wanted))]
        if len(matches) == 1:
            wanted = matches[0]
        else:
            st.sidebar.warning(f"No run {wanted!r} in this store; showing the newest.")
            wanted = None
    index = ids.index(wanted) if wanted in ids else 0
    labels = {r["run_id"]: _label(r) for _, r in table.iterrows()}
    choice = st.sidebar.selectbox("Run", ids, index=index, format_func=lambda i: labels.get(i, i))
    if st.session_state.get("run_id") not in (None, choice):  # another run: the cursor and agent start afresh
        for key in ("cursor_tick", "cursor_agent", "cursor_slider"):
            st.session_state.pop(key, None)
        for key in ("tick", "agent"):
            set_url(key, None)
    st.session_state["run_id"] = choice
    if st.query_params.get("run") != choice:
        st.query_params["run"] = choice
    run = table[table["run_id"] == choice].iloc[0].to_dict()
    return run


def scenario_class(name: str) -> Any:
    """The registered scenario class, or None (a run of a scenario this install does not know, or code the app may
    not import)."""
    return REGISTRY.get(name)


def noun(scenario: str) -> str:
    """The scenario's unit of time (`tick_noun`: month, round, step), 'tick' for one this install does not know: one
    word for the same axis on every page."""
    return str(getattr(scenario_class(scenario), "tick_noun", None) or "tick")


def units(scenario: str) -> dict[str, str]:
    """The scenario's units (`metric_units`): of its metrics and state fields, final metrics, `payoff` and numeric
    actions (`action.PHASE`); {} when it declares none."""
    return dict(getattr(scenario_class(scenario), "metric_units", None) or {})


def unit_of(units_: dict[str, str], name: str) -> str:
    """The unit of `name`: its own, else that of the longest `prefix.*` key it falls under (`state.strategies.*`)."""
    if name in units_:
        return units_[name]
    wild = [k for k in units_ if k.endswith(".*") and name.startswith(k[:-1])]
    return units_[max(wild, key=len)] if wild else ""


def lineage_note(run: dict[str, Any], detail: Optional[dict[str, Any]] = None) -> None:
    """Where a run comes from, with links: a fork of which run at which tick, a replay or resume of which run, which
    sweep it belongs to. Nothing for a run of its own."""
    parent, branch, sweep = run.get("parent_id"), run.get("branch_tick"), run.get("sweep_id")
    origin = (detail or {}).get("origin") or ("fork" if isinstance(parent, str) and parent else "run")
    has_parent = isinstance(parent, str) and bool(parent)
    if has_parent:
        at = as_int(branch)
        what = {"fork": "Fork", "replay": "Replay", "resume": "Resumed run"}.get(origin, "Run made from")
        text = f"{what} of run {parent}" + (f", branched after {noun(run['scenario'])} {at}" if at is not None else "")
        c1, c2, c3 = st.columns([3, 1, 1])
        c1.info(text + (": its ticks up to the branch are its parent's." if at is not None else "."), icon=":material/call_split:")
        c2.page_link("app_pages/run.py", label="Open the parent", icon=":material/arrow_upward:", query_params={"run": parent})
        c3.page_link("app_pages/compare.py", label="Side by side", icon=":material/compare_arrows:",
                     query_params={"runs": f"{parent},{run['run_id']}", "tab": "Forks"})
    if isinstance(sweep, str) and sweep:
        c1, c2 = st.columns([4, 1])
        c1.caption(f"One run of sweep {sweep}.")
        c2.page_link("app_pages/compare.py", label="Compare the sweep", icon=":material/compare_arrows:",
                     query_params={"sweep": sweep})


def metric_docs(run: dict[str, Any], final: bool = False) -> dict[str, str]:
    """The scenario's metric docs (tick or final) plus the base ones."""
    return scenario_metric_docs(scenario_class(run["scenario"]))["final" if final else "tick"]


def sandbox_note(run: dict[str, Any]) -> None:
    """For a run that ran code an LLM wrote: the sandbox level it ran under and what that guarantees (a warning
    for a weaker level than the full one)."""
    found = sandbox_of_run({"config": run.get("config") or {}, "policy": run.get("policy")})
    if found is None:
        return
    level, guarantees = found
    (st.caption if level == DEFAULT_LEVEL else st.warning)(f"Sandbox: {level} — {guarantees}")


def as_int(value: Any) -> Optional[int]:
    """`value` as an int (a URL's text, surrounding spaces allowed; a whole float such as a nullable column's 4.0),
    None when it is not one."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def init_state(key: str, value: Any) -> None:
    """Give session_state[key] its first value (a widget's, from the URL), leaving one the user chose alone."""
    if key not in st.session_state:
        st.session_state[key] = value


def tick_picker(run: dict[str, Any], label: str = "Tick", key: Optional[str] = None) -> Optional[int]:
    """The replay cursor: one tick shared by every page (session state and `?tick=` in the URL), the run's last
    tick by default; a slider over the committed ticks. None when the run has none."""
    last = int(run.get("ticks") or 0)
    if last < 1:
        st.info("This run has no committed tick yet.")
        return None
    wanted = as_int(st.session_state.get("cursor_tick")) or as_int(url_value("tick")) or last
    wanted = min(max(1, wanted), last)
    if last == 1:
        tick = 1
    else:
        widget = key or "cursor_slider"
        current = as_int(st.session_state.get(widget))
        if current is None or not 1 <= current <= last:  # a page that had no cursor yet, or another run's
            st.session_state[widget] = wanted
        tick = int(st.slider(label, 1, last, key=widget, help="the replay cursor: shared by every page, and in the URL"))
    st.session_state["cursor_tick"] = tick
    set_url("tick", tick if tick != last else None)
    return tick


def choose_agent(ids: list[int], labels: Optional[dict[int, str]] = None, label: str = "Agent") -> Optional[int]:
    """One agent of the run (`?agent=ID` in the URL, shared by the pages); None when there are none."""
    if not ids:
        return None
    wanted = as_int(st.session_state.get("cursor_agent")) or as_int(url_value("agent"))
    index = ids.index(wanted) if wanted in ids else 0
    names = labels or {}
    agent = st.selectbox(label, ids, index=index, format_func=lambda a: names.get(a, f"agent {a}"))
    st.session_state["cursor_agent"] = int(agent)
    set_url("agent", int(agent))
    return int(agent)


def one_of(label: str, options: list[str], key: str, *, url: Optional[str] = None, **kwargs: Any) -> Optional[str]:
    """A segmented control that always has one of `options` chosen (the first until one is clicked; a click on the
    chosen one keeps it): what a page draws of several views, one at a time, since the browser draws every chart of
    a first view (a hidden tab's or expander's too). With `url`, the choice is in the URL under that name (`url_slugs`:
    its first word, lower case, `?view=degree`; the first option writes nothing), so a link opens the same view. None
    when there are no options; with one, no control."""
    if not options:
        return None
    named = url_slugs(options)
    last, slugs = f"{key}_last", {slug: o for o, slug in named.items()}
    linked = slugs.get(url_value(url) or "") if url else None
    if linked is not None and linked != st.session_state.get(last):  # a link followed (or the first view)
        st.session_state[key] = linked
    elif st.session_state.get(key) not in options:
        st.session_state[key] = st.session_state.get(last) if st.session_state.get(last) in options else options[0]
    if len(options) > 1:
        st.segmented_control(label, options, key=key, on_change=_keep_one, args=(key,), **kwargs)
    chosen = st.session_state.get(key)
    if chosen not in options:  # (clicked off without the callback: the one before stays)
        chosen = st.session_state.get(last) if st.session_state.get(last) in options else options[0]
    st.session_state[last] = chosen
    if url:
        set_url(url, None if chosen == options[0] else named[chosen])
    return chosen


def url_slugs(options: list[str]) -> dict[str, str]:
    """Each option's name in a URL: its first word, lower case; where options share a first word ("reward mean",
    "reward gini"), the whole label in lower case, spaces as "-" (a name that is still taken gets its place: "-2")."""
    first = [o.split()[0].lower() if o.split() else "" for o in options]
    out: dict[str, str] = {}
    taken: set[str] = set()
    for i, (o, word) in enumerate(zip(options, first)):
        slug = base = word if first.count(word) == 1 and word else "-".join(o.lower().split())
        n = i + 1
        while slug in taken or not slug:  # (a suffixed name may be another option's own: "q", "Q", "q-3")
            slug, n = f"{base}-{n}", n + 1
        taken.add(slug)
        out[o] = slug
    return out


def _keep_one(key: str) -> None:
    """A click on the chosen segment would leave none chosen: the one before stays."""
    if st.session_state.get(key) is None:
        st.session_state[key] = st.session_state.get(f"{key}_last")
