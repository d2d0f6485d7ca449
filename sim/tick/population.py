"""Who plays a run: its population planned and checked once, before the world is built.

`plan_population(cls, config, policy)` checks everything a config says about its agents against the
scenario (a policy it supports, late entry where it allows it, every strategy named for scripted agents
known or loadable by reference) and returns the `Population` the model populates its world from
(`SocietyModel.population_plan`), with the strategies named by reference loaded. The runner plans it
when it binds a spec (runner.config.bind) and hands it to the model; a model built directly plans
its own. Every problem is bad input: a one-line UsageError naming the field and the valid values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from sim.core.errors import UsageError
from sim.core.refs import is_reference, load_strategy
from sim.core.spec import policies_used
from sim.tick.config import PopulationGroup, ScenarioConfig
from sim.tick.models import backend_for

if TYPE_CHECKING:
    from sim.tick.model import SocietyModel


@dataclass(frozen=True)
class Population:
    """A run's agents by group (checked): each group's count, policy, strategy, persona and the tick it joins."""

    #: the config's groups (None: one group of every agent, playing the run's policy and the default strategy)
    groups: Optional[tuple[PopulationGroup, ...]]
    #: the run's policy: a group's where it names none
    policy: str
    #: the scenario's name, for messages
    scenario: str
    #: the scenario's strategies, with those the config names by reference (loaded)
    strategies: Mapping[str, Any] = field(repr=False, compare=False)
    #: each group's model of its own (its backend `llm:K`, sim.tick.models), None where it plays the run's llm
    models: tuple[Optional[str], ...] = ()

    def roles(self, n: int, default_strategy: str, persona: str = "") -> list[tuple[str, str, str]]:
        """(policy, strategy, persona) for each of the n agents: a group's own, else the run's policy,
        `default_strategy` and `persona`. UsageError when the groups' counts do not add up to n, or the
        strategy a scenario gives its scripted agents by default is not one of its strategies."""
        groups = self.groups or (PopulationGroup(count=n),)
        total = sum(g.count for g in groups)
        if total != n:
            raise UsageError(f"population counts add up to {total}, but the scenario has {n} agents")
        plan: list[tuple[str, str, str]] = []
        for k, g in enumerate(groups):
            role = (g.policy or self.policy, g.strategy or default_strategy, g.persona or persona)
            if role[0] == "scripted" and role[1] not in self.strategies:
                raise UsageError(f"unknown {self.scenario} strategy {role[1]!r} for scripted agents; valid: "
                                 f"{', '.join(sorted(self.strategies)) or 'none (the scenario has no strategies)'}")
            model = self.models[k] if k < len(self.models) else None
            if role[0] == "llm" and model is not None:  # the agent splits it: policy llm, backend llm:K
                role = (model, role[1], role[2])
            plan.extend([role] * g.count)
        return plan

    def entries(self, n: int) -> list[int]:
        """The tick each of the n agents of `roles` joins (1 for all without a population)."""
        return [g.enter for g in self.groups or (PopulationGroup(count=n),) for _ in range(g.count)]


def plan_population(cls: type["SocietyModel"], config: ScenarioConfig, policy: str) -> Population:
    """The population `config` asks of scenario `cls` under the run's `policy`, checked (UsageError otherwise).

    A population group's `strategy`, and the config's own `strategy` field when some agent takes it (a group
    without a strategy, or no population) and is scripted, must be one of the scenario's strategies or a
    reference `module:function` / `path/to/file.py:function` that loads; a reference in the `strategy` field
    must load whoever takes it.
    """
    name = cls.name or cls.__qualname__
    population = config.population
    if "synthesis" in policies_used(population, policy) and not cls.synthesis:
        raise UsageError(f"{name} does not support --policy synthesis (agents run by a program an LLM writes); the "
                         "grid games do: gathering, cleanup")
    if any(g.enter > 1 for g in population or ()) and not cls.late_entry:
        raise UsageError(f"bad value for 'population.enter': {name} does not support late entry; every group takes "
                         "part from tick 1")
    named = [("population.strategy", g.strategy) for g in population or () if g.strategy is not None]
    own = getattr(config, "strategy", cls.default_strategy)  # what agents without a group strategy play
    field_name = "strategy" if "strategy" in type(config).model_fields else f"{name}.default_strategy"
    if isinstance(own, str):
        takers = [g for g in population or () if g.strategy is None] if population else None
        scripted = (any((g.policy or policy) == "scripted" for g in takers) if takers is not None
                    else policy == "scripted")
        if is_reference(own) or scripted:
            named.append((field_name, own))
    if any(g.llm is not None and (g.policy or policy) != "llm" for g in population or ()):
        k = next(i for i, g in enumerate(population or ()) if g.llm is not None and (g.policy or policy) != "llm")
        raise UsageError(f"bad value for 'population.{k}.llm': a group's llm block sets the model of LLM agents, and this "
                         f"group plays {policy!r} (give it policy: llm)")
    models = tuple(backend_for(config, g.llm) if g.llm is not None else None for g in population or ())
    return Population(tuple(population) if population else None, policy, name, _strategies(cls, named), models)


def _strategies(cls: type["SocietyModel"], named: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """The scenario's strategies with every reference among `named` loaded; UsageError naming the field of a name
    that is neither."""
    loaded: dict[str, Any] = {}
    for field_name, strategy in named:
        if is_reference(strategy):
            if strategy not in cls.strategies and strategy not in loaded:
                try:
                    loaded[strategy] = load_strategy(strategy)
                except UsageError as exc:
                    raise UsageError(f"bad value for {field_name!r}: {exc}") from None
        elif not cls.strategies:
            raise UsageError(f"{cls.name or cls.__qualname__} has no scripted strategies, so it has no scripted agents: "
                             "run it with --policy llm (or give the class `strategies`)")
        elif strategy not in cls.strategies:
            raise UsageError(f"bad value for {field_name!r}: {strategy!r}; valid: {', '.join(sorted(cls.strategies))}, "
                             "or a reference module:function or path/to/file.py:function")
    return {**dict(cls.strategies), **{name: loaded[name] for name in sorted(loaded)}}
