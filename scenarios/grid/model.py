"""Spatial social dilemmas on a Mesa grid: Gathering and Cleanup, played step by step or by synthesised code.

One tick is one environment step for every agent (`scenarios.grid.world` has the rules). A run plays
`iterations` episodes of `episode_steps` steps; each episode starts the world afresh. Agents decide
through the decision layer like every scenario's: scripted strategies (`scenarios.grid.strategies`), an
LLM choosing each step's action (`--policy llm`), or — the policy-synthesis loop of arXiv 2603.19453
(`--policy synthesis`) — a Python program an LLM writes once per episode and the sandbox
(`agents.sandbox`) runs for every synthesis agent at every step:

1. at an episode's first step (up to `iterations`) the LLM is shown the rules, the policy API
   (`scenarios.grid.api.DOC`), the program in use and, per the config's `feedback`, the earlier episodes'
   results: `sparse` the mean reward per agent, `dense` also efficiency, equality, sustainability and
   peace; it answers with a program;
2. the program is checked (`agents.sandbox.checks`); a refused one is sent back with its problems, up to
   `code_retries` times; if none is accepted the previous program stays (at first: none, agents stand);
3. the sandbox runs it for the episode: an agent whose call fails, returns no action, tries to write its
   observation (a reward hack) or to reach outside (the program is then stopped for the episode) takes the
   default action `stand`, and the decision layer records the replacement and its reason.

Every version of the code (`policy.code` events), its results (`policy.scores`) and every stop or hack
attempt (`policy.incident`) are stored with the run; the app's Policies page shows them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Optional

import numpy as np
from mesa.discrete_space import CellAgent

from sim.contracts.agent import SocietyAgent
from agents.sandbox.checks import check, extract
from scenarios.grid import api
from scenarios.grid import maps as grid_maps
from scenarios.grid import report
from scenarios.grid.editions import EDITIONS
from scenarios.grid.probes import CLEANUP_PROBES, GATHERING_PROBES
from scenarios.grid.strategies import STRATEGIES, GridView
from scenarios.grid.world import ACTIONS, INDEX, STAND, UNREACHABLE, GridWorld, Rules, move
from sim.reward.components import nonzero
from sim.core.contracts import Decision, DecisionRequest, RequestBatch
from sim.core.spaces import Choice, Text
from sim.core.text import code_block, quote
from sim.reward.metrics import PerolatTracker
from scenarios.grid.config import FIXES, CleanupConfig, GatheringConfig, GridConfig
from sim.tick.model import SocietyModel

DEFAULT_CODE = "def policy(obs):\n    return STAND\n"
WRITE_PHASES = ("write", *FIXES)
API_FILE = str(Path(api.__file__).resolve())
#: what an incident's reason starts with (the code backend's fallback reasons), by kind
INCIDENT_KINDS = ("error", "stopped", "hack", "invalid", "no program")


class Forager(SocietyAgent, CellAgent):
    """An agent on the grid: its Mesa cell follows its position in the world's arrays."""


