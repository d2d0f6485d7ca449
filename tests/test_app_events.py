"""The Conversations and Event log pages: everything said is shown (paged, never dropped), social comments are
threaded under their post, market proposals and payments are lines in words, agents' text is plain text, and
search / kind / agent filters work and live in the URL; the Event log lists every event and decision, filters and
pages them in SQL, and replays one tick."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("streamlit")
from sqlalchemy import insert  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from sim.store import event_queries as ev  # noqa: E402
from scenarios import REGISTRY  # noqa: E402
from sim.store.queries import open_reader  # noqa: E402
from runner.config import build_spec  # noqa: E402
from runner.execution import RunFailed, execute  # noqa: E402
from sim.store.store import Store  # noqa: E402
from sim.store.tables import AgentStep, EventRow, Run  # noqa: E402
from tests.test_app import APP  # noqa: E402

MARKDOWN = "1. first\n# heading"


def _run(store: Store, scenario: str, ticks: int, sets: tuple[str, ...] = ()) -> str:
    try:
        return execute(build_spec(scenario, ticks=ticks, seed=0, sets=sets), store).run_id
    except RunFailed as exc:
        return exc.run_id


def _synthetic_events(rid: str) -> list[dict]:
    """A thread (post, comment, reply to the comment), a markdown-looking message, a proposal and a payment."""
    rows = [
        (1, "post", 1, None, {"item": 900, "forum": "art", "text": "POST-A: the original post", "stance": 0.5}),
        (2, "comment", 2, 1, {"item": 901, "parent": 900, "depth": 1, "text": "COMMENT-A1 on the post"}),
        (2, "message", 4, None, {"text": MARKDOWN}),
        (2, "comment", 3, 2, {"item": 902, "parent": 901, "depth": 2, "text": "COMMENT-A2 on the comment"}),
        (2, "proposal", 5, 4, {"business": "business_0007", "items": {"pizza": 3.5, "soda": 1.25}, "total": 4.75,
                               "arrival_rank": 1}),
        (2, "payment", 4, 5, {"business": "business_0007", "amount": 4.75, "utility": 2.0, "needs_met": True,
                              "arrival_rank": 1}),
    ]
    return [{"run_id": rid, "tick": t, "kind": k, "actor": a, "target": b, "data": d} for t, k, a, b, d in rows]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    """Real runs of the fishery with talk (36 and 120 messages), social and market, and a commons run with synthetic
    social, markdown and market events added."""
    url = f"sqlite:///{tmp_path_factory.mktemp('events') / 'runs.db'}"
    s = Store(url)
    ids = {"talk": _run(s, "commons", 6, ("fishers=6", "talk=true", "sanctions=true")),
           "crowd": _run(s, "commons", 6, ("fishers=20", "talk=true")),
           "social": _run(s, "social", 4), "market": _run(s, "market", 6)}
    for name in sorted(REGISTRY):
        ids.setdefault(f"plain-{name}", _run(s, name, 2))
    ids["synthetic"] = _run(s, "commons", 2)
    with s.engine.begin() as conn:
        conn.execute(insert(EventRow.__table__), _synthetic_events(ids["synthetic"]))
    return {"url": url, "ids": ids, "engine": open_reader(url)}


def _open(url: str, monkeypatch, page: str, run_id: str, **params: str) -> AppTest:
    monkeypatch.setenv("SOCIETAS_DB", url)
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.query_params["run"] = run_id
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    return at


def _shown(at: AppTest) -> list[str]:
    """Everything written as plain text or code, in order."""
    return [t.value for t in at.text] + [c.value for c in at.code]


def _markdowns(at: AppTest) -> list[str]:
    return [m.value for m in (*at.markdown, *at.caption)]


# ----- Conversations ----------------------------------------------------------------------------------------------
def test_every_tick_is_shown_by_default(store, monkeypatch):
    """A 6-tick talk run shows its last tick without touching any control, and says how much it shows."""
    at = _open(store["url"], monkeypatch, "conversations", store["ids"]["talk"])
    heads = [h.value for h in at.subheader]
    assert "Month 1" in heads and "Month 6" in heads  # (the fishery's unit of time, issue 41)
    assert any("Showing messages 1–36 of 36" in c for c in _markdowns(at))


def test_many_messages_are_paged_with_a_visible_count(store, monkeypatch):
    """120 messages: the first page says `of 120` and page 2 shows the rest (the last tick), nothing dropped."""
    at = _open(store["url"], monkeypatch, "conversations", store["ids"]["crowd"])
    assert any("Showing messages 1–100 of 120" in c for c in _markdowns(at))
    at.number_input(key="conv_page").set_value(2).run()
    assert not at.exception and not at.error
    assert any("Showing messages 101–120 of 120" in c for c in _markdowns(at))
    assert "Month 6" in [h.value for h in at.subheader]
    assert at.query_params["p"] == ["2"] or at.query_params["p"] == "2"


def test_comments_are_threaded_under_their_post_without_raw_json(store, monkeypatch):
    """Each comment follows its post's author and text; a reply to a comment quotes that comment; no JSON dumps."""
    at = _open(store["url"], monkeypatch, "conversations", store["ids"]["synthetic"])
    shown = _shown(at)
    post, first, second = (shown.index(t) for t in ("POST-A: the original post", "COMMENT-A1 on the post",
                                                    "COMMENT-A2 on the comment"))
    assert shown.count("POST-A: the original post") == 2  # its own message at tick 1, and the head of its thread
    thread_head = max(i for i, t in enumerate(shown) if t == "POST-A: the original post")
    assert thread_head < first < second
    assert "> COMMENT-A1 on the post" in shown[first:second]
    assert any("Thread: agent 1's post" in c for c in _markdowns(at))
    everything = _markdowns(at) + shown
    assert not any("{" in m or '"parent"' in m or "'parent'" in m for m in everything), everything


