"""The Mesa model base that runs the tick: update, observe, decide, act, reward, record.

A scenario subclasses `SocietyModel`, declares its `Config`, its phases and strategies,
and fills in the hooks. The base owns the order of the tick, the seeded RNG, the reward
layer, the norm ledger and the per-tick record handed to the store.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from operator import attrgetter
from typing import Any, ClassVar, Optional

import mesa
import numpy as np

from sim.contracts.agent import SocietyAgent
from sim.contracts.memory import Memory
from sim.contracts.strategy import Strategy
from sim.core.contracts import Decision, DecisionColumns, DecisionRequest, Event, RequestBatch
from sim.core.profiles import CONTRACT, DecisionProfile, profile
from sim.core.records import TickRecord
from sim.core.rng import SeedStream, seed_keys
from sim.core.spec import policies_used
from sim.core.spaces import Space
from sim.core.text import quote
from sim.reward.docs import metric_docs
from sim.reward.metrics import PerolatTracker
from sim.tick.probe import Probe
from sim.reward.norms import NormLedger
from sim.reward.components import Component, RewardColumns
from sim.reward.rewards import RewardLayer, describe_feedback
from sim.tick.broker import DecisionBroker
from sim.tick import legacy
from sim.tick.config import ScenarioConfig
from sim.tick.editions import Editions
from sim.tick.payments import Payments
from sim.tick.population import Population, plan_population
from sim.tick.recording import step_columns
from sim.tick.roster import Entrants, Roster

_by_id = attrgetter("unique_id")
_policy, _strategy, _persona = attrgetter("policy"), attrgetter("strategy"), attrgetter("persona")


class SocietyModel(mesa.Model):
    """Base class of every scenario. A scenario declares the settings below and fills in the hooks.

    The settings, by what they say: what the scenario is (`name`, `description`, `Config`, `horizon_field`);
    who plays it (`strategies`, `default_strategy`, `late_entry`, `synthesis`, `tick_noun`); what its runs
    measure (`tick_metric_docs`, `final_metric_docs`, `component_docs`, `metric_units`, `clock_metrics`,
    `usage_phase`); how its runs are continued, replayed and checked (`fork_fields`, `fork_conditions`, `horizon_bounds`, `editions`, `probes`).
    The hooks: the world (`setup`, `phases`, `update`, `observe`, `observe_batch`, `act`), its rewards
    (`payoffs`, `reward_components`, `after_reward`, `sanctioned_count`), its records (`scenario_metrics`,
    `final_metrics`, `state`, `initial_state`, `agent_profile`) and chart hints (`reference_lines`,
    `usage_limit`). Everything else here is the tick's own (its order, the RNG, rewards, norms, records)
    and helpers for scenarios (`request`, `batch_request`, `population_plan`, `quoted`, `emit`, `end`...).
    """

    # ----- what the scenario is ----------------------------------------------------------------------------
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Config: ClassVar[type[ScenarioConfig]] = ScenarioConfig
    horizon_field: ClassVar[str] = ""
    # ----- who plays it ------------------------------------------------------------------------------------
    strategies: ClassVar[Mapping[str, Strategy]] = {}
    default_strategy: ClassVar[str] = ""
    #: whether a population group may join after tick 1 (`enter`); a scenario that says so keeps absent agents
    #: out of its world until then (`entry_ticks`); any other refuses such a population as bad input
    late_entry: ClassVar[bool] = False
    #: whether agents may be run by a program an LLM writes (`--policy synthesis`, the `synthesis` backend); a
    #: scenario that says so puts the program and the step's state in its requests (see agents.sandbox.backend)
    synthesis: ClassVar[bool] = False
    #: what one tick is, in the words agents read ("month", "round", "tick"): their memory lines are dated by it
    tick_noun: ClassVar[str] = "tick"
    # ----- what its runs measure (sim.reward.docs adds the base's own metrics) -------------------------------
    #: per-tick metrics (the `ticks` table): name -> one line saying what it measures
    tick_metric_docs: ClassVar[Mapping[str, str]] = {}
    #: the run's final summary (`runs.final_metrics`, `--json`): name -> what it is over the whole run
    final_metric_docs: ClassVar[Mapping[str, str]] = {}
    #: the scenario's own reward components (`reward_components`), beside the common ones
    #: (sim.reward.components.COMMON_COMPONENTS): name -> what it is
    component_docs: ClassVar[Mapping[str, str]] = {}
    #: units of the scenario's per-tick metrics and state fields, for axes and tables: name -> unit ("tons")
    metric_units: ClassVar[Mapping[str, str]] = {}
    #: per-tick metrics that are the scenario's clock (generation, game, round), not measurements: never plotted
    clock_metrics: ClassVar[frozenset[str]] = frozenset()
    #: the phase whose numeric action takes from a common resource (the fishery's `harvest`): each agent's is
    #: compared with `usage_limit` for its over-usage (GovSim's per-persona view); None: no such phase
    usage_phase: ClassVar[Optional[str]] = None
    # ----- how its runs are continued, replayed and checked ------------------------------------------------
    #: config fields a fork may change mid-run: those the model reads as it goes (each tick, each game), not
    #: only when it builds the world. The reward layer's (reward_mode, lam, feedback) and the horizon always
    #: may; a fork that changes any other field is refused before it is stored
    fork_fields: ClassVar[frozenset[str]] = frozenset()
    #: fork fields the world reads only under some condition: field -> conditions, any one of which suffices, each a
    #: mapping of config field -> the value it must have (a tuple: one of them), "@policy" -> a policy some agent plays
    #: or "@strategy" -> a strategy some scripted agent plays. A fork that changes such a field where no condition holds
    #: (after the change) is refused: it would store a change nothing reads (the grid's density_radius under fixed
    #: regrowth; the fishery's reasoning without LLM fishers)
    fork_conditions: ClassVar[Mapping[str, Sequence[Mapping[str, Any]]]] = {}
    #: fields that only bound the horizon (the donor game's generations bounds total_rounds): nothing reads them once
    #: the world is built, so a fork may change one only together with the horizon
    horizon_bounds: ClassVar[frozenset[str]] = frozenset()
    #: the scenario's editions (sim.tick.editions): what its rules were made with under each decision contract, where
    #: they changed; the run's is `self.edition`, picked once when the model is built. None: it never changed
    editions: ClassVar[Optional[Editions[Any]]] = None
    #: validity probes (`societas probe`, sim.tick.probe): matched requests that differ in one variable
    probes: ClassVar[tuple[Probe, ...]] = ()

    @staticmethod
    def archetype(request: DecisionRequest) -> Hashable:
        """The bucket key of a request under `llm.archetypes` (agents.llm.archetypes; the phase and the kind of action space are
        added to it): requests of a tick with equal keys share one LLM call. By default only identical prompts
        share one; a scenario bins the structured state its agents decide on (the fishery's stock in 10-ton bins)."""
        return (request.persona, request.context, request.own_context, request.question, request.memory,
                request.feedback, request.system, request.answer_prompt, request.reason_tokens)

    #: (set per class, not declared) whether `observe_batch` may stand for `observe`: not where a subclass makes
    #: requests or applies decisions its own way below the class that batches them (its own code sees every request)
    _batched: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        batcher = _owner(cls, "observe_batch")
        cls._batched = batcher is not SocietyModel and all(
            issubclass(batcher, _owner(cls, hook)) for hook in ("observe", "act", "request", "batch_request"))

    def __init__(
        self,
        config: ScenarioConfig,
        *,
        seed: int,
        broker: DecisionBroker,
        policy: str = "scripted",
        on_tick: Optional[Callable[[TickRecord], None]] = None,
        contract: int = CONTRACT,
        population: Optional[Population] = None,
    ) -> None:
        """`population`: who plays, as the runner planned and checked it when it bound the run's spec (default:
        planned here from `config` and `policy`, sim.tick.population)."""
        super().__init__(seed=seed)
        self._roster = Roster([], random=self.random)  # model.agents (see `agents`)
        self._entrants = Entrants(self._profile)  # agents not yet handed to the store (`take_joined`)
        self.config = config
        self.seed = seed
        self.contract = contract  # the run spec's decision contract: how decisions are made (sim.core.profiles)
        self.profile = profile(contract)
        self.seeds = SeedStream(seed, self.profile.rng)  # each decision's seed (sim.core.rng)
        self.edition: Any = self.editions.at(contract) if self.editions is not None else None
        self._bind_contract(self.profile)
        self.broker = broker
        #: backends that read only some of their requests' prompts (archetypes: one a bucket): `deferred` builds
        #: their requests' text only when asked
        self._deferring = frozenset(name for name, b in getattr(broker, "backends", {}).items()
                                    if getattr(b, "defers_prompts", False))
        self.policy = policy
        self.on_tick = on_tick
        self.reward_layer = reward_layer(config)
        self.norms = NormLedger()
        self.payments = Payments()  # what the ticks paid each agent (its last payoff and reward, its total)
        self.status = "running"
        self.reason: Optional[str] = None
        self.events: list[Event] = []
        self.last_metrics: dict[str, float] = {}
        self.last_record: Optional[TickRecord] = None
        self.fallbacks = 0  # fallback decisions so far (records are handed to the store, not kept)
        self._batch_ids: Optional[tuple[Any, list[Any], Any]] = None  # batch_request's agents, their ids and seed keys
        self.population = population if population is not None else plan_population(type(self), config, policy)
        self._told = "llm" in policies_used(config.population, policy)  # whether any agent reads feedback (LLM agents)
        self.strategies = self.population.strategies  # (with those the config names by reference)
        self.setup()
        self.perolat = PerolatTracker(len(self.agents))

    def _bind_contract(self, p: DecisionProfile) -> None:
        """The tick's pieces of decision profile `p`, picked once here (sim.tick.legacy keeps the old ones): the rules
        never ask which contract they run under."""
        self.memory_noun = self.tick_noun if p.tick_noun else legacy.MONTH  # what memory lines date an item by
        self._memory: Callable[[ScenarioConfig], Memory] = configured_memory if p.configured_memory else legacy.default_memory
        self._quote: Callable[[str, Optional[int]], str] = quote if p.quoted_text else legacy.plain_quote
        self._name: Callable[[str], str] = quote if p.quoted_text else legacy.bare
        self._perolat_over: Callable[[Mapping[int, float], Mapping[int, float]], Mapping[int, float]] = (
            material if p.metrics >= 2 else legacy.shaped)  # Perolat's four: over the material payoffs (contract 6 on)
        # each agent step stores its reward vector (contract 7 on)
        self._vector: Callable[[Mapping[int, float], np.ndarray, np.ndarray, np.ndarray], Optional[RewardColumns]] = (
            self._reward_vector if p.reward_components else legacy.no_vector)

    # ----- hooks a scenario fills in: the world ----------------------------------------------------------------
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

    def observe_scripted(self, phase: str) -> Optional[RequestBatch]:
        """When `observe_batch` gives None: the requests of some agents as one RequestBatch (those of one non-LLM
        policy that differ in nothing but who decides: the scripted fishers beside an LLM one), or None (the
        default). The engine asks `observe` for every agent not in it; the decisions keep the agents' order, as
        one by one. Optional, for speed: the batch must hold exactly the requests `observe` would give its agents."""
        return None

    def act(self, phase: str, decisions: Sequence[Decision]) -> None:
        """Apply a phase's decisions (already in seeded random order)."""

    # ----- hooks a scenario fills in: its rewards --------------------------------------------------------------
    def payoffs(self) -> dict[int, float]:
        """Material payoff of each agent this tick."""
        return {}

    def reward_components(self) -> Mapping[str, Component]:
        """The scenario's own reward components of this tick (called after `payoffs()`): name -> agent id -> value,
        or name -> a `Column` of ids and values (numpy arrays as a scenario keeps them); an agent a component leaves
        out has 0 of it. Each name is documented in `component_docs`."""
        return {}

    def after_reward(self, rewards: Mapping[int, float]) -> None:
        """Learning and bookkeeping once rewards are known (e.g. social learning)."""

    def sanctioned_count(self) -> int:
        """Agents sanctioned this tick, for Perolat's peace: the norm ledger's sanctions by default; a scenario with
        its own sanctions (the grid games' tagging beam: agents tagged out) counts them itself."""
        return len(self.norms.sanctioned())

    # ----- hooks a scenario fills in: its records --------------------------------------------------------------
    def scenario_metrics(self) -> dict[str, float]:
        """The scenario's own metrics after this tick."""
        return {}

    def final_metrics(self) -> dict[str, float]:
        """The scenario's summary of the whole run: totals and rates named as such.

        Called once, after the last tick; the base adds the Perolat metrics and norm totals.
        Kept apart from `scenario_metrics()` (this tick) so no figure mixes the two.
        """
        return {}

    def state(self) -> dict[str, Any]:
        """A plain-data snapshot of the world after this tick."""
        return {}

    def initial_state(self) -> dict[str, Any]:
        """What the run starts from that its events do not carry (e.g. the seeded follow graph), as plain data;
        stored once per run (`runs.initial`), so a page can rebuild the world at any tick. Nothing by default."""
        return {}

    def agent_profile(self, agent: Any) -> dict[str, Any]:
        """Who an agent is, stored once per agent (`run_agents`): role, policy, strategy, persona, and any plain
        data a scenario adds (a business's name, a donor's generation). The role is the agent's class by default."""
        profile = {"role": type(agent).__name__.lower(), "policy": getattr(agent, "policy", None),
                   "strategy": getattr(agent, "strategy", None), "persona": getattr(agent, "persona", "") or ""}
        backend = getattr(agent, "backend", None)
        if backend is not None and backend != profile["policy"]:  # a model of its group's own (sim.tick.models)
            profile["backend"] = backend
        return profile

    # ----- hooks a scenario fills in: chart hints, from a stored run's config and state ------------------------
    @classmethod
    def reference_lines(cls, config: Mapping[str, Any]) -> dict[str, list[tuple[float, str]]]:
        """Lines a chart of a metric or state field draws beside the data (metric -> [(value, label)]), from the
        run's config: e.g. the fishery's collapse threshold and sustainable stock. None by default."""
        return {}

    @classmethod
    def usage_limit(cls, config: Mapping[str, Any], state: Mapping[str, Any], agents: int) -> Optional[float]:
        """The most one agent may take in a tick without over-using the resource, from the tick's stored state and
        the number of agents who acted (`usage_phase`); None where there is no such limit."""
        return None

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

    @classmethod
    def metric_docs(cls) -> dict[str, dict[str, str]]:
        """{"tick": ..., "final": ...}: every metric the scenario's runs store, with its meaning (its own and the base's)."""
        return metric_docs(cls.tick_metric_docs, cls.final_metric_docs)

    # ----- the agents ----------------------------------------------------------------------
    @property
    def agents(self) -> Roster:
        """Every agent of the model: Mesa's AgentSet (a `Roster`, iterated from a cached tuple)."""
        return self._roster

    def register_agent(self, agent: mesa.Agent) -> None:
        super().register_agent(agent)
        self._roster.add(agent)
        self._entrants.joined(agent, self.steps)

    def deregister_agent(self, agent: mesa.Agent) -> None:
        super().deregister_agent(agent)
        self._roster.remove(agent)
        self._entrants.left(agent)

    def take_joined(self) -> list[dict[str, Any]]:
        """Profiles (`agent_profile` + id and the tick it joined) of the agents that joined since the last call."""
        return self._entrants.take()

    def _profile(self, agent: Any, tick: int) -> dict[str, Any]:
        return {"agent_id": int(agent.unique_id), "joined": tick, **self.agent_profile(agent)}

    def agent_map(self) -> Mapping[int, mesa.Agent]:
        """unique_id -> agent, for every agent present (kept by the Roster: rebuilt only when agents change)."""
        return self._roster.by_id()[1]

    def release(self) -> None:
        """Let the model be freed once its run is over.

        Mesa 3.3 counts agent ids in a class-level dict of `mesa.Agent` keyed by model, which holds every model
        a process ever built: a sweep worker running thousands of runs, or a probe building thousands of
        models, would keep them all (a 200-member community is ~1 MB). Dropping this model's counter is the
        only change; call it when no agent will be added any more.
        """
        self._entrants.clear()
        counters = getattr(mesa.Agent, "_ids", None)
        if isinstance(counters, dict):
            counters.pop(self, None)

    # ----- helpers for scenarios -----------------------------------------------------------
    @property
    def tick(self) -> int:
        return self.steps

    def quoted(self, text: str, limit: Optional[int] = None) -> str:
        """Text an agent or a data file wrote, as it enters a prompt (cut to `limit` characters): `sim.core.text.quote`,
        one line between quotes it cannot close (runs before decision contract 5: as written, between plain quotes)."""
        return self._quote(text, limit)

    def named(self, text: str) -> str:
        """A name or label an agent or a data file wrote, in a prompt: `quoted` (before contract 5: bare)."""
        return self._name(text)

    def new_memory(self) -> Memory:
        """An empty memory, sized by the config's `memory_window` and `memory_summary_chars` (runs before decision
        contract 3: Memory's defaults, as they were made)."""
        return self._memory(self.config)

    def population_plan(self, n: int, *, strategy: Optional[str] = None, persona: str = "") -> list[tuple[str, str, str]]:
        """(policy, strategy, persona) for each of n agents, from `population` or the defaults.

        A group without a policy plays the run's `policy`; without a strategy, `strategy` (default: the
        config's `strategy` field, else the class's `default_strategy`); without a persona, `persona`.
        The population was checked when it was planned (sim.tick.population); UsageError (bad input: the run
        is not stored) when its counts do not add up to n.
        """
        return self.population.roles(n, strategy or getattr(self.config, "strategy", self.default_strategy), persona)

    def entry_ticks(self, n: int) -> list[int]:
        """The tick each of the n agents of `population_plan` joins (1 for all without a `population`)."""
        return self.population.entries(n)

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
        reason_tokens: int = 0,
        system: Optional[str] = None,
        answer_prompt: str = "",
    ) -> DecisionRequest:
        """Build a request with everything the decision layer needs from this agent.

        Prompt text (memory, feedback) is rendered only for agents whose decisions read it
        (LLM agents); a scripted strategy reads `observation` alone. `context` is the text every
        agent shares; `own_context` this agent's own part (see DecisionRequest); `reason_tokens`
        the reasoning an LLM agent writes before its answer (a paper protocol's; 0: none); `system`
        and `answer_prompt` a paper protocol's own system message ("": none) and answer instruction,
        in place of the platform's (agents.llm.prompts).
        """
        text = agent.policy == "llm"
        return DecisionRequest(
            agent_id=agent.unique_id, tick=self.tick, phase=phase, space=space, default=default,
            backend=agent.backend, strategy=agent.strategy, observation=observation, context=context,
            question=question, persona=agent.persona, memory=agent.memory.render(question, noun=self.memory_noun) if text else "",
            feedback=describe_feedback(agent.feedback) if text else "",
            seed=self.seeds.seed_for(self.tick, agent.unique_id, phase), own_context=own_context,
            reason_tokens=reason_tokens if text else 0, system=system if text else None,
            answer_prompt=answer_prompt if text else "",
        )

    def deferred(self, agent: SocietyAgent, phase: str, space: Space, default: Any, observation: dict[str, Any],
                 build: Callable[[], DecisionRequest]) -> DecisionRequest:
        """`build()`: the agent's request with its prompt text; or, when the agent's backend reads only some prompts
        (`llm.archetypes`: the first of each bucket, agents.llm.archetypes), the same request without its text, with
        `build` as its `render`, so that 100,000 members' feeds are not rendered for the few prompts sent.

        For a scenario whose `archetype` key reads the request's phase, persona and observation only (never its
        text); `build` must give the request `request` builds (same phase, space, default, observation), and is
        called, if at all, before the phase's decisions are applied (the world it reads is the one observed).
        """
        if agent.backend not in self._deferring:
            return build()
        return DecisionRequest(
            agent_id=agent.unique_id, tick=self.tick, phase=phase, space=space, default=default, backend=agent.backend,
            strategy=agent.strategy, observation=observation, persona=agent.persona,
            seed=self.seeds.seed_for(self.tick, agent.unique_id, phase), render=build)

    def batch_request(self, agents: Sequence[SocietyAgent], phase: str, space: Space, default: Any,
                      observation: dict[str, Any], question: str, *, columns: Optional[Mapping[str, np.ndarray]] = None,
                      build: Optional[Callable[[int], DecisionRequest]] = None) -> RequestBatch:
        """The RequestBatch equal to `request(a, phase, space, default, observation, "", question)` for each agent; with
        `columns` (what differs in each agent's observation, an array over `agents`) and `build` (agent i's request as
        `observe` builds it), the batch of those requests (RequestBatch).

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
            question=question, columns=columns, build=build,
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
        taken = self._decide()
        payoffs = self.payoffs()
        _refuse_non_finite(self.tick, "payoff", payoffs)
        present = self._roster.ids()[1]
        paid = np.fromiter(payoffs, dtype=np.int64, count=len(payoffs))
        pay = np.fromiter(payoffs.values(), dtype=np.float64, count=len(payoffs))
        components = self._vector(payoffs, present, paid, pay)
        rewards = self.reward_layer.rewards(payoffs, components)
        _refuse_non_finite(self.tick, "reward", rewards)
        metrics = self._measure(payoffs, rewards)
        self.payments.settle(payoffs, rewards, present, paid, pay)  # (each agent's last_payoff, last_reward, total_payoff)
        if self._told:
            layer = self.reward_layer
            for agent in self.agents:
                if agent.policy == "llm":  # feedback is prompt text: only LLM agents read it
                    agent.feedback = layer.feedback_for(agent.unique_id, rewards, metrics)
        self.after_reward(rewards)
        state = self.state()
        steps, fell = step_columns(self._roster, taken, payoffs, rewards, components)
        self.fallbacks += fell
        record = TickRecord(self.tick, metrics, state, steps, list(self.events), self.status)
        self.last_record = record
        if self.on_tick is not None:
            self.on_tick(record)

    def _decide(self) -> list[tuple[str, Sequence[Decision]]]:
        """Each phase in turn: its requests (one batch, or agent by agent), decided by the broker, applied in a seeded
        random order; until the world ends. Each phase's decisions, in request order."""
        taken: list[tuple[str, Sequence[Decision]]] = []
        for phase in self.phases():
            batch = self.observe_batch(phase) if self._batched else None
            some = self.observe_scripted(phase) if batch is None and self._batched else None
            if batch is not None:
                decided: Sequence[Decision] = self.broker.decide_columns(batch) if len(batch) else []
            elif some is not None:
                decided = self._decide_around(phase, some)
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
        return taken

    def _decide_around(self, phase: str, some: RequestBatch) -> Sequence[Decision]:
        """A phase whose `some` agents are one batch and the others asked one by one: the decisions in the agents'
        order, as the one-by-one path gives them, in columns (the one-by-one ones kept whole, as `special`), so that
        the batch's decisions are never made one object each."""
        columns = self.broker.decide_columns(some) if len(some) else None
        inside = dict(zip(some.agent_ids, range(len(some))))
        requests = [r for a in self.agents if a.unique_id not in inside and (r := self.observe(a, phase)) is not None]
        by_agent = self.broker.decide(requests) if requests else {}
        if columns is None:
            return [d for a in self.agents if (d := by_agent.get(a.unique_id)) is not None]
        batch_values, batch_special = columns.values, columns.special
        ids: list[int] = []
        values: list[Any] = []
        special: dict[int, Decision] = {}
        for a in self.agents:
            aid = a.unique_id
            i = inside.get(aid)
            if i is not None:
                if i in batch_special:
                    special[len(ids)] = batch_special[i]
                ids.append(aid)
                values.append(batch_values[i])
            elif (d := by_agent.get(aid)) is not None:
                special[len(ids)] = d
                ids.append(aid)
                values.append(d.value)
        return DecisionColumns(phase, columns.backend, ids, values, special)

    def _measure(self, payoffs: Mapping[int, float], rewards: Mapping[int, float]) -> dict[str, float]:
        """The tick's metrics: the scenario's own, Perolat's four so far, and the norm events' counts (flushed to
        the tick's events)."""
        sanctioned = self.sanctioned_count()
        self.perolat.n_agents = len(self.agents)
        self.perolat.update(self._perolat_over(payoffs, rewards), sanctioned)
        norm_counts = self.norms.tick_counts()
        self.events.extend(self.norms.flush())
        metrics = dict(self.scenario_metrics())
        metrics.update(self.perolat.values())
        metrics.update({f"norm_{k}s": float(v) for k, v in norm_counts.items()})
        self.last_metrics = metrics
        return metrics

    def _reward_vector(self, payoffs: Mapping[int, float], present: np.ndarray, paid: np.ndarray,
                       pay: np.ndarray) -> RewardColumns:
        """The tick's reward components, in columns over the agents present (`present`: their ids, sorted): the common
        ones (sim.reward.components), then the scenario's own. `paid`, `pay`: the payoffs' ids and values as arrays."""
        return RewardColumns.of_tick(present, payoffs, paid, pay, self.norms.events, self.reward_components())


