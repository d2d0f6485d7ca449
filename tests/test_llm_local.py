"""The real embedded model (SmolLM2-135M on CPU): slow, but run in CI."""

import pytest

from agents.llm.cache import CachedBackend

from agents.llm.backend import LLMBackend
from agents.llm.local.llm import LocalLLM
from agents.scripted import ScriptedBackend
from scenarios import get_scenario
from runner.config import build_spec
from sim.core.contracts import DecisionRequest
from runner.execution import execute
from sim.core.spaces import Choice, Number, Text
from tests.conftest import cli, cli_json

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lm():
    from agents.llm.local.model import shared_lm

    return shared_lm()


def _req(agent, space, default, seed, question):
    return DecisionRequest(agent_id=agent, tick=1, phase="p", space=space, default=default, backend="llm",
                           context="You are one of five fishers sharing a lake of 100 tons.", question=question, seed=seed)


REQS = [
    _req(1, Number(0, 100, 1), 0.0, 11, "How many tons do you catch?"),
    _req(2, Choice(["none", "fisher 3", "fisher 4"]), "none", 12, "Whom do you fine?"),
    _req(3, Text(12), "hi", 13, "Say something to the group."),
    _req(4, Number(3, 17, 1), 3.0, 14, "How many tons do you catch this month, at most 17?"),
    _req(5, Choice(["cooperate", "defect"]), "cooperate", 15, "Do you cooperate or defect?"),
]


def test_batch_independence(lm):
    """The same request gets the same decision alone and inside a batch of others."""
    eng = LocalLLM(lm=lm)
    backend = LLMBackend(eng.model_id, eng.sampling, llm=eng)
    together = backend.decide_batch(REQS)
    alone = [backend.decide_batch([r])[0] for r in REQS]
    assert [d.value for d in together] == [d.value for d in alone]
    for r, d in zip(REQS, together):
        assert r.space.validate(d.value) == d.value and not d.fallback


def test_llm_commons_run_is_valid_stored_and_replayed_from_cache(db_url, store, lm):
    """A few LLM ticks: every decision in its space, the run stored, a rerun identical and model-free."""
    spec = build_spec("commons", policy="llm", ticks=3, seed=5, sets=["talk=true"])
    cls = get_scenario("commons")

    def backends(engine):
        return {"scripted": ScriptedBackend(cls.strategies), "llm": CachedBackend(LLMBackend(engine.model_id, engine.sampling, llm=engine), store)}

    first = execute(spec, store, backends=backends(LocalLLM(lm=lm)))
    steps = store.steps(first.run_id)
    assert len(steps) == 5 * first.ticks and not any(s.fallback for s in steps)
    for s in steps:
        assert 0 <= s.action["harvest"] <= 100 and float(s.action["harvest"]).is_integer()
        assert isinstance(s.action["talk"], str) and s.action["talk"]
    assert len(store.llm_calls(first.run_id)) == 10 * first.ticks

    class NoModel(LocalLLM):
        @property
        def lm(self):
            raise AssertionError("the model was needed for a cached rerun")

    second = execute(spec, store, backends=backends(NoModel()))
    key = lambda rid: [(s.tick, s.agent_id, s.action, s.payoff, s.reward) for s in store.steps(rid)]  # noqa: E731
    assert key(first.run_id) == key(second.run_id) and first.metrics == second.metrics


def test_cli_llm_run_twice_identical_then_replay(db_url):
    """`run --policy llm` twice prints identical metrics (second from cache); `replay` matches every tick."""
    a = cli_json("run", "commons", "--policy", "llm", "--seed", "3", "--ticks", "2", db=db_url)
    b = cli_json("run", "commons", "--policy", "llm", "--seed", "3", "--ticks", "2", db=db_url)
    assert a["metrics"] == b["metrics"] and a["run_id"] != b["run_id"]
    shown = cli_json("show", b["run_id"], db=db_url)
    assert shown["llm"]["calls"] == shown["llm"]["cache_hits"] > 0
    proc = cli("replay", a["run_id"], db=db_url)
    assert proc.returncode == 0 and "every tick matched" in proc.stdout


def test_local_chat_model_batch_is_one_call(lm):
    """The LangChain face of the local model answers a batch with one batched generation."""
    from agents.llm.chat_model import LocalChatModel

    chat = LocalChatModel(max_tokens=8, temperature=0)
    chat._lm = lm
    calls = []
    original = lm.generate

    def spy(prompts, *a, **k):
        calls.append(len(prompts))
        return original(prompts, *a, **k)

    lm.generate = spy
    try:
        out = chat.batch(["Name a fish.", "Say hello.", "Count to three."])
    finally:
        del lm.generate
    assert calls == [3] and len(out) == 3 and all(m.content for m in out)


def test_langchain_path_with_local_chat_model(db_url):
    """`--llm module:Class` runs any LangChain chat model; here the local one, with no network."""
    out = cli_json("run", "commons", "--policy", "llm", "--ticks", "1", "--llm", "agents.llm.chat_model:LocalChatModel",
                   "--llm-arg", "max_tokens=6", "--set", "llm.timeout_s=600", db=db_url)  # the first call includes the load
    assert out["ticks"] == 1
    shown = cli_json("show", out["run_id"], db=db_url)
    assert shown["llm"]["calls"] == 5 and shown["llm"]["by_backend"][0]["backend"].startswith("langchain:")


def test_model_path_flag_loads_a_gguf_file(db_url):
    """`--model PATH.gguf` loads that file the same way as the embedded default."""
    from agents.llm.local.ids import embedded_model_path

    path = str(embedded_model_path())
    out = cli_json("run", "commons", "--policy", "llm", "--ticks", "1", "--model", path, db=db_url)
    shown = cli_json("show", out["run_id"], db=db_url)
    assert shown["llm"]["calls"] == 5 and shown["llm"]["by_backend"][0]["backend"] == f"local:{path}"
    assert shown["spec"]["llm"]["model"] == path


def test_concurrent_first_use_loads_the_model_once():
    """Threads asking for the shared model at once get one instance (one load, not one per thread)."""
    from concurrent.futures import ThreadPoolExecutor

    from agents.llm.local import model as local

    key = (None, None, None, 63)  # a key no other test uses: the four threads race on a real first load
    assert key not in local._SHARED
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: local.shared_lm(max_batch=63), range(4)))
    assert all(g is got[0] for g in got) and local._SHARED[key] is got[0]
    del local._SHARED[key]
