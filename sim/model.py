"""The Mesa model base that runs the tick: update, observe, decide, act, reward, record.

A scenario subclasses `SocietyModel`, declares its `Config`, its phases and strategies,
and fills in the hooks. The base owns the order of the tick, the seeded RNG, the reward
layer, the norm ledger and the per-tick record handed to the store.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Optional

import mesa
from mesa.agent import AgentSet
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.base import SocietyAgent
from agents.memory import Memory
from agents.scripted import Strategy
from sim import metrics as social
from sim.broker import DecisionBroker
from sim.contracts import CONTRACT, Decision, DecisionColumns, DecisionRequest, Event, RequestBatch, values_by_agent
from sim.norms import NormLedger
from sim.rewards import FeedbackMode, RewardLayer, RewardMode, describe_feedback
from sim.rng import SeedStream, rng_version, seed_keys
from sim.spaces import Space


#: metrics the base adds to every scenario's tick, and what they mean
BASE_TICK_DOCS: dict[str, str] = {
    "perolat_efficiency": "Perolat U so far: sum of all rewards / ticks elapsed",
    "perolat_equality": "Perolat E so far: 1 - Gini of the agents' summed rewards",
    "perolat_sustainability": "Perolat S so far: mean tick (1-based) at which agents got positive rewards",
    "perolat_peace": "Perolat P so far: mean number of agents not sanctioned per tick",
    "norm_statements": "norms stated this tick",
    "norm_adoptions": "norms put in force this tick (e.g. by a vote)",
    "norm_compliances": "norm compliances recorded this tick",
    "norm_violations": "norm violations recorded this tick",
    "norm_sanctions": "sanctions given this tick",
}
#: metrics the base adds to every run's final summary
BASE_FINAL_DOCS: dict[str, str] = {
    "perolat_efficiency": "Perolat U (2017): sum of all agents' rewards over the run / ticks",
    "perolat_equality": "Perolat E: 1 - Gini of the agents' total rewards",
    "perolat_sustainability": "Perolat S: mean over agents of the average tick (1-based) of their positive rewards",
    "perolat_peace": "Perolat P: mean number of agents not sanctioned per tick",
    "norm_statements": "norms stated over the whole run",
    "norm_adoptions": "norms put in force over the whole run",
    "norm_compliances": "norm compliances over the whole run",
    "norm_violations": "norm violations over the whole run",
    "norm_sanctions": "sanctions over the whole run",
    "norm_compliance_rate": "compliances / (compliances + violations) over the run; null when no act was judged",
}


class PopulationGroup(BaseModel):
    """A group of agents sharing a policy (mixed populations: e.g. 4 LLM + 1 greedy)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(ge=1)
    policy: Optional[Literal["scripted", "llm"]] = None
    strategy: Optional[str] = None
    persona: Optional[str] = None


class ScenarioConfig(BaseModel):
    """Fields every scenario has: the reward layer's settings, population and memory sizes.

    Values must be finite (`inf`/`nan` are refused) and a boolean is never taken for a number.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        """`fishers=true` must not become 1: a bool is accepted only by a bool field."""
        if isinstance(data, dict):
            for name, value in data.items():
                f = cls.model_fields.get(name)
                if f is not None and isinstance(value, bool) and f.annotation in (int, float):
                    raise ValueError(f"{name!r} must be a number, not {str(value).lower()}")
        return data

    reward_mode: RewardMode = Field("private", description="what agents are rewarded: own, integrated or group payoff")
    lam: float = Field(0.0, ge=0.0, le=10.0, description="weight of others' payoffs in integrated mode")
    feedback: FeedbackMode = Field("sparse", description="sparse: own reward; dense: plus group metrics")
    population: Optional[list[PopulationGroup]] = Field(None, description="groups {count, policy, strategy, persona}")
    memory_window: int = Field(8, ge=1, le=1000, description="recent memory items kept verbatim")
    memory_summary_chars: int = Field(400, ge=0, le=100_000, description="size of the running summary")


@dataclass(slots=True)
class AgentStepRecord:
    """One agent's tick: its decisions by phase, payoff, reward, fallback flag, memory snapshot."""

    agent_id: int
    action: dict[str, Any]
    payoff: float
    reward: float
    fallback: bool
    backend: str
    reason: Optional[str]
    memory: Optional[dict[str, Any]]  # None: unchanged since the last stored snapshot

    def row(self, prefix: tuple, encode: Callable[[Any], str]) -> tuple:
        """The store's row: `prefix + (agent_id, backend, action JSON, payoff, reward, fallback, reason,
        memory JSON or None)`."""
        return prefix + (self.agent_id, self.backend, encode(self.action), self.payoff, self.reward, self.fallback,
                         self.reason, None if self.memory is None else encode(self.memory))


