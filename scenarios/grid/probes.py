"""The grid games' validity probes: does zapping respond to the apples left (Gathering, Cleanup), and does
cleaning respond to the river's waste (Cleanup)?

What is probed. A grid agent acts through one of three policies: a scripted strategy, an LLM choosing each
step's action (`--policy llm`), or a program an LLM writes (`--policy synthesis`). Each probe asks one
step's action of agent 0 on matched views: the same cell, the same heading, a rival one cell ahead in its
beam, only the probed variable changed (which apples are alive; which river cells hold waste, as nested
seeded subsets: the cells live at a low level are live at every higher one). Under synthesis the probed
policy is the program: the LLM writes it once per seed (the probe's prelude, episode 1's write request;
refused code is not sent back for fixes), and that program answers every level, each view in a sandbox
process of its own, so nothing the program keeps carries over from one level to the next. A seed whose
program was refused answers `stand` by fallback at every level and is left out of the verdict, and counted.

The action is chosen among the same actions at every level (the game's 8, or 9 with CLEAN), so a policy
blind to the variable acts the same at every level. Controls: for zapping, blind beams whenever a rival is
in its beam, and follows beams only while fewer than half of the apples are left; for cleaning, blind
cleans at every step, and follows cleans when waste lies in its beam.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np

from scenarios.grid.api import FRAMES
from sim.core.contracts import Decision, DecisionRequest
from sim.core.errors import UsageError
from sim.core.rng import derive_seed
from sim.tick.probe import Control, Prelude, Probe, enter_first_tick

SCARCE = 0.5  # the positive control beams while fewer than this share of the apples are left


def _subset(model: Any, what: str, n: int, share: float) -> np.ndarray:
    """The first round(share x n) of a seeded permutation of range(n): nested across shares, fixed per seed."""
    order = np.random.default_rng(derive_seed(model.seed, "probe", what)).permutation(n)
    return order[: int(round(share * n))]


def _free(w: Any, r: int, c: int) -> bool:
    return 0 <= r < w.height and 0 <= c < w.width and not w.walls[r, c]


def _stand(model: Any, i: int, cell: tuple[int, int], orient: int) -> None:
    """Agent i to `cell`, facing `orient`; an agent already there swaps places with it."""
    w = model.world
    other = next((j for j in range(w.n) if j != i and tuple(w.pos[j].tolist()) == cell), None)
    if other is not None:
        w.pos[other] = w.pos[i]
    w.pos[i] = cell
    w.orient[i] = orient


def _duel(model: Any) -> None:
    """Agent 0 faces its first open neighbour (north, east, south, west); agent 1 (the rival) stands there."""
    w = model.world
    if w.n < 2:
        raise UsageError(f"the {model.name} zapping probe needs at least 2 agents (one with a rival in its beam); agents={w.n}")
    r0, c0 = (int(x) for x in w.pos[0])
    for orient in range(4):
        fwd = FRAMES[orient][0]
        ahead = (r0 + fwd[0], c0 + fwd[1])
        if _free(w, *ahead):
            _stand(model, 1, ahead, orient)
            w.orient[0] = orient
            return
    raise UsageError(f"agent 0 of {model.name} starts walled in: the zapping probe cannot put a rival in its beam")


def _program_id(model: Any, level: Any) -> None:
    """The synthesised program answers each view in a sandbox of its own (the code backend keeps one per program id)."""
    if model.program is not None:
        model.program = {**model.program, "id": f"{model.program['id']}:probe:{model.seed}:{level}"}


def _act(model: Any, level: Any) -> Optional[DecisionRequest]:
    """Agent 0's act request, its observation holding the step's view (for the controls) whatever its policy."""
    _program_id(model, level)
    model.world.place(model.foragers)
    request = model.observe(model.foragers[0], "act")
    if request is None or "view" in request.observation:
        return request
    return dataclasses.replace(request, observation={**request.observation, "view": model.view()})


def _apples_left(model: Any, level: float) -> Optional[DecisionRequest]:
    """Step 1: agent 0 faces a rival one cell ahead; `level` of the apple points hold an apple (a seeded subset)."""
    enter_first_tick(model)
    _duel(model)
    w = model.world
    w.apples[:] = False
    if len(w.apple_pos):
        live = w.apple_pos[_subset(model, "apples", len(w.apple_pos), float(level))]
        w.apples[live[:, 0], live[:, 1]] = True
    return _act(model, level)


def _river_view(model: Any) -> tuple[tuple[int, int], int]:
    """The open cell and heading whose cleaning beam covers the most river cells (the first such, row by row)."""
    w = model.world
    river = {tuple(p) for p in w.river.tolist()}
    best, where = -1, ((0, 0), 0)
    for r, c in zip(*np.nonzero(~w.walls)):
        for orient in range(4):
            saved = (w.pos[0].copy(), int(w.orient[0]))
            w.pos[0], w.orient[0] = (int(r), int(c)), orient
            covered = sum(cell in river for cell in w.beam_cells(0))
            w.pos[0], w.orient[0] = saved
            if covered > best:
                best, where = covered, ((int(r), int(c)), orient)
    if best <= 0:
        raise UsageError("the cleaning probe needs a map with river cells a beam can reach")
    return where


def _waste_at(model: Any, level: float) -> Optional[DecisionRequest]:
    """Step 1: agent 0 stands where its cleaning beam covers the most river; `level` of the river holds waste
    (a seeded subset)."""
    enter_first_tick(model)
    cell, orient = _river_view(model)
    _stand(model, 0, cell, orient)
    w = model.world
    w.waste[:] = False
    if len(w.river):
        dirty = w.river[_subset(model, "waste", len(w.river), float(level))]
        w.waste[dirty[:, 0], dirty[:, 1]] = True
    return _act(model, level)


def _view(request: DecisionRequest) -> tuple[Any, int]:
    view = request.observation["view"]
    return view, view.index[request.agent_id]


def _beams_at_rivals(request: DecisionRequest, rng: Any) -> str:
    view, i = _view(request)
    return "beam" if len(view.world.in_beam(i)) else "stand"


def _beams_when_scarce(request: DecisionRequest, rng: Any) -> str:
    view, i = _view(request)
    w = view.world
    alive = w.alive_apples()
    scarce = len(alive) and alive.mean() < SCARCE
    return "beam" if scarce and len(w.in_beam(i)) else "stand"


def _cleans_waste(request: DecisionRequest, rng: Any) -> str:
    view, i = _view(request)
    w = view.world
    return "clean" if any(w.waste[r, c] for r, c in w.beam_cells(i)) else "stand"


def _ask_program(model: Any) -> Optional[DecisionRequest]:
    """Episode 1's write request of the synthesis policy (None: no synthesis agent, or a seed program is the first)."""
    enter_first_tick(model)
    if model.designer is None or model.config.seed_code:
        return None
    return model.observe(model.designer, "write")


