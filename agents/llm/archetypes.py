"""Archetype decisions: a tick's requests that fall in one bucket share one LLM call, sampled per agent.

With `llm.archetypes: true` the run's LLM backend is an `ArchetypeBackend`. Each request of a batch is put in a
bucket by its phase, its kind of action space and the scenario's own `archetype(request)` key (the persona and the
structured state it decides on, numbers binned: `sim.tick.model.SocietyModel.archetype`). One request per bucket
(the first, in request order) is asked:

- a Choice or a Number, when the model can score answers (the embedded/local model): one scored call gives the
  model's distribution over the options (a Number's grid; a grid of more than `MAX_CANDIDATES` values: its first
  128 values and 128 more geometrically spaced up to its top),
  softmax of the options' scores at the model's temperature, as the local model's `choose` draws from it; every
  agent of the bucket then draws its own answer from that distribution with its own decision seed
  (`draw`: inverse CDF of a uniform that is a pure function of the seed);
- anything else (Text, a Form, a request that reasons first, a model that cannot score): the bucket's one answer
  is every agent's answer.

Both kinds of call go through the store's cache like any call (a distribution call's key carries `ARCHETYPE` in
its sampling, so it never meets a full run's call), so an archetype run reruns and replays from its cache
identically. The backend counts its calls (buckets) and decisions (requests), reported in the run's final summary
(`run_stats`, `STATS_DOCS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any, Optional

import numpy as np

from agents.llm.base import Answer, Messages
from agents.llm.local.llm import LocalLLM
from agents.llm.prompts import reasoned
from sim.contracts.backend import Backend, CallRecord, fallback_decision
from sim.core.contracts import Decision, DecisionRequest
from sim.core.rng import mix64_array
from sim.core.spaces import Choice, Number, Space, SpaceError
from sim.core.spec import RunSpec

#: marks a distribution call's sampling (so its cache key): the version of how distributions are made
ARCHETYPE = "distribution-v1"
#: the most values of a Number scored in one distribution (a larger grid: this many evenly spaced values of it)
MAX_CANDIDATES = 256
#: the stream a per-agent draw mixes into its seed (independent of the model's own noise streams)
_DRAW_STREAM = 0xA4C3_7E1D_95B2_0F61
_M64 = (1 << 64) - 1

#: what a run with archetypes adds to its final summary (`run_stats`), and what each means
STATS_DOCS = {
    "archetype_calls": "LLM calls the run's archetype buckets needed (one per bucket per tick; a rerun's are cache hits)",
    "archetype_decisions": "LLM decisions those calls answered (one per agent per phase)",
    "archetype_decisions_per_call": "archetype_decisions / archetype_calls: how many decisions one call stood for",
}

#: a scenario's bucket key of a request (sim.tick.model.SocietyModel.archetype)
ArchetypeKey = Callable[[DecisionRequest], Hashable]


def scored_sampling(sampling: dict[str, Any]) -> dict[str, Any]:
    """The sampling parameters of a distribution call (part of its cache key)."""
    return {**sampling, "archetype": ARCHETYPE}


def candidates(space: Space) -> Optional[list[tuple[str, Any]]]:
    """(text scored, value) of every answer a distribution covers: a Choice's options, a Number's grid (a longer one:
    its first MAX_CANDIDATES / 2 values, then as many geometrically spaced up to its top; a continuous Number as a
    grid of MAX_CANDIDATES values); None for a space that has no such list (Text, Form)."""
    if isinstance(space, Choice):
        return [(o, o) for o in space.options]
    if not isinstance(space, Number):
        return None
    step = space.step or (space.hi - space.lo) / (MAX_CANDIDATES - 1) or 1.0
    n = int(math.floor((space.hi - space.lo) / step + 1e-9)) + 1
    if n <= MAX_CANDIDATES:
        picks: list[float] = list(range(n))
    else:  # the first half of the grid as it is, the rest geometrically spaced up to its top
        half = MAX_CANDIDATES // 2
        ratio = ((n - 1) / half) ** (1 / (MAX_CANDIDATES - half - 1))
        picks = list(range(half)) + [round(half * ratio ** j) for j in range(MAX_CANDIDATES - half)]
    values = list(dict.fromkeys(space.snap(space.lo + k * step) for k in picks))
    return [(f"{v:g}", v) for v in values]


def distribution(scores: Sequence[float], temperature: float) -> list[float]:
    """Probabilities of answers with these scores: softmax(scores / T) (the law of the local model's seeded pick),
    all on the first best at T = 0."""
    s = np.asarray(scores, dtype=np.float64)
    if temperature <= 0:
        p = np.zeros_like(s)
        p[int(np.argmax(s))] = 1.0
        return p.tolist()
    z = s / temperature
    z = np.exp(z - np.max(z))
    return (z / z.sum()).tolist()


def uniforms(seeds: Sequence[int]) -> np.ndarray:
    """One uniform in [0, 1) per seed, a pure function of that seed alone."""
    with np.errstate(over="ignore"):
        x = mix64_array(np.asarray([int(s) & _M64 for s in seeds], dtype=np.uint64) ^ np.uint64(_DRAW_STREAM))
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def draw(probabilities: Sequence[float], seeds: Sequence[int]) -> list[int]:
    """The index each seed draws from `probabilities` (inverse CDF of `uniforms(seeds)`)."""
    cdf = np.cumsum(np.asarray(probabilities, dtype=np.float64))
    picks = np.searchsorted(cdf, uniforms(seeds) * cdf[-1], side="right")
    return np.minimum(picks, len(cdf) - 1).tolist()


def _admits(space: Space, value: Any) -> bool:
    """Whether `value` is an answer of `space` as it is."""
    try:
        return space.validate(value) == value
    except SpaceError:
        return False


class ScoredLLM:
    """The local model as an LLM whose answer to a Choice or Number request is the distribution over its answers:
    every candidate scored after the prompt (mean token log-likelihood, one batched call), then softmax at the
    model's temperature. The answer's value is {"values": [...], "p": [...]}."""

    def __init__(self, local: LocalLLM) -> None:
        self.local = local
        self.model_id = local.model_id
        self.sampling = scored_sampling(local.sampling)

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        lm = self.local.lm
        prompts = lm.encode(lm.render_all(messages))
        options = [candidates(r.space) for r in requests]
        if any(o is None for o in options):
            raise ValueError("a distribution is made for Choice and Number requests only")
        scores = lm.score_choices(prompts, [[text for text, _ in o] for o in options])
        out = []
        for prompt, opts, s in zip(prompts, options, scores):
            p = distribution(s, self.local.temperature)
            best = int(np.argmax(p))
            out.append(Answer({"values": [v for _, v in opts], "p": p}, raw=opts[best][0], tokens_in=len(prompt),
                              tokens_out=0))
        return out


class ArchetypeBackend(Backend):
    """The `llm` backend of a run with archetypes: one call per bucket of a batch, each agent's answer drawn from
    the bucket's distribution with its own seed (or the bucket's one answer, where there is no distribution).

    `shared` answers a bucket's one request (the run's LLM backend, behind the cache); `scored`, when the model can
    score answers, gives a Choice or Number bucket's distribution (its LLM a `ScoredLLM`, behind the cache).
    Only those requests' prompts are read: a scenario may hand the others over without their text
    (`defers_prompts`, `SocietyModel.deferred`), and each bucket's first is `rendered` before it is sent.
    """

    #: a request may come without its prompt text (`DecisionRequest.render`): only a bucket's first is rendered
    defers_prompts = True

    def __init__(self, shared: Backend, scored: Optional[Backend], key: ArchetypeKey) -> None:
        self.shared, self.scored, self.key = shared, scored, key
        self.name = shared.name
        self.concurrent = shared.concurrent
        self.calls = 0  # buckets asked (one LLM call or cache hit each)
        self.decisions = 0  # requests answered

    def bind(self, run_id: str, spec: RunSpec) -> None:
        self.calls = self.decisions = 0
        self.shared.bind(run_id, spec)
        if self.scored is not None:
            self.scored.bind(run_id, spec)

    def drain_calls(self) -> list[CallRecord]:
        return self.shared.drain_calls() + (self.scored.drain_calls() if self.scored is not None else [])

    def bucket(self, request: DecisionRequest) -> tuple:
        """The bucket of a request: its phase, its kind of action space and the scenario's key."""
        return (request.phase, type(request.space).__name__, self.key(request))

    def _scorable(self, request: DecisionRequest) -> bool:
        return self.scored is not None and not reasoned(request) and isinstance(request.space, (Choice, Number))

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        buckets: dict[tuple, list[int]] = {}
        for i, request in enumerate(requests):
            buckets.setdefault(self.bucket(request), []).append(i)
        members = list(buckets.values())
        first = {m[0]: requests[m[0]].rendered() for m in members}  # (the only prompts built: one a bucket)
        scored = [m for m in members if self._scorable(first[m[0]])]
        shared = [m for m in members if not self._scorable(first[m[0]])]
        out: list[Optional[Decision]] = [None] * len(requests)
        if scored:
            got = self.scored.decide_batch([first[m[0]] for m in scored])
            for m, d in zip(scored, got):
                self._sampled(requests, m, d, out)
        if shared:
            got = self.shared.decide_batch([first[m[0]] for m in shared])
            for m, d in zip(shared, got):
                for i in m:
                    out[i] = d if i == m[0] else replace(d, agent_id=requests[i].agent_id)
        self.calls += len(members)
        self.decisions += len(requests)
        return out  # type: ignore[return-value]

    def _sampled(self, requests: Sequence[DecisionRequest], m: list[int], d: Decision, out: list) -> None:
        """Each agent of bucket `m` draws its answer from the distribution `d` holds (all fall back when it failed)."""
        if d.fallback or not isinstance(d.value, dict):
            for i in m:
                out[i] = fallback_decision(requests[i], self.name, d.reason or "archetype call failed", d.attempts, d.raw)
            return
        values, p = d.value["values"], d.value["p"]
        first = requests[m[0]].space
        alike = [i for i in m if requests[i].space is first or requests[i].space == first]
        for i, k in zip(alike, draw(p, [requests[i].seed for i in alike])):
            out[i] = Decision(agent_id=requests[i].agent_id, phase=requests[i].phase, value=values[k], backend=self.name,
                              cached=d.cached)
        for i in set(m).difference(alike):  # another space: the distribution restricted to the agent's own answers
            request = requests[i]
            own = [q if _admits(request.space, v) else 0.0 for v, q in zip(values, p)]
            if sum(own) <= 0:
                out[i] = fallback_decision(request, self.name, "archetype: no answer of the bucket's is in this space")
                continue
            k = draw(own, [request.seed])[0]
            out[i] = Decision(agent_id=request.agent_id, phase=request.phase, value=values[k], backend=self.name,
                              cached=d.cached)


def run_stats(backends: Sequence[Backend]) -> dict[str, float]:
    """The run's calls and decisions over its archetype backends (none: {}), for its final summary."""
    ours = [b for b in backends if isinstance(b, ArchetypeBackend)]
    if not ours:
        return {}
    calls, decisions = sum(b.calls for b in ours), sum(b.decisions for b in ours)
    return {"archetype_calls": float(calls), "archetype_decisions": float(decisions),
            "archetype_decisions_per_call": decisions / calls if calls else 0.0}


__all__ = ["ARCHETYPE", "STATS_DOCS", "ArchetypeBackend", "ArchetypeKey", "ScoredLLM", "candidates", "distribution", "draw",
           "run_stats", "scored_sampling", "uniforms"]