_PLAIN = frozenset({str, int, float, bool, type(None)})  # values equal only when their JSON is (but 0.0 / -0.0)


class StepColumns(Sequence[AgentStepRecord]):
    """A tick's agent steps in columns, by agent id; indexing or iterating gives the AgentStepRecords.

    Built once per tick for every agent, so it holds columns (ids, backends, payoffs, rewards) and
    each phase's `agent id -> value` map rather than one object per agent: at 10,000 agents that
    is most of the cost of recording a tick. `reasons` and `memories` hold only the agents that
    had a fallback or whose memory changed.
    """

    __slots__ = ("agent_ids", "backends", "payoffs", "rewards", "actions", "reasons", "memories")

    def __init__(self, agent_ids: Sequence[int], backends: Sequence[str], payoffs: Sequence[float],
                 rewards: Sequence[float], actions: Sequence[tuple[str, Mapping[int, Any]]],
                 reasons: Mapping[int, str], memories: Mapping[int, dict[str, Any]]) -> None:
        self.agent_ids, self.backends, self.payoffs, self.rewards = agent_ids, backends, payoffs, rewards
        self.actions, self.reasons, self.memories = actions, reasons, memories

    def __len__(self) -> int:
        return len(self.agent_ids)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        aid = self.agent_ids[i]
        reason = self.reasons.get(aid)
        return AgentStepRecord(aid, {p: m[aid] for p, m in self.actions if aid in m}, self.payoffs[i], self.rewards[i],
                               reason is not None, self.backends[i], reason, self.memories.get(aid))

    def __iter__(self) -> Iterator[AgentStepRecord]:
        return (self[i] for i in range(len(self)))

    def rows(self, prefix: tuple, encode: Callable[[Any], str]) -> list[tuple]:
        """One row per agent for the store: `prefix + (agent_id, backend, action JSON, payoff, reward,
        fallback, reason, memory JSON or None)` (as `AgentStepRecord.row`); a one-phase tick encodes each
        distinct action once."""
        if len(self.actions) != 1:
            return [st.row(prefix, encode) for st in self]
        phase, chosen = self.actions[0]
        reasons, memories = self.reasons, self.memories
        encoded: dict[Any, str] = {}
        empty = encode({})
        rows = []
        for aid, backend, payoff, reward in zip(self.agent_ids, self.backends, self.payoffs, self.rewards):
            if aid in chosen:
                v = chosen[aid]
                kind = type(v)
                if kind in _PLAIN:  # one encoding per value (and 0.0 / -0.0, equal keys, apart)
                    key = (kind, v, str(v)) if kind is float and v == 0.0 else (kind, v)
                    action = encoded.get(key)
                    if action is None:
                        action = encoded[key] = encode({phase: v})
                else:
                    action = encode({phase: v})
            else:
                action = empty
            reason = reasons.get(aid)
            memory = memories.get(aid)
            rows.append(prefix + (aid, backend, action, payoff, reward, reason is not None, reason,
                                  None if memory is None else encode(memory)))
        return rows


@dataclass
class TickRecord:
    """Everything the store commits for one tick, in one transaction."""

    tick: int
    metrics: dict[str, float]
    state: dict[str, Any]
    steps: Sequence[AgentStepRecord]
    events: list[Event]
    status: str = "running"
    extra: dict[str, Any] = field(default_factory=dict)


