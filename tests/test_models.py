"""Mixed-model populations: a group's own llm block is a backend of its own, batched per model, cached per model,
stored, replayed, resumed and reported per group and model with its cost; bad blocks are bad input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from analysis.model_usage import load_prices, model_usage
from conftest import ROOT, cli, cli_json
from runner.backends import make_backends
from runner.config import build_spec
from runner.execution import execute
from runner.replay import replay_run
from runner.sweeps.backlog import prepare
from runner.sweeps.executor import run_sweep
from runner.sweeps.spec import parse_sweep, sweep_id
from scenarios.registry import get_scenario
from sim.contracts.backend import Backend
from sim.core.contracts import Decision, DecisionRequest
from sim.core.errors import UsageError
from sim.core.spaces import Number
from sim.store.store import Store
from sim.tick.broker import DecisionBroker

HASH = {"provider": "langchain", "cls": "tests.fakechat:HashChat", "args": {}, "max_retries": 0}
#: two groups, each with a model of its own (HashChat with different arguments: different model ids and keys)
TWO_MODELS = ["fishers=4", "months=3", "collapse_below=0",
              "population=[{count: 2, name: slow, llm: {args: {delay: 0.0}}}, "
              "{count: 2, name: cold, llm: {args: {delay: 0.001}, temperature: 0.0}}]"]


def two_model_spec(seed: int = 1, sets: list[str] = TWO_MODELS, **llm):
    return build_spec("commons", policy="llm", sets=sets, seed=seed, llm={**HASH, **llm})


def test_group_blocks_are_backends_one_per_distinct_model():
    """Equal blocks share a backend llm:K, a group without one plays the run's llm, dumps omit unset new fields."""
    spec = build_spec("commons", policy="llm", sets=[
        "fishers=6", "population=[{count: 2, llm: {temperature: 0.1}}, {count: 2}, {count: 2, llm: {temperature: 0.1}}]"])
    assert spec.population.models == ("llm:1", None, "llm:1")
    backends = make_backends(spec, get_scenario("commons"), Store("sqlite://"))
    assert sorted(backends) == ["llm", "llm:1", "scripted"] and backends["llm:1"].name == "llm:1"
    plain = build_spec("commons", policy="llm", sets=["fishers=4", "population=[{count: 2}, {count: 2}]"])
    assert all("llm" not in g and "name" not in g for g in plain.config["population"])
    assert "endpoint" not in plain.model_dump(mode="json")["llm"]
    assert "customer_llm" not in build_spec("market", policy="llm").config


def test_two_model_groups_store_replay_rerun_from_cache_and_report_usage(tmp_path):
    """Each group's calls go to its own model (own model id, own cache keys), the run replays, a rerun is all cache hits,
    and show/export report calls, tokens, latency, fallbacks and cost per group and model."""
    url = f"sqlite:///{tmp_path / 'two.db'}"
    store = Store(url)
    spec = two_model_spec()
    run_id = execute(spec, store).run_id
    calls = store.llm_calls(run_id)
    by_agent = {c.agent_id: (c.backend, c.model_id) for c in calls}
    assert {by_agent[1][0], by_agent[2][0]} == {"llm:1"} and {by_agent[3][0], by_agent[4][0]} == {"llm:2"}
    assert by_agent[1][1] != by_agent[3][1], "the two groups' models differ, so do their cache keys"
    steps = store.steps(run_id)
    assert {s.backend for s in steps if s.agent_id in (1, 2)} == {"llm:1"}
    assert {a.agent_id: a.profile.get("backend") for a in store.run_agents(run_id)} == {1: "llm:1", 2: "llm:1",
                                                                                     3: "llm:2", 4: "llm:2"}
    assert replay_run(store, run_id)["matched"]
    again = execute(spec, store)
    assert all(c.cache_hit for c in store.llm_calls(again.run_id))

    shown = cli_json("show", run_id, db=url)
    rows = {r["backend"]: r for r in shown["llm"]["by_model"]}
    assert rows["llm:1"]["group"] == "slow" and rows["llm:2"]["group"] == "cold"
    assert rows["llm:2"]["model"].endswith("t=0") and rows["llm:1"]["calls"] == 2 * 3
    assert shown["llm"]["cost"] is None, "HashChat has no price in the built-in table"
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"models": [{"match": "*delay=0.001*", "input": 1.0, "output": 2.0},
                                                 {"match": "langchain:*", "input": 0, "output": 0}]}))
    priced = cli_json("show", run_id, "--prices", str(prices), db=url)
    cold = next(r for r in priced["llm"]["by_model"] if r["backend"] == "llm:2")
    assert cold["cost"] == pytest.approx((cold["tokens_in"] * 1.0 + cold["tokens_out"] * 2.0) / 1e6)
    assert priced["llm"]["cost"] == pytest.approx(cold["cost"])
    cached = model_usage(store, again.run_id, load_prices(prices))
    assert all(r["cost"] == 0 for r in cached), "cache hits cost nothing"
    text = cli("show", run_id, db=url).stdout
    assert "LLM usage by group and model" in text and "slow" in text and "cold" in text
    out = tmp_path / "export"
    assert cli("export", run_id, "--out", str(out), db=url).returncode == 0
    usage = (out / "llm_usage.csv").read_text().splitlines()
    assert len(usage) == 3 and usage[0].startswith("backend,group,model")