def test_a_real_social_runs_comments_show_their_post(store, monkeypatch):
    """In a social run every comment shown is under the text of the post it answers."""
    rid = store["ids"]["social"]
    said, total = ev.conversation_page(store["engine"], rid, ["comment"], limit=1000)
    assert total > 0
    items = ev.thread_items(store["engine"], rid, [d["parent"] for d in said["data"]])
    roots = {ev.thread_root(items, d["parent"]) for d in said["data"]}
    at = _open(store["url"], monkeypatch, "conversations", rid)
    shown = _shown(at)
    for root in roots:
        assert items[root]["kind"] == "post" and items[root]["text"] in shown
    assert not any(m.lstrip("\\").startswith("{") for m in _markdowns(at))


def test_market_proposals_and_payments_are_lines_in_words(store, monkeypatch):
    """Proposals and payments of a market run: who proposed what at what price, who paid whom how much."""
    at = _open(store["url"], monkeypatch, "conversations", store["ids"]["synthetic"])
    shown = _shown(at)
    assert "business_0007 (agent 5) proposes to agent 4: pizza $3.50, soda $1.25, total $4.75 (offer #1 to arrive)" in shown
    assert "agent 4 paid business_0007 (agent 5) $4.75, needs met, utility 2" in shown
    rid = store["ids"]["market"]
    paid = ev.conversation_page(store["engine"], rid, ["payment"], limit=1)[0]
    assert len(paid)
    at = _open(store["url"], monkeypatch, "conversations", rid, kind="payment,proposal")
    shown = _shown(at)
    assert any(" paid business_" in t for t in shown) and any(" proposes to agent " in t for t in shown)
    assert sorted(at.multiselect(key="conv_kinds").value) == ["payment", "proposal"]


def test_what_agents_wrote_is_plain_text_not_markdown(store, monkeypatch):
    """A message `1. first\\n# heading` is shown literally: no list or heading made of it."""
    at = _open(store["url"], monkeypatch, "conversations", store["ids"]["synthetic"])
    assert MARKDOWN in _shown(at)
    assert not any("first" in m or "heading" in m for m in _markdowns(at))
    assert not any("heading" in h.value for h in at.subheader)