_by_id = attrgetter("unique_id")
_policy, _strategy, _persona = attrgetter("policy"), attrgetter("strategy"), attrgetter("persona")


class Roster(AgentSet):
    """`model.agents` of a SocietyModel: Mesa's AgentSet, iterated from a cached tuple.

    Mesa iterates an AgentSet through a weak-key dictionary's Python generator (~0.3 µs per
    agent per loop); a scenario loops over all agents several times a tick, which at 10,000
    agents cost more than the decisions. The tuple is rebuilt when an agent joins or leaves (or
    an in-place select/sort/shuffle reorders the set); the model holds its agents strongly, so
    the tuple never keeps a removed agent alive. Iteration is over a snapshot: adding or
    removing agents while looping is safe.
    """

    def __init__(self, agents: Iterable[mesa.Agent], random: Any = None) -> None:
        self._snapshot: Optional[tuple[mesa.Agent, ...]] = None
        self._index: Optional[tuple[tuple[mesa.Agent, ...], tuple[mesa.Agent, ...], dict[int, mesa.Agent]]] = None
        super().__init__(agents, random=random)

    def __iter__(self) -> Iterator[mesa.Agent]:
        return iter(self.snapshot())

    def snapshot(self) -> tuple[mesa.Agent, ...]:
        """The agents in the set's order, as a tuple (rebuilt only when the set changes)."""
        snap = self._snapshot
        if snap is None:
            snap = self._snapshot = tuple(self._agents.keys())
        return snap

    def by_id(self) -> tuple[tuple[mesa.Agent, ...], dict[int, mesa.Agent]]:
        """The agents sorted by unique_id, and unique_id -> agent (rebuilt only when the set changes)."""
        snap = self.snapshot()
        index = self._index
        if index is None or index[0] is not snap:
            ordered = tuple(sorted(snap, key=_by_id))
            index = self._index = (snap, ordered, {a.unique_id: a for a in ordered})
        return index[1], index[2]

    def add(self, agent: mesa.Agent) -> None:
        super().add(agent)
        self._snapshot = None

    def discard(self, agent: mesa.Agent) -> None:
        super().discard(agent)
        self._snapshot = None

    def remove(self, agent: mesa.Agent) -> None:
        super().remove(agent)
        self._snapshot = None

    def _update(self, agents: Iterable[mesa.Agent]):  # in-place select and sort
        agents = list(agents)  # select passes a generator over this very set: read it before replacing
        out = super()._update(agents)
        self._snapshot = None
        return out

    def shuffle(self, inplace: bool = False) -> AgentSet:
        out = super().shuffle(inplace=inplace)
        if inplace:
            self._snapshot = None
        return out

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._snapshot = None
        self._index = None

    def __copy__(self) -> AgentSet:
        """A plain AgentSet of the same agents (`select()` with no filter copies): a copy keeps no
        cached tuple, so it never holds an agent the model has removed."""
        return AgentSet(list(self._agents.keys()), self.random)


