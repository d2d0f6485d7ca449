"""The donor game across generations ("Cultural Evolution of Cooperation among LLM Agents",
Vallinder & Hughes 2024).

A generation of `agents` players is split at random into two halves. It plays two games; each
starts every player with `endowment` units and lasts `rounds` rounds (hidden from the players).
In each round one half donates and the other receives, the halves alternating from round to
round; each donor is paired with a different recipient of the other half, never the same one
twice in a game. A donor gives a share of its resources; the recipient receives `multiplier`
times the gift. The second game swaps which half donates first, so roles balance. With
`punishment`, a donor may instead pay x to remove `punish_multiplier` x from the recipient.

After the two games the top half by average final resources survive; each of the others is
replaced by a newcomer that inherits from a random survivor (scripted: its strategy and
parameters with seeded Gaussian mutation; LLM: it writes a strategy at the start of the
generation, with the survivors' strategies in the prompt). Each game starts every player's reputation
trace afresh (decision contract 8 on; before, only each generation did: `editions`).

One tick is one round of one game: a run has generations x 2 x rounds ticks (`total_rounds`).

This module holds the rounds: their pairing, selection and inheritance, what each phase asks and does. Beside
it: the config (`config`), the players (`players`), the prompt text (`prompts`, `templates`; Vallinder & Hughes's
own, `prompts: vh2024`, in `vh2024`), the strategies (`strategies`), the figures it reports (`report`) and the
pieces that changed between decision contracts (`editions`, `legacy`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

import numpy as np

from scenarios.donor import prompts, report, vh2024
from scenarios.donor import templates as tpl
from scenarios.donor.config import DonorConfig
from scenarios.donor.editions import EDITIONS, DonorEdition
from scenarios.donor.players import Donor
from scenarios.donor.probes import PROBES
from scenarios.donor.strategies import STRATEGIES
from sim.contracts.strategy import columnar_form
from sim.core.contracts import Decision, DecisionRequest, Event, RequestBatch, columns_of
from sim.core.spaces import Choice, Number, Text
from sim.tick.model import SocietyModel

NORM = "reciprocity"  # the norm a costly punishment enforces (norm.sanction events)
STRATEGY_NORM = "donor_strategy"  # an LLM player's written strategy (norm.statement events)
_ACTION = Choice(["give", "punish"])  # what a donor does with punishment on
_PERCENT = Number(0, 100, 1)  # the share a donor gives, in whole percents (the platform's prompts)


class DonorModel(SocietyModel):
    """The donor game. Phases per round: strategy (LLM, first round of a generation), action (with punishment), donate."""

    name = "donor"
    description = "Donor game across generations: indirect reciprocity, selection, inheritance, costly punishment"
    Config = DonorConfig
    horizon_field = "total_rounds"
    strategies = STRATEGIES
    probes = PROBES  # validity probes (`societas probe`): sim.tick.probe
    default_strategy = "fixed"
    tick_noun = "round"
    #: read as the rounds go (agents, rounds, the first generation's strategy and parameters, and the
    #: reputation trace's depth shape the players and their clock at the start)
    fork_fields = frozenset({"endowment", "multiplier", "punishment", "punish_multiplier", "mutation",
                             "reasoning", "goal", "reciprocity_cues", "strategy_tokens"})
    fork_conditions = {  # what the world reads only under some condition (sim.tick.model.SocietyModel)
        **dict.fromkeys(("reasoning", "goal", "reciprocity_cues", "strategy_tokens"), ({"@policy": "llm"},)),
        "punish_multiplier": ({"punishment": True},),
    }
    horizon_bounds = frozenset({"generations"})  # bounds total_rounds; read by nothing once the world is built
    editions = EDITIONS  # what changed between decision contracts: scenarios.donor.editions
    tick_metric_docs = report.TICK_METRIC_DOCS
    final_metric_docs = report.FINAL_METRIC_DOCS
    component_docs = report.COMPONENT_DOCS
    metric_units = report.UNITS
    clock_metrics = report.CLOCK_METRICS
    config: DonorConfig
    edition: DonorEdition

    def setup(self) -> None:
        c = self.config
        params = {"fraction": c.fraction, "threshold": c.threshold, "punish_fraction": c.punish_fraction}
        for k, (policy, strategy, persona) in enumerate(self.population_plan(c.agents), start=1):
            Donor(self, policy, strategy, persona, params, generation=1, index=k)
        self.paper = c.prompts == "vh2024"  # Vallinder & Hughes's prompts (scenarios.donor.vh2024)
        self.generation = self.game = self.round = 0  # 1-based once the first tick starts
        self.halves: tuple[list[Donor], list[Donor]] = ([], [])
        self.schedule: dict[int, tuple[list[Donor], list[int]]] = {}
        self.pairs: dict[int, Donor] = {}  # donor id -> recipient, this round
        self.modes: dict[int, str] = {}  # donor id -> give / punish, this round
        self.deltas: dict[int, float] = {}
        self.survivor_texts: list[str] = []
        self.gen_resources: dict[int, float] = {}  # generation -> average final resources
        self.gen_given: dict[int, list[float]] = {}  # generation -> [sum of gift shares, donor decisions]
        self.decisions = self.punishments = 0
        self.shares_given = 0.0
        self.round_given: list[float] = []
        self.round_punish = 0
        self.round_units = 0.0
        self._rules_key: Optional[tuple[int, int]] = None  # the generation's rules text, made once (_rules)
        self._rules_text = ""
        # the action and donate phases are one RequestBatch when every player is scripted with a columnar strategy (its
        # newcomers inherit their parents' policy and strategy; the engine asks one by one anyway where a subclass makes
        # requests or applies decisions its own way: SocietyModel.__init_subclass__)
        self._memories = any(a.remembers for a in self.agents)  # (newcomers play their parents' policy)
        self._columnar = not self.paper and all(
            a.policy == "scripted" and a.strategy in self.strategies and columnar_form(self.strategies[a.strategy]) is not None
            for a in self.agents)

    # ----- the clock: generation, game, round -------------------------------------------
    def _position(self, tick: int) -> tuple[int, int, int]:
        r = self.config.rounds
        t = tick - 1
        return t // (2 * r) + 1, (t % (2 * r)) // r + 1, t % r + 1

    def update(self) -> None:
        gen, game, rnd = self._position(self.tick)
        if gen != self.generation:
            if self.generation:
                self._turnover(gen)
            self.generation = gen
            self._start_generation()
        if rnd == 1:
            self._start_game(game)
        self.game, self.round = game, rnd
        self.deltas = {a.unique_id: 0.0 for a in self.agents}
        self.gifts: dict[int, float] = {}  # units given and received this round (reward components)
        self.received: dict[int, float] = {}
        self.modes = {}
        self.round_given, self.round_punish, self.round_units = [], 0, 0.0
        # halves donate in turn; the second game swaps which half starts
        donors_half = (rnd - 1 + game - 1) % 2
        donors, shifts = self.schedule[donors_half]
        others = self.halves[1 - donors_half]
        k = shifts[(rnd - 1) // 2]
        self.pairs = {d.unique_id: others[(i + k) % len(others)] for i, d in enumerate(donors)}

    def _start_generation(self) -> None:
        """Split the players into two random halves; forget the last generation's reputations."""
        players = sorted(self.agents, key=lambda a: a.unique_id)
        self.random.shuffle(players)
        m = len(players) // 2
        self.halves = (players[:m], players[m:])
        for a in players:
            a.finals = []
            a.actions.clear()
        self.gen_given.setdefault(self.generation, [0.0, 0])

    def _start_game(self, game: int) -> None:
        """Reset resources (and, decision contract 8 on, reputations: the run's edition); draw each half's recipient
        order and its round shifts (distinct: no repeats)."""
        for a in self.agents:
            self.edition.start_game(a, self.config.endowment)
        m = len(self.halves[0])
        self.schedule = {}
        for h in (0, 1):
            donors = list(self.halves[h])
            self.random.shuffle(donors)
            self.schedule[h] = (donors, self.random.sample(range(m), m))

    def _turnover(self, gen: int) -> None:
        """Selection and inheritance: the top half by average final resources survive; newcomers inherit."""
        c = self.config
        ranked = sorted(self.agents, key=lambda a: a.unique_id)
        self.random.shuffle(ranked)  # ties broken at random, seeded
        ranked.sort(key=lambda a: -a.score)
        keep = len(ranked) // 2
        survivors, dropped = ranked[:keep], ranked[keep:]
        self.survivor_texts = [a.strategy_text for a in survivors if a.strategy_text]
        self.emit("generation", None, None, generation=gen, survivors=[a.unique_id for a in survivors],
                  dropped=[a.unique_id for a in dropped], scores={a.unique_id: round(a.score, 6) for a in ranked})
        for a in dropped:
            a.remove()
        for k, _ in enumerate(dropped, start=1):
            parent = self.random.choice(survivors)
            params = dict(parent.params)
            for key in ("fraction", "threshold"):
                params[key] = min(1.0, max(0.0, params[key] + self.random.gauss(0.0, c.mutation))) if c.mutation else params[key]
            child = Donor(self, parent.backend, parent.strategy or "", parent.persona, params, gen, parent.unique_id, index=k)
            self.emit("learn.inherit", child.unique_id, parent.unique_id, strategy=parent.strategy,
                      fraction=params["fraction"], threshold=params["threshold"])
        for a in survivors:
            a.remember(self.tick, "note", f"I survived generation {gen - 1} with {a.score:g} units on average.")

    # ----- decisions -----------------------------------------------------------------------
    def phases(self) -> Sequence[str]:
        first = self.round == 1 and self.game == 1
        write = first and any(a.policy == "llm" and a.strategy_text is None for a in self.agents)
        return (("strategy",) if write else ()) + (("action",) if self.config.punishment else ()) + ("donate",)

    def _rules(self) -> str:
        """The generation's rules text, made once per generation (the survivors' strategies are the generation's)."""
        shown = self.survivor_texts[:prompts.MAX_SURVIVOR_STRATEGIES]
        key = (self.generation, len(shown))
        if self._rules_key != key:
            self._rules_key = key
            self._rules_text = prompts.rules(self.config, self.generation,
                                             [self.quoted(t, prompts.STRATEGY_CHARS) for t in shown])
        return self._rules_text

    def trace(self, recipient: Donor) -> list[dict[str, Any]]:
        """The recipient's last action, then its partner's action before that, ... (`trace_depth` steps)."""
        out: list[dict[str, Any]] = []
        current: Optional[Donor] = recipient
        before = self.tick
        ids = self.agent_map()
        for _ in range(self.config.trace_depth):
            if current is None:
                break
            act = next((x for x in reversed(current.actions) if x[0] < before), None)
            if act is None:
                out.append({"agent": current.unique_id, "kind": None})
                break
            tick, kind, share, amount, to = act
            out.append({"agent": current.unique_id, "kind": kind, "share": share, "amount": amount, "to": to, "tick": tick})
            before, current = tick, ids.get(to)
        return out

    def last_gift(self, recipient: Donor) -> Optional[float]:
        """The share of its resources the recipient gave in its last gift (punishments skipped); None if unseen."""
        if not self.config.trace_depth:
            return None
        return next((x[2] for x in reversed(recipient.actions) if x[1] == "give"), None)

    def observe(self, agent: Donor, phase: str) -> Optional[DecisionRequest]:
        return _REQUESTS[phase](self, agent)

    def observe_batch(self, phase: str) -> Optional[RequestBatch]:
        """A round's action and donate phases as one batch, in columns, when every donor is scripted with a strategy
        that answers in columns (not under the paper's prompts: each donor's space there is its own resources); the
        requests are those `observe` gives (each built by it when asked for), in its order."""
        if phase not in ("action", "donate") or not self._columnar:
            return None
        pairs, modes = self.pairs, self.modes
        donors = [a for a in self.agents if a.unique_id in pairs]
        params = [a.params for a in donors]
        columns = {key: np.fromiter((p[key] for p in params), np.float64, len(donors))
                   for key in ("fraction", "threshold", "punish_fraction")}
        columns["last_gift"] = np.fromiter((self._last_share(pairs[a.unique_id]) for a in donors), np.float64, len(donors))
        if phase == "action":
            asked, space, default = self._request_action, _ACTION, "give"
        else:
            columns["action"] = np.array([modes.get(a.unique_id, "give") for a in donors], dtype=object)
            asked, space, default = self._request_donate, _PERCENT, 0.0
        shared = {"punishment": self.config.punishment, "round": self.round, "game": self.game, "generation": self.generation}
        return self.batch_request(donors, phase, space, default, shared, "", columns=columns,
                                  build=lambda i: asked(donors[i]))

    def _last_share(self, recipient: Donor) -> float:
        """`last_gift(recipient)` as a float, NaN for None (a column of the batch); its latest action first, the usual
        answer."""
        actions = recipient.actions
        if actions and actions[-1][1] == "give" and self.config.trace_depth:
            return actions[-1][2]
        last = self.last_gift(recipient)
        return math.nan if last is None else last

    def _request_strategy(self, agent: Donor) -> Optional[DecisionRequest]:
        """An LLM player without a strategy writes one (at the start of its generation)."""
        if agent.policy != "llm" or agent.strategy_text is not None:
            return None
        space, obs = Text(max_tokens=self.config.strategy_tokens), {"generation": self.generation}
        default = "I give half of my resources to those who gave before."
        if self.paper:  # the paper's prompt: generation 1's, or a newcomer's with the survivors' strategies
            question, answer = self._paper_strategy_prompt(agent)
            return self.request(agent, "strategy", space, default, obs, "", question, answer_prompt=answer,
                                system=self._paper_system())
        context = self._rules() + tpl.SELF.substitute(agent=agent.unique_id, strategy="")
        return self.request(agent, "strategy", space, default, obs, context, tpl.QUESTIONS["strategy"].substitute())

    def _paper_system(self) -> str:
        return vh2024.system(self.config.endowment, self.config.multiplier)

    def _paper_strategy_prompt(self, agent: Donor) -> tuple[str, str]:
        """Vallinder & Hughes's strategy prompt for `agent` and how it asks to answer: generation 1's, or a newcomer's,
        which holds every survivor's strategy (the survivors keep theirs and are not asked)."""
        if self.generation == 1:
            return vh2024.STRATEGY_FIRST.format(name=agent.name), vh2024.STRATEGY_FIRST_ANSWER
        shown = vh2024.strategies_list([self.quoted(t) for t in self.survivor_texts])
        return vh2024.STRATEGY_LATER.format(name=agent.name, strategies=shown), vh2024.STRATEGY_LATER_ANSWER

    def _request_action(self, agent: Donor) -> Optional[DecisionRequest]:
        """With punishment: a donor gives to its recipient or pays to punish it."""
        round_ = self._round_of(agent)
        if round_ is None:
            return None
        recipient, obs, context = round_
        question = tpl.QUESTIONS["action"].substitute(recipient=recipient.unique_id)
        return self.request(agent, "action", _ACTION, "give", obs, context, question,
                            reason_tokens=self.config.reasoning)

    def _request_donate(self, agent: Donor) -> Optional[DecisionRequest]:
        """The share of its resources a donor gives (or, having chosen to punish, pays to punish)."""
        round_ = self._round_of(agent)
        if round_ is None:
            return None
        recipient, obs, context = round_
        mode = self.modes.get(agent.unique_id, "give")
        obs["action"] = mode
        if self.paper:  # the paper's question: how many units, between 0 and what the donor has
            own, question = self._paper_donation_prompt(agent, recipient, obs["trace"])
            return self.request(agent, "donate", Number(0, round(agent.resources, 2), 0), 0.0, obs, "", question, own,
                                reason_tokens=self.config.reasoning, system=self._paper_system(),
                                answer_prompt=vh2024.DONATION_ANSWER)
        question = tpl.QUESTIONS[mode].substitute(recipient=recipient.unique_id)
        return self.request(agent, "donate", _PERCENT, 0.0, obs, context, question, reason_tokens=self.config.reasoning)

    def _paper_donation_prompt(self, agent: Donor, recipient: Donor, steps: Sequence[dict[str, Any]]) -> tuple[str, str]:
        """Vallinder & Hughes's donation prompt: the donor's situation (its strategy, the round of the game, the
        recipient's units and its trace `steps`), and the question."""
        ids, rounds = self.agent_map(), self.config.rounds
        trace = vh2024.trace_text(steps, lambda aid: ids[aid].name if aid in ids else str(aid),
                                  lambda tick: (tick - 1) % rounds + 1 if tick >= 1 else 0)
        recall = vh2024.RECALL.format(strategy=self.quoted(agent.strategy_text)) if agent.strategy_text else ""
        units = vh2024.units(agent.resources)
        own = vh2024.DONATION.format(name=agent.name, recall=recall, generation=self.generation, round=self.round,
                                     recipient=recipient.name, recipient_units=vh2024.units(recipient.resources),
                                     trace=trace, units=units)
        return own, vh2024.DONATION_QUESTION.format(units=units)

    def _round_of(self, agent: Donor) -> Optional[tuple[Donor, dict[str, Any], str]]:
        """A donor's recipient this round, what it observes of it, and the prompt text (an LLM donor's only: a scripted
        one reads the observation); None when it does not donate."""
        recipient = self.pairs.get(agent.unique_id)
        if recipient is None:
            return None
        trace = self.trace(recipient)
        obs = {
            **agent.params, "resources": agent.resources, "recipient": recipient.unique_id,
            "recipient_resources": recipient.resources, "trace": trace, "punishment": self.config.punishment,
            "last_gift": self.last_gift(recipient),
            "round": self.round, "game": self.game, "generation": self.generation,
        }
        if self.paper:
            obs["in_units"] = True  # the gift is asked in units (strategies.gift)
            return recipient, obs, ""
        if agent.policy != "llm":
            return recipient, obs, ""
        own = tpl.OWN_STRATEGY.substitute(text=self.quoted(agent.strategy_text)) if agent.strategy_text else ""
        context = self._rules() + tpl.SELF.substitute(agent=agent.unique_id, strategy=own) + tpl.ROUND.substitute(
            round=self.round, resources=f"{agent.resources:.2f}", recipient=recipient.unique_id,
            recipient_resources=f"{recipient.resources:.2f}", trace=prompts.trace_text(trace))
        return recipient, obs, context

    def act(self, phase: str, decisions: Sequence[Decision]) -> None:
        _ACTS[phase](self, decisions)

    def _act_strategy(self, decisions: Sequence[Decision]) -> None:
        for d in decisions:
            agent = self.agent_map()[d.agent_id]
            text = vh2024.parse_strategy(str(d.value)) if self.paper else str(d.value).strip()
            agent.strategy_text = text or "(no strategy)"
            self.norms.statement(d.agent_id, STRATEGY_NORM, {"generation": self.generation}, agent.strategy_text)

    def _act_action(self, decisions: Sequence[Decision]) -> None:
        self.modes.update({d.agent_id: str(d.value) for d in decisions})

    def _act_donate(self, decisions: Sequence[Decision]) -> None:
        """Each donor, in the decisions' order, gives its share of resources (the recipient gets `multiplier` x), or
        pays it to punish (`_punish`). One loop over the columns: what a gift changes, in the order it changes it."""
        c, tick, modes = self.config, self.tick, self.modes
        players, pairs, deltas, gifts, received_by = self.agent_map(), self.pairs, self.deltas, self.gifts, self.received
        gen, given, events = self.gen_given[self.generation], self.round_given, self.events
        multiplier, cues, memories = c.multiplier, c.reciprocity_cues, self._memories
        ids, values = columns_of(decisions)
        gen[1] += len(ids)
        self.decisions += len(ids)
        for aid, value in zip(ids, values):
            donor, recipient = players[aid], pairs[aid]
            share = self._share(donor, float(value)) if self.paper else float(value) / 100.0
            rid = recipient.unique_id
            x = share * donor.resources
            donor.resources -= x
            deltas[aid] -= x
            if modes and modes.get(aid) == "punish":
                self._punish(donor, recipient, x)
                donor.actions.append((tick, "punish", 0.0, x, rid))
                continue
            received = multiplier * x
            gifts[aid] = gifts.get(aid, 0.0) + x
            received_by[rid] = received_by.get(rid, 0.0) + received
            recipient.resources += received
            deltas[rid] += received
            gen[0] += share
            self.shares_given += share
            given.append(share)
            self.round_units += x
            events.append(Event("donation", aid, rid, {"share": share, "amount": x, "received": received}))
            if memories:  # (no player keeps a memory in a game of scripted donors: no line is even written)
                if donor.remembers:
                    donor.remember(tick, "observation", f"I gave {x:.2f} units ({100 * share:.0f}%) to player {rid}.")
                if cues and recipient.remembers:
                    recipient.remember(tick, "observation", f"Player {aid} gave me {received:.2f} units.")
                if share > 0:
                    recipient.relate(aid, 0.2)
            donor.actions.append((tick, "give", share, x, rid))

    def _share(self, donor: Donor, value: float) -> float:
        """The share of its resources a donor's answer gives: a percent, or units under the paper's prompts."""
        if not self.paper:
            return value / 100.0
        return min(1.0, value / donor.resources) if donor.resources > 0 else 0.0

    def _punish(self, donor: Donor, recipient: Donor, x: float) -> None:
        """The donor has paid `x` to punish: the recipient loses `punish_multiplier` x (at most what it has)."""
        c = self.config
        removed = min(c.punish_multiplier * x, recipient.resources)
        recipient.resources -= removed
        self.deltas[recipient.unique_id] -= removed
        self.punishments += 1
        self.round_punish += 1
        self.round_given.append(0.0)
        self.norms.sanction(donor.unique_id, recipient.unique_id, NORM, cost=x, fine=removed)
        if donor.remembers:  # (a scripted donor keeps no memory: the line is not even written)
            donor.remember(self.tick, "observation", f"I paid {x:.2f} units to punish player {recipient.unique_id}.")
        if c.reciprocity_cues and recipient.remembers:
            recipient.remember(self.tick, "observation", f"Player {donor.unique_id} punished me: I lost {removed:.2f} units.")
        recipient.relate(donor.unique_id, -0.3)

    # ----- payoffs, bookkeeping, metrics --------------------------------------------------
    def payoffs(self) -> dict[int, float]:
        return dict(self.deltas)

    def reward_components(self) -> dict[str, dict[int, float]]:
        """Gifts made and received this round, and each player's standing (its image: its latest gift's share)."""
        reputation = {a.unique_id: a.actions[-1][2] for a in self.agents if a.actions}
        return {"given": dict(self.gifts), "received": dict(self.received), "reputation": reputation}

    def after_reward(self, rewards: Mapping[int, float]) -> None:
        if self.round != self.config.rounds:
            return
        for a in self.agents:
            a.finals.append(a.resources)
            a.remember(self.tick, "note", f"Game {self.game} ended: I had {a.resources:.2f} units.")
        scores = [a.score for a in self.agents]
        self.gen_resources[self.generation] = sum(scores) / len(scores)

    def scenario_metrics(self) -> dict[str, float]:
        """This round's figures."""
        return report.round_metrics(self)

    def agent_profile(self, agent: Any) -> dict[str, Any]:
        """A player: its generation and the parent whose strategy it inherited."""
        return {**super().agent_profile(agent), "role": "donor", "generation": int(agent.generation),
                "parent": agent.parent}

    def final_metrics(self) -> dict[str, Optional[float]]:
        """The paper's score per generation, and donation and punishment over the run."""
        return report.run_metrics(self)

    def state(self) -> dict[str, Any]:
        """Small on purpose: per-player resources live in agent_steps; strategies are counted."""
        counts: dict[str, int] = {}
        for a in self.agents:
            key = a.strategy or a.policy
            counts[key] = counts.get(key, 0) + 1
        fractions = [a.params["fraction"] for a in self.agents]
        return {"generation": self.generation, "game": self.game, "round": self.round,
                "strategies": dict(sorted(counts.items())), "mean_fraction": sum(fractions) / len(fractions)}



#: what each phase asks a player, and how the phase's decisions apply
_REQUESTS: dict[str, Callable[[DonorModel, Donor], Optional[DecisionRequest]]] = {
    "strategy": DonorModel._request_strategy, "action": DonorModel._request_action, "donate": DonorModel._request_donate,
}
_ACTS: dict[str, Callable[[DonorModel, Sequence[Decision]], None]] = {
    "strategy": DonorModel._act_strategy, "action": DonorModel._act_action, "donate": DonorModel._act_donate,
}
