"""The inference pool (agents.llm.pool): shards, placement, and runs on engine replicas on a real local Ray instance."""

import os
import signal

import pytest

from agents.llm import pool
from agents.llm.local.layout import LayoutRules
from runner.backends import make_backends
from runner.config import build_spec
from runner.execution import execute
from scenarios import get_scenario
from sim.store.store import Store
from tests.conftest import cli


def _messages(system: str, n: int) -> list[list[dict[str, str]]]:
    return [[{"role": "system", "content": system}, {"role": "user", "content": f"You are fisher {k}. " + "x" * k}]
            for k in range(n)]


def test_shards_keep_prefix_groups_whole_and_cover_the_batch():
    """Every request is in one shard, a shard never mixes two prefix groups, and no shard passes the row cap."""
    a = _messages("You fish a lake shared by many fishers; each month you choose a catch. " * 3, 40)
    b = _messages("You post on a social network where members vote and comment on each other. " * 3, 9)
    batch = [m for pair in zip(a, b) for m in pair] + a[len(b):]  # the two groups interleaved in request order
    parts = pool.shards(batch)
    assert sorted(i for p in parts for i in p) == list(range(len(batch)))
    assert all(len(p) <= pool.SHARD_ROWS and p == sorted(p) for p in parts)
    for p in parts:
        assert len({batch[i][0]["content"] for i in p}) == 1, "a shard mixes two system texts"


def test_shards_depend_on_the_prompts_alone():
    """The same prompts in another order make the same shards (as sets of prompts): never a function of N or order."""
    batch = _messages("You fish a lake shared by many fishers; each month you choose a catch. " * 3, 37)
    order = list(reversed(range(len(batch))))
    shuffled = [batch[i] for i in order]
    as_text = lambda parts, b: sorted(sorted(str(b[i]) for i in p) for p in parts)  # noqa: E731
    assert as_text(pool.shards(batch), batch) == as_text(pool.shards(shuffled), shuffled)


def test_assign_spreads_shards_and_keeps_neighbours_together():
    """Four equal shards on two replicas: two each, neighbours (one prefix group's shards) on the same replica."""
    batch = _messages("s" * 200, 64)
    parts = [list(range(k, k + 16)) for k in range(0, 64, 16)]
    assert pool.assign(parts, batch, 2) == [0, 0, 1, 1]
    assert sorted(pool.assign(parts, batch, 4)) == [0, 1, 2, 3]
    assert pool.assign(parts, batch, 1) == [0, 0, 0, 0]


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


# ----- on a real local Ray instance with the embedded model --------------------------------------------------------

#: 8 fishers' harvest requests in shards of 3: three shards a month, spread over the replicas
SMALL_SHARDS = LayoutRules(batch_tokens=1 << 62, max_batch=3, min_shared_prefix=64, split_cost=192)


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance (2 CPUs) for the module."""
    ray = pytest.importorskip("ray")
    from runner.sweeps.ray_tasks import init_ray

    init_ray(None, 2)
    yield ray
    ray.shutdown()


@pytest.fixture
def small_shards(monkeypatch):
    monkeypatch.setattr(pool, "SHARD_RULES", SMALL_SHARDS)


class KillingPool(pool.PoolLLM):
    """A pool that kills replica 0's process (SIGKILL) right after sending its second batch's shards."""

    killed: list[int] = []

    def send(self, requests, messages):
        import ray

        victim = None
        if self.calls == 1:
            victim = ray.get(self.start()[0].pid.remote())  # asked before the shards queue behind it
        sent = super().send(requests, messages)
        if victim is not None:
            os.kill(victim, signal.SIGKILL)
            self.killed.append(victim)
        return sent


def _run(tmp_path, name: str, replicas: int, pool_cls=pool.PoolLLM):
    """A 2-month, 8-fisher LLM fishery on `replicas` replicas, in a store of its own (no cache shared between runs)."""
    spec = build_spec("commons", policy="llm", ticks=2, seed=4, sets=["fishers=8"], llm={"replicas": replicas})
    store = Store(f"sqlite:///{tmp_path / name}.db")
    llm = pool_cls(spec.llm, replicas)
    backends = make_backends(spec, get_scenario("commons"), store, llm_factory=lambda: llm)
    result = execute(spec, store, backends=backends)
    steps = [(s.tick, s.agent_id, s.action, s.payoff, s.fallback) for s in store.steps(result.run_id)]
    calls = sorted((c.tick, c.agent_id, c.phase, c.key, c.answer, c.logprobs, c.cache_hit) for c in store.llm_calls(result.run_id))
    stats = llm.stats()
    llm.close()
    return result, steps, calls, stats


@pytest.mark.slow
def test_two_replicas_equal_one_and_survive_kill_9(local_ray, tmp_path, small_shards):
    """A run on 2 replicas stores the same decisions, every tick, as on 1; a replica killed with kill -9 mid-run is
    restarted, its shards sent again, and the run finishes identical."""
    one, steps1, calls1, stats1 = _run(tmp_path, "one", 1)
    two, steps2, calls2, stats2 = _run(tmp_path, "two", 2)
    assert one.status == two.status == "finished" and one.ticks == 2
    assert len(steps1) == 16 and not any(s[-1] for s in steps1)
    assert steps2 == steps1 and calls2 == calls1 and not any(c[-1] for c in calls1), "the same answers, to the log-probability"
    assert [s["requests"] for s in stats1] == [16] and all(s["requests"] for s in stats2), "both replicas answered"
    killed, steps3, calls3, stats3 = _run(tmp_path, "killed", 2, KillingPool)
    assert KillingPool.killed, "no replica was killed"
    assert killed.status == "finished" and steps3 == steps1 and calls3 == calls1
    assert KillingPool.killed[0] not in {s["pid"] for s in stats3}, "the killed replica was not replaced"