class SocietyModel(mesa.Model):
    """Base class of every scenario. Subclasses fill in the hooks below."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Config: ClassVar[type[ScenarioConfig]] = ScenarioConfig
    horizon_field: ClassVar[str] = ""
    strategies: ClassVar[Mapping[str, Strategy]] = {}
    default_strategy: ClassVar[str] = ""
    #: per-tick metrics (the `ticks` table): name -> one line saying what it measures
    tick_metric_docs: ClassVar[Mapping[str, str]] = {}
    #: the run's final summary (`runs.final_metrics`, `--json`): name -> what it is over the whole run
    final_metric_docs: ClassVar[Mapping[str, str]] = {}

    def __init__(
        self,
        config: ScenarioConfig,
        *,
        seed: int,
        broker: DecisionBroker,
        policy: str = "scripted",
        on_tick: Optional[Callable[[TickRecord], None]] = None,
        contract: int = CONTRACT,
    ) -> None:
        super().__init__(seed=seed)
        self._all_agents = Roster([], random=self.random)  # model.agents: Mesa's AgentSet, looped over fast
        self.config = config
        self.seed = seed
        self.contract = contract  # the run spec's decision contract (sim.contracts.CONTRACT): how decisions are made
        self.seeds = SeedStream(seed, rng_version(contract))  # each decision's seed (sim.rng)
        self.broker = broker
        self.policy = policy
        self.on_tick = on_tick
        self.reward_layer = RewardLayer(config.reward_mode, config.lam, config.feedback)
        self.norms = NormLedger()
        self.status = "running"
        self.reason: Optional[str] = None
        self.events: list[Event] = []
        self.last_metrics: dict[str, float] = {}
        self.last_record: Optional[TickRecord] = None
        self.fallbacks = 0  # fallback decisions so far (records are handed to the store, not kept)
        self._batch_ids: Optional[tuple[Any, list[Any], Any]] = None  # batch_request's agents, their ids and seed keys
        self._add_referenced_strategies()
        self.setup()
        self.perolat = social.PerolatTracker(len(self.agents))

    # ----- hooks a scenario fills in -----------------------------------------------------
    def setup(self) -> None:
        """Create the world and the agents."""

    def phases(self) -> Sequence[str]:
        """The decision phases of this tick, in order (e.g. talk, harvest, sanction)."""
        return ("act",)

    def update(self) -> None:
        """Environment update at the start of the tick (regrowth, feeds, listings)."""

    def observe(self, agent: SocietyAgent, phase: str) -> Optional[DecisionRequest]:
        """The agent's request for this phase, or None when it has nothing to decide."""
        return None

    def observe_batch(self, phase: str) -> Optional[RequestBatch]:
        """This phase's requests as one RequestBatch, or None (the default): ask `observe` agent by agent.

        Optional, for speed at scale: return a batch only when the phase's requests differ in
        nothing but who decides, and it must hold exactly the requests `observe` would give, in
        the same order (see `batch_request`). The decisions are then made, checked, shuffled and
        recorded in columns.
        """
        return None

    def act(self, phase: str, decisions: Sequence[Decision]) -> None:
        """Apply a phase's decisions (already in seeded random order)."""

    def payoffs(self) -> dict[int, float]:
        """Material payoff of each agent this tick."""
        return {}

    def scenario_metrics(self) -> dict[str, float]:
        """The scenario's own metrics after this tick."""
        return {}

    def state(self) -> dict[str, Any]:
        """A plain-data snapshot of the world after this tick."""
        return {}

    def after_reward(self, rewards: Mapping[int, float]) -> None:
        """Learning and bookkeeping once rewards are known (e.g. social learning)."""

    def final_metrics(self) -> dict[str, float]:
        """The scenario's summary of the whole run: totals and rates named as such.

        Called once, after the last tick; the base adds the Perolat metrics and norm totals.
        Kept apart from `scenario_metrics()` (this tick) so no figure mixes the two.
        """
        return {}

    # ----- the run's summary ----------------------------------------------------------------
    def summary(self) -> dict[str, float]:
        """Final metrics: the scenario's own, the Perolat four over the run, norm totals and rates."""
        out = dict(self.final_metrics())
        out.update(self.perolat.values())
        totals = self.norms.totals
        out.update({f"norm_{k}s": float(v) for k, v in totals.items()})
        judged = totals["compliance"] + totals["violation"]
        out["norm_compliance_rate"] = totals["compliance"] / judged if judged else None
        return out

    # ----- helpers for scenarios -----------------------------------------------------------
    @property
    def tick(self) -> int:
        return self.steps

    def new_memory(self) -> Memory:
        """An empty memory sized by the config's `memory_window` and `memory_summary_chars`.

        Runs under decision contracts 1 and 2 got Memory's defaults (8 items, 400 characters)
        whatever the config said (an empty memory is falsy, and the agent replaced it); they keep
        them, so that they replay as they ran.
        """
        if self.contract < 3:
            return Memory()
        return Memory(self.config.memory_window, self.config.memory_summary_chars)

    def population_plan(self, n: int) -> list[tuple[str, str, str]]:
        """(policy, strategy, persona) for each of n agents, from `population` or the defaults."""
        default_strategy = getattr(self.config, "strategy", self.default_strategy)
        groups = self.config.population or [PopulationGroup(count=n)]
        total = sum(g.count for g in groups)
        if total != n:
            raise ValueError(f"population counts add up to {total}, but the scenario has {n} agents")
        plan = []
        for g in groups:
            for _ in range(g.count):
                plan.append((g.policy or self.policy, g.strategy or default_strategy, g.persona or ""))
        return plan

    def _add_referenced_strategies(self) -> None:
        """Strategies the config names by reference (`module:function`, `file.py:function`: a population
        group's `strategy` or a `strategy` field) join this model's `strategies` before `setup()`."""
        from sim.refs import is_reference

        names = [g.strategy for g in self.config.population or ()] + [getattr(self.config, "strategy", None)]
        wanted = sorted({n for n in names if is_reference(n) and n not in self.strategies})
        if wanted:
            from scenarios import load_strategy

            self.strategies = {**dict(self.strategies), **{n: load_strategy(n) for n in wanted}}

    def request(
        self,
        agent: SocietyAgent,
        phase: str,
        space: Space,
        default: Any,
        observation: dict[str, Any],
        context: str,
        question: str,
        own_context: str = "",
    ) -> DecisionRequest:
        """Build a request with everything the decision layer needs from this agent.

        Prompt text (memory, feedback) is rendered only for agents whose decisions read it
        (LLM agents); a scripted strategy reads `observation` alone. `context` is the text every
        agent shares; `own_context` this agent's own part (see DecisionRequest).
        """
        text = agent.policy == "llm"
        return DecisionRequest(
            agent_id=agent.unique_id, tick=self.tick, phase=phase, space=space, default=default,
            backend=agent.policy, strategy=agent.strategy, observation=observation, context=context,
            question=question, persona=agent.persona, memory=agent.memory.render(question) if text else "",
            feedback=describe_feedback(agent.feedback) if text else "",
            seed=self.seeds.seed_for(self.tick, agent.unique_id, phase), own_context=own_context,
        )

    def batch_request(self, agents: Sequence[SocietyAgent], phase: str, space: Space, default: Any,
                      observation: dict[str, Any], question: str) -> RequestBatch:
        """The RequestBatch equal to `request(a, phase, space, default, observation, "", question)` for each agent.

        For agents of one policy whose requests carry no prompt text (scripted ones): an LLM
        agent's request has its own memory and feedback, so it is never batched.
        """
        policies = set(map(_policy, agents))
        if len(policies) > 1 or "llm" in policies:
            raise ValueError(f"a batch holds agents of one non-LLM policy, not {sorted(policies)}")
        cached = self._batch_ids
        if cached is None or cached[0] is not agents or type(agents) is not tuple:  # the same tuple of agents: the same ids
            ids = list(map(_by_id, agents))
            keys = seed_keys(ids)
            cached = self._batch_ids = (agents, ids, ids if keys is None else keys)
        _, ids, keys = cached
        return RequestBatch(
            tick=self.tick, phase=phase, space=space, default=default, observation=observation, agent_ids=ids,
            strategies=list(map(_strategy, agents)), personas=list(map(_persona, agents)),
            seeds=self.seeds.seeds_for_many(self.tick, keys, phase), backend=policies.pop() if policies else "scripted",
            question=question,
        )

    def emit(self, kind: str, actor: Optional[int] = None, target: Optional[int] = None, **data: Any) -> Event:
        event = Event(kind=kind, actor=actor, target=target, data=data)
        self.events.append(event)
        return event

    def end(self, status: str, reason: Optional[str] = None) -> None:
        """Stop after this tick with a final status (`collapsed`, ...)."""
        self.status = status
        self.reason = reason
        self.running = False

    # ----- the tick ------------------------------------------------------------------------------
    def step(self) -> None:
        """One tick: update, then for each phase observe/decide/act; reward; record.

        The cyclic garbage collector is paused for the tick: a tick allocates a few objects per
        agent that reference counting frees, and at 10,000 agents the collector's repeated full
        passes over the live world cost as much as the tick itself. It runs again when the tick
        ends (and stays off if it was off).
        """
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._tick()
        finally:
            if was_enabled:
                gc.enable()

    def _tick(self) -> None:
        self.events = []
        self.update()
        taken: list[tuple[str, Sequence[Decision]]] = []  # each phase's decisions, in request order
        for phase in self.phases():
            batch = self.observe_batch(phase)
            if batch is not None:
                decided: Sequence[Decision] = self.broker.decide_columns(batch) if len(batch) else []
            else:
                requests = [r for a in self.agents if (r := self.observe(a, phase)) is not None]
                by_agent = self.broker.decide(requests) if requests else {}
                decided = [by_agent[r.agent_id] for r in requests]
            order = list(range(len(decided)))
            self.random.shuffle(order)  # the same draws as shuffling the decisions themselves
            ordered = decided.take(order) if isinstance(decided, DecisionColumns) else [decided[i] for i in order]
            taken.append((phase, decided))
            self.act(phase, ordered)
            if not self.running and self.status != "running":
                break
        payoffs = self.payoffs()
        rewards = self.reward_layer.rewards(payoffs)
        sanctioned = len(self.norms.sanctioned())
        self.perolat.n_agents = len(self.agents)
        self.perolat.update(rewards, sanctioned)
        norm_counts = self.norms.tick_counts()
        self.events.extend(self.norms.flush())
        metrics = dict(self.scenario_metrics())
        metrics.update(self.perolat.values())
        metrics.update({f"norm_{k}s": float(v) for k, v in norm_counts.items()})
        self.last_metrics = metrics
        layer = self.reward_layer
        for agent in self.agents:
            aid = agent.unique_id
            agent.last_payoff = paid = payoffs.get(aid, 0.0)
            agent.total_payoff += paid
            agent.last_reward = rewards.get(aid, 0.0)
            if agent.policy == "llm":  # feedback is prompt text: only LLM agents read it
                agent.feedback = layer.feedback_for(aid, rewards, metrics)
        self.after_reward(rewards)
        record = TickRecord(self.tick, metrics, self.state(), self._steps(taken, payoffs, rewards), list(self.events),
                            self.status)
        self.last_record = record
        if self.on_tick is not None:
            self.on_tick(record)

    def _steps(self, taken: Sequence[tuple[str, Sequence[Decision]]], payoffs: Mapping[int, float],
               rewards: Mapping[int, float]) -> StepColumns:
        """The tick's agent steps (the agents present now, by id): decisions by phase, payoff, reward,
        fallbacks with their reasons, and each memory snapshot that changed since it was last stored."""
        agents, present = self._all_agents.by_id()
        ids = list(map(_by_id, agents))
        fell: dict[int, list[str]] = {}
        for _, decided in taken:
            for d in decided.fallbacks() if isinstance(decided, DecisionColumns) else [d for d in decided if d.fallback]:
                if d.agent_id in present:
                    fell.setdefault(d.agent_id, []).append(f"{d.phase}: {d.reason}")
        self.fallbacks += len(fell)
        memories: dict[int, dict[str, Any]] = {}
        for agent in [a for a in agents if a.memory.version != a.stored_memory_version]:
            memories[agent.unique_id] = agent.memory.snapshot()
            agent.stored_memory_version = agent.memory.version
        return StepColumns(
            ids, list(map(_policy, agents)), list(map(payoffs.get, ids, repeat(0.0))),
            list(map(rewards.get, ids, repeat(0.0))), [(phase, values_by_agent(decided)) for phase, decided in taken],
            {aid: "; ".join(reasons) for aid, reasons in fell.items()}, memories,
        )