def test_served_backends_of_a_phase_are_in_flight_at_once():
    """The broker sends concurrent (served) backends' batches together; a local one answers meanwhile."""
    spans: dict[str, tuple[float, float]] = {}

    class Slow(Backend):
        def __init__(self, name: str, concurrent: bool) -> None:
            self.name, self.concurrent = name, concurrent

        def decide_batch(self, requests):
            start = time.perf_counter()
            time.sleep(0.3)
            spans[self.name] = (start, time.perf_counter())
            return [Decision(r.agent_id, r.phase, 1.0, self.name) for r in requests]

    broker = DecisionBroker({"llm:1": Slow("llm:1", True), "llm:2": Slow("llm:2", True), "llm": Slow("llm", False)})
    requests = [DecisionRequest(agent_id=k, tick=1, phase="p", space=Number(0, 5, 1), default=0.0, backend=b)
                for k, b in enumerate(["llm:1", "llm:2", "llm", "llm:1"])]
    started = time.perf_counter()
    out = broker.decide(requests)
    assert sorted(out) == [0, 1, 2, 3] and {out[k].backend for k in (0, 3)} == {"llm:1"}
    (a0, a1), (b0, b1) = spans["llm:1"], spans["llm:2"]
    assert a0 < b1 and b0 < a1, "the two served batches overlapped"
    assert time.perf_counter() - started < 0.85, "not three batches one after another"


BAD_BLOCKS = [
    ("{temperature: -1}", "temperature"),
    ("{bogus: 1}", "unknown llm field 'bogus'"),
    ("5", "must be a mapping"),
    ("{}", "is empty"),
    ("{model: /no/such/model.gguf}", "neither a model directory nor a .gguf file"),
    ("{provider: served}", "no llm.endpoint"),
    ("{provider: served, endpoint: 'ftp://x'}", "endpoint"),
    ("{provider: langchain, cls: 'no_such_module:Chat'}", "cannot import chat model"),
]


@pytest.mark.parametrize("block,says", BAD_BLOCKS)
def test_bad_llm_block_in_a_group_exits_2_with_one_line_and_stores_nothing(tmp_path, block, says):
    """A group's bad llm block is bad input: exit 2, one line naming it, no store written."""
    db = tmp_path / "bad.db"
    done = cli("run", "commons", "--policy", "llm", "--set", "fishers=2", "--set", "months=1",
               "--set", f"population=[{{count: 1, llm: {block}}}, {{count: 1}}]", db=f"sqlite:///{db}")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr
    assert not db.exists() or Store(f"sqlite:///{db}").count_runs() == 0


def test_a_block_on_a_scripted_group_or_side_is_refused():
    """An llm block sets the model of LLM agents: on a scripted group, or a market side the LLM does not play, refused."""
    with pytest.raises(UsageError, match="llm block"):
        build_spec("commons", policy="llm", sets=["fishers=2", "population=[{count: 1, policy: scripted, "
                                                  "llm: {temperature: 0}}, {count: 1}]"])
    with pytest.raises(UsageError, match="population.0.llm"):
        build_spec("commons", policy="scripted", sets=["fishers=2", "population=[{count: 1, llm: {temperature: 0}}, "
                                                       "{count: 1}]"])
    with pytest.raises(UsageError, match="business_llm"):
        build_spec("market", policy="llm", sets=["llm_side=customers", "business_llm={temperature: 0}"])


