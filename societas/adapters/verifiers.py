"""A scenario as a verifiers environment (verifiers 0.3.1, `verifiers.v1`): its multi-agent `Env`, every focal
agent a seat, the world owning the reward.

verifiers' v1 stack runs an episode as `Env.run(task, agents)`: the env opens each seat's exchange
(`agents.player.interaction(task)`) and speaks to it turn by turn (`interaction.turn(messages)` gives the
model's reply), and what each seat earned is recorded on its trace. `SocietasEnv` plays one episode of a
scenario (a stored run, `societas.env.SocietyEnv`) so:

- every focal agent of the configuration (policy llm; the others are the scripted background) is a seat of
  the one role `player`, its own exchange with the model (the same policy plays them all: self-play);
- at each decision point the agents that decide are asked together: the first turn is the decision's chat
  messages as the platform sends them to an LLM agent (the system text and the question), later turns the
  question alone; the reply is parsed as the platform parses an LLM's text (`agents.llm.parse`), and a
  reply that does not parse is handed to the world as the raw text (the run records it and takes the
  request's default), the model told so on its next turn; a seat whose exchange ends (a turn limit) is given the
  request's default from then on, but one whose exchange fails (the model's server down) ends the episode
  (`SeatFailed`): its run is stored as failed and no seat is paid;
- each seat's reward (`REWARD` on its trace) is what the world paid that agent over the episode (the reward
  layer's, in the scenario's reward mode), and each reward-vector component is a metric (`reward_<name>`);
  the stored run's id is in the trace's `info["societas"]`.

`SocietasTaskset` makes one task per episode seed (`seeds`) of a `SocietasWorld` (the scenario, config
file, `--set` pairs and fields, `world`, as `societas.env.parallel_env` takes them; episodes stored in
`db`), which is checked when the config is parsed, its seeds and its store too (verifiers' commands refuse a
bad one with their config error, nothing stored); every task carries its world. Its tasks' `validate`
(verifiers' model-free `validate` command) builds the world with the task's seed and checks its store, writing
nothing.
`SocietasHarness` is verifiers' `null` harness (a plain chat loop) run by this interpreter rather than in
an environment `uv` builds from the network: its needs (openai, mcp, httpx, tenacity) are ours. verifiers
finds the three by the plugin id `societas-verifiers` (the `societas_verifiers` package re-exports them).

verifiers 0.3.1 is installed without its dependency openai-agents (see docs/learning.md: that package's
top-level `agents` module would shadow ours); this module is imported only where verifiers is installed.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import uuid
from contextlib import AsyncExitStack
from typing import Annotated, Any, Optional

import verifiers.v1 as vf
from pydantic import Field, model_validator
from verifiers.v1.harnesses.null.harness import NullHarness

from sim.core.errors import UsageError
from sim.core.text import one_line
from sim.store.schema import check_writable
from sim.store.urls import as_url
from societas.adapters.focal import read_answer
from societas.env import SocietyEnv
from societas.env.parallel import MAX_SEED

#: the reward each seat's trace carries: what the world paid its agent over the episode
REWARD = "world_reward"
#: where episodes are stored when the world names no `db` (SocietyEnv's default: runs.db in the current folder)
DEFAULT_STORE = "sqlite:///runs.db"
#: the plugin id verifiers knows the taskset, env and harness by (`eval societas-verifiers`)
PLUGIN = "societas-verifiers"


class SocietasWorld(vf.BaseConfig):
    """A world as `societas.env.parallel_env` takes it: the scenario, a config file, `--set` pairs and fields; where its
    episodes are stored (`db`, default runs.db) and the policy's label in their model id."""

    scenario: str = "commons"
    config_file: Optional[str] = None
    sets: list[str] = []
    world: dict[str, Any] = {}
    db: Optional[str] = None
    label: str = "verifiers"


class SocietasData(vf.TaskData):
    """One episode: the world (carried by every trace, so a trace says what it played), its seed and, optionally, a
    shorter horizon (ticks)."""

    world: SocietasWorld = SocietasWorld()
    seed: int = 0
    ticks: Optional[int] = None


