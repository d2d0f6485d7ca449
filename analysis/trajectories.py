"""Trajectories for training: one row per decision of a run, with its prompt, tokens, log-probabilities and rewards.

An LLM agent's decision is its stored call. A scripted agent's decision comes with the prompt an LLM agent in its
seat would have been sent (rendered by making the run again with the seat played as an LLM seat that answers by
its strategy: `runner.seats`); its token fields are null. `decisions="llm"` keeps the LLM agents' rows only.

`societas export RUN --format trajectories --out DIR` writes `trajectories.parquet` and
`trajectories.jsonl` (the same rows; `datasets.load_dataset("parquet", data_files=...)` loads the
first). Columns, in the names GRPO/PPO trainers (TRL, OpenRLHF, verl) expect where they have one:

| column | what |
| --- | --- |
| `run_id`, `scenario`, `tick`, `phase`, `agent_id` | which decision |
| `policy`, `strategy` | who decided: `llm` (strategy null) or `scripted` and its strategy (`sustainable`, ...) |
| `run_seed`, `decision_seed` | the run's seed and the request's (a pure function of run seed, tick, agent, phase) |
| `model_id`, `weights_sha256` | the model that answered, and a hash of its weight files (local models; else null) |
| `prompt` | the chat messages sent: a list of `{role, content}` |
| `prompt_ids` | the prompt as the local model's token ids (its chat template applied; null for other models) |
| `completion` | the answer text (a scripted decision's: its action as the answer an LLM would write) |
| `completion_ids`, `logprobs` | the answer as token ids and each token's log-probability under the model (temperature 1, before top-k and constraints; a local model gives them, a served one where its server returns `logprobs`, else null; null entries for tokens the model did not sample, e.g. reasoning re-encoded after its cut; null for scripted decisions) |
| `action` | the decision taken, as JSON (the request's default when `fallback`) |
| `fallback`, `cache_hit` | the answer was unusable (the default was taken); the call was answered from the cache |
| `reward`, `payoff`, `reward_vector` | the agent's reward at this tick (the reward layer's scalar: weights, then mode), its material payoff, and its reward components as JSON |
| `return_to_go` | sum over this and later ticks of the agent's reward, discounted by `gamma` |
| `done` | the agent's last stored tick |

Decisions an agent makes in several phases of one tick share that tick's reward.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

from agents.llm.backend import parse_prompt_text
from agents.llm.local.ids import EMBEDDED_ID, ModelNotFound, resolve_model, weights_digest
from runner.seats import scripted_prompts
from sim.core.errors import UsageError
from sim.core.rng import SeedStream
from sim.core.spec import RunSpec
from sim.store.store import Store
from sim.store.tables import AgentStep, LLMCall

COLUMNS = ("run_id", "scenario", "tick", "phase", "agent_id", "policy", "strategy", "run_seed", "decision_seed", "model_id",
           "weights_sha256",
           "prompt", "prompt_ids", "completion", "completion_ids", "logprobs", "action", "fallback", "cache_hit",
           "reward", "payoff", "reward_vector", "return_to_go", "done")


def local_model_of(model_id: str) -> tuple[bool, Optional[str]]:
    """(whether `model_id` names a local model, its path or None for the embedded one)."""
    if model_id == EMBEDDED_ID:
        return True, None
    if model_id.startswith("local:"):
        return True, model_id[len("local:"):]
    return False, None


class _Tokenizers:
    """Each local model's tokenizer and weights hash, loaded once per export (None where it cannot be loaded)."""

    def __init__(self) -> None:
        self._tok: dict[str, Any] = {}
        self._hash: dict[str, Optional[str]] = {}

    def tokenizer(self, model_id: str) -> Any:
        if model_id not in self._tok:
            local, path = local_model_of(model_id)
            self._tok[model_id] = load_tokenizer(path) if local else None
        return self._tok[model_id]

    def digest(self, model_id: str) -> Optional[str]:
        if model_id not in self._hash:
            local, path = local_model_of(model_id)
            try:
                self._hash[model_id] = weights_digest(path) if local else None
            except (ModelNotFound, OSError):
                self._hash[model_id] = None
        return self._hash[model_id]


def load_tokenizer(model: Optional[str]) -> Any:
    """A local model's tokenizer (transformers; the embedded GGUF's too), or None when it cannot be loaded."""
    try:
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        directory, gguf, _ = resolve_model(model)
        return AutoTokenizer.from_pretrained(directory, **({"gguf_file": gguf} if gguf else {}))
    except Exception:  # noqa: BLE001 - a model that cannot be read leaves prompt_ids null, never fails the export
        return None


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> Optional[list[int]]:
    """The prompt's token ids as the local engine forms them: the chat template with the assistant's turn opened,
    encoded without added special tokens."""
    if tokenizer is None:
        return None
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _rewards(store: Store, run_id: str, agents: Optional[set[int]], gamma: float) -> dict[tuple[int, int], dict[str, Any]]:
    """(tick, agent) -> reward, payoff, vector, return to go and done, for `agents` (None: all)."""
    by_agent: dict[int, list[Any]] = {}
    for rows in store.iter_rows(AgentStep, run_id):
        for r in rows:
            if agents is None or r.agent_id in agents:
                by_agent.setdefault(r.agent_id, []).append(r)
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for aid, steps in by_agent.items():
        steps.sort(key=lambda r: r.tick)
        rtg = 0.0
        last = steps[-1].tick
        for r in reversed(steps):
            rtg = float(r.reward) + gamma * rtg
            out[(r.tick, aid)] = {"reward": float(r.reward), "payoff": float(r.payoff),
                                  "reward_vector": json.dumps(r.components, sort_keys=True) if r.components is not None else None,
                                  "return_to_go": rtg, "done": r.tick == last}
    return out


