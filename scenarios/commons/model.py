"""The fishery commons of GovSim ("Cooperate or Collapse", Piatti et al., NeurIPS 2024).

N fishers share a lake of capacity C, starting full. Each month every fisher chooses a
catch; demand beyond the stock is rationed unit by unit to random fishers with demand left;
the remaining stock multiplies by `regrowth` (2: doubles), capped at C. Fewer than
`collapse_below` tons left after fishing is a collapse and ends the run. Options: a talk
phase (a stated norm), monitoring and sanctions, and social learning.

Two protocols ask the LLM fishers (`protocol`): the compact one (one short situation, the harvest question, the
median limit stated as the conversation's agreement) and GovSim's, word for word where the scenario can
(`scenarios.commons.govsim`: its texts, its month of harvest, group chat, the agreed limit read from the chat,
thoughts and reflection; a collapsing month still talks). Each is a table of what each kind of phase asks and does.

Norm formation (the Ostrom-grounded CPR studies of social learning and collective norms):
with `norm_formation`, every `vote_every` months the fishers propose a catch limit (a number)
and then vote for one of the proposals; the winner is adopted by majority (or plurality) and
stays in force until another is adopted. Every catch is judged against the norm in force
(norm.compliance / norm.violation); sanctions can be graduated (`sanction_growth`: the fine
grows with the violator's earlier violations) and cost every fisher `monitoring_cost` a month
while a norm is monitored; social learning copies a peer's strategy and its stated belief
(its last proposal). `start_fraction` and `disposition` give the 2 x 2 design (rich vs scarce
start, altruistic vs selfish fishers): configs/norms_2x2.sweep.yaml.

This module holds the month: the world's state, its phases and what each phase asks and does. The
rest is beside it, an idea a module: the config (`config`), the lake (`lake`), the prompt text
(`prompts`, `templates`), the shared history (`history`), the limit a message proposes (`limits`),
votes and sanctions (`norms`), social learning (`learning`), the metrics (`report`), and the
pieces that changed between decision contracts (`editions`, `legacy`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any, Optional

import numpy as np

from sim.contracts.agent import SocietyAgent
from scenarios.commons import archetypes
from scenarios.commons import govsim, lake, learning, norms, prompts, report
from scenarios.commons import templates as tpl
from scenarios.commons.config import DISPOSITIONS, CommonsConfig
from scenarios.commons.editions import EDITIONS, CommonsEdition
from scenarios.commons.history import Chronicle
from scenarios.commons.probes import PROBES
from scenarios.commons.strategies import STRATEGIES, sustainable_share
from sim.core.contracts import Decision, DecisionRequest, RequestBatch, columns_of
from sim.core.spaces import Choice, Number, Space, Text
from sim.reward.components import Column
from sim.tick.model import SocietyModel

NORM = norms.NORM
CONVERSE = prompts.CONVERSE  # the post-harvest conversation's rounds, one phase each (conversation_rounds)
MAYOR_LISTS = 20  # the mayor's report names at most this many fishers' catches
_by_id, _catch = attrgetter("unique_id"), attrgetter("catch")


class Fisher(SocietyAgent):
    """A fisher: what it caught this month and in all, and what it paid or was fined."""

    def __init__(self, model: "CommonsModel", policy: str, strategy: str, persona: str) -> None:
        super().__init__(model, policy=policy, strategy=strategy, persona=persona, memory=model.new_memory())
        self.catch = 0.0
        self.gain = 0.0
        self.costs = 0.0
        self.enter = 1  # the month it joins (population `enter`); before it, it takes no part
        self.belief: Optional[float] = None  # the limit it last stated (proposed), or copied from a peer
        self.copied = False  # the belief was copied from a peer and not yet stated
        self.violations = 0


#: phases that share a kind: every round of the conversation, GovSim's two thoughts on it
KINDS = {**dict.fromkeys(CONVERSE, "converse"), **dict.fromkeys(govsim.THOUGHTS, "thought")}


def kind_of(phase: str) -> str:
    """A phase's kind: itself, `converse` for every round of the conversation, `thought` for GovSim's thoughts."""
    return KINDS.get(phase, phase)


class CommonsModel(SocietyModel):
    """The fishery. Phases per month: talk (optional), harvest, sanction (optional)."""

    name = "commons"
    description = "GovSim fishery: a shared lake that regrows and can collapse"
    Config = CommonsConfig
    horizon_field = "months"
    strategies = STRATEGIES
    probes = PROBES  # validity probes (`societas probe`): sim.tick.probe
    archetype = staticmethod(archetypes.archetype)  # buckets under llm.archetypes (agents.llm.archetypes)
    default_strategy = "sustainable"
    tick_noun = "month"
    late_entry = True  # a population group may join in a later month (GovSim's outsider: month 4)
    #: read as the months go (fishers, strategy, disposition and start_fraction shape the world at its start)
    fork_fields = frozenset({"capacity", "collapse_below", "regrowth", "catch", "talk", "sanctions", "sanction_cost",
                             "sanction_fine", "social_learning", "norm_formation", "vote_every", "vote_rule",
                             "sanction_growth", "monitoring_cost", "reasoning", "disclose_collapse", "disclose_horizon",
                             "conversation_rounds", "reflection"})
    fork_conditions = {  # what the world reads only under some condition (sim.tick.model.SocietyModel)
        **dict.fromkeys(("reasoning", "reflection", "disclose_collapse", "disclose_horizon"), ({"@policy": "llm"},)),
        **dict.fromkeys(("sanction_cost", "sanction_fine", "sanction_growth", "monitoring_cost"), ({"sanctions": True},)),
        **dict.fromkeys(("vote_every", "vote_rule"), ({"norm_formation": True},)),
        "catch": ({"@strategy": "fixed"},),
    }
    editions = EDITIONS  # what changed between decision contracts: scenarios.commons.editions
    usage_phase = "harvest"
    tick_metric_docs = report.TICK_METRIC_DOCS
    final_metric_docs = report.FINAL_METRIC_DOCS
    component_docs = report.COMPONENT_DOCS
    metric_units = report.UNITS
    config: CommonsConfig
    edition: CommonsEdition

    def setup(self) -> None:
        c = self.config
        self.stock = float(c.capacity) * c.start_fraction
        self.stock_start = self.stock
        self.norm: Optional[float] = None
        self.norm_in_force: Optional[float] = None  # the adopted limit (norm formation)
        self.agreed: Optional[float] = None  # the limit the last post-harvest conversation agreed (conversation_rounds)
        self.conversation_limits: list[float] = []  # limits stated in this month's conversation so far
        self.proposals: dict[int, float] = {}
        self.vote_options: dict[str, float] = {}
        self.fines_total = 0.0
        self.monitoring_total = 0.0
        self.adoptions = 0
        self.messages: list[tuple[int, str]] = []
        self.last_catches: Mapping[int, float] = {}
        self.actions = 0
        self.over_actions = 0
        self.month_actions = 0  # this month's catch decisions, and those above the sustainable share
        self.month_over = 0
        self.months_collapsed = 0
        self._base: Optional[dict[str, Any]] = None
        self._violators: Optional[dict[int, float]] = None
        self._space: Optional[Number] = None
        self._questions: dict[str, str] = {}
        self.chat = govsim.Chat()  # this month's group chat (GovSim's protocol)
        self._collapse: Optional[str] = None  # a collapse that ends the run after the month (GovSim's protocol)
        self._govsim = c.protocol == "govsim"
        # what each kind of phase asks and does, as the run's protocol says
        self._asks = {**_REQUESTS, **govsim.ASKS} if self._govsim else _REQUESTS
        self._does = {**_ACTS, **govsim.DOES} if self._govsim else _ACTS
        # what every fisher sees (the month's catches in all, messages, proposals, votes), as the run's edition says
        self.chronicle: Chronicle = self.edition.chronicle(self)
        persona, strategy = DISPOSITIONS.get(c.disposition, ("", c.strategy))
        plan = self.population_plan(c.fishers, strategy=strategy, persona=persona)
        for (policy, strategy, persona), enter in zip(plan, self.entry_ticks(c.fishers)):
            Fisher(self, policy, strategy, persona).enter = enter
        self._late = any(f.enter > 1 for f in self.agents)
        self.listeners = any(f.remembers for f in self.agents)  # a fishery of scripted fishers keeps no history
        # a harvest is one RequestBatch when every fisher is scripted (the engine asks one by one anyway when a
        # subclass makes requests or applies decisions its own way: SocietyModel.__init_subclass__)
        self._scripted = not self._late and all(f.policy == "scripted" for f in self.agents)
        # beside LLM fishers, the scripted ones still see one lake at harvest: one batch of them (observe_scripted)
        # (found each month from the roster, so a fisher who leaves is never asked, nor kept alive by a cached tuple)
        self._mixed = not self._late and not self._scripted and any(f.policy == "scripted" for f in self.agents)

    @property
    def history(self) -> Any:
        """The shared history of what every fisher saw (an `sim.contracts.memory.Memory`), or None where it is in memories."""
        return self.chronicle.memory

    # ----- the month --------------------------------------------------------------------
    def voting(self) -> bool:
        """Whether this month has a propose/vote round."""
        return self.config.norm_formation and (self.tick - 1) % self.config.vote_every == 0

    def phases(self) -> Sequence[str]:
        c = self.config
        chat = CONVERSE[:c.conversation_rounds] + (govsim.AFTER_CHAT if self._govsim else ())
        return ((("talk",) if c.talk else ()) + (("propose", "vote") if self.voting() else ()) + ("harvest",)
                + (("sanction",) if c.sanctions else ()) + chat + (("reflect",) if c.reflection else ()))

    def update(self) -> None:
        c = self.config
        self.stock_before = self.stock  # last month's stock after its harvest: the stock_change component's base
        if self.tick > 1:
            self.stock = lake.regrown(self.stock, c.capacity, c.regrowth)
        self.stock_start = self.stock
        self.messages = []
        agreed = self.agreed if c.conversation_rounds else None  # (a fork that ends the conversation ends its limit)
        self.norm = self.norm_in_force if self.norm_in_force is not None else agreed
        self.proposals = {}
        self.vote_options = {}
        self._base = None
        self._violators = None
        for f in self.agents:
            f.catch = 0.0
            f.costs = 0.0
        if c.sanctions and not c.talk and not c.norm_formation:
            self.norm = float(sustainable_share(self._obs_base()))
            self.norms.statement(None, NORM, {"max_catch": self.norm}, "institutional sustainable share")

    def present(self) -> int:
        """Fishers taking part this month (every fisher, unless a population group joins later)."""
        return sum(f.enter <= self.tick for f in self.agents) if self._late else len(self.agents)

    def present_fishers(self) -> Sequence[Fisher]:
        """The fishers taking part this month (those of a group that joins later only from its month on)."""
        return [f for f in self.agents if f.enter <= self.tick] if self._late else self.agents

    def _obs_base(self) -> dict[str, Any]:
        """What every fisher sees this phase; computed once per phase, not once per fisher (O(N) a tick)."""
        c = self.config
        key = (self.stock, self.norm, self.tick if self._late else 0)
        if self._base is None or self._base_key != key:
            last = self.last_catches.values()
            total = sum(last)
            self._base_key = key
            self._base = {
                "stock": self.stock, "fishers": self.present(), "capacity": c.capacity, "regrowth": c.regrowth,
                "month": self.tick, "months": c.months, "catch": c.catch, "norm": self.norm,
                "last_mean": total / len(last) if last else None, "last_total": total if last else None,
            }
        return dict(self._base)

    # ----- what each phase asks -------------------------------------------------------------
    def observe(self, agent: Fisher, phase: str) -> Optional[DecisionRequest]:
        if agent.enter > self.tick:
            return None  # not in the fishery yet
        return self._asks[kind_of(phase)](self, agent, phase)

    def observe_batch(self, phase: str) -> Optional[RequestBatch]:
        """At harvest every scripted fisher sees the same lake: one batch (the requests `observe` gives)."""
        if phase != "harvest" or not self._scripted:
            return None
        return self.batch_request(self.agents.snapshot(), phase, self._harvest_space(), 0.0, self._obs_base(),
                                  self._question(phase))

    def observe_scripted(self, phase: str) -> Optional[RequestBatch]:
        """At harvest beside LLM fishers: the scripted fishers in one batch (the LLM ones are asked one by one)."""
        if phase != "harvest" or not self._mixed:
            return None
        scripted = tuple(f for f in self.agents if f.policy == "scripted")
        if not scripted:
            return None
        return self.batch_request(scripted, phase, self._harvest_space(), 0.0, self._obs_base(), self._question(phase))

    def _request_talk(self, agent: Fisher, phase: str) -> DecisionRequest:
        return self._request(agent, phase, Text(max_tokens=40), "I will catch a fair share.", self._obs_base())

    def _request_propose(self, agent: Fisher, phase: str) -> DecisionRequest:
        obs = self._obs_base()
        belief = self._belief(agent, obs)
        space = Number(0, float(int(self.stock)), 1)
        return self._request(agent, phase, space, space.snap(float(sustainable_share(obs))), obs, own_extra=belief)

    def _request_vote(self, agent: Fisher, phase: str) -> Optional[DecisionRequest]:
        obs = self._obs_base()
        belief = self._belief(agent, obs)
        if not self.vote_options:
            return None
        obs["options"] = dict(self.vote_options)
        own = obs["own_proposal"] = self.proposals.get(agent.unique_id)
        space = Choice(list(self.vote_options))
        default = norms.closest_option(self.vote_options, own) if own is not None else space.options[0]
        proposed = tpl.PROPOSALS.substitute(options=", ".join(self.vote_options))
        return self._request(agent, phase, space, default, obs, shared_extra=proposed, own_extra=belief)

    def _request_harvest(self, agent: Fisher, phase: str) -> DecisionRequest:
        return self._request(agent, phase, self._harvest_space(), 0.0, self._obs_base())

    def _request_sanction(self, agent: Fisher, phase: str) -> Optional[DecisionRequest]:
        if self.norm is None:
            return None
        violators = {str(aid): amount for aid, amount in self._top_violators().items() if aid != agent.unique_id}
        if not violators:
            return None
        obs = self._obs_base()
        obs["violators"] = violators
        return self._request(agent, phase, Choice(["none", *(f"fisher {k}" for k in violators)]), "none", obs)

    def _request_words(self, agent: Fisher, phase: str) -> Optional[DecisionRequest]:
        """A round of the conversation, or the month's reflection (an LLM fisher's own: a scripted one keeps none)."""
        if phase == "reflect":
            if agent.policy != "llm":
                return None
            return self._request(agent, phase, Text(max_tokens=60), "I will keep my catch sustainable.", self._obs_base())
        return self._request(agent, phase, Text(max_tokens=40), "I will catch a fair share.", self._obs_base())

    def _belief(self, agent: Fisher, obs: dict[str, Any]) -> str:
        """The limit the fisher believes in (proposed, or copied from a peer), into `obs` and as its own prompt text."""
        if agent.belief is None:
            return ""
        obs["belief"], obs["copied"] = agent.belief, agent.copied
        return tpl.BELIEF.substitute(belief=f"{agent.belief:g}")

    def _request(self, agent: Fisher, phase: str, space: Space, default: Any, obs: dict[str, Any],
                 shared_extra: str = "", own_extra: str = "") -> DecisionRequest:
        """The request, with prompt text (shared situation, then the fisher's own) for LLM fishers only."""
        question = self._question(phase)
        if agent.policy != "llm":
            return self.request(agent, phase, space, default, obs, "", question)
        shared, own = prompts.situation(self, agent, obs, question, after_harvest=phase in CONVERSE or phase == "reflect")
        reason = self.config.reasoning if phase == "harvest" else 0
        return self.request(agent, phase, space, default, obs, shared + shared_extra, question, own_context=own + own_extra,
                            reason_tokens=reason)

    def _question(self, phase: str) -> str:
        kind = kind_of(phase)
        if kind not in self._questions:
            self._questions[kind] = prompts.question(self.config, kind)
        return self._questions[kind]

    def _harvest_space(self) -> Number:
        """The month's catch space (0..stock), built once per month."""
        hi = float(int(self.stock))
        if self._space is None or self._space.hi != hi:
            self._space = Number(0, hi, 1)
        return self._space

    def _top_violators(self) -> dict[int, float]:
        """The fishers over the norm with the largest catches (computed once per tick)."""
        if self._violators is None:
            self._violators = norms.top_violators(((f.catch, f.unique_id) for f in self.agents), self.norm)
        return self._violators

    # ----- what each phase does -------------------------------------------------------------
    def act(self, phase: str, decisions: Sequence[Decision]) -> None:
        self._does[kind_of(phase)](self, phase, decisions)
        if self._collapse is not None and phase == self.phases()[-1]:  # GovSim: the run ends after the month
            self.end("collapsed", self._collapse)

    def _hear(self, decisions: Sequence[Decision], told: Optional[str], parse: Callable[[str], Optional[float]],
              **tags: Any) -> tuple[list[tuple[int, str]], list[Optional[float]]]:
        """Messages every fisher hears: each emitted (with `tags`) and its stated limit (`parse`) recorded as a norm
        statement; the first MAX_MESSAGES_SHOWN told in one line after `told` (None: kept out of the shared history).
        (said, the limit each message states or None)."""
        said, limits = [], []
        for d in decisions:
            text = str(d.value)
            said.append((d.agent_id, text))
            self.emit("message", d.agent_id, None, text=text, **tags)
            amount = parse(text)
            limits.append(amount)
            if amount is not None:
                self.norms.statement(d.agent_id, NORM, {"max_catch": amount}, text)
        heard = " ".join(f"fisher {a}: {self.quoted(m)}" for a, m in said[:prompts.MAX_MESSAGES_SHOWN])
        if heard and told is not None:
            self.chronicle.tell("message", f"{told} {heard}")
        return said, limits

    def _act_talk(self, phase: str, decisions: Sequence[Decision]) -> None:
        said, stated = self._hear(decisions, "The fishers said:", self.edition.proposal)
        self.messages.extend(said)  # (the month's one talk phase: its messages are these)
        proposals = [x for x in stated if x is not None]
        if proposals and not self.config.norm_formation:
            self.norm = float(statistics.median(proposals))

    def _act_converse(self, phase: str, decisions: Sequence[Decision]) -> None:
        """A round of the post-harvest conversation: every message heard (the next round sees this one), every
        limit stated recorded; in the compact protocol, after the last round, the median limit stated is the agreed
        limit of next month (GovSim's protocol: `govsim.chatted`)."""
        _, stated = self._hear(decisions, "At the restaurant the fishers said:", self.edition.said_limit, conversation=True)
        self.conversation_limits.extend(x for x in stated if x is not None)
        if phase == CONVERSE[self.config.conversation_rounds - 1]:
            limits, self.conversation_limits = self.conversation_limits, []
            self.agreed = float(statistics.median(limits)) if limits else self.agreed

    def _act_reflect(self, phase: str, decisions: Sequence[Decision]) -> None:
        """Each LLM fisher's insight, kept in its own memory (GovSim's reflection at home)."""
        fishers = self.agent_map()
        for d in decisions:
            f = fishers[d.agent_id]
            if f.remembers:
                f.remember(self.tick, "insight", f"My insight: {self.quoted(str(d.value))}")

    def _act_propose(self, phase: str, decisions: Sequence[Decision]) -> None:
        fishers = self.agent_map()
        for d in decisions:
            amount = float(d.value)
            self.proposals[d.agent_id] = amount
            f = fishers[d.agent_id]
            f.belief, f.copied = amount, False
            self.norms.statement(d.agent_id, NORM, {"max_catch": amount}, f"I propose a limit of {amount:g} tons per fisher.")
        self.vote_options = norms.vote_options(self.proposals.values())
        self.chronicle.tell("message", f"The fishers proposed catch limits of {', '.join(self.vote_options)}.")

    def _act_vote(self, phase: str, decisions: Sequence[Decision]) -> None:
        rule = self.config.vote_rule
        for d in decisions:
            self.emit("vote", d.agent_id, None, option=str(d.value), limit=self.vote_options[str(d.value)])
        outcome = norms.count_votes(self.vote_options, [str(d.value) for d in decisions], rule)
        if not outcome:
            return
        tally, winner, adopted, cast = outcome["tally"], outcome["winner"], outcome["adopted"], outcome["cast"]
        limit = self.vote_options[winner]
        self.emit("vote.result", None, None, tally=tally, winner=limit, adopted=adopted, rule=rule)
        if adopted:
            previous = self.norm_in_force
            self.norm_in_force = self.norm = limit
            self.adoptions += 1
            self.norms.adoption(NORM, {"max_catch": limit}, f"The group adopted a limit of {limit:g} tons per fisher.",
                                votes=tally[winner], cast=cast, vote_rule=rule, previous=previous)
        said = (f"adopted a limit of {limit:g} tons" if adopted
                else f"adopted nothing ({limit:g} tons had {tally[winner]} of {cast} votes)")
        self.chronicle.tell("observation", f"The vote {said}.")

    def _act_harvest(self, phase: str, decisions: Sequence[Decision]) -> None:
        ids, values = columns_of(decisions)
        demand = dict(zip(ids, map(float, values)))
        caught = lake.ration(demand, self.stock, self.random)
        over = lake.sustainable_catch(self.stock, self.config.regrowth, max(1, self.present())) + 1e-9
        self.month_actions = len(caught)
        self.month_over = sum(map(over.__lt__, demand.values()))  # (every fisher with a demand is in `caught`)
        self.actions += self.month_actions
        self.over_actions += self.month_over
        self._land(caught)
        total = sum(caught.values())
        self.stock -= total
        rationed = {str(a): v for a, v in caught.items() if v != demand[a]} if caught is not demand else {}
        self.emit("harvest", None, None, demand_total=sum(demand.values()), caught_total=total,
                  stock_after=self.stock, rationed=rationed)
        self.last_catches = caught
        if self._govsim:  # what each fisher wanted and caught, the mayor's report; the month goes on after a collapse
            govsim.harvested(self, demand, caught)
            if self.stock < self.config.collapse_below:
                self._collapse = f"stock fell to {self.stock:g} tons in month {self.tick}"
            return
        public = self.chronicle.caught(total, self.stock)
        if self.listeners:  # (no fisher keeps a memory in an all-scripted fishery)
            for f in self.agents:
                if f.remembers and f.enter <= self.tick:
                    f.remember(self.tick, "observation", f"I caught {f.catch:g} tons{public}.")
        if self.config.conversation_rounds:  # GovSim's mayor opens the conversation with every catch
            listed = ", ".join(f"fisher {aid} caught {amount:g} tons" for aid, amount in list(caught.items())[:MAYOR_LISTS])
            more = f", and {len(caught) - MAYOR_LISTS} more fishers" if len(caught) > MAYOR_LISTS else ""
            self.chronicle.tell("report", f"The mayor's report of this month's catches: {listed}{more}.")
        if self.stock < self.config.collapse_below:
            self.end("collapsed", f"stock fell to {self.stock:g} tons in month {self.tick}")

    def _land(self, caught: Mapping[int, float]) -> None:
        """Each fisher's landed catch, judged against the norm in force (compliance or violation, and the month's
        monitoring cost while sanctions are on)."""
        fishers, norm, c = self.agent_map(), self.norm, self.config
        if norm is None:  # (fisher by fisher in the set's order, not the catches' shuffled one: no jumps in memory)
            landed = caught.get
            for f in self.present_fishers():
                amount = landed(f.unique_id)
                if amount is not None:
                    f.catch = amount
                    f.gain += amount
            return
        monitoring = c.monitoring_cost if c.sanctions else 0.0
        for aid, amount in caught.items():
            f = fishers[aid]
            f.catch = amount
            f.gain += amount
            if amount > norm + 1e-9:
                f.violations += 1
                self.norms.violation(aid, NORM, catch=amount, limit=norm, count=f.violations)
            else:
                self.norms.compliance(aid, NORM, catch=amount, limit=norm)
            if monitoring:
                f.costs += monitoring
                self.monitoring_total += monitoring

    def _act_sanction(self, phase: str, decisions: Sequence[Decision]) -> None:
        c = self.config
        fishers = self.agent_map()
        for d in decisions:
            if d.value == "none":
                continue
            target = int(str(d.value).split()[-1])
            fine = norms.graduated_fine(c.sanction_fine, c.sanction_growth, fishers[target].violations)
            fishers[d.agent_id].costs += c.sanction_cost
            fishers[target].costs += fine
            self.fines_total += fine
            self.norms.sanction(d.agent_id, target, NORM, c.sanction_cost, fine)
            fishers[target].remember(self.tick, "observation", f"Fisher {d.agent_id} fined me {fine:g} for overfishing.")
            fishers[target].relate(d.agent_id, -0.3)
            fishers[d.agent_id].relate(target, -0.2)

    # ----- payoffs, learning, metrics -----------------------------------------------------
    def payoffs(self) -> dict[int, float]:
        """Each fisher's catch less its costs; a fisher that has not joined yet has none (and so no reward)."""
        return {f.unique_id: f.catch - f.costs for f in self.present_fishers()}

    def reward_components(self) -> dict[str, Column]:
        """The fisher's catch and the lake's change this month (sanctions received and norm compliance are the common
        components `fined`, `norm_kept`, `norm_broken`)."""
        present = self.present_fishers()
        ids = np.fromiter(map(_by_id, present), dtype=np.int64, count=len(present))
        return {"catch": Column(ids, np.fromiter(map(_catch, present), dtype=np.float64, count=len(present))),
                "stock_change": Column(ids, np.full(len(present), self.stock - self.stock_before))}

    def after_reward(self, rewards: Mapping[int, float]) -> None:
        if self._late:
            for f in self.agents:
                if f.enter > self.tick:
                    f.feedback = {}  # a fisher that has not joined is told nothing
        if self.config.social_learning:
            learning.imitate(self)

    def scenario_metrics(self) -> dict[str, float]:
        """This month's figures, and the GovSim figures so far (named `*_so_far`)."""
        return report.month_metrics(self)

    def final_metrics(self) -> dict[str, Optional[float]]:
        """GovSim's table over the whole run (Piatti et al. 2024)."""
        return report.run_metrics(self)

    @classmethod
    def usage_limit(cls, config: Any, state: Any, agents: int) -> Optional[float]:
        """GovSim's sustainable share: stock_start x (1 - 1/regrowth) / fishers (a catch above it is over-usage)."""
        regrowth = float(dict(config or {}).get("regrowth", cls.Config.model_fields["regrowth"].default))
        return report.usage_limit(regrowth, state, agents)

    @classmethod
    def reference_lines(cls, config: Any) -> dict[str, list[tuple[float, str]]]:
        """The stock's collapse threshold and the level from which the lake regrows to capacity in one month."""
        c, fields = dict(config or {}), cls.Config.model_fields
        return report.reference_lines(*(float(c.get(k, fields[k].default)) for k in ("capacity", "regrowth", "collapse_below")))

    def state(self) -> dict[str, Any]:
        """Small on purpose: per-fisher catches live in agent_steps; strategies are counted."""
        counts = Counter([f.strategy or f.policy for f in self.agents])
        state = {"stock_start": self.stock_start, "stock": self.stock, "norm": self.norm,
                 "strategies": dict(sorted(counts.items()))}
        state.update(self.chronicle.state())
        return state


#: what each kind of phase asks a fisher, and how the phase's decisions apply (kind_of: every conversation round
#: is `converse`)
_REQUESTS: dict[str, Callable[[CommonsModel, Fisher, str], Optional[DecisionRequest]]] = {
    "talk": CommonsModel._request_talk, "propose": CommonsModel._request_propose, "vote": CommonsModel._request_vote,
    "harvest": CommonsModel._request_harvest, "sanction": CommonsModel._request_sanction,
    "converse": CommonsModel._request_words, "reflect": CommonsModel._request_words,
}
_ACTS: dict[str, Callable[[CommonsModel, str, Sequence[Decision]], None]] = {
    "talk": CommonsModel._act_talk, "propose": CommonsModel._act_propose, "vote": CommonsModel._act_vote,
    "harvest": CommonsModel._act_harvest, "sanction": CommonsModel._act_sanction,
    "converse": CommonsModel._act_converse, "reflect": CommonsModel._act_reflect,
}