class SocietasTasksetConfig(vf.TasksetConfig):
    """The world every task plays and the episodes' seeds (one task each, each a seed the platform takes). The world is
    checked when the config is parsed (built once on an in-memory store), and its store (opened without creating or
    writing it): verifiers' commands then refuse a bad one in their own clean exit, nothing stored."""

    world: SocietasWorld = SocietasWorld()
    seeds: list[Annotated[int, Field(ge=0, le=MAX_SEED)]] = Field([0], min_length=1)
    ticks: Optional[int] = Field(None, ge=1)

    @model_validator(mode="after")
    def _world_plays(self) -> "SocietasTasksetConfig":
        try:
            open_env(self.world.model_copy(update={"db": "sqlite://"})).close()
            check_writable(as_url(self.world.db or DEFAULT_STORE))
        except UsageError as exc:
            raise ValueError(str(exc)) from None
        return self


class SocietasTask(vf.Task[SocietasData]):
    """An episode of a world; `validate` (verifiers' model-free check) builds the world with the task's seed and checks
    its store, writing nothing (a world built on an in-memory store; the store opened read-only)."""

    async def validate(self, runtime: Any) -> bool:
        world = self.data.world

        def check() -> None:
            open_env(world.model_copy(update={"db": "sqlite://"}), self.data.seed).close()
            check_writable(as_url(world.db or DEFAULT_STORE))

        try:
            await asyncio.to_thread(check)
        except UsageError:
            return False
        return True


class SocietasTaskset(vf.Taskset[SocietasTask, SocietasTasksetConfig]):
    """One task per seed (its config checked the world, seeds and store when parsed; the store is made, or opened, by
    the first episode)."""

    def load(self):
        world = self.config.world
        for idx, seed in enumerate(self.config.seeds):
            yield SocietasTask(SocietasData(idx=idx, name=f"{world.scenario}#seed={seed}", prompt=None, world=world,
                                            seed=seed, ticks=self.config.ticks), self.config.task)


class SocietasHarness(NullHarness):
    """verifiers' null harness (its chat-loop program, unchanged) run by this Python rather than a uv environment."""

    async def setup(self, runtime: Any) -> None:
        """Nothing to provision: the program's needs are installed here."""

    async def launch(self, ctx: Any, trace: Any, runtime: Any, endpoint: str, secret: str, mcp_urls: dict[str, str],
                     data: Any) -> Any:
        return await super().launch(ctx, trace, _ThisPython(runtime), endpoint, secret, mcp_urls, data)


class SocietasEnvConfig(vf.EnvConfig):
    """One role, `player`: every focal agent is a seat of it, run on this machine (a subprocess) by default."""

    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class SocietasEnv(vf.Env[SocietasEnvConfig]):
    """An episode of the taskset's world, its focal agents played by the `player` seats; see the module docstring."""

    async def run(self, task: SocietasTask, agents: vf.Agents) -> None:
        data = task.data
        env = await asyncio.to_thread(open_env, data.world)
        try:
            async with AsyncExitStack() as stack:
                seats = _Seats(env, task, agents.player, stack)
                options = {"ticks": data.ticks} if data.ticks is not None else None
                obs, _ = await asyncio.to_thread(env.reset, seed=data.seed, options=options)
                while env.agents:
                    deciding = [a for a in env.agents if obs.get(a, {}).get("messages")]
                    # every seat's turn ends before a failure is raised (none is left running as the exchanges close)
                    replies = await asyncio.gather(*(seats.ask(a, obs[a]["messages"]) for a in deciding),
                                                   return_exceptions=True)
                    failed = next((r for r in replies if isinstance(r, BaseException)), None)
                    if failed is not None:
                        raise failed
                    actions = {}
                    for agent, reply in zip(deciding, replies):
                        if reply is not None:  # None: its exchange ended, the world takes the default
                            value, error = read_answer(reply, env.action_space(agent).space)
                            actions[agent] = reply if error is not None else value
                            seats.errors[agent] = error
                    obs, rewards, _, _, infos = await asyncio.to_thread(env.step, actions)
                    seats.pay(rewards, infos)
            seats.record(env.run_id)  # after the exchanges closed, as verifiers' own OpenEnv env records
        finally:
            await asyncio.to_thread(env.close)