class GridModel(SocietyModel):
    """What Gathering and Cleanup share: episodes, the act phase, the synthesis loop, the metrics."""

    Config: ClassVar[type[GridConfig]] = GridConfig
    horizon_field = "steps"
    strategies = STRATEGIES
    default_strategy = "greedy"
    tick_noun = "step"
    editions = EDITIONS  # what changed between decision contracts: scenarios.grid.editions
    maps: ClassVar[dict[str, str]] = {}
    cleanup: ClassVar[bool] = False
    synthesis = True
    #: rule fields a fork may change (read every step), and the synthesis settings (read by synthesis runs only)
    fork_fields = frozenset({"beam", "beam_length", "beam_width", "hits_to_tag", "timeout_steps", "code_tokens",
                             "code_retries", "step_timeout", "cpu_limit", "memory_limit", "sandbox", "iterations"})
    fork_conditions = dict.fromkeys(("code_tokens", "code_retries", "step_timeout", "cpu_limit", "memory_limit",
                                     "sandbox", "iterations"), ({"@policy": "synthesis"},))
    horizon_bounds = frozenset({"iterations"})  # bounds steps (and names the episodes in the synthesis prompt)
    tick_metric_docs = report.TICK_METRIC_DOCS
    final_metric_docs = report.FINAL_METRIC_DOCS
    metric_units = report.UNITS
    component_docs = report.COMPONENT_DOCS
    config: GridConfig

    def setup(self) -> None:
        c = self.config
        self.grid_map = grid_maps.load(c.map, c.maps or self.maps)
        plan = self.population_plan(c.agents)
        self.world = GridWorld(self.grid_map, self._rules(), c.agents, self.rng, self.random)
        for policy, strategy, persona in plan:
            Forager(self, policy, strategy, persona)
        self.foragers: tuple[Forager, ...] = tuple(sorted(self.agents, key=lambda a: a.unique_id))
        self.index = {a.unique_id: i for i, a in enumerate(self.foragers)}
        self.strategy_of = {a.unique_id: a.strategy for a in self.foragers if a.policy == "scripted"}
        self.designer = next((a for a in self.foragers if a.policy == "synthesis"), None)
        self.uniform = len({a.policy for a in self.foragers}) == 1 and self.foragers[0].policy != "llm"
        self.episode = 0
        self.episode_cache: dict[str, Any] = {}
        self.ep_perolat = PerolatTracker(c.agents)
        self.ep_returns = np.zeros(c.agents)
        self.ep_incidents: Counter = Counter()
        self.results: list[dict[str, Any]] = []  # synthesis: each episode's scores
        self.program: Optional[dict[str, Any]] = None  # the program the synthesis agents run
        self.versions = 0
        self.accepted = 0
        self.refused_problems: list[str] = []
        self._static: Optional[dict[str, Any]] = None
        self._state: Optional[dict[str, Any]] = None
        self._view: Optional[GridView] = None
        self._rewards = np.zeros(c.agents)
        self.totals: Counter = Counter()
        self.fallbacks_this_step = 0

    # ----- episodes ----------------------------------------------------------------------------------------
    def _rules(self) -> Rules:
        c = self.config
        return Rules(beam_length=c.beam_length, beam_width=c.beam_width, hits_to_tag=c.hits_to_tag,
                     timeout_steps=c.timeout_steps, beam=c.beam, **self._game_rules())

    def _game_rules(self) -> dict[str, Any]:
        return {}

    def step_in_episode(self) -> int:
        return (self.tick - 1) % self.config.episode_steps + 1

    def writes_now(self) -> bool:
        """Whether this tick starts an episode whose program the LLM writes."""
        return self.designer is not None and self.step_in_episode() == 1 and self.episode <= self.config.iterations

    def update(self) -> None:
        self.world.rules = self._rules()
        if self.step_in_episode() == 1:
            self.episode += 1
            self.world.reset()
            self.world.place(self.foragers)
            self.episode_cache = {}
            self.ep_perolat = PerolatTracker(self.config.agents)
            self.ep_returns = np.zeros(self.config.agents)
            self.ep_incidents = Counter()
            self._static = None
            self._attempt_failed = False
            self._problems: list[str] = []
            if self.designer is not None and self.episode == 1 and self.config.seed_code:
                self._seed_program()
        self._state = None
        self._view = None
        self.fallbacks_this_step = 0

    def _seed_program(self) -> None:
        path = Path(self.config.seed_code or "")
        try:
            code = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            code = f"# cannot read {path.name}: {type(exc).__name__}\n"
        self._take_program(code, "seed_code", attempt=0, answer=None, fallback=False)

    def phases(self) -> Sequence[str]:
        if self.writes_now() and not (self.episode == 1 and self.config.seed_code):
            return ("write", *FIXES[:self.config.code_retries], "act")
        return ("act",)

    # ----- requests ----------------------------------------------------------------------------------------
    def view(self) -> GridView:
        if self._view is None:
            self._view = GridView(self.world, self.index, self.strategy_of, self.episode_cache, self.cleanup,
                                  self.step_in_episode())
        return self._view

    def _space(self) -> Choice:
        cached = self.__dict__.get("_action_space")
        if cached is None:
            cached = self.__dict__["_action_space"] = Choice(ACTIONS[:9 if self.cleanup else 8])
        return cached

    def program_observation(self) -> dict[str, Any]:
        """What the code backend needs this step: the program, the episode's map, the state, who is who."""
        w = self.world
        if self._static is None:
            self._static = api.encode_static(w.walls, w.apple_pos, self.grid_map.river, self.grid_map.stream,
                                             {"beam_length": w.rules.beam_length, "beam_width": w.rules.beam_width,
                                              "hits_to_tag": w.rules.hits_to_tag, "timeout_steps": w.rules.timeout_steps},
                                             self.config.episode_steps, self.name)
        if self._state is None:
            self._state = api.encode_state(w.pos, w.orient, w.timeout, w.hits, w.alive_apples(), w.waste, self.step_in_episode())
        c = self.config
        program = None if self.program is None else MappingProxyType(self.program)  # read-only: the world's own
        return {"program": program, "static": self._static, "state": self._state, "index": MappingProxyType(self.index),
                "actions": self._space().options, "episode": self.episode,
                "limits": {"memory_mb": c.memory_limit, "cpu_s": c.cpu_limit, "step_s": c.step_timeout}}

    def _observation(self, policy: str) -> dict[str, Any]:
        return self.program_observation() if policy == "synthesis" else {"view": self.view()}

    def observe(self, agent: Forager, phase: str) -> Optional[DecisionRequest]:
        if phase in WRITE_PHASES:
            if agent is not self.designer or (phase != "write" and not self._attempt_failed):
                return None
            return self._write_request(agent, phase)
        i = self.index[agent.unique_id]
        if self.world.timeout[i] > 0:
            return None  # tagged out: no decision
        if agent.policy == "llm":
            context, own = self._llm_context(i)
            return self.request(agent, phase, self._space(), "stand", {"view": self.view()}, context,
                                "Which action do you take this step?", own_context=own)
        return self.request(agent, phase, self._space(), "stand", self._observation(agent.policy), "", "")

    def observe_batch(self, phase: str) -> Optional[RequestBatch]:
        if phase != "act" or not self.uniform:
            return None
        active = tuple(a for a, out in zip(self.foragers, self.world.timeout.tolist()) if out == 0)
        if len(active) == len(self.foragers):
            active = self.foragers
        return self.batch_request(active, phase, self._space(), "stand", self._observation(self.foragers[0].policy), "")

    def _llm_context(self, i: int) -> tuple[str, str]:
        w = self.world
        r, c = int(w.pos[i, 0]), int(w.pos[i, 1])
        field = self.view().field("apple")
        dist = field[r, c]
        step = move(w.descend(field, i), int(w.orient[i]))
        apple = (f"The nearest apple is {int(dist)} steps away; the first step there is {ACTIONS[step]}."
                 if dist != UNREACHABLE else "No apple can be reached now.")
        rivals = len(w.in_beam(i))
        waste = f" The river's waste share is {w.waste_share():.0%}; apples stop growing at {w.rules.depletion:.0%}." if self.cleanup else ""
        shared = (f"A {self.name} game on a {w.height}x{w.width} grid: apples are worth 1; live apples {int(w.alive_apples().sum())}."
                  f"{waste} Step {self.step_in_episode()} of {self.config.episode_steps}.")
        facing = ("north", "east", "south", "west")[int(w.orient[i])]
        own = (f"You are at row {r}, column {c}, facing {facing}. {apple} Rivals in your beam now: {rivals}."
               f" Actions: {', '.join(self._space().options)}.")
        return shared, own

    # ----- synthesis: writing the program ------------------------------------------------------------------
    def _write_request(self, agent: Forager, phase: str) -> DecisionRequest:
        c = self.config
        space = Text(max_tokens=c.code_tokens, label="a Python program defining policy(obs) in a ```python block")
        context = self._rules_text() + "\n\nThe policy API:\n" + api.DOC.format(clean=", CLEAN=8 (cleaning beam)" if self.cleanup else "")
        own = self._program_text()
        if phase != "write":
            own += "\nYour last answer was refused: " + "; ".join(quote(p, 200) for p in self._problems[:5]) + ". Fix it."
        question = (f"Iteration {self.episode} of {c.iterations}: write {'an improved' if self.program else 'the'} policy. "
                    f"All {sum(a.policy == 'synthesis' for a in self.foragers)} agents run your code; maximise the "
                    "reward per agent. Answer with one ```python block defining policy(obs).")
        return DecisionRequest(
            agent_id=agent.unique_id, tick=self.tick, phase=phase, space=space, default=DEFAULT_CODE, backend="llm",
            strategy=None, observation={"iteration": self.episode}, context=context, question=question,
            persona="", memory="", feedback=self._feedback_text(), seed=self.seeds.seed_for(self.tick, agent.unique_id, phase),
            own_context=own)

    def _rules_text(self) -> str:
        w, c = self.world.rules, self.config
        others = sum(a.policy != "synthesis" for a in self.foragers)
        lines = [f"You design the policy of the agents of {self.name}, a sequential social dilemma on a "
                 f"{self.world.height}x{self.world.width} grid: {c.agents} agents, {c.episode_steps} steps an episode.",
                 "Agents collect apples (+1 each)."]
        if self.cleanup:
            lines.append(f"Apples grow only while the river is clean: waste accumulates in the river, and apples stop "
                         f"growing once waste covers {w.depletion:.0%} of it. CLEAN fires a cleaning beam ({w.beam_length} "
                         f"ahead, {w.beam_width} wide; costs {w.clean_cost:g}) that removes waste. BEAM fires a penalty "
                         f"beam: costs {w.fire_cost:g}, each agent hit loses {w.fire_penalty:g} and is out for "
                         f"{w.timeout_steps} steps.")
        else:
            regrow = (f"A taken apple regrows after {w.respawn_time} steps." if w.regrowth == "fixed"
                      else "A taken apple regrows only near other live apples: taking the last ones of a patch ends it.")
            lines.append(f"{regrow} BEAM fires a tagging beam ({w.beam_length} ahead, {w.beam_width} wide): an agent "
                         f"hit {w.hits_to_tag} times is out for {w.timeout_steps} steps.")
        if others:
            lines.append(f"{others} other agents follow fixed scripted policies.")
        return " ".join(lines)

    def _program_text(self) -> str:
        if self.program is None:
            return "No policy exists yet."
        return "The policy all your agents run now:\n" + code_block(self.program["code"], max_lines=120)

    def _feedback_text(self) -> str:
        mode = self.config.feedback
        if mode == "none" or not self.results:
            return ""
        lines = ["Results of the earlier episodes:"]
        for r in self.results:
            line = f"- iteration {r['iteration']}: average agent reward {r['reward']:.1f}"
            if mode == "dense":
                line += (f"; efficiency {r['efficiency']:.2f} (apples per step, all agents), equality {r['equality']:.2f} "
                         f"(1 = equal rewards), sustainability {r['sustainability']:.0f} (mean step of rewards; later "
                         f"is better), peace {r['peace']:.2f} (agents not tagged out per step, of {self.config.agents})")
            if r["incidents"]:
                line += f"; {r['incidents']} agent-steps fell back to STAND ({quote(r['first_incident'], 160)})"
            lines.append(line)
        return "\n".join(lines)

    def act(self, phase: str, decisions: Sequence[Decision]) -> None:
        if phase in WRITE_PHASES:
            for d in decisions:
                self._take_program(str(d.value), "llm", attempt=WRITE_PHASES.index(phase), answer=d.raw or str(d.value),
                                   fallback=d.fallback, reason=d.reason)
            return
        self._act(decisions)

    def _take_program(self, answer_text: str, source: str, *, attempt: int, answer: Optional[str], fallback: bool,
                      reason: Optional[str] = None) -> None:
        code = extract(answer_text) if source == "llm" else answer_text
        report = check(code, hacks=api.HACKS) if code is not None else None
        problems = ["the answer holds no program (no ```python block, no def policy)"] if report is None else report.problems
        self.versions += 1
        status = "refused" if problems else "accepted"
        if not problems:
            self.accepted += 1
            self.program = {"id": f"{self.episode}.{attempt}", "code": code, "iteration": self.episode, "api": API_FILE}
        self._attempt_failed = bool(problems)
        self._problems = problems
        hacks = report.hacks if report is not None else []
        if hacks:
            self.totals["hack_attempts"] += len(hacks)
        self.emit("policy.code", self.designer.unique_id if self.designer else None, iteration=self.episode,
                  attempt=attempt, status=status, source=source, code=code or "", problems=problems, hacks=hacks,
                  answer=(answer or "")[:20_000], fallback=fallback, reason=reason)

    # ----- the step ---------------------------------------------------------------------------------------
    def _act(self, decisions: Sequence[Decision]) -> None:
        w = self.world
        actions = [STAND] * len(self.foragers)
        order = []
        index = self.index
        for d in decisions:
            i = index[d.agent_id]
            actions[i] = INDEX.get(d.value, STAND)
            order.append(i)
            if d.fallback:
                self.fallbacks_this_step += 1
                if self.foragers[i].policy == "synthesis":
                    self._incident(d)
        self._rewards = w.step(actions, order)
        w.place(self.foragers)
        for firer, hit in w.beamed:
            if w.timeout[hit] == w.rules.timeout_steps and w.rules.timeout_steps > 0:
                self.emit("tagged", self.foragers[firer].unique_id, self.foragers[hit].unique_id)
                self.totals["tags"] += 1
        self.totals["beams"] += int(w.fired.sum())
        self.totals["collected"] += int(w.collected.sum())

    def _incident(self, d: Decision) -> None:
        reason = d.reason or ""
        kind = next((k for k in INCIDENT_KINDS if reason.startswith(k)), "invalid")
        self.ep_incidents[kind] += 1
        self.totals["incidents"] += 1
        if kind == "hack":
            self.totals["hack_attempts"] += 1
        first = self.episode_cache.setdefault("_incidents", {})
        key = reason.split(":")[0]
        if key not in first:  # the first of each kind of incident in an episode is an event
            first[key] = reason
            if kind == "stopped" and "violation" in reason:
                self.totals["violations"] += 1
            self.emit("policy.incident", d.agent_id, iteration=self.episode, incident=kind, reason=reason[:500],
                      step=self.step_in_episode(), program=(self.program or {}).get("id"))

    def payoffs(self) -> dict[int, float]:
        return {a.unique_id: float(r) for a, r in zip(self.foragers, self._rewards.tolist())}


    def reward_components(self) -> dict[str, dict[int, float]]:
        """Apples collected, beams fired and being tagged out, per agent (non-zero only)."""
        w = self.world
        ids = [a.unique_id for a in self.foragers]
        return nonzero(ids, (("apples", w.collected), ("fired", w.fired), ("tagged", w.timeout > 0)))

    def sanctioned_count(self) -> int:
        return int((self.world.timeout > 0).sum())

    def after_reward(self, rewards: Mapping[int, float]) -> None:
        payoffs = self.payoffs()
        self.ep_perolat.update(payoffs, self.sanctioned_count())
        self.ep_returns += self._rewards
        last = self.step_in_episode() == self.config.episode_steps or self.tick == self.config.steps
        if last:
            self._score_episode()

    def _score_episode(self) -> None:
        mine = [self.index[a.unique_id] for a in self.foragers if a.policy == "synthesis"] or list(range(len(self.foragers)))
        values = self.ep_perolat.values()
        result = {
            "iteration": self.episode, "program": (self.program or {}).get("id"),
            "reward": float(self.ep_returns[mine].mean()), "steps": self.step_in_episode(),
            "efficiency": values["perolat_efficiency"], "equality": values["perolat_equality"],
            "sustainability": values["perolat_sustainability"], "peace": values["perolat_peace"],
            "incidents": int(sum(self.ep_incidents.values())), "incident_kinds": dict(self.ep_incidents),
            "first_incident": next(iter(self.episode_cache.get("_incidents", {}).values()), ""),
        }
        self.results.append(result)
        if self.designer is not None:
            self.emit("policy.scores", self.designer.unique_id, **result)

    # ----- records -----------------------------------------------------------------------------------------
    def scenario_metrics(self) -> dict[str, float]:
        w = self.world
        out = {"episode": float(self.episode), "apples": float(w.alive_apples().sum()), "collected": float(w.collected.sum()),
               "tagged": float(self.sanctioned_count()), "beams": float(w.fired.sum()), "hits": float(len(w.beamed)),
               "fallbacks": float(self.fallbacks_this_step)}
        return out

    def state(self) -> dict[str, Any]:
        return self.edition.state(self)

    def final_metrics(self) -> dict[str, Optional[float]]:
        n = max(1, len(self.foragers))
        returns = self.perolat.returns
        out: dict[str, Optional[float]] = {
            "apples_collected": float(self.totals["collected"]), "reward_per_agent": sum(returns.values()) / n,
            "beams_fired": float(self.totals["beams"]), "tags": float(self.totals["tags"]), "episodes": float(self.episode),
        }
        if self.designer is not None:
            best = max(self.results, key=lambda r: r["reward"], default=None)
            out.update({"code_versions": float(self.versions), "code_accepted": float(self.accepted),
                        "best_iteration": float(best["iteration"]) if best else None,
                        "best_reward": best["reward"] if best else None,
                        "last_reward": self.results[-1]["reward"] if self.results else None,
                        "incidents": float(self.totals["incidents"]), "hack_attempts": float(self.totals["hack_attempts"]),
                        "violations": float(self.totals["violations"])})
        return out


