"""A scenario as an OpenEnv environment (openenv 0.10, huggingface/OpenEnv): `Environment` with typed
`Action`, `Observation` and `State`, served over OpenEnv's HTTP and WebSocket protocol by `app(...)`.

- `SocietasAction(answer=...)`: the focal agent's answer, the text a model wrote (parsed as the platform
  parses an LLM's) or a value of the decision's space (a number, an option, a form's dict);
- `SocietasObservation`: the decision's chat `messages` and `prompt` (the question), its action `space`
  (the request's spec), `tick`, `phase`, and after a step the world's `reward` (the reward layer's, in
  the scenario's reward mode), `reward_vector`, `done`, and `error` when the answer did not parse (the
  default was used, recorded in the run);
- `SocietasState`: the `episode_id` and `step_count` OpenEnv asks for, the stored `run_id`, the `tick`
  and the `total` return so far.

`SocietasEnvironment(scenario, db=..., **fields)` plays the scenario's one focal agent (`FocalGame`);
`app(scenario, ...)` is OpenEnv's FastAPI app for it (`uvicorn.run(app(...), host="127.0.0.1")`), which
OpenEnv's own `openenv validate --url` checks. openenv is imported when this module is, so import it only
where openenv is installed (`pip install societas[rl]`; see docs/learning.md for its one missing optional
dependency, gradio, which only its web UI needs).
"""

from __future__ import annotations

import uuid
from typing import Any, Optional, Union

from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app
from openenv.core.env_server.types import EnvironmentMetadata
from pydantic import Field

from sim.store.store import Store
from societas.adapters.focal import FocalGame


class SocietasAction(Action):
    """The focal agent's answer to its pending decision."""

    answer: Union[str, float, dict[str, Any]] = Field(
        description="the model's text (parsed as the platform parses an LLM's answer) or a value of the decision's space")


class SocietasObservation(Observation):
    """The agent's pending decision (empty once the episode is over) and what its last answer earned."""

    messages: list[dict[str, str]] = Field(default_factory=list, description="the chat messages an LLM agent is sent")
    prompt: str = Field(default="", description="the decision's question (the last user message)")
    space: Optional[dict[str, Any]] = Field(default=None, description="the decision's action space (its spec)")
    tick: int = Field(default=0, description="the world's tick")
    phase: Optional[str] = Field(default=None, description="the decision's phase (None: nothing to decide)")
    reward_vector: dict[str, float] = Field(default_factory=dict, description="the reward layer's components")
    error: Optional[str] = Field(default=None, description="why the answer did not parse (the default was used)")


class SocietasState(State):
    """The episode: OpenEnv's id and step count, the stored run, the tick and the return so far."""

    run_id: Optional[str] = None
    scenario: str = ""
    tick: int = 0
    total: float = 0.0


class SocietasEnvironment(Environment[SocietasAction, SocietasObservation, SocietasState]):
    """A scenario's focal agent as an OpenEnv environment; see the module docstring."""

    def __init__(self, scenario: str = "commons", *, db: Union[str, Store, None] = None, name: str = "openenv",
                 ticks: Optional[int] = None, **fields: Any) -> None:
        """`scenario` built with `fields` as `societas.env.parallel_env` takes them (one focal agent); episodes stored
        in `db`; `ticks` a shorter horizon for every episode."""
        super().__init__()
        self.game = FocalGame(scenario, db=db, name=name, **fields)
        self.ticks = ticks
        self._state = SocietasState(scenario=self.game.scenario)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> SocietasObservation:
        """Start an episode (a stored run) from `seed`; `ticks` in kwargs shortens its horizon."""
        ticks = kwargs.get("ticks", self.ticks)
        self.game.reset(seed=seed, ticks=ticks)
        self._state = SocietasState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, scenario=self.game.scenario)
        return self._observation(done=self.game.done)

    def step(self, action: SocietasAction, timeout_s: Optional[float] = None, **kwargs: Any) -> SocietasObservation:
        """Answer the pending decision; the next one, with the reward the world gave."""
        if self.game.done:
            return self._observation(done=True, reward=0.0, error="the episode is over: reset() starts the next")
        turn = self.game.act(action.answer)
        self._state.step_count += 1
        return self._observation(done=turn.done, reward=turn.reward, vector=turn.vector, error=turn.error)

    @property
    def state(self) -> SocietasState:
        self._state.run_id, self._state.tick, self._state.total = self.game.run_id, self.game.tick, self.game.total
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=f"societas-{self.game.scenario}", version="0.1.0",
                                   description=f"the {self.game.scenario} scenario of societas, played by its focal agent")

    def close(self) -> None:
        """End an unfinished episode (stored as failed) and close the store the env opened."""
        self.game.close()

    def _observation(self, *, done: bool, reward: Optional[float] = None, vector: Optional[dict[str, float]] = None,
                     error: Optional[str] = None) -> SocietasObservation:
        game = self.game
        space = game.space
        return SocietasObservation(done=done, reward=reward, messages=list(game.messages), prompt=game.question,
                                   space=space.spec() if space is not None else None, tick=game.tick,
                                   phase=game.phase, reward_vector=vector or {}, error=error,
                                   metadata={"run_id": game.run_id})


def app(scenario: str = "commons", *, db: Union[str, Store, None] = None, max_concurrent_envs: int = 1,
        **kwargs: Any) -> Any:
    """OpenEnv's FastAPI app serving `SocietasEnvironment(scenario, db=db, **kwargs)` (one per session); bind it to
    127.0.0.1 unless told otherwise. The configuration is checked now, so bad input fails before serving."""
    SocietasEnvironment(scenario, db=db, **kwargs).close()
    return create_fastapi_app(lambda: SocietasEnvironment(scenario, db=db, **kwargs), SocietasAction,
                              SocietasObservation, max_concurrent_envs=max_concurrent_envs,
                              env_name=f"societas-{scenario}", state_cls=SocietasState)


__all__ = ["SocietasAction", "SocietasObservation", "SocietasState", "SocietasEnvironment", "app"]
