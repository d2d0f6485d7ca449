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
  same as one text. An agent with nothing to decide at this step has `phase` None. Observations are
  copies in plain data (`sim.core.observations.plain_copy`; a scenario's live view, such as the grid
  games', as its `as_data()`): a policy that writes to one changes nothing of the episode.
- `step(actions)` answers the pending requests (a value of the request's space: a number, an option,
  a text, a form's dict; anything else, or a missing action, becomes the request's default, recorded
  as a fallback) and runs the model to the next step where a focal agent decides. Rewards are the
  reward layer's (its weights and mode) summed over the ticks completed in between; `infos` hold the
  reward vector (`reward_vector`, summed likewise), the last completed tick's metrics and the tick;
  the episode's run id is `env.run_id` (two envs given the same seed return equal data, as
  PettingZoo's seed test asks). After the episode's end, `step` returns empty dicts until `reset()`.
- An episode ends `terminated` when the world ends it (a collapse) and `truncated` at its horizon.
- Its ticks are committed `commit_every` at a time (default 10; `sim.store.grouped`), and the rest when the
  episode ends, fails, or is reset or closed: a finished episode is stored as a run made tick by tick is. A crash
  (kill -9) mid-episode loses at most `commit_every - 1` ticks: the run stays at its last committed tick
  (`societas list` shows it stale), and `runner.resume.resume_run(store, run_id, llm_factory=POLICY)` goes on from
  there (the committed ticks replayed from the cache). While an episode runs, the store
  (`env.store`, another process) holds its committed ticks; `commit_every=1` commits each tick as it ends.
- Bad input (a seed outside 0..2**63-1 or not an integer, a horizon that is not a whole number of
  ticks, actions that are not a mapping of the env's agents) raises `UsageError` before anything is
  stored. An env dropped without `close()` (collected, or at the interpreter's exit) ends its episode
  (stored as failed) and closes the store it opened, so that a SQLite file holds every committed tick.

One env step is one decision point, not one tick: a scenario with several phases a tick (talk,
harvest, sanction) asks its focal agents once per phase.
"""

from __future__ import annotations

import numbers
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional, Union

from pettingzoo import ParallelEnv

from agents.llm.backend import LLMBackend, prompt_text
from agents.llm.base import Answer
from agents.llm.factory import ENV_SAMPLING
from agents.llm.prompts import get_template
from agents.scripted import ScriptedBackend
from runner.backends import make_backends
from runner.config import build_spec, cut, validate_config
from runner.execution import RunFailed, RunResult, execute
from scenarios.registry import get_scenario
from sim.contracts.backend import Backend
from sim.core.errors import UsageError
from sim.core.observations import plain_copy
from sim.core.records import StepColumns
from sim.core.spec import RunSpec
from sim.store.grouped import GroupCommit
from sim.store.schema import as_url
from sim.store.store import Store
from sim.tick.broker import DecisionBroker
from societas.env.bridge import EpisodeClosed, OutsideLLM
from societas.env.spaces import DecisionSpace, ObservationSpace

AgentID = str
MAX_SEED = 2**63 - 1
MAX_TICKS = 10_000_000
#: an episode's ticks committed at once by default: a crash loses at most 9, an episode costs ~1/4 less CPU (docs/learning.md)
COMMIT_EVERY = 10


def agent_name(agent_id: int) -> AgentID:
    """The env's name of a scenario agent."""
    return f"agent_{agent_id}"


class SocietyEnv(ParallelEnv):
    """A scenario as a PettingZoo parallel environment; see the module docstring."""

    metadata = {"name": "societas_v0", "render_modes": ["ansi"], "is_parallelizable": False}

    def __init__(self, scenario: Union[str, type], *, config: Optional[str] = None, sets: Sequence[str] = (),
                 seed: int = 0, policy: Optional[str] = None, db: Union[str, Store, None] = None, name: str = "env",
                 render_mode: Optional[str] = None, commit_every: int = COMMIT_EVERY, **fields: Any) -> None:
        """`scenario` with a config file, `--set`-style pairs and `fields` as `societas run` takes them; the agents whose
        policy is `llm` (every agent when no population says otherwise) are the env's. Episodes are stored in `db`
        (a URL, a SQLite file, a Store; default `runs.db`); `name` labels the policy in each episode's model id.
        `policy` is the run's policy (default: llm, so every agent without a group policy is focal); `commit_every`:
        the ticks an episode commits at once (see the module docstring)."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise UsageError(f"bad value for 'render_mode': {cut(render_mode)}; valid: ansi")
        if db is not None and not isinstance(db, (str, os.PathLike, Store)):
            raise UsageError(f"bad value for 'db': a database URL, a SQLite file path or a Store, not {type(db).__name__}")
        if isinstance(commit_every, bool) or not isinstance(commit_every, numbers.Integral) or not 1 <= commit_every <= MAX_TICKS:
            raise UsageError(f"bad value for 'commit_every': the ticks an episode commits at once, a whole number from 1 "
                             f"to {MAX_TICKS} (got {cut(commit_every)})")
        if not isinstance(name, str) or not name:
            raise UsageError(f"bad value for 'name': the policy's label, a non-empty string (got {cut(name)})")
        self.render_mode = render_mode
        base = build_spec(scenario, config_file=config, sets=sets, seed=_checked_seed(seed), overrides=fields or None,
                          policy=policy or "llm")
        if "llm" not in base.policies():
            raise UsageError("the environment has no focal agents: give some agents policy llm (--policy llm, or a "
                             "population group with policy: llm); the others are its background population")
        self.base = base
        self.name = name
        self.commit_every = int(commit_every)
        self.cls = get_scenario(base.scenario)
        self._seed = base.seed
        ids = self._focal_ids(base)
        self._owns_store = not isinstance(db, Store)
        self.store = db if isinstance(db, Store) else Store(as_url(os.fspath(db) if db else "sqlite:///runs.db"))
        self.possible_agents: list[AgentID] = [agent_name(i) for i in ids]
        self._ids = {agent_name(i): i for i in ids}
        self.agents: list[AgentID] = []
        self._pending: dict[AgentID, Any] = {}  # agent -> its pending DecisionRequest
        self._messages: dict[AgentID, Any] = {}
        self._order: list[AgentID] = []
        self._carried: Optional[tuple[dict[int, float], dict[int, dict[str, float]], bool, str]] = None
        self._episode = _Episode()
        self._started = False  # reset() was called (and close() not since)
        self._observation_spaces: dict[AgentID, ObservationSpace] = {}
        self._action_spaces: dict[AgentID, DecisionSpace] = {}
        self.run_id: Optional[str] = None
        self.tick = 0
        self.last_metrics: dict[str, Any] = {}
        self.result: Optional[RunResult] = None
        # dropped without close() (collected, or still open at the interpreter's exit): the episode ends, stored as
        # failed, and a store the env opened is closed (SQLite folds its write-ahead log into the file)
        weakref.finalize(self, _shut_down, self._episode, self.store, self._owns_store)

    # ----- spaces (one object per agent, as PettingZoo asks) ---------------------------------------
    def observation_space(self, agent: AgentID) -> ObservationSpace:
        space = self._observation_spaces.get(agent)
        if space is None:
            space = self._observation_spaces[agent] = ObservationSpace()
        return space

    def action_space(self, agent: AgentID) -> DecisionSpace:
        space = self._action_spaces.get(agent)
        if space is None:
            pending = self._pending_space(agent)
            space = self._action_spaces[agent] = DecisionSpace(pending)
        return space

    def _pending_space(self, agent: AgentID) -> Callable[[], Any]:
        ref = weakref.ref(self)

        def pending() -> Any:
            env = ref()
            return None if env is None else getattr(env._pending.get(agent), "space", None)

        return pending

    # ----- episodes -------------------------------------------------------------------------------
    def reset(self, seed: Optional[int] = None, options: Optional[Mapping[str, Any]] = None):
        """Start an episode (a new stored run) with `seed` (None: the last one + 1); `options` may hold
        `{"ticks": N}` (a shorter horizon; other keys are ignored). Bad input raises UsageError before anything is
        stored or the running episode is stopped."""
        if seed is not None:
            seed = _checked_seed(seed)
        elif self.run_id is not None:  # the next episode: the last seed + 1
            seed = (self._seed + 1) % (MAX_SEED + 1)
        else:
            seed = self._seed
        if options is not None and not isinstance(options, Mapping):
            raise UsageError(f"reset(options=...) takes a mapping such as {{'ticks': 5}}, not {type(options).__name__}")
        config = dict(self.base.config)
        ticks = (options or {}).get("ticks")
        if ticks is not None:
            if isinstance(ticks, bool) or not isinstance(ticks, numbers.Integral) or not 1 <= ticks <= MAX_TICKS:
                raise UsageError(f"bad value for 'ticks': must be a whole number of ticks from 1 to {MAX_TICKS} "
                                 f"(got {cut(ticks)})")
            config[self.cls.horizon_field] = int(ticks)
            config = validate_config(self.cls.Config, config).model_dump(mode="json")
        self._episode.stop()
        self._seed = seed
        episode = uuid.uuid4().hex[:12]
        llm = self.base.llm.model_copy(update={"provider": "env", "model": f"{self.name}/{episode}"})
        spec = self.base.model_copy(update={"seed": seed, "llm": llm, "config": config})
        bridge = OutsideLLM(f"env:{llm.model}")
        backends = make_backends(spec, self.cls, self.store, llm_factory=lambda: bridge)
        backends["llm"] = _Announcing(backends["llm"], bridge)
        self.result, self.run_id, self.tick, self.last_metrics = None, None, 0, {}
        self._pending, self._messages, self._order, self._carried = {}, {}, [], None
        self._episode.start(spec, GroupCommit(self.store, self.commit_every), backends, bridge, episode)
        self._started = True
        self.agents = list(self.possible_agents)
        # ticks completed before the first focal decision: their rewards come with the first step's; an episode
        # without a single focal decision (a one-tick horizon the agents sit out) ends at that step
        self._carried = self._advance()
        obs = {a: self._observation(a) for a in self.agents}
        infos = {a: {"tick": self.tick} for a in self.agents}
        return obs, infos

    def step(self, actions: Mapping[AgentID, Any]):
        """Answer the pending requests with `actions`, run to the next decision point; (obs, rewards, terminations,
        truncations, infos), each keyed by the agents live before the step (empty once the episode has ended)."""
        if not isinstance(actions, Mapping):
            raise UsageError(f"step() takes a mapping of agent -> action, not {type(actions).__name__}")
        if not self._started:
            raise UsageError("step() before reset(): call reset() to start an episode")
        unknown = [a for a in actions if a not in self._ids]
        if unknown:
            raise UsageError(f"step(): {cut(unknown[0])} is not an agent of this env; its agents: "
                             f"{cut(', '.join(self.possible_agents), 200)}")
        if not self.agents:  # the episode has ended: nothing to answer until reset()
            return {}, {}, {}, {}, {}
        live = list(self.agents)
        carried, self._carried = self._carried, None  # what happened between reset() and the first decision
        rewards, vectors, done, status = carried if carried is not None else ({}, {}, False, "running")
        if not done:
            pending = [(a, self._pending[a]) for a in self._order if a in self._pending]
            answers = [_answer(request, actions.get(a)) for a, request in pending]
            self._pending, self._messages = {}, {}
            self._episode.bridge.send(answers)
            rewards, vectors, done, status = self._advance(rewards, vectors)
        terminated = done and status == "collapsed"
        obs = {a: self._observation(a) for a in live}
        rew = {a: float(rewards.get(self._ids[a], 0.0)) for a in live}
        terms = dict.fromkeys(live, terminated)
        truncs = dict.fromkeys(live, done and not terminated)
        infos = {a: {"tick": self.tick, "reward_vector": vectors.get(self._ids[a], {}),
                     "metrics": plain_copy(self.last_metrics)} for a in live}
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
        """Stop an unfinished episode (its run is stored as failed) and close the store if the env opened it."""
        _shut_down(self._episode, self.store, self._owns_store)
        self._pending, self._messages, self._order, self._carried = {}, {}, [], None
        self.agents = []
        self._started = False

    def state(self) -> Any:
        raise NotImplementedError("the world's state is in the store: societas show RUN_ID --tick N")

    # ----- the model thread ------------------------------------------------------------------------
    def _advance(self, rewards: Optional[dict[int, float]] = None, vectors: Optional[dict[int, dict[str, float]]] = None
                 ) -> tuple[dict[int, float], dict[int, dict[str, float]], bool, str]:
        """Wait for the model's next decision point (or its end), adding the rewards of the ticks completed to
        `rewards` and `vectors` (new ones by default)."""
        bridge = self._episode.bridge
        assert bridge is not None
        rewards = {} if rewards is None else rewards
        vectors = {} if vectors is None else vectors
        focal = set(self._ids.values())
        msg = bridge.to_env.get()  # the model's next batch, its end or its failure: one handoff
        for record in bridge.take_ticks():  # the ticks committed before it
            self.tick, self.last_metrics = record.tick, dict(record.metrics)
            self.run_id = bridge.run_id
            for aid, reward, components in _rewards_of(record.steps, focal):
                rewards[aid] = rewards.get(aid, 0.0) + float(reward)
                vec = vectors.setdefault(aid, {})
                for k, v in (components or {}).items():
                    vec[k] = vec.get(k, 0.0) + float(v)
        kind = msg[0]
        if kind == "decide":
            _, requests, messages = msg
            self._pending = {agent_name(r.agent_id): r for r in requests}
            self._messages = {agent_name(r.agent_id): m for r, m in zip(requests, messages)}
            self._order = [agent_name(r.agent_id) for r in requests]
            self.run_id = bridge.run_id
            return rewards, vectors, False, "running"
        self._episode.thread = None
        if kind == "end":
            self.result = msg[1]
            self.run_id = self.result.run_id
            return rewards, vectors, True, self.result.status
        self.agents = []
        raise msg[1]

    # ----- observations ------------------------------------------------------------------------------
    def _observation(self, agent: AgentID) -> dict[str, Any]:
        """The agent's observation: a copy in plain data, so that writing to it changes nothing of the episode."""
        request = self._pending.get(agent)
        if request is None:
            return {"tick": self.tick, "phase": None, "request": None, "messages": [], "prompt": ""}
        messages = self._messages[agent]
        return plain_copy({
            "tick": request.tick, "phase": request.phase,
            "request": {"space": request.space, "spec": request.space.spec(), "default": request.default,
                        "observation": request.observation, "question": request.question, "context": request.context,
                        "own_context": request.own_context, "memory": request.memory, "feedback": request.feedback,
                        "persona": request.persona, "seed": request.seed},
            "messages": messages, "prompt": prompt_text(messages),
        })

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


class _Episode:
    """The running episode's model thread and bridge, kept apart from the env (the thread must not keep the env
    alive, so that an env dropped without `close()` is collected and its episode stopped)."""

    def __init__(self) -> None:
        self.thread: Optional[threading.Thread] = None
        self.bridge: Optional[OutsideLLM] = None

    def start(self, spec: RunSpec, store: GroupCommit, backends: dict[str, Any], bridge: OutsideLLM, episode: str) -> None:
        self.bridge = bridge
        self.thread = threading.Thread(target=_play, args=(spec, store, backends, bridge), name=f"societas-env-{episode}",
                                       daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """End the running episode, if any: its model thread stops (the run is stored as failed)."""
        thread, bridge = self.thread, self.bridge
        if thread is not None and bridge is not None and thread.is_alive():
            bridge.close()
            while True:  # drain until the thread says it ended
                kind = bridge.to_env.get()[0]
                if kind in ("end", "closed", "error"):
                    break
            thread.join()
        self.thread = None


def _shut_down(episode: _Episode, store: Store, close_store: bool) -> None:
    """Stop the episode (stored as failed) and close the store's connections if the env opened it."""
    episode.stop()
    if close_store:
        store.close()


def _play(spec: RunSpec, store: GroupCommit, backends: dict[str, Any], bridge: OutsideLLM) -> None:
    """The model thread: one run, every tick and its end handed to the env through the bridge."""
    def progress(tick: int, total: int, record: Any) -> None:
        bridge.tick(record)

    try:
        result = execute(spec, store, backends=backends, progress=progress)
        bridge.to_env.put(("end", result))
    except RunFailed as exc:
        if isinstance(exc.__cause__, EpisodeClosed) or "environment was reset or closed" in exc.reason:
            bridge.to_env.put(("closed", exc))
        else:
            bridge.to_env.put(("error", exc))
    except BaseException as exc:  # noqa: BLE001 - handed to the env's thread, raised there
        bridge.to_env.put(("error", exc))


def _rewards_of(steps: Sequence[Any], agents: set[int]) -> list[tuple[int, float, Optional[dict[str, float]]]]:
    """(agent id, reward, reward vector) of each of `agents` in a tick's steps; of columns, read from the columns
    (no AgentStepRecord is made: an env reads one or a few agents of a tick, at every step)."""
    if isinstance(steps, StepColumns):
        vectors = steps.vectors
        return [(aid, steps.rewards[i], None if vectors is None else vectors.vector(i))
                for i, aid in enumerate(steps.agent_ids) if aid in agents]
    return [(st.agent_id, st.reward, st.components) for st in steps if st.agent_id in agents]


def _checked_seed(seed: Any) -> int:
    """An episode's seed: an integer from 0 to 2**63-1 (a float, a bool or a number outside is refused, not cut)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_SEED:
        raise UsageError(f"bad value for 'seed': must be an integer from 0 to 2**63-1 (got {cut(seed)})")
    return int(seed)


def _answer(request: Any, action: Any) -> Answer:
    """An action as the LLM answer it stands for: in the space, or an error (the default is used, recorded)."""
    if action is None:
        return Answer(None, raw="", error="no action given")
    raw = _text(action, 2000)
    try:
        value = request.space.validate(action)
    except Exception as exc:  # noqa: BLE001 - an action is untrusted input: whatever it raises, it is outside the space
        return Answer(None, raw=raw, error=f"action outside the space: {_text(exc, 200)}")
    return Answer(value, raw=raw)


def _text(value: Any, limit: int) -> str:
    """`str(value)` cut to `limit` characters; a value that cannot be printed (an int of 5,000 digits) by its type."""
    try:
        return str(value)[:limit]
    except Exception:  # noqa: BLE001 - any object may come from outside
        return f"<{type(value).__name__}>"


def parallel_env(scenario: Union[str, type], **kwargs: Any) -> SocietyEnv:
    """`SocietyEnv(scenario, **kwargs)`, by PettingZoo's naming convention."""
    return SocietyEnv(scenario, **kwargs)


__all__ = ["SocietyEnv", "parallel_env", "agent_name"]
