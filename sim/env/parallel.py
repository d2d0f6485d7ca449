"""A PettingZoo `ParallelEnv` over any scenario: the focal agents are the env's agents, the rest a background.

The focal agents are the run's LLM agents (`policy: llm`, all of them or a population group's); the
others act by their scripted strategies, as Melting Pot's background population: give a population
of held-out strategies and the same policy is evaluated against them. Every episode is a run made by
the platform's own engine (the tick, the decision layer, the reward layer) and stored like any other:
the focal decisions are the calls of an LLM whose answers come from outside (`llm.provider: env`),
so `societas replay` redoes the episode from the store and the app shows it.

- `reset(seed, options)` starts an episode (a new run) and returns each focal agent's observation:
  `{"tick", "phase", "request", "messages", "prompt"}`; `request` holds the structured request (the
  action space as `space` and its `spec`, the default, the observation the scenario made, the
  question, memory and feedback), `messages` the chat messages an LLM would be sent and `prompt` the
  same as one text. An agent with nothing to decide at this step has `phase` None.
- `step(actions)` answers the pending requests (a value of the request's space: a number, an option,
  a text, a form's dict; anything else, or a missing action, becomes the request's default, recorded
  as a fallback) and runs the model to the next step where a focal agent decides. Rewards are the
  reward layer's (its weights and mode) summed over the ticks completed in between; `infos` hold the
  reward vector (`reward_vector`, summed likewise), the last completed tick's metrics and the run id.
- An episode ends `terminated` when the world ends it (a collapse) and `truncated` at its horizon.

One env step is one decision point, not one tick: a scenario with several phases a tick (talk,
harvest, sanction) asks its focal agents once per phase.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Optional, Union

from pettingzoo import ParallelEnv

from agents.llm.backend import LLMBackend, prompt_text
from agents.llm.base import Answer
from agents.llm.factory import ENV_SAMPLING
from agents.llm.prompts import get_template
from agents.scripted import ScriptedBackend
from scenarios.registry import get_scenario
from sim.core.backend import Backend
from sim.core.errors import UsageError
from sim.core.spaces import SpaceError
from sim.core.spec import RunSpec
from sim.env.bridge import EpisodeClosed, OutsideLLM
from sim.env.spaces import DecisionSpace, ObservationSpace
from sim.runner.backends import make_backends
from sim.runner.config import build_spec
from sim.runner.execution import RunFailed, RunResult, execute
from sim.store.schema import as_url
from sim.store.store import Store
from sim.tick.broker import DecisionBroker

AgentID = str


def agent_name(agent_id: int) -> AgentID:
    """The env's name of a scenario agent."""
    return f"agent_{agent_id}"