def material(payoffs: Mapping[int, float], rewards: Mapping[int, float]) -> Mapping[int, float]:
    """What Perolat's metrics are taken over: the material payoffs, never the shaped rewards (Perolat et al. 2017)."""
    return payoffs


def configured_memory(config: ScenarioConfig) -> Memory:
    """An empty memory sized by the config's `memory_window` and `memory_summary_chars`."""
    return Memory(config.memory_window, config.memory_summary_chars)


def _owner(cls: type, name: str) -> type:
    """The class of `cls`'s MRO that defines `name`."""
    return next(k for k in cls.__mro__ if name in vars(k))


class NonFiniteReward(ArithmeticError):
    """A payoff or reward that is not a finite number: the run stops (stored as failed) before the tick is stored."""


def _refuse_non_finite(tick: int, what: str, values: Mapping[int, float]) -> None:
    """Stop the run at a payoff or reward that is inf or NaN (a scenario's or a weighting's overflow), naming it, instead
    of storing it (a NaN reward once failed a NOT NULL column with the SQL in the message; an inf one replayed as
    matched while rollouts failed on it). O(n): one sum; each value is looked at only when the sum is not finite."""
    if values and not math.isfinite(sum(values.values())):
        bad = next(((a, v) for a, v in values.items() if not math.isfinite(v)), None)
        if bad is not None:
            raise NonFiniteReward(f"tick {tick}: agent {bad[0]}'s {what} is {bad[1]} (not a finite number: the "
                                  "reward weights or the scenario's values overflow)")


def reward_layer(config: ScenarioConfig) -> RewardLayer:
    """The reward layer a config asks for (mode, lambda, feedback, component weights)."""
    return RewardLayer(config.reward_mode, config.lam, config.feedback, dict(config.reward_weights))
