"""Several servers of one served model (`llm.endpoints`): a tick's batch split across them, through fake OpenAI servers."""

from __future__ import annotations

import re
import socket

import pytest

from agents.llm.base import Answer
from agents.llm.endpoints import EndpointsLLM
from agents.llm.factory import chat_model_id
from sim.contracts.backend import BackendUnavailable
from sim.core.errors import UsageError
from conftest import cli, cli_json
from fakeopenai import FakeOpenAI
from sim.core.spec import LLMSpec, group_llm
from sim.store.store import Store

pytest.importorskip("langchain_openai")


def _run(db_url: str, *sets: str) -> dict:
    return cli_json("run", "commons", "--policy", "llm", "--ticks", "2", "--seed", "5", "--set", "fishers=8",
                    "--set", "llm.provider=served", "--set", "llm.model=fake", "--set", "llm.max_retries=0",
                    *[x for s in sets for x in ("--set", s)], db=db_url)


def _closed_port_url() -> str:
    """The URL of a port nobody listens on (taken from the OS, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_run_on_two_servers_splits_each_tick_and_replays_on_one(db_url):
    """Each tick's 8 harvest requests are split between the two servers (both answer, none twice); the same run on
    the first server alone is answered from the cache: the number of servers is not in the cache key."""
    with FakeOpenAI(answer="3") as a, FakeOpenAI(answer="3") as b:
        run = _run(db_url, f"llm.endpoints=[{a.url}, {b.url}]")
        assert run["status"] == "finished" and run["fallbacks"] == 0
        assert a.requests and b.requests and len(a.requests) + len(b.requests) == 16, (len(a.requests), len(b.requests))
        asked = len(a.requests)
        again = _run(db_url, f"llm.endpoint={a.url}")
        assert len(a.requests) == asked, "the run on one server made no call: every decision came from the cache"
    store = Store(db_url, create=False)
    first, second = (store.llm_calls(r["run_id"]) for r in (run, again))
    assert [c.answer for c in second] == [c.answer for c in first] and all(c.cache_hit for c in second)


def test_a_server_that_is_down_leaves_its_shards_to_the_others(db_url):
    """With one of two servers down, the live one answers every decision and the run finishes; with both down the
    run fails, saying no server answers."""
    with FakeOpenAI(answer="4") as live:
        run = _run(db_url, f"llm.endpoints=[{_closed_port_url()}, {live.url}]")
        assert run["status"] == "finished" and run["fallbacks"] == 0 and len(live.requests) == 16
    proc = cli("run", "commons", "--policy", "llm", "--ticks", "1", "--set", "fishers=4", "--set", "llm.provider=served",
               "--set", "llm.model=fake", "--set", "llm.max_retries=0",
               "--set", f"llm.endpoints=[{_closed_port_url()}, {_closed_port_url()}]", db=db_url)
    assert proc.returncode != 0 and "no server answers" in proc.stdout + proc.stderr, proc.stderr


def test_a_server_that_failed_is_left_out_of_the_next_batches(db_url):
    """A server answering 503 is asked in the first batch only: a 3-month run sends it no more calls than a 1-month
    run (each a new process's backend), the live server answering the rest; both runs finish without fallbacks."""
    asked = []
    for ticks, seed in (("1", "5"), ("3", "6")):
        with FakeOpenAI(answer="4") as failing, FakeOpenAI(answer="4") as live:
            failing.fail = True
            run = cli_json("run", "commons", "--policy", "llm", "--ticks", ticks, "--seed", seed, "--set", "fishers=8",
                           "--set", "llm.provider=served", "--set", "llm.model=fake", "--set", "llm.max_retries=0",
                           "--set", f"llm.endpoints=[{failing.url}, {live.url}]", db=db_url)
            assert run["status"] == "finished" and run["fallbacks"] == 0
            asked.append(len(failing.requests))
    assert 0 < asked[0] == asked[1], asked


class _Server:
    """A server's ChatLLM stand-in: answers its number, or fails every call while `up` is False."""

    def __init__(self, name: int) -> None:
        self.name, self.up, self.calls = name, True, 0

    def answer(self, requests, messages):
        self.calls += 1
        if not self.up:
            raise BackendUnavailable(f"server {self.name} unreachable")
        return [Answer(value=self.name) for _ in requests]


def test_a_server_left_out_is_tried_again_when_the_others_fail():
    """A server that failed sits out the next batch; when the others fail in that batch it is asked after all, and
    when every server fails the batch fails in one BackendUnavailable."""
    a, b = _Server(0), _Server(1)
    llm = EndpointsLLM([a, b])
    requests, messages = [object()] * 8, [[{"role": "user", "content": f"q{i}"}] for i in range(8)]
    a.up = False
    assert {x.value for x in llm.answer(requests, messages)} == {1}
    a.up, calls = True, a.calls
    assert {x.value for x in llm.answer(requests, messages)} == {1} and a.calls == calls  # a sits out
    b.up = False
    assert {x.value for x in llm.answer(requests, messages)} == {0}  # b failed, so a, left out, is asked
    a.up = False
    with pytest.raises(BackendUnavailable, match="no server answers"):
        llm.answer(requests, messages)


def test_bad_endpoints_are_refused_before_storing(tmp_path):
    """Endpoints of a local model, endpoint and endpoints together, a server listed twice (a trailing slash is the same
    server), a server in llm.args, a non-URL, replicas of a served model: one line, exit 2, nothing stored."""
    db = tmp_path / "runs.db"
    served = ["--set", "llm.provider=served", "--set", "llm.model=fake"]
    cases = [(["--set", "llm.endpoints=[http://127.0.0.1:9/v1]"], "llm.endpoints is for a served model"),
             ([*served, "--set", "llm.endpoint=http://127.0.0.1:9/v1", "--set", "llm.endpoints=[http://127.0.0.1:8/v1]"],
              "not both"),
             ([*served, "--set", "llm.endpoints=[http://127.0.0.1:9/v1, http://127.0.0.1:9/v1]"], "twice"),
             ([*served, "--set", "llm.endpoints=[http://127.0.0.1:9/v1, http://127.0.0.1:9/v1/]"], "twice"),
             ([*served, "--set", "llm.endpoints=[http://127.0.0.1:9/v1, http://127.0.0.1:8/v1]",
               "--set", "llm.args={base_url: http://127.0.0.1:7/v1}"], "llm.args.base_url"),
             ([*served, "--set", "llm.endpoints=[nope]"], "bad value for 'llm.endpoints"),
             ([*served, "--set", "llm.endpoints=[]"], "bad value for 'llm.endpoints'"),
             ([*served, "--set", "llm.endpoints=[http://127.0.0.1:9/v1]", "--replicas", "2"], "llm.endpoints")]
    for flags, said in cases:
        proc = cli("run", "commons", "--policy", "llm", "--ticks", "1", *flags, db=f"sqlite:///{db}")
        assert proc.returncode == 2 and said in proc.stderr, (flags, proc.stderr)
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not db.exists(), flags


def test_a_served_models_args_may_not_name_what_its_spec_and_cache_key_hold():
    """llm.args of a served model (the run's or a group's) naming its model or temperature (the cache key holds llm's:
    another model's or temperature's answers would be served from it) or its API key (stored with the run) is
    refused before anything runs, naming the field to use."""
    from runner.backends import preflight
    from runner.config import build_spec

    for args, says in (({"model": "other"}, "llm.model"), ({"model_name": "other"}, "llm.model"),
                       ({"temperature": 1.5}, "llm.temperature"), ({"api_key": "sk-1"}, "$OPENAI_API_KEY"),
                       ({"openai_api_key": "sk-1"}, "$OPENAI_API_KEY"), ({"base_url": "http://b:1/v1"}, "llm.endpoint")):
        llm = {"provider": "served", "model": "m", "endpoint": "http://127.0.0.1:9/v1", "args": args}
        with pytest.raises(UsageError, match=f"llm.args.{next(iter(args))}: .* given by {re.escape(says)}"):
            preflight(build_spec("commons", overrides={"fishers": 3, "months": 1, "llm": llm}, policy="llm"))
        group = [{"count": 1, "policy": "llm", "llm": llm}, {"count": 2, "policy": "scripted", "strategy": "greedy"}]
        with pytest.raises(UsageError, match=f"the llm block of group 1: llm.args.{next(iter(args))}"):
            preflight(build_spec("commons", overrides={"fishers": 3, "months": 1, "population": group}, policy="llm"))
    ok = {"provider": "served", "model": "m", "endpoint": "http://127.0.0.1:9/v1", "args": {"max_tokens": 8}}
    preflight(build_spec("commons", overrides={"fishers": 3, "months": 1, "llm": ok}, policy="llm"))


def test_the_cache_key_names_the_first_server_only():
    """A served model on several servers has the model id of the first alone (so runs replay across server counts)."""
    one = LLMSpec(provider="served", model="m", endpoint="http://a:1/v1")
    two = LLMSpec(provider="served", model="m", endpoints=("http://a:1/v1", "http://b:1/v1"))
    assert chat_model_id(one) == chat_model_id(two) == "served:m@http://a:1/v1"


def test_the_label_counts_the_other_servers_only_where_there_are_some():
    """A served model's label names its first server and how many more, with no "(+0)" for a list of one."""
    one = LLMSpec(provider="served", model="m", endpoints=("http://a:1/v1",))
    two = LLMSpec(provider="served", model="m", endpoints=("http://a:1/v1", "http://b:1/v1"))
    single = LLMSpec(provider="served", model="m", endpoint="http://a:1/v1")
    assert one.label() == single.label() == "served m at http://a:1/v1 t=0.7"
    assert two.label() == "served m at http://a:1/v1 (+1) t=0.7"


def test_a_groups_servers_replace_the_runs_server_rather_than_clash_with_it():
    """A group block naming `endpoints` under a run's `endpoint` (or the other way round) plays on the block's
    servers: the run's server is not inherited beside them (that was refused as "not both")."""
    run_one = LLMSpec(provider="served", model="m", endpoint="http://a:1/v1")
    run_two = LLMSpec(provider="served", model="m", endpoints=("http://a:1/v1", "http://b:1/v1"))
    group = group_llm(run_one, {"endpoints": ["http://c:1/v1", "http://d:1/v1"]})
    assert group.endpoint is None and group.endpoints == ("http://c:1/v1", "http://d:1/v1")
    assert chat_model_id(group) == "served:m@http://c:1/v1"
    group = group_llm(run_two, {"endpoint": "http://c:1/v1", "temperature": 0.2})
    assert group.endpoints is None and group.endpoint == "http://c:1/v1" and group.temperature == 0.2
    assert group_llm(run_two, {"temperature": 0.2}).endpoints == run_two.endpoints  # the rest is inherited as before


def test_a_served_models_cache_key_names_its_llm_args_from_contract_10(tmp_path):
    """Two runs of one served model differing only in llm.args (top_p) are each answered by the server, not one from
    the other's cache (contract 10); the same args again are answered from the cache; under 9 the key left them out."""
    def run(url: str, args: str) -> dict:
        return cli_json("run", "commons", "--policy", "llm", "--ticks", "1", "--seed", "5", "--set", "fishers=4",
                        "--set", "llm.provider=served", "--set", "llm.model=fake", "--set", "llm.max_retries=0",
                        "--set", f"llm.endpoint={url}", "--set", f"llm.args={{{args}}}", db=f"sqlite:///{tmp_path}/runs.db")

    with FakeOpenAI(answer="3") as server:
        first = run(server.url, "top_p: 0.5")
        asked = len(server.requests)
        other = run(server.url, "top_p: 0.9")
        assert len(server.requests) == 2 * asked and asked > 0, "the other top_p was asked of the server"
        again = run(server.url, "top_p: 0.5")
        assert len(server.requests) == 2 * asked, "the same args were answered from the cache"
    assert first["status"] == other["status"] == again["status"] == "finished"
    spec = LLMSpec(provider="served", model="m", endpoint="http://a:1/v1", args={"top_p": 0.5, "openai_api_key_x": "s"})
    assert chat_model_id(spec) == "served:m@http://a:1/v1:top_p=0.5"
    assert chat_model_id(spec, args_keyed=False) == chat_model_id(spec.model_copy(update={"args": {}}))
