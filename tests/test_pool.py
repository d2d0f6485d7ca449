"""The inference pool (agents.llm.pool): shards, placement, and runs on engine replicas on a real local Ray instance."""

import os
import signal

import pytest

from agents.llm import pool, sharding
from agents.llm.local.layout import LayoutRules
from runner.backends import make_backends
from runner.config import build_spec
from runner.execution import execute
from runner.resume import resume_run
from scenarios import get_scenario
from sim.store.store import Store
from tests.conftest import cli


def _messages(system: str, n: int) -> list[list[dict[str, str]]]:
    return [[{"role": "system", "content": system}, {"role": "user", "content": f"You are fisher {k}. " + "x" * k}]
            for k in range(n)]


def _shards(batch):
    return sharding.shards(batch, pool.SHARD_RULES)


def test_shards_keep_prefix_groups_whole_and_cover_the_batch():
    """Every request is in one shard, no shard passes the row cap, and a prefix group of n requests lies in
    ceil(n / cap) shards (never spread thinner)."""
    a = _messages("You fish a lake shared by many fishers; each month you choose a catch. " * 3, 40)
    b = _messages("You post on a social network where members vote and comment on each other. " * 3, 9)
    batch = [m for pair in zip(a, b) for m in pair] + a[len(b):]  # the two groups interleaved in request order
    parts = _shards(batch)
    assert sorted(i for p in parts for i in p) == list(range(len(batch)))
    assert all(len(p) <= pool.SHARD_ROWS and p == sorted(p) for p in parts)
    for system, n in ((a[0][0]["content"], 40), (b[0][0]["content"], 9)):
        touched = [p for p in parts if any(batch[i][0]["content"] == system for i in p)]
        assert len(touched) == -(-n // pool.SHARD_ROWS), (n, [len(p) for p in touched])


def test_shards_pack_small_prefix_groups_up_to_the_cap():
    """Many small prefix groups (a social tick's) share shards up to the cap instead of one call each."""
    batch = [m for k in range(12) for m in _messages("ABCDEFGHIJKL"[k] + " forum: members argue about the river. " * 8, 3)]
    parts = _shards(batch)
    assert sorted(i for p in parts for i in p) == list(range(len(batch)))
    assert [len(p) for p in parts] == [15, 15, 6], "36 requests of 12 groups of 3: packed 5 groups a shard"
    for p in parts:  # a group is never split between two shards
        groups = {batch[i][0]["content"] for i in p}
        assert sum(1 for i in range(len(batch)) if batch[i][0]["content"] in groups) == len(p)


def test_shards_depend_on_the_prompts_alone():
    """The same prompts in another order make the same shards (as sets of prompts): never a function of N or order."""
    batch = _messages("You fish a lake shared by many fishers; each month you choose a catch. " * 3, 37)
    batch += [m for k in range(7) for m in _messages("ABCDEFG"[k] + " forum: members argue. " * 10, k + 1)]
    order = list(reversed(range(len(batch))))
    shuffled = [batch[i] for i in order]
    as_text = lambda parts, b: sorted(sorted(str(b[i]) for i in p) for p in parts)  # noqa: E731
    assert as_text(_shards(batch), batch) == as_text(_shards(shuffled), shuffled)


def test_assign_spreads_shards_and_keeps_neighbours_together():
    """Four equal shards on two replicas: two each, neighbours (one prefix group's shards) on the same replica."""
    batch = _messages("s" * 200, 64)
    parts = [list(range(k, k + 16)) for k in range(0, 64, 16)]
    assert sharding.assign(parts, batch, 2) == [0, 0, 1, 1]
    assert sorted(sharding.assign(parts, batch, 4)) == [0, 1, 2, 3]
    assert sharding.assign(parts, batch, 1) == [0, 0, 0, 0]


def test_dispatch_lets_a_free_replica_take_a_slow_ones_pending_shards():
    """A replica that is done with its plan takes the last pending shard of the busiest one; a shard given back
    goes first; every shard is handed out exactly once."""
    plan = sharding.Dispatch([0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], 2)
    assert [plan.next(0), plan.next(1)] == [0, 2]
    assert [plan.next(0), plan.next(0)] == [1, 5], "replica 0's plan done: it takes replica 1's last pending shard"
    plan.again(5)  # replica 0 failed it
    assert [plan.next(1), plan.next(1), plan.next(1)] == [5, 3, 4]
    assert plan.next(0) is None and plan.next(1) is None and plan.pending() == 0


def test_cli_refuses_bad_pool_settings_before_storing(tmp_path):
    """An unreachable cluster, --address without replicas, 0 replicas or replicas of a served model: exit 2, no store."""
    db = tmp_path / "runs.db"
    url = f"sqlite:///{db}"
    cases = [(["--replicas", "2", "--address", "127.0.0.1:1"], "cannot reach a Ray cluster"),
             (["--address", "127.0.0.1:6379"], "--address is for a run on engine replicas"),
             (["--replicas", "0"], "replicas"),
             (["--replicas", "2", "--llm", "langchain_openai:ChatOpenAI"], "llm.replicas is for the local model")]
    for flags, said in cases:
        proc = cli("run", "commons", "--policy", "llm", "--ticks", "1", *flags, db=url)
        assert proc.returncode == 2 and said in proc.stderr, (flags, proc.stderr)
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not db.exists(), flags


def _unfinished(db, replicas=None) -> str:
    """A stored LLM fishery run left `failed` after no tick (made in its process, or on `replicas` replicas)."""
    store = Store(f"sqlite:///{db}")
    spec = build_spec("commons", policy="llm", ticks=2, sets=["fishers=2"], llm={"replicas": replicas} if replicas else {})
    run_id = store.create_run(spec, {})
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE runs SET status = 'failed' WHERE id = ?", (run_id,))
    return run_id


def test_resume_and_fork_refuse_bad_pool_settings_before_changing_the_store(tmp_path):
    """resume and fork take --replicas and --address with run's checks (and a run made in-process resumes only
    in-process): each refusal is one line, exit 2, and the store is left as it was."""
    db = tmp_path / "runs.db"
    url = f"sqlite:///{db}"
    own, pooled = _unfinished(db), _unfinished(db, replicas=1)
    rows = lambda: sorted((r.id, r.status, r.ticks, str(r.spec)) for r in Store(url, create=False).list_runs())  # noqa: E731
    before = rows()
    cases = [(["resume", own, "--address", "127.0.0.1:6379"], "--address is for a run on engine replicas"),
             (["resume", own, "--replicas", "2"], "was made by the local model in its process"),
             (["resume", pooled, "--replicas", "0"], "bad value for 'llm.replicas'"),
             (["resume", pooled, "--address", "127.0.0.1:1"], "cannot reach a Ray cluster"),
             (["fork", own, "--at", "0", "--address", "127.0.0.1:6379"], "--address is for a run on engine replicas"),
             (["fork", own, "--at", "0", "--replicas", "2", "--address", "127.0.0.1:1"], "cannot reach a Ray cluster"),
             (["fork", pooled, "--at", "0", "--replicas", "2000"], "bad value for 'llm.replicas'")]
    _assert_refused(cases, url, rows, before)


def _assert_refused(cases, url: str, rows, before) -> None:
    """Each (CLI args, words of its message) exits 2 with that one line, no traceback, and leaves `rows()` as `before`."""
    for args, said in cases:
        proc = cli(*args, db=url)
        assert proc.returncode == 2 and said in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert rows() == before, args


def test_replicas_and_address_without_llm_agents_are_refused_before_changing_the_store(tmp_path):
    """A scripted run takes no --replicas on fork or resume (as on run), and no --address even where its config file
    names replicas: one line, exit 2, the store left as it was."""
    db = tmp_path / "runs.db"
    url = f"sqlite:///{db}"
    (tmp_path / "pool.yaml").write_text("llm:\n  replicas: 2\n")
    store = Store(url)
    spec = build_spec("commons", policy="scripted", ticks=2, sets=["fishers=2"])
    scripted = store.create_run(spec, {})
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE runs SET status = 'failed' WHERE id = ?", (scripted,))
    rows = lambda: sorted((r.id, r.status, r.ticks, str(r.spec)) for r in Store(url, create=False).list_runs())  # noqa: E731
    before = rows()
    cases = [(["resume", scripted, "--replicas", "2"], "only applies to LLM agents"),
             (["fork", scripted, "--at", "0", "--replicas", "2"], "only applies to LLM agents"),
             (["run", "commons", "--policy", "scripted", "--ticks", "1", "--config", str(tmp_path / "pool.yaml"),
               "--address", "127.0.0.1:6379"], "--address is for a run of LLM agents on engine replicas")]
    _assert_refused(cases, url, rows, before)


def test_a_local_sweep_refuses_replicas(tmp_path):
    """A sweep on the local executor whose runs ask for replicas is refused (each worker would start a pool): exit 2."""
    path = tmp_path / "pool.sweep.yaml"
    path.write_text("scenario: commons\npolicy: llm\nseeds: 2\nbase: {months: 1}\nllm: {replicas: 2}\n")
    db = tmp_path / "runs.db"
    proc = cli("sweep", str(path), db=f"sqlite:///{db}")
    assert proc.returncode == 2 and "llm.replicas is for one run" in proc.stderr and not db.exists(), proc.stderr


# ----- on a real local Ray instance with the embedded model --------------------------------------------------------

#: 8 fishers' harvest requests in shards of 3: three shards a month, spread over the replicas
SMALL_SHARDS = LayoutRules(batch_tokens=1 << 62, max_batch=3, min_shared_prefix=64, split_cost=192)


@pytest.fixture
def small_shards(monkeypatch):
    monkeypatch.setattr(pool, "SHARD_RULES", SMALL_SHARDS)


class KillingPool(pool.PoolLLM):
    """A pool that, once armed (`kill_at`: the number of its batch), kills replica 0's process with SIGKILL right
    after sending that batch's parts."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.kill_at, self.killed = None, []

    def send(self, requests, messages):
        import ray

        victim = None
        if self.calls + 1 == self.kill_at:
            victim = ray.get(self.start()[0].pid.remote())  # asked before the batch queues behind it
        sent = super().send(requests, messages)
        if victim is not None:
            os.kill(victim, signal.SIGKILL)
            self.killed.append(victim)
        return sent


def _run(tmp_path, name: str, llm: pool.PoolLLM):
    """A 2-month, 8-fisher LLM fishery on `llm`'s replicas, in a store of its own (no cache shared between runs)."""
    spec = build_spec("commons", policy="llm", ticks=2, seed=4, sets=["fishers=8"], llm={"replicas": llm.replicas})
    store = Store(f"sqlite:///{tmp_path / name}.db")
    backends = make_backends(spec, get_scenario("commons"), store, llm_factory=lambda: llm)
    before = {a["pid"]: a["requests"] for a in llm.stats()} if llm.actors else {}
    result = execute(spec, store, backends=backends)
    steps = [(s.tick, s.agent_id, s.action, s.payoff, s.fallback) for s in store.steps(result.run_id)]
    calls = sorted((c.tick, c.agent_id, c.phase, c.key, c.answer, c.logprobs, c.cache_hit)
                   for c in store.llm_calls(result.run_id))
    stats = llm.stats()
    answered = [a["requests"] - before.get(a["pid"], 0) for a in stats]  # by this run (a new process: all of its)
    return result, steps, calls, {"answered": answered, "pids": [a["pid"] for a in stats]}


@pytest.mark.slow
def test_two_replicas_equal_one_and_survive_kill_9(local_ray, tmp_path, small_shards):
    """A run on 2 replicas stores the same decisions, every tick, as on 1; a replica killed with kill -9 mid-run is
    restarted, its part of the batch sent again, and the run finishes identical."""
    spec = build_spec("commons", policy="llm", ticks=2, seed=4, sets=["fishers=8"], llm={"replicas": 1}).llm
    single, double = pool.PoolLLM(spec, 1), KillingPool(spec, 2)
    try:
        one, steps1, calls1, stats1 = _run(tmp_path, "one", single)
        single.close()  # (its CPU for the next pool's second replica)
        two, steps2, calls2, stats2 = _run(tmp_path, "two", double)
        assert one.status == two.status == "finished" and one.ticks == 2
        assert len(steps1) == 16 and not any(s[-1] for s in steps1)
        assert steps2 == steps1 and calls2 == calls1, "the same decisions and calls, to the log-probability"
        assert not any(c[-1] for c in calls1), "every call was answered by the model, none by a cache"
        assert stats1["answered"] == [16] and all(stats2["answered"]), "both replicas answered"
        double.kill_at = double.calls + 2  # the second month's batch of the next run
        killed, steps3, calls3, stats3 = _run(tmp_path, "killed", double)
        assert double.killed, "no replica was killed"
        assert killed.status == "finished" and steps3 == steps1 and calls3 == calls1
        assert double.killed[0] not in stats3["pids"] and stats3["pids"][1] == stats2["pids"][1], "replica 0 replaced"
    finally:
        single.close()
        double.close()


@pytest.mark.slow
def test_a_run_made_on_one_replica_resumes_on_two_identical(local_ray, tmp_path, small_shards):
    """A run made on 1 replica and cut after its first tick, resumed with replicas=2 (its second tick answered live by
    both replicas), stores every decision and call of the same run made on 1 replica without a break."""
    spec = build_spec("commons", policy="llm", ticks=2, seed=4, sets=["fishers=8"], llm={"replicas": 1})
    single = pool.PoolLLM(spec.llm, 1)
    try:
        _, steps1, calls1, _ = _run(tmp_path, "whole", single)
        store = Store(f"sqlite:///{tmp_path / 'cut'}.db")
        cut = execute(spec, store, backends=make_backends(spec, get_scenario("commons"), store, llm_factory=lambda: single),
                      stop_after=1)
    finally:
        single.close()  # (its CPU for the resumed run's second replica)
    with store.engine.begin() as conn:  # as a run whose process died after its first tick
        conn.exec_driver_sql("UPDATE runs SET status = 'failed' WHERE id = ?", (cut.run_id,))
    assert cut.ticks == 1
    result = resume_run(store, cut.run_id, replicas=2)
    steps = [(s.tick, s.agent_id, s.action, s.payoff, s.fallback) for s in store.steps(result.run_id)]
    calls = sorted((c.tick, c.agent_id, c.phase, c.key, c.answer, c.logprobs, c.cache_hit) for c in store.llm_calls(result.run_id))
    assert result.status == "finished" and steps == steps1 and calls == calls1


@pytest.mark.slow
def test_no_address_starts_a_local_instance_whatever_RAY_ADDRESS_says():
    """init_ray(None, ...) starts its own local Ray even where RAY_ADDRESS names another cluster (ray.init's default
    would try to join it, or a `ray start` instance on the machine)."""
    import subprocess
    import sys

    code = ("from agents.llm.shared import init_ray; import ray; init_ray(None, 1); "
            "print(ray.cluster_resources().get('CPU')); ray.shutdown()")
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "1.0"
