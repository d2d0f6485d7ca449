"""Served models' log-probabilities in trajectories: OpenAI-compatible `logprobs`, through a fake HTTP server."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from agents.llm.chat import served_logprobs
from conftest import cli, cli_json
from fakeopenai import FakeOpenAI

pytest.importorskip("langchain_openai")


def _run(db_url: str, url: str, *args: str) -> str:
    return cli_json("run", "commons", "--policy", "llm", "--ticks", "2", "--set", "fishers=2",
                    "--llm", "langchain_openai:ChatOpenAI", "--llm-arg", f"base_url={url}", "--llm-arg", "api_key=none",
                    "--llm-arg", "model=fake", "--llm-arg", "max_retries=0", *args, db=db_url)["run_id"]


def _rows(db_url: str, run_id: str, out) -> list[dict]:
    proc = cli("export", run_id, "--format", "trajectories", "--out", str(out), db=db_url)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]


def test_a_served_models_logprobs_reach_the_trajectories(db_url, tmp_path):
    """Asked with logprobs=true, the server's per-token log-probabilities are every row's `logprobs`; its tokens
    given as ids (`token_id:N`) are the row's `completion_ids`."""
    with FakeOpenAI(answer="12", logprobs=[-0.5, -1.25], ids=True) as server:
        run = _run(db_url, server.url, "--llm-arg", "logprobs=true")
        assert server.requests and all(r.get("logprobs") is True for r in server.requests)
    rows = _rows(db_url, run, tmp_path / "t")
    assert len(rows) == 4 and all(json.loads(r["action"]) == 12 for r in rows)
    for r in rows:
        assert r["completion"] == "12" and r["logprobs"] == [-0.5, -1.25] and r["completion_ids"] == [100, 101]
        assert r["prompt_ids"] is None  # a served model's tokenizer is not ours to apply


def test_a_server_that_returns_no_logprobs_leaves_them_null(db_url, tmp_path):
    """Without logprobs asked (or returned), the rows' token fields are null, never made up."""
    with FakeOpenAI(answer="7", logprobs=[-0.1]) as server:
        run = _run(db_url, server.url)
        assert all("logprobs" not in r or not r["logprobs"] for r in server.requests)
    rows = _rows(db_url, run, tmp_path / "t")
    assert len(rows) == 4 and all(r["logprobs"] is None and r["completion_ids"] is None for r in rows)


@pytest.mark.parametrize("meta, want", [
    ({}, (None, None)),
    ({"logprobs": None}, (None, None)),
    ({"logprobs": {"content": []}}, (None, None)),
    ({"logprobs": {"content": [{"token": "4", "logprob": -0.2}, {"token": "2", "logprob": -3}]}}, (None, [-0.2, -3.0])),
    ({"logprobs": {"content": [{"token": "token_id:9", "logprob": -0.2}, {"token": "x", "logprob": "bad"}]}}, (None, [-0.2, None])),
    ({"logprobs": {"content": [{"token": "token_id:9", "logprob": -0.2}]}}, ([9], [-0.2])),
    ({"logprobs": "garbage"}, (None, None)),
])
def test_served_logprobs_reads_only_what_the_server_said(meta, want):
    """Token texts give no ids; a malformed log-probability is null; anything else is no log-probabilities."""
    assert served_logprobs(SimpleNamespace(response_metadata=meta)) == want