DECISIONS = ("all", "llm")


def answer_text(value: Any) -> str:
    """A decision's value as the answer text an LLM would write for it: a number as digits, an option or a text as
    itself, a form as JSON."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float, str)):
        return str(value)
    return json.dumps(value, sort_keys=True)


def trajectory_rows(store: Store, run_id: str, *, gamma: float = 1.0, decisions: str = "all") -> Iterator[dict[str, Any]]:
    """One row per decision of the run (see the module docstring; `decisions="llm"`: the LLM agents' only), in tick
    order (a tick's LLM decisions in call order, then its scripted ones in request order). UsageError where the
    scripted decisions' prompts cannot be rendered (runner.seats)."""
    if not 0.0 <= gamma <= 1.0:
        raise UsageError(f"bad value for '--gamma': {gamma}; a discount from 0 to 1")
    if decisions not in DECISIONS:
        raise UsageError(f"bad value for '--decisions': {str(decisions)[:40]!r}; valid: {', '.join(DECISIONS)}")
    run = store.get_run(run_id)
    spec = RunSpec.model_validate(run.spec)
    seeds = SeedStream(spec.seed, spec.profile.rng, tuple(spec.rollout) if spec.rollout else None)
    calls = [c for rows in store.iter_rows(LLMCall, run.id) for c in rows if c.backend == "llm"]
    seats = scripted_prompts(store, run.id) if decisions == "all" else []
    rewards = _rewards(store, run.id, None if seats else {c.agent_id for c in calls}, gamma)
    tools = _Tokenizers()
    rows: list[dict[str, Any]] = []
    for c in calls:
        messages = parse_prompt_text(c.prompt)
        rows.append({
            "tick": c.tick, "phase": c.phase, "agent_id": c.agent_id, "policy": "llm", "strategy": None,
            "model_id": c.model_id, "weights_sha256": tools.digest(c.model_id),
            "prompt": messages,
            "prompt_ids": prompt_ids(tools.tokenizer(c.model_id), messages) if c.completion_ids is not None else None,
            "completion": c.answer, "completion_ids": c.completion_ids, "logprobs": c.logprobs,
            "action": json.dumps(c.value, sort_keys=True), "fallback": bool(c.fallback), "cache_hit": bool(c.cache_hit),
        })
    for s in seats:
        rows.append({
            "tick": s.tick, "phase": s.phase, "agent_id": s.agent_id, "policy": "scripted", "strategy": s.strategy,
            "model_id": None, "weights_sha256": None, "prompt": parse_prompt_text(s.prompt), "prompt_ids": None,
            "completion": answer_text(s.value), "completion_ids": None, "logprobs": None,
            "action": json.dumps(s.value, sort_keys=True), "fallback": s.fallback, "cache_hit": False,
        })
    rows.sort(key=lambda r: r["tick"])  # stable: a tick's LLM calls, then its scripted decisions
    for row in rows:
        got = rewards.get((row["tick"], row["agent_id"]), {})
        yield {
            "run_id": run.id, "scenario": run.scenario, **row,
            "run_seed": spec.seed, "decision_seed": seeds.seed_for(row["tick"], row["agent_id"], row["phase"]),
            "reward": got.get("reward"), "payoff": got.get("payoff"), "reward_vector": got.get("reward_vector"),
            "return_to_go": got.get("return_to_go"), "done": got.get("done"),
        }


def _schema() -> Any:
    import pyarrow as pa

    ints, floats = pa.list_(pa.int64()), pa.list_(pa.float64())
    return pa.schema([
        ("run_id", pa.string()), ("scenario", pa.string()), ("tick", pa.int64()), ("phase", pa.string()),
        ("agent_id", pa.int64()), ("policy", pa.string()), ("strategy", pa.string()), ("run_seed", pa.uint64()),
        ("decision_seed", pa.uint64()), ("model_id", pa.string()),
        ("weights_sha256", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))), ("prompt_ids", ints),
        ("completion", pa.string()), ("completion_ids", ints), ("logprobs", floats), ("action", pa.string()),
        ("fallback", pa.bool_()), ("cache_hit", pa.bool_()), ("reward", pa.float64()), ("payoff", pa.float64()),
        ("reward_vector", pa.string()), ("return_to_go", pa.float64()), ("done", pa.bool_()),
    ])


def export_trajectories(store: Store, run_id: str, out_dir: Path, *, gamma: float = 1.0, decisions: str = "all") -> list[Path]:
    """Write the run's trajectories as `trajectories.parquet` and `trajectories.jsonl` into `out_dir`; the paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"bad value for '--out': {str(out_dir)!r} is a file, not a folder")
    rows = [{k: row[k] for k in COLUMNS} for row in trajectory_rows(store, run_id, gamma=gamma, decisions=decisions)]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        parquet, jsonl = out_dir / "trajectories.parquet", out_dir / "trajectories.jsonl"
        table = pa.Table.from_pylist(rows, schema=_schema())
        pq.write_table(table, parquet)
        with open(jsonl, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, sort_keys=True) + "\n")
    except OSError as exc:
        raise UsageError(f"bad value for '--out': cannot write into {str(out_dir)!r}: {exc.strerror}") from None
    return [parquet, jsonl]
