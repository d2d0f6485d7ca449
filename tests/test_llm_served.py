"""Served models end to end: llama-cpp-python's OpenAI-compatible server on the embedded GGUF.

A fixture starts `python -m llama_cpp.server` on a free port; the fishery then runs through
`--llm langchain_openai:ChatOpenAI` with `llm.structured=llama_cpp`: every decision must be valid
by construction (no fallback, no retry), every call's output bounded by its space.

Needs `pip install 'llama-cpp-python[server]' langchain-openai`: llama-cpp-python builds from source;
.ci/llama.sh builds a CPU-only library in ~8 min on 2 cores and CI runs it before the tests. Where
it is missing these tests skip, saying what to install.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from sim.core.spaces import Choice, Form, Number, Text

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _missing() -> str | None:
    for mod, pip in [("llama_cpp", "llama-cpp-python[server]"), ("uvicorn", "llama-cpp-python[server]"),
                     ("sse_starlette", "llama-cpp-python[server]"), ("starlette_context", "llama-cpp-python[server]"),
                     ("langchain_openai", "langchain-openai")]:
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not importable (pip install '{pip}'; see README, Served models)"
    return None


@pytest.fixture(scope="module")
def server():
    """The base URL of a llama.cpp server running the embedded SmolLM2 GGUF on a free port."""
    why = _missing()
    if why:
        pytest.skip(why)
    from agents.llm.local.ids import embedded_model_path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(os.devnull, "w")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_model_path()),
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2",
                             "--verbose", "False"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start (exit code {proc.poll()})")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _chat(url: str):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="smollm2", base_url=url, api_key="none", temperature=0.7, max_retries=0)


def test_fishery_through_the_served_model_is_valid_by_construction(server, tmp_path):
    """3 fishers x 2 months via --llm ChatOpenAI with llama.cpp grammars: zero fallbacks, bounded output."""
    import sim
    from agents.llm.structured import max_tokens_for

    db = f"sqlite:///{tmp_path}/served.db"
    cmd = [sys.executable, "-m", "societas.cli", "run", "commons", "--policy", "llm", "--seed", "1", "--ticks", "2",
           "--set", "fishers=3", "--set", "collapse_below=0", "--set", "llm.structured=llama_cpp",
           "--llm", "langchain_openai:ChatOpenAI", "--llm-arg", f"base_url={server}", "--llm-arg", "api_key=none",
           "--llm-arg", "model=smollm2", "--db", db, "--json"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["ticks"] == 2 and out["fallbacks"] == 0
    run = sim.load_run(out["run_id"], db)
    calls = run.llm_calls
    assert len(calls) == 6 and not calls["fallback"].any() and (calls["attempts"] == 1).all()
    steps = run.steps
    assert len(steps) == 6
    for _, c in calls.iterrows():
        # the whole answer IS the number (no rambles to fish in), within the stock offered
        assert c["answer"].strip() == f"{float(c['value']):g}"
        assert 0 <= float(c["value"]) <= 100
        assert 1 <= c["tokens_out"] <= max_tokens_for(Number(0, 100, 1), "llama_cpp")


def test_every_space_served_under_grammar_and_strictly_parsed(server):
    """Choice, negative/continuous Number, Text and Form under llama.cpp grammars; unconstrained calls bounded."""
    from agents.llm.chat import ChatLLM
    from agents.llm.prompts import render_messages
    from agents.llm.structured import max_tokens_for
    from sim.core.contracts import DecisionRequest

    spaces = [Choice(["cooperate", "defect"]), Number(-5, 5, 0), Text(8),
              Form({"give": Number(0, 10, 1), "to": Choice(["fisher 1", "fisher 2"])})]
    defaults = ["defect", 0.0, "ok", {"give": 0.0, "to": "fisher 1"}]
    reqs = [DecisionRequest(agent_id=k, tick=1, phase="p", space=s, default=d, backend="llm", context="A lake with fish.",
                            question="What do you do?", seed=100 + k) for k, (s, d) in enumerate(zip(spaces, defaults))]
    msgs = [render_messages(r) for r in reqs]
    answers = ChatLLM(_chat(server), "served", structured="llama_cpp", max_retries=0).answer(reqs, msgs)
    for r, a in zip(reqs, answers):
        assert a.error is None and a.attempts == 1, (r.space, a.raw, a.error)
        assert r.space.validate(a.value) == a.value
        assert a.tokens_out <= max_tokens_for(r.space, "llama_cpp")
    # without a constraint the bound still holds, and a value is only ever the whole (or marked) answer
    free = ChatLLM(_chat(server), "free", structured="none", max_retries=0).answer(reqs[:1] * 2, msgs[:1] * 2)
    for a in free:
        assert a.tokens_out <= max_tokens_for(reqs[0].space, "none")
        assert a.error is not None or a.raw.strip().strip('."*').lower() == a.value