def _take_program(model: Any, decision: Decision) -> None:
    model.act("write", [decision])


def _write_facts(model: Any, request: DecisionRequest) -> dict[str, Any]:
    if request.phase != "write":
        return {}
    return {"iteration": model.episode, "iterations": model.config.iterations,
            "which": "an improved" if model.program else "the",
            "agents": sum(a.policy == "synthesis" for a in model.foragers)}


ANSWER = "Answer with one ```python block defining policy(obs)."
QUESTIONS = {
    "act": (
        "Which action do you take this step?",
        "What action do you take this step?",
        "Which action will you take now?",
        "Choose your action for this step.",
        "What do you do this step? Pick one action.",
        "Decide this step's action.",
    ),
    "write": tuple(f"Iteration $iteration of $iterations: write $which policy. {middle} {ANSWER}" for middle in (
        "All $agents agents run your code; maximise the reward per agent.",
        "Your code is run by all $agents agents; make the reward per agent as high as you can.",
        "All $agents agents will run it; aim for the highest reward per agent.",
        "Every one of the $agents agents runs your code; the goal is the most reward per agent.",
        "The $agents agents all execute your code; maximise their average reward.",
        "It is run by all $agents agents; try to maximise the reward each agent earns.",
    )),
}
PROGRAM = Prelude(ask=_ask_program, take=_take_program)
ACTIONS_SAME = ("the action is chosen among the game's same actions at every level (moves, turns, beam, stand{clean}): "
                "an action that ignores the {what} reads the same at every level")


def _zap(game: str, clean: str) -> Probe:
    return Probe(
        name="beam_by_apples", variable="share of the apple points holding an apple", levels=(0.1, 0.5, 1.0),
        response="fired the beam at a rival in it (0/1)",
        finding=f"{game}: agents turn to zapping rivals as apples run out (Leibo et al. 2017: aggression rises with scarcity)",
        situate=_apples_left, measure=lambda value, request: 1.0 if value == "beam" else 0.0,
        blind=Control("beams whenever a rival is in its beam, whatever the apples", _beams_at_rivals),
        follows=Control(f"beams at a rival only while fewer than {SCARCE:.0%} of the apples are left", _beams_when_scarce),
        unforced=ACTIONS_SAME.format(clean=clean, what="apples"), rate=True, questions=QUESTIONS, facts=_write_facts,
        prelude=PROGRAM,
    )


GATHERING_PROBES = (_zap("Gathering", ""),)
CLEAN_BY_WASTE = Probe(
    name="clean_by_waste", variable="share of the river holding waste", levels=(0.0, 0.2, 0.4),
    response="fired the cleaning beam (0/1)",
    finding="Cleanup: someone must clean a dirty river for apples to grow (Hughes et al. 2018: the public good)",
    situate=_waste_at, measure=lambda value, request: 1.0 if value == "clean" else 0.0,
    blind=Control("fires the cleaning beam at every step", lambda request, rng: "clean"),
    follows=Control("fires the cleaning beam when waste lies in it, else stands", _cleans_waste),
    unforced=ACTIONS_SAME.format(clean=", clean", what="waste"), rate=True, questions=QUESTIONS, facts=_write_facts,
    prelude=PROGRAM,
)
CLEANUP_PROBES = (_zap("Cleanup", ", clean"), CLEAN_BY_WASTE)
