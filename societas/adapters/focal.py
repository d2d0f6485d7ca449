"""One focal agent's episodes in text: what the RL libraries' adapters share.

TRL, OpenEnv and verifiers train a model that reads a prompt and writes an answer. `FocalGame` is a
scenario's PettingZoo env (`societas.env`) seen by one focal agent that way: `reset(seed)` starts an
episode and gives the chat messages the platform would send an LLM agent; `act(answer)` takes the
answer the model wrote (parsed exactly as the platform parses an LLM's text: `agents.llm.parse`), runs
the world to the agent's next decision and gives its reward (the reward layer's, in the scenario's
reward mode) and reward vector. An answer that does not parse is handed to the env as the raw text, so
the run records it and takes the request's default, as for any LLM answer outside the space.

The world decides the rewards: an adapter never computes one itself. Every episode is a stored run.
The other agents are the env's background (scripted): a configuration with more than one focal agent
is refused (a multi-agent trainer uses `societas.env` itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from agents.llm.parse import parse_answer
from sim.core.errors import UsageError
from sim.core.spaces import Space, SpaceError
from sim.core.text import one_line
from sim.store.store import Store
from societas.env import SocietyEnv


@dataclass
class Turn:
    """What one answer did: its reward and reward vector, whether the episode is over, and the answer as the world
    took it (`value`; None when it did not parse and the default was used, `error` saying why)."""

    reward: float
    vector: dict[str, float]
    done: bool
    value: Any = None
    error: Optional[str] = None
    metrics: dict[str, Any] = field(default_factory=dict)


def read_answer(answer: Any, space: Optional[Space]) -> tuple[Any, Optional[str]]:
    """`answer` (a model's text, parsed as the platform parses an LLM's, or a value of `space`) as a value of `space`:
    (value, None), or (None, why not) on one line, the model's text quoted defused (it may be read back to the model)."""
    if space is None:
        return None, "nothing to decide"
    try:
        return (parse_answer(answer, space) if isinstance(answer, str) else space.validate(answer)), None
    except (SpaceError, TypeError, ValueError) as exc:
        return None, one_line(str(exc), 200)


class FocalGame:
    """A scenario's episodes played by its one focal agent in text; see the module docstring."""

    def __init__(self, scenario: str = "commons", *, db: Union[str, Store, None] = None, name: str = "adapter",
                 config: Optional[str] = None, sets: tuple[str, ...] = (), seed: int = 0, **fields: Any) -> None:
        """The env as `societas.env.parallel_env` builds it (`db`: where episodes are stored; `name`: the policy's
        label in each episode's model id); it must have exactly one focal agent (policy llm)."""
        self.env = SocietyEnv(scenario, db=db, name=name, config=config, sets=sets, seed=seed, **fields)
        if len(self.env.possible_agents) != 1:
            focal = len(self.env.possible_agents)
            self.env.close()
            raise UsageError(f"the adapters play one focal agent; this configuration has {focal} (give the others a "
                             "scripted policy through a population, or use societas.env for several)")
        self.agent = self.env.possible_agents[0]
        self.scenario = self.env.cls.name
        self.messages: list[dict[str, str]] = []
        self.phase: Optional[str] = None  # the pending decision's phase (None: nothing to decide)
        self.total = 0.0  # the focal agent's return over the decisions it answered
        self.vector: dict[str, float] = {}
        self.turns = 0
        self.done = True

    @property
    def run_id(self) -> Optional[str]:
        """The stored run of the current (or last) episode."""
        return self.env.run_id

    @property
    def tick(self) -> int:
        return self.env.tick

    def reset(self, seed: Optional[int] = None, ticks: Optional[int] = None) -> list[dict[str, str]]:
        """Start an episode (a new run; `ticks`: a shorter horizon) and return the chat messages of the agent's first
        decision (empty if the episode ended before it had one). Bad input raises UsageError."""
        obs, _ = self.env.reset(seed=seed, options={"ticks": ticks} if ticks is not None else None)
        self.total, self.vector, self.turns, self.done = 0.0, {}, 0, False
        self.messages, self.phase = obs[self.agent]["messages"], obs[self.agent]["phase"]
        self._skip_idle()
        return list(self.messages)

    def act(self, answer: Any) -> Turn:
        """Answer the pending decision with `answer` (the model's text, or a value of the space) and run the world to
        the agent's next decision or the episode's end."""
        if self.done:
            raise UsageError("the episode is over: reset() starts the next")
        value, error = self._parse(answer)
        obs, rewards, terms, truncs, infos = self.env.step({self.agent: value if error is None else answer})
        turn = self._record(obs, rewards, terms, truncs, infos)
        turn.value, turn.error = value, error
        self.turns += 1
        self._skip_idle()
        return turn

    def finish(self) -> None:
        """Play the decisions left unanswered with their defaults (recorded as fallbacks), so that the stored run is
        whole; what they earn is not added to `total`."""
        while not self.done:
            obs, rewards, terms, truncs, infos = self.env.step({})
            self.done = not self.env.agents

    def close(self) -> None:
        """End an unfinished episode (stored as failed) and close the store if the env opened it."""
        self.env.close()
        self.done = True

    @property
    def space(self) -> Optional[Space]:
        """The pending decision's action space (a copy; None when there is none)."""
        return None if self.done else self.env.action_space(self.agent).space

    @property
    def question(self) -> str:
        """The pending decision's prompt: its last user message ('' when there is none)."""
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else ""

    @property
    def system(self) -> str:
        """The pending decision's system text ('' when there is none)."""
        systems = [m["content"] for m in self.messages if m["role"] == "system"]
        return systems[0] if systems else ""

    # ----- inside -------------------------------------------------------------------------------------
    def _parse(self, answer: Any) -> tuple[Any, Optional[str]]:
        return read_answer(answer, self.space)

    def _record(self, obs: dict, rewards: dict, terms: dict, truncs: dict, infos: dict) -> Turn:
        reward = float(rewards.get(self.agent, 0.0))
        vector = dict(infos.get(self.agent, {}).get("reward_vector", {}))
        self.total += reward
        for k, v in vector.items():
            self.vector[k] = self.vector.get(k, 0.0) + v
        pending = obs.get(self.agent, {}) if self.env.agents else {}
        self.messages, self.phase = pending.get("messages", []), pending.get("phase")
        self.done = not self.env.agents
        return Turn(reward, vector, self.done, metrics=dict(infos.get(self.agent, {}).get("metrics", {})))

    def _skip_idle(self) -> None:
        """Run the world on while the agent has nothing to decide (a phase it sits out); their rewards count."""
        while not self.done and not self.messages:
            self._record(*self.env.step({}))


__all__ = ["FocalGame", "Turn", "read_answer"]