class GatheringModel(GridModel):
    """Gathering (Leibo et al. 2017): apples regrow; a tagging beam removes rivals for a while."""

    name = "gathering"
    description = "Gathering: apples on a grid, a tagging beam; scripted, LLM or synthesised policies"
    Config = GatheringConfig
    maps = grid_maps.GATHERING_MAPS
    cleanup = False
    probes = GATHERING_PROBES  # validity probes (`societas probe`): scenarios/grid/probes.py
    fork_fields = GridModel.fork_fields | {"regrowth", "respawn_time", "density_radius"}
    fork_conditions = {**GridModel.fork_conditions, "respawn_time": ({"regrowth": "fixed"},),
                       "density_radius": ({"regrowth": "density"},)}
    config: GatheringConfig

    def _game_rules(self) -> dict[str, Any]:
        c = self.config
        return {"regrowth": c.regrowth, "respawn_time": c.respawn_time, "density_radius": c.density_radius}


class CleanupModel(GridModel):
    """Cleanup (Hughes et al. 2018): a public good (the river's cleanliness) that feeds the apples."""

    name = "cleanup"
    description = "Cleanup: apples grow while agents clean the river; scripted, LLM or synthesised policies"
    Config = CleanupConfig
    maps = grid_maps.CLEANUP_MAPS
    cleanup = True
    probes = CLEANUP_PROBES
    fork_fields = GridModel.fork_fields | {"fire_cost", "fire_penalty", "clean_cost", "depletion", "restoration",
                                           "waste_spawn_prob", "apple_respawn_prob"}
    tick_metric_docs = report.CLEANUP_TICK_METRIC_DOCS
    final_metric_docs = report.CLEANUP_FINAL_METRIC_DOCS
    config: CleanupConfig

    def setup(self) -> None:
        super().setup()
        self.waste_sum = 0.0

    def _game_rules(self) -> dict[str, Any]:
        c = self.config
        return {"regrowth": "cleanup", "fire_cost": c.fire_cost, "fire_penalty": c.fire_penalty, "clean_cost": c.clean_cost,
                "depletion": c.depletion, "restoration": c.restoration, "waste_spawn_prob": c.waste_spawn_prob,
                "apple_respawn_prob": c.apple_respawn_prob}

    def scenario_metrics(self) -> dict[str, float]:
        out = super().scenario_metrics()
        share = self.world.waste_share()
        self.waste_sum += share
        out.update({"waste_share": share, "cleaned": float(self.world.cleaned)})
        return out

    def final_metrics(self) -> dict[str, Optional[float]]:
        out = super().final_metrics()
        out["mean_waste_share"] = self.waste_sum / max(1, self.tick)
        return out