def test_search_kind_and_agent_filters_live_in_the_url(store, monkeypatch):
    """A case-insensitive search, an agent and kinds filter in SQL; a link with ?q= reproduces the view."""
    rid = store["ids"]["synthetic"]
    at = _open(store["url"], monkeypatch, "conversations", rid)
    at.text_input(key="conv_q").input("HEADING").run()
    assert not at.exception and not at.error
    assert MARKDOWN in _shown(at) and "POST-A: the original post" not in _shown(at)
    assert any("of 1" in c for c in _markdowns(at))
    assert at.query_params["q"] in ("HEADING", ["HEADING"])
    at = _open(store["url"], monkeypatch, "conversations", rid, q="pizza")
    assert at.text_input(key="conv_q").value == "pizza"
    assert any(" proposes to " in t for t in _shown(at)) and MARKDOWN not in _shown(at)
    at = _open(store["url"], monkeypatch, "conversations", rid, agent="3")
    assert "COMMENT-A2 on the comment" in _shown(at) and MARKDOWN not in _shown(at)
    at = _open(store["url"], monkeypatch, "conversations", rid, kind="message")
    assert _shown(at) == [MARKDOWN]


# ----- Event log --------------------------------------------------------------------------------------------------
def _counts(engine, rid: str) -> tuple[int, int]:
    from sqlalchemy import func, select
    with engine.connect() as conn:
        n_events = conn.execute(select(func.count()).select_from(EventRow.__table__)
                                .where(EventRow.__table__.c.run_id == rid)).scalar()
        n_steps = conn.execute(select(func.count()).select_from(AgentStep.__table__)
                               .where(AgentStep.__table__.c.run_id == rid)).scalar()
    return int(n_events), int(n_steps)


def test_event_log_lists_every_event_and_decision_with_counts(store, monkeypatch):
    """Events and decisions together, counted; kind, agent and search filters (and the URL) narrow them."""
    rid = store["ids"]["market"]
    n_events, n_steps = _counts(store["engine"], rid)
    at = _open(store["url"], monkeypatch, "events", rid)
    assert any(f"{n_events} events and {n_steps} decisions match" in c for c in _markdowns(at))
    frame = at.dataframe[0].value
    assert len(frame) == min(200, n_events + n_steps) and {"event", "decision"} >= set(frame["type"])
    at = _open(store["url"], monkeypatch, "events", rid, kind="payment")
    frame = at.dataframe[0].value
    assert set(frame["kind"]) == {"payment"} and len(frame) == ev.conversation_page(store["engine"], rid, ["payment"])[1]
    rid = store["ids"]["synthetic"]
    at = _open(store["url"], monkeypatch, "events", rid, q="pizza")
    frame = at.dataframe[0].value
    assert list(frame["kind"]) == ["proposal"]
    at.text_input(key="log_agent").input("3").run()
    assert not at.exception and not at.error
    assert at.query_params["agent"] in ("3", ["3"]) and any("0 events" in i.value or "No event" in i.value for i in at.info)


def test_event_log_pages_through_everything(store, monkeypatch):
    """More rows than a page: a page control, and page 2 continues where page 1 stopped."""
    rid = store["ids"]["crowd"]
    n_events, n_steps = _counts(store["engine"], rid)
    assert n_events + n_steps > 200
    at = _open(store["url"], monkeypatch, "events", rid)
    first = at.dataframe[0].value
    at.number_input(key="log_page").set_value(2).run()
    assert not at.exception and not at.error
    second = at.dataframe[0].value
    assert any(f"showing rows 201–{min(400, n_events + n_steps)} of {n_events + n_steps}" in c for c in _markdowns(at))
    assert (first["tick"].iloc[-1], first["type"].iloc[-1]) <= (second["tick"].iloc[0], second["type"].iloc[0])


@pytest.mark.parametrize("scenario", sorted(REGISTRY))
def test_both_pages_render_a_run_of_every_scenario_in_both_modes(scenario, store, monkeypatch):
    """Conversations, the Event log and its Replay show a 2-tick run of each scenario with no error."""
    rid = store["ids"][f"plain-{scenario}"]
    _open(store["url"], monkeypatch, "conversations", rid)
    at = _open(store["url"], monkeypatch, "events", rid)
    assert at.dataframe and len(at.dataframe[0].value) > 0
    at = _open(store["url"], monkeypatch, "events", rid, mode="Replay", tick="1")
    assert at.radio(key="log_mode").value == "Replay"


