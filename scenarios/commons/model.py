"""The fishery commons of GovSim ("Cooperate or Collapse", Piatti et al., NeurIPS 2024).

N fishers share a lake of capacity C, starting full. Each month every fisher chooses a
catch; demand beyond the stock is rationed unit by unit to random fishers with demand left;
the remaining stock multiplies by `regrowth` (2: doubles), capped at C. Fewer than
`collapse_below` tons left after fishing is a collapse and ends the run. Options: a talk
phase (a stated norm), monitoring and sanctions, and social learning.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Optional

from pydantic import Field, model_validator

from agents.base import SocietyAgent
from sim.contracts import Decision, DecisionRequest
from sim.metrics import equality
from sim.model import ScenarioConfig, SocietyModel
from sim.spaces import Choice, Number, Text
from scenarios.commons import templates as tpl
from scenarios.commons.strategies import STRATEGIES, sustainable_share

StrategyName = Literal["sustainable", "greedy", "fixed", "random", "conditional"]
NORM = "catch_limit"
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)")
MAX_MESSAGES_SHOWN = 8  # a prompt quotes at most this many of the month's messages
MAX_SANCTION_TARGETS = 8  # a sanction choice lists at most this many violators (the largest catches)


class CommonsConfig(ScenarioConfig):
    """Config of the fishery; every field can be set with `--set key=value`."""

    fishers: int = Field(5, ge=1, le=1000, description="number of fishers")
    capacity: float = Field(100.0, gt=0, description="lake capacity in tons (starts full)")
    months: int = Field(12, ge=1, le=100_000, description="months to run unless the lake collapses")
    collapse_below: float = Field(5.0, ge=0, description="stock under which the lake collapses")
    regrowth: float = Field(2.0, ge=1.0, le=100.0, description="factor the remaining stock multiplies by")
    strategy: StrategyName = Field("sustainable", description="scripted strategy of the fishers")
    catch: float = Field(10.0, ge=0, description="tons per month for the `fixed` strategy")
    talk: bool = Field(False, description="fishers post a message (a proposed limit) before fishing")
    sanctions: bool = Field(False, description="fishers may pay to fine those over the group's norm")
    sanction_cost: float = Field(1.0, ge=0, description="cost to the sanctioner")
    sanction_fine: float = Field(3.0, ge=0, description="fine to the sanctioned")
    social_learning: bool = Field(False, description="fishers may copy a more successful peer's strategy")

    @model_validator(mode="after")
    def _check(self) -> "CommonsConfig":
        if self.collapse_below >= self.capacity:
            raise ValueError(f"collapse_below ({self.collapse_below:g}) must be below capacity ({self.capacity:g})")
        if self.population and sum(g.count for g in self.population) != self.fishers:
            total = sum(g.count for g in self.population)
            raise ValueError(f"population counts add up to {total}, but fishers is {self.fishers}")
        return self


class Fisher(SocietyAgent):
    """A fisher: what it caught this month and in all, and what it paid or was fined."""

    def __init__(self, model: "CommonsModel", policy: str, strategy: str, persona: str) -> None:
        super().__init__(model, policy=policy, strategy=strategy, persona=persona, memory=model.new_memory())
        self.catch = 0.0
        self.gain = 0.0
        self.costs = 0.0


class CommonsModel(SocietyModel):
    """The fishery. Phases per month: talk (optional), harvest, sanction (optional)."""

    name = "commons"
    description = "GovSim fishery: a shared lake that regrows and can collapse"
    Config = CommonsConfig
    horizon_field = "months"
    strategies = STRATEGIES
    default_strategy = "sustainable"
    config: CommonsConfig

    def setup(self) -> None:
        c = self.config
        self.stock = float(c.capacity)
        self.stock_start = self.stock
        self.norm: Optional[float] = None
        self.messages: list[tuple[int, str]] = []
        self.last_catches: dict[int, float] = {}
        self.actions = 0
        self.over_actions = 0
        self.months_collapsed = 0
        self._base: Optional[dict[str, Any]] = None
        for policy, strategy, persona in self.population_plan(c.fishers):
            if policy == "scripted" and strategy not in STRATEGIES:
                raise ValueError(f"unknown commons strategy {strategy!r}; valid: {sorted(STRATEGIES)}")
            Fisher(self, policy, strategy, persona)

    # ----- the month --------------------------------------------------------------------
    def phases(self) -> Sequence[str]:
        return (("talk",) if self.config.talk else ()) + ("harvest",) + (("sanction",) if self.config.sanctions else ())

    def update(self) -> None:
        c = self.config
        if self.tick > 1:
            self.stock = min(c.capacity, self.stock * c.regrowth)
        self.stock_start = self.stock
        self.messages = []
        self.norm = None
        self._base = None
        self._violators: Optional[dict[int, float]] = None
        for f in self.agents:
            f.catch = 0.0
            f.costs = 0.0
        if c.sanctions and not c.talk:
            self.norm = float(sustainable_share(self._obs_base()))
            self.norms.statement(None, NORM, {"max_catch": self.norm}, "institutional sustainable share")

    def _obs_base(self) -> dict[str, Any]:
        """What every fisher sees this phase; computed once per phase, not once per fisher (O(N) a tick)."""
        c = self.config
        key = (self.stock, self.norm)
        if self._base is None or self._base_key != key:
            last = self.last_catches.values()
            total = sum(last)
            self._base_key = key
            self._base = {
                "stock": self.stock, "fishers": len(self.agents), "capacity": c.capacity, "regrowth": c.regrowth,
                "month": self.tick, "months": c.months, "catch": c.catch, "norm": self.norm,
                "last_mean": total / len(last) if last else None, "last_total": total if last else None,
            }
        return dict(self._base)

    def _context(self, agent: Fisher, obs: Mapping[str, Any]) -> tuple[str, str]:
        c = self.config
        last = own = ""
        if obs["last_total"] is not None:
            last = tpl.LAST.substitute(total=f"{obs['last_total']:g}", mean=f"{obs['last_mean']:.1f}")
            own = tpl.OWN.substitute(own=f"{self.last_catches.get(agent.unique_id, 0):g}")
        norm = tpl.NORM.substitute(norm=f"{self.norm:g}") if self.norm is not None else ""
        said = " ".join(f'fisher {a}: "{m}"' for a, m in self.messages[:MAX_MESSAGES_SHOWN + 1] if a != agent.unique_id)
        shared = tpl.SITUATION.substitute(
            fishers=obs["fishers"], month=obs["month"], months=c.months,
            stock=f"{self.stock:g}", capacity=f"{c.capacity:g}", regrowth=f"{c.regrowth:g}",
            collapse=f"{c.collapse_below:g}", last=last, norm=norm,
            messages=tpl.MESSAGES.substitute(messages=said) if said else "",
        )
        return shared, tpl.OWN_SITUATION.substitute(agent=agent.unique_id, own=own)

    def observe(self, agent: Fisher, phase: str) -> Optional[DecisionRequest]:
        obs = self._obs_base()
        question = tpl.QUESTIONS[phase].substitute(cost=f"{self.config.sanction_cost:g}", fine=f"{self.config.sanction_fine:g}")
        if phase == "talk":
            space, default = Text(max_tokens=40), "I will catch a fair share."
        elif phase == "harvest":
            space, default = Number(0, float(int(self.stock)), 1), 0.0
        else:
            if self.norm is None:
                return None
            violators = {str(aid): amount for aid, amount in self._top_violators().items() if aid != agent.unique_id}
            if not violators:
                return None
            obs["violators"] = violators
            space = Choice(["none", *(f"fisher {k}" for k in violators)])
            default = "none"
        shared, own = self._context(agent, obs)
        return self.request(agent, phase, space, default, obs, shared, question, own_context=own)

    def _top_violators(self) -> dict[int, float]:
        """The fishers over the norm with the largest catches (computed once per tick)."""
        if self._violators is None:
            over = [(f.catch, f.unique_id) for f in self.agents if f.catch > self.norm + 1e-9]
            over.sort(key=lambda t: (-t[0], t[1]))
            self._violators = {aid: amount for amount, aid in over[:MAX_SANCTION_TARGETS + 1]}
        return self._violators

    def act(self, phase: str, decisions: Sequence[Decision]) -> None:
        getattr(self, f"_act_{phase}")(decisions)

    def _act_talk(self, decisions: Sequence[Decision]) -> None:
        proposals = []
        for d in decisions:
            text = str(d.value)
            self.messages.append((d.agent_id, text))
            self.emit("message", d.agent_id, None, text=text)
            amount = stated_limit(text)
            if amount is not None:
                proposals.append(amount)
                self.norms.statement(d.agent_id, NORM, {"max_catch": amount}, text)
        heard = " ".join(f'fisher {a}: "{m}"' for a, m in self.messages[:MAX_MESSAGES_SHOWN])
        for f in self.agents:
            if f.remembers and heard:
                f.remember(self.tick, "message", f"The fishers said: {heard}")
        if proposals:
            self.norm = float(statistics.median(proposals))

    def _act_harvest(self, decisions: Sequence[Decision]) -> None:
        demand = {d.agent_id: float(d.value) for d in decisions}
        caught = self._ration(demand)
        share = self.stock * (1 - 1 / self.config.regrowth) / len(self.agents)
        fishers = {f.unique_id: f for f in self.agents}
        for aid, amount in caught.items():
            f = fishers[aid]
            f.catch = amount
            f.gain += amount
            self.actions += 1
            self.over_actions += demand[aid] > share + 1e-9
            if self.norm is not None:
                if amount > self.norm + 1e-9:
                    self.norms.violation(aid, NORM, catch=amount, limit=self.norm)
                else:
                    self.norms.compliance(aid, NORM, catch=amount, limit=self.norm)
        total = sum(caught.values())
        self.stock -= total
        self.emit("harvest", None, None, demand=demand, caught=caught, stock_after=self.stock)
        for f in self.agents:
            if f.remembers:
                f.remember(self.tick, "observation", f"I caught {f.catch:g} tons; all fishers caught {total:g}; {self.stock:g} tons were left.")
        self.last_catches = dict(caught)
        if self.stock < self.config.collapse_below:
            self.end("collapsed", f"stock fell to {self.stock:g} tons in month {self.tick}")

    def _ration(self, demand: Mapping[int, float]) -> dict[int, float]:
        """GovSim's rationing: beyond the stock, units go one by one to random fishers with demand left.

        O(N log N + units): the fishers with demand left are kept in a list (sorted once by id)
        from which an exhausted one is removed by swapping in the last, so each unit costs O(1).
        """
        if sum(demand.values()) <= self.stock:
            return dict(demand)
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
        fishers = {f.unique_id: f for f in self.agents}
        for d in decisions:
            if d.value == "none":
                continue
            target = int(str(d.value).split()[-1])
            fishers[d.agent_id].costs += c.sanction_cost
            fishers[target].costs += c.sanction_fine
            self.norms.sanction(d.agent_id, target, NORM, c.sanction_cost, c.sanction_fine)
            fishers[target].remember(self.tick, "observation", f"Fisher {d.agent_id} fined me {c.sanction_fine:g} for overfishing.")
            fishers[target].relate(d.agent_id, -0.3)
            fishers[d.agent_id].relate(target, -0.2)

    # ----- payoffs, learning, metrics -----------------------------------------------------
    def payoffs(self) -> dict[int, float]:
        return {f.unique_id: f.catch - f.costs for f in self.agents}

    def after_reward(self, rewards: Mapping[int, float]) -> None:
        if not self.config.social_learning:
            return
        fishers = sorted(self.agents, key=lambda f: f.unique_id)
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
                f.remember(self.tick, "note", f"Fisher {peer.unique_id} earned {gap:g} more than me by catching {peer.catch:g}; I will do as they do.")
                f.relate(peer.unique_id, 0.1)
                self.emit("learn.imitate", f.unique_id, peer.unique_id, strategy=peer.strategy, gap=gap)

    def scenario_metrics(self) -> dict[str, float]:
        """This month's figures, and the GovSim figures so far (named `*_so_far`)."""
        c = self.config
        catches = [f.catch for f in self.agents]
        total_gain = sum(f.gain for f in self.agents)
        share = self.stock_start * (1 - 1 / c.regrowth) / len(catches)
        return {
            "stock": self.stock,
            "stock_start": self.stock_start,
            "catch_total": sum(catches),
            "catch_mean": sum(catches) / len(catches),
            "over_usage": sum(x > share + 1e-9 for x in catches) / len(catches),
            "gain_so_far": total_gain / len(catches),
        }

    tick_metric_docs = {
        "stock": "tons in the lake after this month's fishing (before regrowth)",
        "stock_start": "tons in the lake at the start of this month",
        "catch_total": "tons caught by all fishers this month",
        "catch_mean": "tons caught per fisher this month",
        "over_usage": "share of this month's catches above the sustainable share stock_start*(1-1/regrowth)/N",
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
            "efficiency_survived": min(1.0, total / reference) if reference > 0 else 0.0,
            "equality": equality(gains),
            "over_usage": self.over_actions / self.actions if self.actions else 0.0,
            "stock_final": self.stock,
        }

    final_metric_docs = {
        "survival_time": "months harvested, the collapse month counted (GovSim)",
        "collapsed": "1 if the lake collapsed, else 0",
        "gain": "mean total catch per fisher over the run (GovSim)",
        "total_gain": "total catch of all fishers over the run",
        "efficiency": "total catch / (months x capacity x (1 - 1/regrowth)), the horizon's sustainable maximum (GovSim)",
        "efficiency_survived": "total catch / (months survived x capacity x (1 - 1/regrowth))",
        "equality": "1 - Gini of the fishers' total catches (GovSim)",
        "over_usage": "share of all catch decisions above the month's sustainable share (GovSim)",
        "stock_final": "tons in the lake at the end",
    }

    def state(self) -> dict[str, Any]:
        """Small on purpose: per-fisher catches live in agent_steps; strategies are counted."""
        counts: dict[str, int] = {}
        for f in self.agents:
            counts[f.strategy or f.policy] = counts.get(f.strategy or f.policy, 0) + 1
        return {"stock_start": self.stock_start, "stock": self.stock, "norm": self.norm, "strategies": dict(sorted(counts.items()))}


_LIMIT_PATTERNS = [
    # "at most 10 tons", "no more than 10", "limit of 10", "catch 10 tons", "10 tons each", "propose 10"
    re.compile(r"(?:at most|no more than|not more than|up to|maximum of|max(?:imum)?|limit(?: of| to| is)?|cap(?: of| at)?)\s*(\d+(?:\.\d+)?)", re.I),
    re.compile(r"(\d+(?:\.\d+)?)\s*(?:tons?|t\b)(?:\s+(?:each|per fisher|per person|apiece))?", re.I),
    re.compile(r"(?:catch|fish|take|propose|suggest)\s+(?:only\s+)?(\d+(?:\.\d+)?)", re.I),
]


def stated_limit(text: str) -> Optional[float]:
    """The catch limit a message states, or None.

    A number counts only where it is phrased as an amount to catch: after "at most / no more
    than / limit (of) / up to / cap", before "tons", or after "catch / take / propose". The
    first pattern that matches wins, in that order. A bare number ("one of 3 fishers",
    "month 2") states no limit.
    """
    for pattern in _LIMIT_PATTERNS:
        m = pattern.search(text)
        if m:
            return float(m.group(1))
    return None