def test_market_sides_play_their_own_models(tmp_path):
    """Magentic's cross-model shape: customers' assistants on one model, businesses on another, each batched apart."""
    store = Store(f"sqlite:///{tmp_path / 'm.db'}")
    spec = build_spec("market", policy="llm", sets=["customers_n=3", "businesses_n=4", "max_steps=2",
                                                    "customer_llm={args: {delay: 0.0}}", "business_llm={args: {delay: 0.001}}"],
                      llm=HASH)
    run_id = execute(spec, store).run_id
    roles = {a.agent_id: a.role for a in store.run_agents(run_id)}
    backends = {(roles[c.agent_id], c.backend) for c in store.llm_calls(run_id)}
    assert {r for r, _ in backends} == {"customer", "business"}
    assert all(b == "llm:1" for r, b in backends if r == "customer")
    assert all(b == "llm:2" for r, b in backends if r == "business")
    groups = {r["backend"]: r["group"] for r in model_usage(store, run_id, load_prices())}
    assert groups["llm:1"] == "customers"


def test_sweep_reports_cost_per_cell(tmp_path):
    """show --sweep has each cell's cost (mean over its runs) beside its metrics."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store(url)
    definition = parse_sweep({"scenario": "commons", "policy": "llm", "llm": HASH, "base": {"months": 2, "fishers": 2},
                              "grid": {"llm.temperature": [0.0, 1.0]}, "seeds": [1, 2]})
    run_sweep(store, prepare(store, definition), workers=1)
    prices = tmp_path / "p.yaml"
    prices.write_text("models:\n  - {match: 'langchain:*', input: 1000000, output: 0}\n")
    cells = cli_json("show", "--sweep", sweep_id(definition), "--prices", str(prices), db=url)
    assert len(cells) == 2 and all(c["cost_mean"] > 0 for c in cells)
    calls = store.llm_calls(store.sweep_runs(sweep_id(definition))[0].id)
    assert {c["n"] for c in cells} == {2} and min(c["cost_mean"] for c in cells) >= min(
        sum(c.tokens_in for c in calls), 1)


def test_bad_price_table_is_bad_input(tmp_path):
    """A price table that cannot be read or has a bad price: exit 2 and one line."""
    store_url = f"sqlite:///{tmp_path / 'p.db'}"
    run_id = execute(build_spec("commons", sets=["fishers=2", "months=1"]), Store(store_url)).run_id
    for text, says in (("models: [{match: x, input: -1, output: 0}]", "input must be a price"),
                       ("[1, 2]", "needs a `models:` list"), (": : :", "not YAML")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        done = cli("show", run_id, "--prices", str(bad), db=store_url)
        assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_builtin_two_model_configs_build():
    """The built-in cross-model market and two-model donor game configs are valid specs with two models."""
    configs = ROOT / "scenarios"
    market = build_spec("market", config_file=str(configs / "market/configs/cross_model.yaml"))
    donor = build_spec("donor", config_file=str(configs / "donor/configs/two_models.yaml"))
    assert sorted(make_backends(market, get_scenario("market"), Store("sqlite://"))) == ["llm", "llm:1", "llm:2", "scripted"]
    assert donor.population.models.count(None) == 0 and len(set(donor.population.models)) == 2


@pytest.mark.slow
def test_two_sampling_settings_of_the_embedded_model_kill9_resume_and_usage(tmp_path):
    """The two-model donor game on the embedded model (two temperatures): killed with SIGKILL after a committed tick,
    resumed to the same result as an uninterrupted run; usage shown per group."""
    url = f"sqlite:///{tmp_path / 'donor.db'}"
    cfg = ROOT / "scenarios/donor/configs/two_models.yaml"
    args = ["run", "donor", "--config", str(cfg), "--set", "agents=4", "--set", "generations=1", "--set", "rounds=4",
            "--set", "population=[{count: 2, name: greedy, llm: {temperature: 0.0}}, "
                     "{count: 2, name: sampled, llm: {temperature: 1.0}}]", "--seed", "2"]
    child = subprocess.Popen([sys.executable, "-m", "societas.cli", *args, "--db", url, "--json"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 900
    while time.time() < deadline and child.poll() is None:
        try:
            if max((r.ticks for r in Store(url, create=False).list_runs()), default=0) >= 1:
                break
        except Exception:  # noqa: BLE001 - not created yet
            pass
        time.sleep(0.2)
    assert child.poll() is None, "the run ended before it could be killed after a committed tick"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    store = Store(url)
    [run] = store.list_runs()
    assert run.status == "running" and 1 <= run.ticks < 4  # killed mid-run
    assert cli_json("resume", run.id, db=url)["run_id"] == run.id
    run = store.get_run(run.id)
    assert run.status in ("finished", "collapsed")
    assert replay_run(store, run.id)["matched"]
    usage = {r["group"]: r for r in cli_json("show", run.id, db=url)["llm"]["by_model"]}
    assert set(usage) == {"greedy", "sampled"} and usage["greedy"]["model"].endswith("t=0")
    assert all(u["calls"] > 0 and u["cost"] == 0 for u in usage.values())
