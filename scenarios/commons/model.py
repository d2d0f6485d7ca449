"""The fishery commons of GovSim ("Cooperate or Collapse", Piatti et al., NeurIPS 2024).

N fishers share a lake of capacity C, starting full. Each month every fisher chooses a
catch; demand beyond the stock is rationed unit by unit to random fishers with demand left;
the remaining stock multiplies by `regrowth` (2: doubles), capped at C. Fewer than
`collapse_below` tons left after fishing is a collapse and ends the run. Options: a talk
phase (a stated norm), monitoring and sanctions, and social learning.

Norm formation (the Ostrom-grounded CPR studies of social learning and collective norms):
with `norm_formation`, every `vote_every` months the fishers propose a catch limit (a number)
and then vote for one of the proposals; the winner is adopted by majority (or plurality) and
stays in force until another is adopted. Every catch is judged against the norm in force
(norm.compliance / norm.violation); sanctions can be graduated (`sanction_growth`: the fine
grows with the violator's earlier violations) and cost every fisher `monitoring_cost` a month
while a norm is monitored; social learning copies a peer's strategy and its stated belief
(its last proposal). `start_fraction` and `disposition` give the 2 x 2 design (rich vs scarce
start, altruistic vs selfish fishers): configs/norms_2x2.sweep.yaml.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, Optional

from pydantic import Field, model_validator

from agents.base import SocietyAgent
from sim.core.contracts import Decision, DecisionRequest, RequestBatch, columns_of
from sim.reward.metrics import equality
from sim.tick.config import ScenarioConfig
from sim.tick.model import SocietyModel
from sim.core.spaces import Choice, Number, Text
from scenarios.commons import templates as tpl
from scenarios.commons.strategies import STRATEGIES, sustainable_share
from scenarios.commons.probes import PROBES

StrategyName = Literal["sustainable", "greedy", "fixed", "random", "conditional"]
NORM = "catch_limit"
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)")
MAX_MESSAGES_SHOWN = 8  # a prompt quotes at most this many of the month's messages
MAX_SANCTION_TARGETS = 8  # a sanction choice lists at most this many violators (the largest catches)
MAX_VOTE_OPTIONS = 8  # a vote lists at most this many proposals (the most proposed ones)
CONVERSE = tuple(f"converse{k}" for k in range(1, 11))  # the post-harvest conversation's rounds (conversation_rounds)
MAYOR_LISTS = 20  # the mayor's report names at most this many fishers' catches
DISPOSITIONS = {  # disposition -> (persona of LLM fishers, strategy of scripted fishers)
    "altruistic": ("a fisher who cares about the whole group and wants the lake to last for everyone", "sustainable"),
    "selfish": ("a fisher who cares only about maximising your own catch", "greedy"),
}


#: the methods a harvest RequestBatch stands in for (see CommonsModel.observe_batch)
_REQUESTS_AND_ACTS = ("observe", "_request", "request", "_obs_base", "_harvest_space", "_question", "act",
                      "_act_harvest", "batch_request")


class CommonsConfig(ScenarioConfig):
    """Config of the fishery; every field can be set with `--set key=value`."""

    count_field: ClassVar[str] = "fishers"

    fishers: int = Field(5, ge=1, le=1_000_000, description="number of fishers")
    capacity: float = Field(100.0, gt=0, le=1e9, description="lake capacity in tons (starts full)")
    months: int = Field(12, ge=1, le=100_000, description="months to run unless the lake collapses")
    collapse_below: float = Field(5.0, ge=0, description="stock under which the lake collapses")
    regrowth: float = Field(2.0, ge=1.0, le=100.0, description="factor the remaining stock multiplies by")
    strategy: StrategyName = Field("sustainable", description="scripted strategy of the fishers")
    catch: float = Field(10.0, ge=0, description="tons per month for the `fixed` strategy")
    talk: bool = Field(False, description="fishers post a message (a proposed limit) before fishing")
    sanctions: bool = Field(False, description="fishers may pay to fine those over the group's norm")
    sanction_cost: float = Field(1.0, ge=0, description="cost to the sanctioner")
    sanction_fine: float = Field(3.0, ge=0, description="fine to the sanctioned")
    social_learning: bool = Field(False, description="fishers may copy a more successful peer's strategy and stated belief")
    norm_formation: bool = Field(False, description="fishers propose a catch limit and vote; the majority's choice is the norm in force")
    vote_every: int = Field(1, ge=1, le=100_000, description="months between propose/vote rounds (month 1 always votes)")
    vote_rule: Literal["majority", "plurality"] = Field("majority", description="majority: adopted only with more than half the votes; plurality: the most votes (ties: the lower limit)")
    sanction_growth: float = Field(0.0, ge=0, le=100, description="graduated sanctions: fine = sanction_fine x (1 + sanction_growth x the violator's earlier violations)")
    monitoring_cost: float = Field(0.0, ge=0, le=1e6, description="cost to every fisher of each month a norm is in force and sanctions are on")
    start_fraction: float = Field(1.0, gt=0, le=1, description="share of the capacity the lake starts with (rich 1.0, scarce e.g. 0.3)")
    conversation_rounds: int = Field(0, ge=0, le=10, description="after the harvest the mayor reports every catch and the fishers "
                                     "talk this many rounds, each seeing the rounds before (GovSim's conversation; 0: none); "
                                     "the median limit stated is the group's agreed limit next month")
    reflection: bool = Field(False, description="at the month's end each LLM fisher writes one insight into its memory (GovSim's reflection)")
    reasoning: int = Field(0, ge=0, le=1024, description="LLM fishers reason in at most this many tokens before each catch, "
                           "then answer after \"Answer:\" (GovSim's step-by-step prompt); 0: a bare number")
    disclose_collapse: bool = Field(True, description="the situation states the collapse threshold (GovSim's prompt does not)")
    disclose_horizon: bool = Field(True, description="the situation says \"month M of N\" (GovSim's says the month only)")
    disposition: Literal["none", "altruistic", "selfish"] = Field("none", description="initial disposition: the LLM fishers' persona and the scripted strategy (sustainable / greedy) where no group names one")

    @model_validator(mode="after")
    def _check(self) -> "CommonsConfig":
        if self.collapse_below >= self.capacity:
            raise ValueError(f"collapse_below ({self.collapse_below:g}) must be below capacity ({self.capacity:g})")
        entries = [g.enter for g in self.population or ()]
        if entries and min(entries) > 1:
            raise ValueError("some population group must take part from month 1 (enter: 1)")
        if entries and max(entries) > self.months:
            raise ValueError(f"a population group enters in month {max(entries)}, after the last month ({self.months})")
        if self.start_fraction * self.capacity <= self.collapse_below:
            raise ValueError(f"start_fraction x capacity ({self.start_fraction * self.capacity:g}) must be above collapse_below ({self.collapse_below:g})")
        return self


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


class CommonsModel(SocietyModel):
    """The fishery. Phases per month: talk (optional), harvest, sanction (optional)."""

    name = "commons"
    description = "GovSim fishery: a shared lake that regrows and can collapse"
    Config = CommonsConfig
    horizon_field = "months"
    strategies = STRATEGIES
    probes = PROBES  # validity probes (`societas probe`): sim.tick.probe
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
    config: CommonsConfig

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
        self.last_catches: dict[int, float] = {}
        self.actions = 0
        self.over_actions = 0
        self.month_actions = 0  # this month's catch decisions, and those above the sustainable share
        self.month_over = 0
        self.months_collapsed = 0
        self._base: Optional[dict[str, Any]] = None
        # what every fisher sees (the month's catches in all, messages, proposals, votes): one shared history in
        # the situation text, where the run's decision profile says so, else a line in each fisher's memory
        self.history = self.new_memory() if self.profile.shared_history else None
        self._history_text: dict[str, str] = {}  # the history rendered for a question, at history.version
        persona, strategy = DISPOSITIONS.get(self.config.disposition, ("", self.config.strategy))
        plan = self.population_plan(self.config.fishers, strategy=strategy, persona=persona)
        for (policy, strategy, persona), enter in zip(plan, self.entry_ticks(self.config.fishers)):
            Fisher(self, policy, strategy, persona).enter = enter
        self._late = any(f.enter > 1 for f in self.agents)
        self._listeners = any(f.remembers for f in self.agents)  # a fishery of scripted fishers keeps no history
        # a harvest is one RequestBatch when every fisher is scripted and a subclass has not changed how
        # requests are made or decisions applied (its own observe or act must see every request)
        self._scripted = not self._late and all(f.policy == "scripted" for f in self.agents) and all(
            getattr(type(self), name) is getattr(CommonsModel, name) for name in _REQUESTS_AND_ACTS)

    # ----- the month --------------------------------------------------------------------
    def voting(self) -> bool:
        """Whether this month has a propose/vote round."""
        return self.config.norm_formation and (self.tick - 1) % self.config.vote_every == 0

    def phases(self) -> Sequence[str]:
        c = self.config
        return ((("talk",) if c.talk else ()) + (("propose", "vote") if self.voting() else ()) + ("harvest",)
                + (("sanction",) if c.sanctions else ()) + CONVERSE[:c.conversation_rounds]
                + (("reflect",) if c.reflection else ()))

    def update(self) -> None:
        c = self.config
        self.stock_before = self.stock  # last month's stock after its harvest: the stock_change component's base
        if self.tick > 1:
            self.stock = min(c.capacity, self.stock * c.regrowth)
        self.stock_start = self.stock
        self.messages = []
        agreed = self.agreed if c.conversation_rounds else None  # (a fork that ends the conversation ends its limit)
        self.norm = self.norm_in_force if self.norm_in_force is not None else agreed
        self.proposals = {}
        self.vote_options = {}
        self._base = None
        self._violators: Optional[dict[int, float]] = None
        for f in self.agents:
            f.catch = 0.0
            f.costs = 0.0
        if c.sanctions and not c.talk and not c.norm_formation:
            self.norm = float(sustainable_share(self._obs_base()))
            self.norms.statement(None, NORM, {"max_catch": self.norm}, "institutional sustainable share")

    def present(self) -> int:
        """Fishers taking part this month (every fisher, unless a population group joins later)."""
        return sum(f.enter <= self.tick for f in self.agents) if self._late else len(self.agents)

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

    def _tell(self, kind: str, text: str) -> None:
        """What every fisher sees: one line of the shared history (profile `shared_history`), else a line in each memory."""
        if self.history is not None:
            if self._listeners:
                self.history.add(self.tick, kind, text)
            return
        for f in self.agents:
            if f.remembers and f.enter <= self.tick:  # a fisher that has not joined hears nothing
                f.remember(self.tick, kind, text)

    def _rendered_history(self, question: str) -> str:
        """The shared history as prompt text for `question`, rendered once per phase, not once per fisher."""
        key = f"{self.history.version}:{question}"
        if key not in self._history_text:
            self._history_text = {key: self.history.render(question, noun=self.memory_noun)}
        return self._history_text[key]

    def _context(self, agent: Fisher, obs: Mapping[str, Any], question: str, after_harvest: bool = False) -> tuple[str, str]:
        c = self.config
        last = own = ""
        if obs["last_total"] is not None and not after_harvest:  # (after the harvest, the month's report says it)
            last = tpl.LAST.substitute(total=f"{obs['last_total']:g}", mean=f"{obs['last_mean']:.1f}")
            if self.history is None and agent.unique_id in self.last_catches:  # (with a shared history the fisher's
                # memory says it: "I caught ..."; a fisher that just joined caught nothing last month)
                own = tpl.OWN.substitute(own=f"{self.last_catches[agent.unique_id]:g}")
        norm = tpl.NORM.substitute(norm=f"{self.norm:g}") if self.norm is not None else ""
        said = ""
        if self.history is None:  # the others' messages (the situation differs per fisher); with a shared
            # history the month's messages are in it ("The fishers said: ...")
            said = " ".join(f"fisher {a}: {self.quoted(m)}" for a, m in self.messages[:MAX_MESSAGES_SHOWN + 1]
                            if a != agent.unique_id)
        collapse = tpl.COLLAPSE.substitute(collapse=f"{c.collapse_below:g}") if c.disclose_collapse else ""
        month = (tpl.MONTH_OF if c.disclose_horizon else tpl.MONTH).substitute(month=obs["month"], months=c.months)
        shared = tpl.SITUATION.substitute(
            fishers=obs["fishers"], month=month,
            stock=f"{self.stock:g}", capacity=f"{c.capacity:g}", regrowth=f"{c.regrowth:g}",
            collapse=collapse, last=last, norm=norm,
            messages=tpl.MESSAGES.substitute(messages=said) if said else "",
        )
        if self.history:
            shared += tpl.HISTORY.substitute(history=self._rendered_history(question))
        return shared, tpl.OWN_SITUATION.substitute(agent=agent.unique_id, own=own)

    def observe(self, agent: Fisher, phase: str) -> Optional[DecisionRequest]:
        if agent.enter > self.tick:
            return None  # not in the fishery yet
        obs = self._obs_base()
        question = self._question(phase)
        belief = ""
        if agent.belief is not None and phase in ("propose", "vote"):
            obs["belief"], obs["copied"] = agent.belief, agent.copied
            belief = tpl.BELIEF.substitute(belief=f"{agent.belief:g}")
        if phase in CONVERSE or phase == "reflect":
            if agent.policy != "llm" and phase == "reflect":
                return None  # a scripted fisher keeps no insights
            space = Text(max_tokens=60 if phase == "reflect" else 40)
            default = "I will keep my catch sustainable." if phase == "reflect" else "I will catch a fair share."
            return self._request(agent, phase, space, default, obs, question)
        if phase == "talk":
            space, default = Text(max_tokens=40), "I will catch a fair share."
        elif phase == "propose":
            space = Number(0, float(int(self.stock)), 1)
            default = space.snap(float(sustainable_share(obs)))
        elif phase == "vote":
            if not self.vote_options:
                return None
            obs["options"] = dict(self.vote_options)
            obs["own_proposal"] = self.proposals.get(agent.unique_id)
            space = Choice(list(self.vote_options))
            own = obs["own_proposal"]
            default = min(self.vote_options, key=lambda k: (abs(self.vote_options[k] - own), self.vote_options[k])) if own is not None else space.options[0]
            proposed = tpl.PROPOSALS.substitute(options=", ".join(self.vote_options))
            return self._request(agent, phase, space, default, obs, question, shared_extra=proposed, own_extra=belief)
        elif phase == "harvest":
            space, default = self._harvest_space(), 0.0
        else:
            if self.norm is None:
                return None
            violators = {str(aid): amount for aid, amount in self._top_violators().items() if aid != agent.unique_id}
            if not violators:
                return None
            obs["violators"] = violators
            space = Choice(["none", *(f"fisher {k}" for k in violators)])
            default = "none"
        return self._request(agent, phase, space, default, obs, question, own_extra=belief)

    def observe_batch(self, phase: str) -> Optional[RequestBatch]:
        """At harvest every scripted fisher sees the same lake: one batch (the requests `observe` gives)."""
        if phase != "harvest" or not self._scripted:
            return None
        return self.batch_request(self.agents.snapshot(), phase, self._harvest_space(), 0.0, self._obs_base(),
                                  self._question(phase))

    def _request(self, agent: Fisher, phase: str, space: Any, default: Any, obs: dict, question: str,
                 shared_extra: str = "", own_extra: str = "") -> DecisionRequest:
        """The request, with prompt text (shared situation, then the fisher's own) for LLM fishers only."""
        if agent.policy != "llm":
            return self.request(agent, phase, space, default, obs, "", question)
        shared, own = self._context(agent, obs, question, after_harvest=phase in CONVERSE or phase == "reflect")
        reason = self.config.reasoning if phase == "harvest" else 0
        return self.request(agent, phase, space, default, obs, shared + shared_extra, question, own_context=own + own_extra,
                            reason_tokens=reason)

    def _question(self, phase: str) -> str:
        cache = self.__dict__.setdefault("_questions", {})
        if phase not in cache:
            c = self.config
            fine = f"{c.sanction_fine:g}" + (" (more for repeat violators)" if c.sanction_growth else "")
            key = "converse" if phase in CONVERSE else phase
            cache[phase] = tpl.QUESTIONS[key].substitute(cost=f"{c.sanction_cost:g}", fine=fine)
        return cache[phase]

    def _harvest_space(self) -> Number:
        """The month's catch space (0..stock), built once per month."""
        hi = float(int(self.stock))
        if getattr(self, "_space", None) is None or self._space.hi != hi:
            self._space = Number(0, hi, 1)
        return self._space

    def _top_violators(self) -> dict[int, float]:
        """The fishers over the norm with the largest catches (computed once per tick)."""
        if self._violators is None:
            over = [(f.catch, f.unique_id) for f in self.agents if f.catch > self.norm + 1e-9]
            over.sort(key=lambda t: (-t[0], t[1]))
            self._violators = {aid: amount for amount, aid in over[:MAX_SANCTION_TARGETS + 1]}
        return self._violators

    def act(self, phase: str, decisions: Sequence[Decision]) -> None:
        if phase in CONVERSE:
            self._act_converse(phase, decisions)
        else:
            getattr(self, f"_act_{phase}")(decisions)

    def _act_converse(self, phase: str, decisions: Sequence[Decision]) -> None:
        """A round of the post-harvest conversation: every message heard (the next round sees this one), every
        limit stated recorded; after the last round, the median limit stated is the agreed limit of next month."""
        _, limits = self._hear(decisions, "At the restaurant the fishers said:", stated_limit, conversation=True)
        self.conversation_limits.extend(limits)
        if phase == CONVERSE[self.config.conversation_rounds - 1]:
            limits, self.conversation_limits = self.conversation_limits, []
            self.agreed = float(statistics.median(limits)) if limits else self.agreed

    def _act_reflect(self, decisions: Sequence[Decision]) -> None:
        """Each LLM fisher's insight, kept in its own memory (GovSim's reflection at home)."""
        fishers = self.agent_map()
        for d in decisions:
            f = fishers[d.agent_id]
            if f.remembers:
                f.remember(self.tick, "insight", f"My insight: {self.quoted(str(d.value))}")

    def _hear(self, decisions: Sequence[Decision], told: str, parse: Any, **tags: Any) -> tuple[list[tuple[int, str]], list[float]]:
        """Messages every fisher hears: each emitted (with `tags`) and its stated limit (`parse`) recorded as a norm
        statement; the first MAX_MESSAGES_SHOWN told in one line after `told`. (said, limits stated)."""
        said, limits = [], []
        for d in decisions:
            text = str(d.value)
            said.append((d.agent_id, text))
            self.emit("message", d.agent_id, None, text=text, **tags)
            amount = parse(text)
            if amount is not None:
                limits.append(amount)
                self.norms.statement(d.agent_id, NORM, {"max_catch": amount}, text)
        heard = " ".join(f"fisher {a}: {self.quoted(m)}" for a, m in said[:MAX_MESSAGES_SHOWN])
        if heard:
            self._tell("message", f"{told} {heard}")
        return said, limits

    def _act_talk(self, decisions: Sequence[Decision]) -> None:
        said, proposals = self._hear(decisions, "The fishers said:",
                                     stated_limit if self.profile.metrics >= 2 else first_stated_amount)
        self.messages.extend(said)  # (the month's one talk phase: its messages are these)
        if proposals and not self.config.norm_formation:
            self.norm = float(statistics.median(proposals))

    def _act_propose(self, decisions: Sequence[Decision]) -> None:
        fishers = self.agent_map()
        for d in decisions:
            amount = float(d.value)
            self.proposals[d.agent_id] = amount
            f = fishers[d.agent_id]
            f.belief, f.copied = amount, False
            self.norms.statement(d.agent_id, NORM, {"max_catch": amount}, f"I propose a limit of {amount:g} tons per fisher.")
        counts: dict[float, int] = {}
        for amount in self.proposals.values():
            counts[amount] = counts.get(amount, 0) + 1
        top = sorted(counts, key=lambda a: (-counts[a], a))[:MAX_VOTE_OPTIONS]
        self.vote_options = {f"{a:g} tons": a for a in sorted(top)}
        self._tell("message", f"The fishers proposed catch limits of {', '.join(self.vote_options)}.")

    def _act_vote(self, decisions: Sequence[Decision]) -> None:
        tally = dict.fromkeys(self.vote_options, 0)
        for d in decisions:
            tally[str(d.value)] += 1
            self.emit("vote", d.agent_id, None, option=str(d.value), limit=self.vote_options[str(d.value)])
        cast = sum(tally.values())
        if not cast:
            return
        winner = min(tally, key=lambda k: (-tally[k], self.vote_options[k]))
        adopted = self.config.vote_rule == "plurality" or 2 * tally[winner] > cast
        limit = self.vote_options[winner]
        self.emit("vote.result", None, None, tally=tally, winner=limit, adopted=adopted, rule=self.config.vote_rule)
        if adopted:
            previous = self.norm_in_force
            self.norm_in_force = self.norm = limit
            self.adoptions += 1
            self.norms.adoption(NORM, {"max_catch": limit}, f"The group adopted a limit of {limit:g} tons per fisher.",
                                votes=tally[winner], cast=cast, vote_rule=self.config.vote_rule, previous=previous)
        outcome = f"adopted a limit of {limit:g} tons" if adopted else f"adopted nothing ({limit:g} tons had {tally[winner]} of {cast} votes)"
        self._tell("observation", f"The vote {outcome}.")

    def _act_harvest(self, decisions: Sequence[Decision]) -> None:
        ids, values = columns_of(decisions)
        demand = dict(zip(ids, map(float, values)))
        caught = self._ration(demand)
        share = self.stock * (1 - 1 / self.config.regrowth) / max(1, self.present())
        fishers = self.agent_map()
        over = share + 1e-9
        self.month_actions = len(caught)
        self.month_over = sum([demand[aid] > over for aid in caught])
        self.actions += self.month_actions
        self.over_actions += self.month_over
        norm, c = self.norm, self.config
        if norm is None:
            for aid, amount in caught.items():
                f = fishers[aid]
                f.catch = amount
                f.gain += amount
        else:
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
        total = sum(caught.values())
        demand_total = sum(demand.values())
        self.stock -= total
        rationed = {str(a): v for a, v in caught.items() if v != demand[a]} if caught is not demand else {}
        self.emit("harvest", None, None, demand_total=demand_total, caught_total=total,
                  stock_after=self.stock, rationed=rationed)
        if self.history is not None:  # the public part once, in the shared history
            self._tell("observation", f"All fishers caught {total:g} tons; {self.stock:g} tons were left.")
            public = ""
        else:
            public = f"; all fishers caught {total:g}; {self.stock:g} tons were left"
        if self._listeners:  # (no fisher keeps a memory in an all-scripted fishery)
            for f in self.agents:
                if f.remembers and f.enter <= self.tick:
                    f.remember(self.tick, "observation", f"I caught {f.catch:g} tons{public}.")
        self.last_catches = caught
        if self.config.conversation_rounds:  # GovSim's mayor opens the conversation with every catch
            listed = ", ".join(f"fisher {aid} caught {amount:g} tons" for aid, amount in list(caught.items())[:MAYOR_LISTS])
            more = f", and {len(caught) - MAYOR_LISTS} more fishers" if len(caught) > MAYOR_LISTS else ""
            self._tell("report", f"The mayor's report of this month's catches: {listed}{more}.")
        if self.stock < self.config.collapse_below:
            self.end("collapsed", f"stock fell to {self.stock:g} tons in month {self.tick}")

    def _ration(self, demand: Mapping[int, float]) -> dict[int, float]:
        """GovSim's rationing: beyond the stock, units go one by one to random fishers with demand left.

        O(N log N + units): the fishers with demand left are kept in a list (sorted once by id)
        from which an exhausted one is removed by swapping in the last, so each unit costs O(1).
        """
        if sum(demand.values()) <= self.stock:
            return demand  # (the caller's dict: nothing was rationed)
        caught = {aid: 0.0 for aid in demand}
        left = {aid: amt for aid, amt in demand.items() if amt > 0}
        ids = sorted(left)
        available = self.stock
        while available > 1e-9 and ids:
            k = self.random.randrange(len(ids))
            aid = ids[k]
            unit = min(1.0, left[aid], available)
            caught[aid] += unit
            available -= unit
            left[aid] -= unit
            if left[aid] <= 1e-9:
                ids[k] = ids[-1]
                ids.pop()
        return caught

    def _act_sanction(self, decisions: Sequence[Decision]) -> None:
        c = self.config
        fishers = self.agent_map()
        for d in decisions:
            if d.value == "none":
                continue
            target = int(str(d.value).split()[-1])
            fine = graduated_fine(c.sanction_fine, c.sanction_growth, fishers[target].violations)
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
        if self._late:
            return {f.unique_id: f.catch - f.costs for f in self.agents if f.enter <= self.tick}
        return {f.unique_id: f.catch - f.costs for f in self.agents}

    component_docs = {
        "catch": "tons the fisher caught this month (its payoff before costs and fines)",
        "stock_change": "the lake's change this month in tons, regrowth and every catch included (the same for every fisher "
                        "taking part): the group's stock change",
    }

    def reward_components(self) -> dict[str, dict[int, float]]:
        """The fisher's catch and the lake's change this month (sanctions received and norm compliance are the common
        components `fined`, `norm_kept`, `norm_broken`)."""
        present = [f for f in self.agents if f.enter <= self.tick] if self._late else list(self.agents)
        ids = [f.unique_id for f in present]
        return {"catch": {f.unique_id: f.catch for f in present},
                "stock_change": dict.fromkeys(ids, self.stock - self.stock_before)}

    def after_reward(self, rewards: Mapping[int, float]) -> None:
        if self._late:
            for f in self.agents:
                if f.enter > self.tick:
                    f.feedback = {}  # a fisher that has not joined is told nothing
        if not self.config.social_learning:
            return
        fishers = sorted((f for f in self.agents if f.enter <= self.tick), key=lambda f: f.unique_id)
        pays = {f.unique_id: f.last_payoff for f in fishers}
        spread = max(pays.values()) - min(pays.values())
        if spread <= 0 or len(fishers) < 2:
            return
        n = len(fishers)
        for i, f in enumerate(fishers):
            j = self.random.randrange(n - 1)
            peer = fishers[j + (j >= i)]  # a uniform peer other than f, in O(1)
            gap = pays[peer.unique_id] - pays[f.unique_id]
            if gap > 0 and self.random.random() < gap / spread:
                if f.policy == "scripted":
                    f.strategy = peer.strategy
                believed = ""
                if peer.belief is not None:
                    f.belief, f.copied = peer.belief, True
                    believed = f" They proposed a limit of {peer.belief:g} tons; I now think so too."
                f.remember(self.tick, "note", f"Fisher {peer.unique_id} earned {gap:g} more than me by catching {peer.catch:g}; I will do as they do.{believed}")
                f.relate(peer.unique_id, 0.1)
                self.emit("learn.imitate", f.unique_id, peer.unique_id, strategy=peer.strategy, gap=gap, belief=peer.belief)

    def scenario_metrics(self) -> dict[str, float]:
        """This month's figures, and the GovSim figures so far (named `*_so_far`)."""
        c = self.config
        fishers = [f for f in self.agents if f.enter <= self.tick] if self._late else self.agents  # (those taking part)
        catches = [f.catch for f in fishers]
        total_gain = sum(f.gain for f in fishers)
        share = self.stock_start * (1 - 1 / c.regrowth) / len(catches)
        return {
            "stock": self.stock,
            "stock_start": self.stock_start,
            "catch_total": sum(catches),
            "catch_mean": sum(catches) / len(catches),
            # GovSim's over-usage judges the catch a fisher chose (rationing is the lake's doing), each month as over
            # the run; the first metric definitions judged this month's landed catch against the month's opening stock
            "over_usage": (self.month_over / self.month_actions if self.month_actions else 0.0) if self.profile.metrics >= 2
            else sum(x > share + 1e-9 for x in catches) / len(catches),
            "gain_so_far": total_gain / len(catches),
        }

    metric_units = {"stock": "tons", "stock_start": "tons", "catch_total": "tons", "catch_mean": "tons",
                    "gain_so_far": "tons", "over_usage": "share", "state.stock": "tons"}

    usage_phase = "harvest"

    @classmethod
    def usage_limit(cls, config: Any, state: Any, agents: int) -> Optional[float]:
        """GovSim's sustainable share: stock_start x (1 - 1/regrowth) / fishers (a catch above it is over-usage)."""
        start = (state or {}).get("stock_start")
        if start is None or agents < 1:
            return None
        regrowth = float(dict(config or {}).get("regrowth", cls.Config.model_fields["regrowth"].default))
        return float(start) * (1 - 1 / regrowth) / agents

    @classmethod
    def reference_lines(cls, config: Any) -> dict[str, list[tuple[float, str]]]:
        """The stock's collapse threshold and the level from which the lake regrows to capacity in one month."""
        c = dict(config or {})
        fields = cls.Config.model_fields
        capacity = float(c.get("capacity", fields["capacity"].default))
        regrowth = float(c.get("regrowth", fields["regrowth"].default))
        collapse = float(c.get("collapse_below", fields["collapse_below"].default))
        lines = [(collapse, "collapse"), (capacity / regrowth, "sustainable: regrows to capacity")]
        return {"stock": lines, "state.stock": lines}

    tick_metric_docs = {
        "stock": "tons in the lake after this month's fishing (before regrowth)",
        "stock_start": "tons in the lake at the start of this month",
        "catch_total": "tons caught by all fishers this month",
        "catch_mean": "tons caught per fisher this month",
        "over_usage": "share of this month's catch decisions (the catch chosen, before rationing) above the sustainable "
                      "share stock_start*(1-1/regrowth)/N (runs before contract 6: the landed catch)",
        "gain_so_far": "mean total catch per fisher up to this month",
    }

    def final_metrics(self) -> dict[str, float]:
        """GovSim's table over the whole run (Piatti et al. 2024)."""
        c = self.config
        gains = [f.gain for f in self.agents]
        total = sum(gains)
        reference = self.tick * c.capacity * (1 - 1 / c.regrowth)
        return {
            "survival_time": float(self.tick),
            "collapsed": float(self.status == "collapsed"),
            "gain": total / len(gains),
            "total_gain": total,
            "efficiency": min(1.0, total / (c.months * c.capacity * (1 - 1 / c.regrowth))),
            # uncapped: above 1, the fishers caught faster than the lake regrows (a collapsing run), which the cap hid
            "efficiency_survived": (total / reference if self.profile.metrics >= 2 else min(1.0, total / reference))
            if reference > 0 else 0.0,
            "equality": equality(gains),
            "over_usage": self.over_actions / self.actions if self.actions else 0.0,
            "stock_final": self.stock,
            "norm_limit_final": self.norm_in_force if self.config.norm_formation else self.norm,
            "sanction_fines_total": self.fines_total,
            "monitoring_cost_total": self.monitoring_total,
        }

    final_metric_docs = {
        "survival_time": "months harvested, the collapse month counted (GovSim)",
        "collapsed": "1 if the lake collapsed, else 0",
        "gain": "mean total catch per fisher over the run (GovSim)",
        "total_gain": "total catch of all fishers over the run",
        "efficiency": "total catch / (months x capacity x (1 - 1/regrowth)), the horizon's sustainable maximum (GovSim)",
        "efficiency_survived": "total catch / (months survived x capacity x (1 - 1/regrowth)); above 1 = caught faster "
                               "than the lake regrows (runs before contract 6: capped at 1)",
        "equality": "1 - Gini of the fishers' total catches (GovSim)",
        "over_usage": "share of all catch decisions above the month's sustainable share (GovSim)",
        "stock_final": "tons in the lake at the end",
        "norm_limit_final": "the catch limit in force at the end (norm formation: the last adopted; else the last month's norm); null if none",
        "sanction_fines_total": "fines paid by sanctioned fishers over the run (graduated: sanction_fine x (1 + sanction_growth x earlier violations))",
        "monitoring_cost_total": "monitoring costs paid by all fishers over the run (monitoring_cost per fisher per month with a norm in force and sanctions on)",
    }

    def state(self) -> dict[str, Any]:
        """Small on purpose: per-fisher catches live in agent_steps; strategies are counted."""
        counts = Counter([f.strategy or f.policy for f in self.agents])
        state = {"stock_start": self.stock_start, "stock": self.stock, "norm": self.norm, "strategies": dict(sorted(counts.items()))}
        if self.history:  # what every LLM fisher saw (their memories hold only their own)
            state["history"] = self.history.snapshot()
        return state


def graduated_fine(base: float, growth: float, violations: int) -> float:
    """Graduated sanctions: the first violation costs `base`, each earlier one adds `growth` x `base`."""
    return base * (1.0 + growth * max(0, violations - 1))


_LIMIT_PATTERNS = [
    # "at most 10 tons", "no more than 10", "limit of 10", "catch 10 tons", "10 tons each", "propose 10"
    re.compile(r"(?:at most|no more than|not more than|up to|maximum of|max(?:imum)?|limit(?: of| to| is)?|cap(?: of| at)?)\s*(\d+(?:\.\d+)?)", re.I),
    re.compile(r"(\d+(?:\.\d+)?)\s*(?:tons?|t\b)(?:\s+(?:each|per fisher|per person|apiece))?", re.I),
    re.compile(r"(?:catch|fish|take|propose|suggest)\s+(?:only\s+)?(\d+(?:\.\d+)?)", re.I),
]


def first_stated_amount(text: str) -> Optional[float]:
    """How runs before contract 6 read a proposal: the first of `_LIMIT_PATTERNS` that matches anywhere wins.

    Kept so those runs replay; it reads "The lake has 100 tons, so let us each catch 5." as 100.
    """
    for pattern in _LIMIT_PATTERNS:
        m = pattern.search(text)
        if m:
            return float(m.group(1))
    return None


_NUM = r"(\d+(?:\.\d+)?)"
_UNIT = r"(?:\s*(?:tons?|t\b))?"
#: phrasings that make a number the amount each fisher should catch (the proposal): a limit or a verb of catching
_PROPOSAL = re.compile(
    r"(?:at most|no more than|not more than|up to|a maximum of|maximum of|max(?:imum)?|limits?(?: of| to| is| at)?|"
    r"caps?(?: of| at| to)?|quotas?(?: of| is)?)\s*" + _NUM
    + r"|(?:catch|catches|catching|fish|fishing|take|takes|taking|harvest|harvesting|propose|proposing|suggest|"
    r"suggesting|keep(?: it)? to|stick to|agree (?:on|to))\s+(?:(?:only|just|about|around|roughly|each|all|"
    r"maybe|no more than|at most)\s+)*" + _NUM,
    re.I)
#: a per-fisher amount without a verb ("12 tons each is fair"), and a bare amount ("5 tons is fine")
_EACH = re.compile(_NUM + _UNIT + r"\s+(?:each|per fisher|per person|per head|apiece)", re.I)
_AMOUNT = re.compile(_NUM + r"\s*(?:tons?|t\b)", re.I)
#: words that make a clause about the lake or the past, not about what to catch ("the lake has 100 tons", "we caught")
_NOT_A_PROPOSAL = re.compile(r"\b(?:lake|stock|pond|fish population|left|remain\w*|regrow\w*|capacity|in total|"
                             r"altogether|collapse\w*|caught|took|last month|so far|already)\b", re.I)
#: where one clause ends: punctuation before a space or the end (not the point of "2.5"), or a conjunction
_CLAUSE = re.compile(r"[.;:!?,](?=\s|$)|\b(?:so|but|and|because|then|while)\b", re.I)


def stated_limit(text: str) -> Optional[float]:
    """The catch limit a message proposes per fisher, or None.

    A number counts where it is phrased as the amount to catch: after "at most / no more than / limit
    (of) / cap / quota", or after "catch / take / fish / harvest / propose / suggest" (with "only",
    "each", "about" between); the first such phrase in the text wins. Failing one, in the first clause
    that is not about the lake or the past ("lake", "stock", "left", "regrows", "caught", "last month",
    ...), "N (tons) each / per fisher / apiece", else a bare "N tons". So "The lake has 100 tons, so let
    us each catch 5." proposes 5; "The lake regrows 25 tons a month" and "100 tons are left." propose
    nothing; "I think 2.5 tons is fair." proposes 2.5; "month 2" is never an amount.
    """
    m = _PROPOSAL.search(text)
    if m:
        return float(next(g for g in m.groups() if g is not None))
    for clause in _CLAUSE.split(text):
        if _NOT_A_PROPOSAL.search(clause):
            continue
        m = _EACH.search(clause) or _AMOUNT.search(clause)
        if m:
            return float(m.group(1))
    return None