class SocietyEnv(ParallelEnv):
    """A scenario as a PettingZoo parallel environment; see the module docstring."""

    metadata = {"name": "societas_v0", "render_modes": ["ansi"], "is_parallelizable": False}

    def __init__(self, scenario: Union[str, type], *, config: Optional[str] = None, sets: Sequence[str] = (),
                 seed: int = 0, policy: Optional[str] = None, db: Union[str, Store, None] = None, name: str = "env",
                 render_mode: Optional[str] = None, **fields: Any) -> None:
        """`scenario` with a config file, `--set`-style pairs and `fields` as `societas run` takes them; the agents whose
        policy is `llm` (every agent when no population says otherwise) are the env's. Episodes are stored in `db`
        (a URL, a SQLite file, a Store; default `runs.db`); `name` labels the policy in each episode's model id.
        `policy` is the run's policy (default: llm, so every agent without a group policy is focal)."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise UsageError(f"bad value for 'render_mode': {render_mode!r}; valid: ansi")
        self.render_mode = render_mode
        base = build_spec(scenario, config_file=config, sets=sets, seed=seed, overrides=fields or None,
                          policy=policy or "llm")
        if "llm" not in base.policies():
            raise UsageError("the environment has no focal agents: give some agents policy llm (--policy llm, or a "
                             "population group with policy: llm); the others are its background population")
        self.base = base
        self.name = name
        self.cls = get_scenario(base.scenario)
        self.store = db if isinstance(db, Store) else Store(as_url(db or "sqlite:///runs.db"))
        self._seed = seed
        ids = self._focal_ids(base)
        self.possible_agents: list[AgentID] = [agent_name(i) for i in ids]
        self._ids = {agent_name(i): i for i in ids}
        self.agents: list[AgentID] = []
        self._pending: dict[AgentID, Any] = {}  # agent -> its pending DecisionRequest
        self._messages: dict[AgentID, Any] = {}
        self._bridge: Optional[OutsideLLM] = None
        self._thread: Optional[threading.Thread] = None
        self.run_id: Optional[str] = None
        self.tick = 0
        self.last_metrics: dict[str, Any] = {}
        self.result: Optional[RunResult] = None

    # ----- spaces --------------------------------------------------------------------------------
    @lru_cache(maxsize=None)
    def observation_space(self, agent: AgentID) -> ObservationSpace:
        return ObservationSpace()

    @lru_cache(maxsize=None)
    def action_space(self, agent: AgentID) -> DecisionSpace:
        return DecisionSpace(lambda: getattr(self._pending.get(agent), "space", None))

    # ----- episodes -------------------------------------------------------------------------------
    def reset(self, seed: Optional[int] = None, options: Optional[Mapping[str, Any]] = None):
        """Start an episode (a new stored run) with `seed` (None: the last one + 1); `options` may hold
        `{"ticks": N}` (a shorter horizon)."""
        self._stop()
        if seed is not None:
            self._seed = int(seed)
        elif self.run_id is not None:
            self._seed += 1
        episode = uuid.uuid4().hex[:12]
        config = dict(self.base.config)
        ticks = (options or {}).get("ticks")
        if ticks is not None:
            config[self.cls.horizon_field] = int(ticks)
        llm = self.base.llm.model_copy(update={"provider": "env", "model": f"{self.name}/{episode}"})
        spec = self.base.model_copy(update={"seed": self._seed, "llm": llm, "config": config})
        bridge = OutsideLLM(f"env:{llm.model}")
        backends = make_backends(spec, self.cls, self.store, llm_factory=lambda: bridge)
        backends["llm"] = _Announcing(backends["llm"], bridge)
        self._bridge, self.result, self.run_id, self.tick, self.last_metrics = bridge, None, None, 0, {}
        self._thread = threading.Thread(target=self._run, args=(spec, backends, bridge), name=f"societas-env-{episode}",
                                        daemon=True)
        self._thread.start()
        self.agents = list(self.possible_agents)
        _, _, done, _ = self._advance()
        obs = {a: self._observation(a) for a in self.agents}
        infos = {a: {"run_id": self.run_id, "tick": self.tick} for a in self.agents}
        if done:  # an episode without a single focal decision (e.g. a one-tick horizon the agents sit out)
            self.agents = []
        return obs, infos

    def step(self, actions: Mapping[AgentID, Any]):
        """Answer the pending requests with `actions`, run to the next decision point; (obs, rewards, terminations,
        truncations, infos), each keyed by the agents live before the step."""
        if self._bridge is None or not self.agents:
            raise UsageError("step() before reset(), or after the episode ended: call reset()")
        live = list(self.agents)
        pending = [(a, self._pending[a]) for a in self._order if a in self._pending]
        answers = [self._answer(request, actions.get(a)) for a, request in pending]
        self._pending, self._messages = {}, {}
        self._bridge.send(answers)
        rewards, vectors, done, status = self._advance()
        terminated = done and status == "collapsed"
        obs = {a: self._observation(a) for a in live}
        rew = {a: float(rewards.get(self._ids[a], 0.0)) for a in live}
        terms = dict.fromkeys(live, terminated)
        truncs = dict.fromkeys(live, done and not terminated)
        infos = {a: {"run_id": self.run_id, "tick": self.tick, "reward_vector": vectors.get(self._ids[a], {}),
                     "metrics": self.last_metrics} for a in live}
        if done:
            self.agents = []
        return obs, rew, terms, truncs, infos

    def render(self) -> Optional[str]:
        """ansi: the tick, the last metrics and who decides what now."""
        if self.render_mode != "ansi":
            return None
        lines = [f"{self.cls.name} run {self.run_id} tick {self.tick}: "
                 + ", ".join(f"{k}={v:.3g}" for k, v in list(self.last_metrics.items())[:6] if isinstance(v, (int, float)))]
        for a, r in self._pending.items():
            lines.append(f"  {a} decides {r.phase}: {r.space.describe()}")
        return "\n".join(lines)

    def close(self) -> None:
        """Stop an unfinished episode (its run is stored as failed) and let go of the store."""
        self._stop()

    def state(self) -> Any:
        raise NotImplementedError("the world's state is in the store: societas show RUN_ID --tick N")

    # ----- the model thread ------------------------------------------------------------------------
    def _run(self, spec: RunSpec, backends: dict[str, Any], bridge: OutsideLLM) -> None:
        def progress(tick: int, total: int, record: Any) -> None:
            bridge.to_env.put(("tick", record))

        try:
            result = execute(spec, self.store, backends=backends, progress=progress)
            bridge.to_env.put(("end", result))
        except RunFailed as exc:
            if isinstance(exc.__cause__, EpisodeClosed) or "environment was reset or closed" in exc.reason:
                bridge.to_env.put(("closed", exc))
            else:
                bridge.to_env.put(("error", exc))
        except BaseException as exc:  # noqa: BLE001 - handed to the env's thread, raised there
            bridge.to_env.put(("error", exc))

    def _advance(self) -> tuple[dict[int, float], dict[int, dict[str, float]], bool, str]:
        """Wait for the model's next decision point (or its end), summing the rewards of the ticks completed."""
        assert self._bridge is not None
        rewards: dict[int, float] = {}
        vectors: dict[int, dict[str, float]] = {}
        focal = set(self._ids.values())
        while True:
            msg = self._bridge.to_env.get()
            kind = msg[0]
            if kind == "tick":
                record = msg[1]
                self.tick, self.last_metrics = record.tick, dict(record.metrics)
                self.run_id = self._bridge.run_id
                for st in record.steps:
                    if st.agent_id in focal:
                        rewards[st.agent_id] = rewards.get(st.agent_id, 0.0) + float(st.reward)
                        vec = vectors.setdefault(st.agent_id, {})
                        for k, v in (st.components or {}).items():
                            vec[k] = vec.get(k, 0.0) + float(v)
            elif kind == "decide":
                _, requests, messages = msg
                self._pending = {agent_name(r.agent_id): r for r in requests}
                self._messages = {agent_name(r.agent_id): m for r, m in zip(requests, messages)}
                self._order = [agent_name(r.agent_id) for r in requests]
                self.run_id = self._bridge.run_id
                return rewards, vectors, False, "running"
            elif kind == "end":
                self.result = msg[1]
                self.run_id = self.result.run_id
                self._thread = None
                return rewards, vectors, True, self.result.status
            else:
                self._thread = None
                raise msg[1]

    def _stop(self) -> None:
        """End the running episode, if any: its model thread stops (the run is stored as failed)."""
        thread, bridge = self._thread, self._bridge
        if thread is not None and bridge is not None and thread.is_alive():
            bridge.close()
            while True:  # drain until the thread says it ended
                kind = bridge.to_env.get()[0]
                if kind in ("end", "closed", "error"):
                    break
            thread.join()
        self._thread = None
        self._pending, self._messages = {}, {}
        self.agents = []

    # ----- observations and actions -----------------------------------------------------------------
    def _observation(self, agent: AgentID) -> dict[str, Any]:
        request = self._pending.get(agent)
        if request is None:
            return {"tick": self.tick, "phase": None, "request": None, "messages": [], "prompt": ""}
        messages = self._messages[agent]
        return {
            "tick": request.tick, "phase": request.phase,
            "request": {"space": request.space, "spec": request.space.spec(), "default": request.default,
                        "observation": request.observation, "question": request.question, "context": request.context,
                        "own_context": request.own_context, "memory": request.memory, "feedback": request.feedback,
                        "persona": request.persona, "seed": request.seed},
            "messages": messages, "prompt": prompt_text(messages),
        }

    @staticmethod
    def _answer(request: Any, action: Any) -> Answer:
        """An action as the LLM answer it stands for: in the space, or an error (the default is used, recorded)."""
        if action is None:
            return Answer(None, raw="", error="no action given")
        try:
            value = request.space.validate(action)
        except (SpaceError, TypeError, ValueError) as exc:
            return Answer(None, raw=str(action)[:2000], error=f"action outside the space: {str(exc)[:200]}")
        return Answer(value, raw=str(action)[:2000])

    # ----- setup ------------------------------------------------------------------------------------
    def _focal_ids(self, spec: RunSpec) -> list[int]:
        """The ids of the agents the spec's LLM policy plays (a model built once, without a run, to read them)."""
        cls = self.cls
        config = cls.Config.model_validate(spec.config)
        llm = LLMBackend("env:probe", ENV_SAMPLING, llm_factory=lambda: None, prompt=get_template(None, spec.profile))
        broker = DecisionBroker({"scripted": ScriptedBackend(cls.strategies), "llm": llm})
        model = cls(config, seed=spec.seed, broker=broker, policy=spec.policy, contract=spec.contract)
        ids = sorted(a.unique_id for a in model.agents if a.policy == "llm")
        model.release()
        return ids

    _order: list[AgentID] = []


class _Announcing(Backend):
    """The focal agents' backend, telling the bridge the run's id when the run starts (`bind`)."""

    def __init__(self, inner: Backend, bridge: OutsideLLM) -> None:
        self.inner, self.bridge, self.name = inner, bridge, inner.name

    def bind(self, run_id: str, spec: RunSpec) -> None:
        self.bridge.run_id = run_id
        self.inner.bind(run_id, spec)

    def decide_batch(self, requests: Sequence[Any]) -> list[Any]:
        return self.inner.decide_batch(requests)

    def drain_calls(self) -> list[Any]:
        return self.inner.drain_calls()


def parallel_env(scenario: Union[str, type], **kwargs: Any) -> SocietyEnv:
    """`SocietyEnv(scenario, **kwargs)`, by PettingZoo's naming convention."""
    return SocietyEnv(scenario, **kwargs)


__all__ = ["SocietyEnv", "parallel_env", "agent_name"]