def test_replay_shows_the_cursor_tick(store, monkeypatch):
    """Replay at ?tick=2: the tick's metrics, and only its events and decisions."""
    rid = store["ids"]["talk"]
    at = _open(store["url"], monkeypatch, "events", rid, mode="Replay", tick="2")
    assert "Month 2" in [h.value for h in at.subheader]
    assert {m.label for m in at.metric} >= {"stock"}
    frame = at.dataframe[-1].value
    assert set(frame["tick"]) == {2} and {"event", "decision"} <= set(frame["type"])


def test_log_queries_page_exactly_like_the_whole_log(store):
    """Any window of log_page is the same slice of the whole filtered log."""
    engine = store["engine"]
    for rid in (store["ids"]["market"], store["ids"]["social"]):
        for filters in ({}, {"kinds": ("decision",)}, {"agent": 3}, {"search": "business"}, {"ticks": (2, 3)}):
            counts = ev.log_counts(engine, rid, **filters)
            whole = ev.log_page(engine, rid, limit=10**6, **filters)
            assert len(whole) == int(counts["events"].sum() + counts["decisions"].sum())
            for offset, limit in ((0, 7), (5, 50), (len(whole) - 3, 10), (len(whole) + 5, 10)):
                part = ev.log_page(engine, rid, offset=max(0, offset), limit=limit, counts=counts, **filters)
                want = whole.iloc[max(0, offset):max(0, offset) + limit]
                assert list(zip(part["type"], part["id"])) == list(zip(want["type"], want["id"])), (rid, filters, offset)


def test_like_patterns_escape_wildcards_and_match_stored_json():
    assert ev.like_pattern("50%_a") == "%50\\%\\_a%"
    assert ev.like_pattern('Say "Hi"', as_json=True) == '%say \\\\"hi\\\\"%'


@pytest.mark.alone
def test_log_queries_are_fast_on_a_big_run(tmp_path):
    """1,000 agents x 50 ticks (50k decisions, 30k events): counts, a page, searches and filters, all quickly."""
    url = f"sqlite:///{tmp_path / 'big.db'}"
    s = Store(url)
    rid = "big"
    with s.engine.begin() as conn:
        conn.execute(insert(Run.__table__), [{"id": rid, "scenario": "commons", "seed": 0, "policy": "scripted",
                                             "spec_digest": "x", "spec": {}, "status": "finished", "ticks": 50,
                                             "final_metrics": {}, "versions": {}, "origin": "run", "backends": ""}])
        for t in range(1, 51):
            conn.execute(insert(AgentStep.__table__), [
                {"run_id": rid, "tick": t, "agent_id": a, "backend": "scripted", "action": {"harvest": a % 7},
                 "payoff": 1.0, "reward": 1.0, "fallback": False, "reason": None, "memory": {}} for a in range(1000)])
            conn.execute(insert(EventRow.__table__), [
                {"run_id": rid, "tick": t, "kind": "message" if i % 3 else "harvest", "actor": i, "target": None,
                 "data": {"text": f"message {i} at {t}"} if i % 3 else {"amount": i}} for i in range(600)])
    engine = open_reader(url)
    start = time.perf_counter()
    counts = ev.log_counts(engine, rid)
    rows = ev.log_page(engine, rid, offset=40_000, limit=200, counts=counts)
    assert len(rows) == 200 and int(counts["decisions"].sum()) == 50_000
    said, total = ev.conversation_page(engine, rid, ev.said_kinds(engine, rid), search="MESSAGE 598 AT 7", offset=0, limit=100)
    assert total == 1 and said["text"].iloc[0] == "message 598 at 7"
    assert ev.log_counts(engine, rid, agent=7, search="harvest")["decisions"].sum() == 50
    assert time.perf_counter() - start < 3.0