def open_env(world: SocietasWorld, seed: int = 0) -> SocietyEnv:
    """`world` as a `SocietyEnv` (UsageError on bad input: a scenario, field or seed it refuses, no focal agent)."""
    return SocietyEnv(world.scenario, db=world.db or DEFAULT_STORE, name=world.label, config=world.config_file,
                      sets=tuple(world.sets), seed=seed, **world.world)


class SeatFailed(RuntimeError):
    """A seat's exchange ended in an error (the model's server down, say): the episode stops there, its run stored as
    failed, rather than going on with the world's defaults for that agent as if the policy had chosen nothing."""


class _Seats:
    """The episode's exchanges, one per focal agent opened at its first decision, and what each agent earned."""

    def __init__(self, env: SocietyEnv, task: SocietasTask, role: Any, stack: AsyncExitStack) -> None:
        self.env, self.task, self.role, self.stack = env, task, role, stack
        self.open: dict[str, Any] = {}
        self.over: set[str] = set()
        self.errors: dict[str, Optional[str]] = {}
        self.totals: dict[str, float] = {}
        self.vectors: dict[str, dict[str, float]] = {}

    async def ask(self, agent: str, messages: list[dict[str, str]]) -> Optional[str]:
        """The model's reply to the agent's decision (None once its exchange has ended)."""
        if agent in self.over:
            return None
        seat = self.open.get(agent)
        if seat is None:
            seat = self.open[agent] = await self.stack.enter_async_context(self.role.interaction(self.task))
            turn = list(messages)
        else:
            turn = [m for m in messages if m["role"] != "system"]
            error = self.errors.get(agent)
            if error:
                turn.insert(0, {"role": "user", "content": f"Your last answer was not understood ({error}); "
                                                           "the default was used."})
        segment = await seat.turn(turn)
        if segment.terminated:
            self.over.add(agent)
            failed = seat.trace.errors
            if failed:  # the model could not be asked (its server down): no decision of the policy's, no episode
                raise SeatFailed(f"{agent}'s exchange with the model failed ({one_line(failed[-1].message, 300)}); the "
                                 f"episode stops, its run stored as failed")
            return None
        return segment.last_reply

    def pay(self, rewards: dict[str, float], infos: dict[str, dict[str, Any]]) -> None:
        for agent, reward in rewards.items():
            self.totals[agent] = self.totals.get(agent, 0.0) + float(reward)
            vector = self.vectors.setdefault(agent, {})
            for k, v in infos.get(agent, {}).get("reward_vector", {}).items():
                vector[k] = vector.get(k, 0.0) + float(v)

    def record(self, run_id: Optional[str]) -> None:
        for agent, seat in self.open.items():
            trace = seat.trace
            trace.record_reward(REWARD, self.totals.get(agent, 0.0))
            trace.record_metrics({f"reward_{k}": v for k, v in self.vectors.get(agent, {}).items()})
            trace.info["societas"] = {"run_id": run_id, "agent": agent, "scenario": self.env.cls.name}


class _ThisPython:
    """A runtime whose uv scripts run with this interpreter: the script is written where the runtime keeps them (to a
    temporary name, then moved: rollouts launching at once never read a half-written file) and run as it is (its
    dependencies are this environment's); everything else is the runtime's."""

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)

    async def prepare_uv_script(self, script: str | bytes, env: Optional[dict[str, str]] = None, *,
                                activate: bool = True) -> list[str]:
        data = script.encode() if isinstance(script, str) else script
        path = f"{self._runtime.scripts_dir}/societas-{hashlib.sha256(data).hexdigest()}.py"
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        await self._runtime.write(tmp, data)
        moved = await self._runtime.run(["mv", "-f", tmp, path], {})
        if moved.exit_code != 0:
            raise RuntimeError(f"could not place the harness program at {path}: {moved.stderr.strip()[-500:]}")
        return [sys.executable, path]


__all__ = ["SocietasWorld", "SocietasData", "SocietasTasksetConfig", "SocietasTask", "SocietasTaskset", "SocietasHarness",
           "SocietasEnvConfig", "SocietasEnv", "SeatFailed", "open_env", "REWARD", "PLUGIN"]
