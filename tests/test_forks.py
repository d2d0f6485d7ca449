"""A fork takes exactly the fields its world reads after the branch: each fork field changes the world from the tick
after it (where its `fork_conditions` hold), a change where they do not is refused, and every other field is refused."""

from __future__ import annotations

import json

import pytest

from conftest import cli, cli_json
from forking import trace
from scenarios.registry import REGISTRY
from sim.core.errors import UsageError
from sim.core.fields import describe_fields
from runner.config import build_spec
from runner.execution import execute
from runner.resume import fork_fields, fork_spec, unread_change
from sim.store.store import Store

LLM2_SCRIPTED2 = "population=[{count: 2, policy: llm}, {count: 2, policy: scripted}]"

#: each scenario with its features on and both LLM and scripted agents (so that every condition can hold): sets,
#: the run's policy, ticks traced, the branch tick
WORLDS = {
    "commons": (["fishers=4", "months=8", "talk=true", "sanctions=true", "norm_formation=true", "social_learning=false",
                 "conversation_rounds=1", "reflection=true", "catch=150", "capacity=1000",
                 "population=[{count: 2, policy: llm}, {count: 2, policy: scripted, strategy: fixed}]"], "llm", 8, 2),
    "donor": (["agents=6", "rounds=3", "generations=3", "punishment=true", "strategy=punisher", "fraction=0.9",
               "punish_fraction=0.5", "threshold=0.95",
               "population=[{count: 2, policy: llm}, {count: 4, policy: scripted}]"], "llm", 18, 4),
    "market": (["customers_n=6", "businesses_n=6", "max_steps=6", "bandwidth=2"], "llm", 6, 0),
    "social": (["agents=60", "ticks=8", "metric_every=1", "activity=0.5", "stance_readback=false",
                "population=[{count: 20, policy: llm}, {count: 40, policy: scripted}]"], "llm", 8, 2),
    "gathering": (["agents=6", "map=small", "episode_steps=40", "strategy=exploitative", "regrowth=density",
                   "population=[{count: 2, policy: llm}, {count: 4, policy: scripted}]"], "llm", 40, 2),
    "cleanup": (["agents=6", "map=small", "episode_steps=30", "strategy=exploitative",
                 "population=[{count: 2, policy: llm}, {count: 2, policy: scripted},"
                 " {count: 2, policy: scripted, strategy: cooperative}]"], "llm", 30, 2),
}
#: the grid's synthesis settings are read by synthesis runs only: such a run, its program refused each time
SYNTHESIS = (["agents=2", "map=small", "episode_steps=4", "iterations=2"], "synthesis", 8, 2)
SYNTHESIS_FIELDS = {"code_tokens", "code_retries", "step_timeout", "cpu_limit", "memory_limit", "iterations"}
#: fork fields that say how the world runs, not what it does (the sandbox's isolation level: a user without
#: bubblewrap forks a run under a weaker level by name): they must change nothing after the branch
SETTINGS = {("gathering", "sandbox"): "process", ("cleanup", "sandbox"): "process"}
#: (scenario, field) -> (extra sets, the value to fork to) where the generic other value shows nothing in the world above
CASES = {
    ("commons", "collapse_below"): ([], 800.0),
    ("donor", "punish_multiplier"): ([], 9.0),
    ("market", "search"): ([], "random"),
    ("market", "offer_notes"): (["customers_n=10", "businesses_n=20", "bandwidth=5"], False),
    ("social", "feed_size"): ([], 2),
    ("social", "feed_window"): (["feed_window=3", "recommender=random"], 1),
    ("social", "hot_decay"): (["activity=1.0", "feed_window=8"], 100.0),
    ("social", "max_candidates"): ([], 10),
    ("social", "metric_sample"): ([], 10),
    ("social", "path_sources"): ([], 1),
    ("gathering", "regrowth"): ([], "fixed"),
    ("gathering", "respawn_time"): (["regrowth=fixed"], 1),
    ("gathering", "beam_length"): ([], 1),
    ("cleanup", "beam"): ([], False),
    ("cleanup", "beam_length"): ([], 1),
    ("cleanup", "restoration"): (["depletion=0.9"], 0.8),
    ("cleanup", "hits_to_tag"): ([], 5),
    ("cleanup", "timeout_steps"): ([], 0),
    ("cleanup", "fire_cost"): ([], 7.0),
    ("cleanup", "fire_penalty"): ([], 0.0),
    ("gathering", "iterations"): ([], 3),
    ("cleanup", "iterations"): ([], 3),
}


def other_value(scenario: str, field: str, value):
    """A valid value for `field` other than `value`: the next option, the flipped bool, a changed number (a number
    where there was none)."""
    doc = {d.name: d for d in describe_fields(REGISTRY[scenario].Config)}[field]
    if value is None:
        return doc.kind(doc.lo or 1)
    if doc.options:
        return next(o for o in doc.options if o != value)
    if doc.kind is bool:
        return not value
    if doc.kind is str:
        return f"{value} (changed)"
    step = 1 if doc.kind is int else 0.25
    for new in (value * 2 + step, value + step, value - step):
        new = doc.kind(new)
        if (doc.lo is None or new >= doc.lo) and (doc.hi is None or new <= doc.hi) and new != value:
            return new
    raise AssertionError(f"no other value for {scenario}.{field}")


def fork_cases(scenario: str):
    """(field, sets, policy, ticks, at, value) for every field a fork of `scenario` may change besides the reward
    layer's and the horizon's."""
    cls = REGISTRY[scenario]
    for field in sorted(cls.fork_fields):
        if (scenario, field) in SETTINGS:
            continue
        sets, policy, ticks, at = SYNTHESIS if field in SYNTHESIS_FIELDS else WORLDS[scenario]
        extra, value = CASES.get((scenario, field), ([], None))
        sets = [*sets, *extra]
        if value is None:
            value = other_value(scenario, field, build_spec(scenario, sets=sets, policy=policy).config[field])
        yield field, sets, policy, ticks, at, value


@pytest.mark.parametrize("scenario", sorted(REGISTRY))
def test_every_fork_field_changes_the_world_after_the_branch(scenario):
    """Each field a fork may change, changed after the branch tick, changes a tick after it (its record or what its
    agents are asked) and none before; under the config that its conditions ask for."""
    program = "not a program"  # synthesis: refused each time, so that every retry is asked for
    inert = []
    for field, sets, policy, ticks, at, value in fork_cases(scenario):
        config = build_spec(scenario, sets=sets, policy=policy).config
        assert unread_change(REGISTRY[scenario], field, {**config, field: value}, policy) is None, field
        base = trace(scenario, sets, policy, ticks, program=program)
        forked = trace(scenario, sets, policy, ticks, swap=(at, {field: value}), program=program)
        assert forked[:at] == base[:at], field
        if forked[at:] == base[at:]:
            inert.append(f"{field}={value!r}")
    assert not inert, f"{scenario}: fork fields that change nothing after the branch: {inert}"


@pytest.mark.parametrize("scenario, field", sorted(SETTINGS))
def test_a_fork_field_that_is_a_setting_changes_nothing_after_the_branch(scenario, field):
    """The sandbox's level is forkable (a fork under a weaker level named by the user) and changes nothing in the
    world after the branch."""
    sets, policy, ticks, at = SYNTHESIS
    assert field in REGISTRY[scenario].fork_fields
    base = trace(scenario, sets, policy, ticks, program="not a program")
    forked = trace(scenario, sets, policy, ticks, swap=(at, {field: SETTINGS[scenario, field]}), program="not a program")
    assert forked == base


#: (scenario, field, sets, policy) where a declared condition fails, so that a fork of the field changes nothing
UNREAD = [
    ("commons", "reasoning", ["fishers=3", "months=4"], "scripted"),
    ("commons", "sanction_fine", ["fishers=3", "months=4", "strategy=random"], "scripted"),
    ("commons", "vote_rule", ["fishers=3", "months=4", "talk=true"], "scripted"),
    ("commons", "catch", ["fishers=3", "months=4", "strategy=random"], "scripted"),
    ("donor", "strategy_tokens", ["agents=4", "rounds=2", "generations=2"], "scripted"),
    ("donor", "punish_multiplier", ["agents=4", "rounds=2", "generations=2", "strategy=punisher"], "scripted"),
    ("market", "customer_view", ["customers_n=4", "businesses_n=4", "max_steps=3"], "scripted"),
    ("market", "menu_prompt", ["customers_n=4", "businesses_n=4", "max_steps=3", "llm_side=customers"], "llm"),
    ("social", "topic", ["agents=30", "ticks=4", "activity=0.5"], "scripted"),
    ("social", "mu", ["agents=30", "ticks=4", "activity=0.5"], "llm"),
    ("gathering", "density_radius", ["agents=4", "map=small", "episode_steps=20", "regrowth=fixed"], "scripted"),
    ("gathering", "respawn_time", ["agents=4", "map=small", "episode_steps=20", "regrowth=density"], "scripted"),
    ("gathering", "code_tokens", ["agents=4", "map=small", "episode_steps=6"], "scripted"),
    ("cleanup", "cpu_limit", ["agents=4", "map=small", "episode_steps=6"], "llm"),
]


@pytest.mark.parametrize("scenario, field, sets, policy", UNREAD, ids=[f"{s}-{f}" for s, f, _, _ in UNREAD])
def test_a_fork_field_whose_condition_fails_is_refused_and_would_change_nothing(scenario, field, sets, policy):
    """Where a fork field's condition fails the field changes nothing after the branch (the declaration is true), and a
    fork that changes it is refused, saying what it would need."""
    cls = REGISTRY[scenario]
    config = build_spec(scenario, sets=sets, policy=policy).config
    value = other_value(scenario, field, config[field])
    assert trace(scenario, sets, policy, 6, swap=(1, {field: value})) == trace(scenario, sets, policy, 6)
    why = unread_change(cls, field, {**config, field: value}, policy, [field])
    assert why and field in why and "reads it only" in why


def test_every_declared_condition_names_fields_and_policies_that_exist():
    """A condition names a fork field of its scenario, and config fields, policies or strategies that exist."""
    for name, cls in REGISTRY.items():
        for field, conditions in cls.fork_conditions.items():
            assert field in cls.fork_fields, (name, field)
            for condition in conditions:
                for key in condition:
                    assert key in ("@policy", "@strategy") or key in cls.Config.model_fields, (name, field, key)
        assert cls.horizon_field not in cls.horizon_bounds and set(cls.horizon_bounds) <= set(cls.Config.model_fields)


@pytest.mark.parametrize("scenario", sorted(REGISTRY))
def test_every_field_outside_the_fork_fields_is_refused(scenario, store):
    """A fork that changes a field its world does not read after the branch is refused before a row is written."""
    cls = REGISTRY[scenario]
    sets = {"commons": ["months=3"], "donor": ["agents=4", "rounds=2", "generations=1"],
            "market": ["customers_n=2", "businesses_n=2", "max_steps=2"], "social": ["agents=10", "ticks=3"],
            "gathering": ["map=small", "agents=2", "episode_steps=3"], "cleanup": ["map=small", "agents=2", "episode_steps=3"]}
    parent = store.get_run(execute(build_spec(scenario, sets=sets[scenario]), store).run_id)
    docs = {d.name: d for d in describe_fields(cls.Config)}
    may = fork_fields(cls)
    tried = 0
    for field in sorted(set(cls.Config.model_fields) - may):
        if field == "population" or docs[field].kind not in (bool, int, float, str) and not docs[field].options:
            continue
        current = parent.spec["config"][field]
        try:
            new = other_value(scenario, field, current) if current is not None else (docs[field].lo or 1)
        except (AssertionError, TypeError):
            continue
        with pytest.raises(UsageError, match="cannot change mid-run|bad"):
            fork_spec(store, parent, 1, [f"{field}={json.dumps(new)}"])
        tried += 1
    assert tried and store.count_runs() == 1


def test_a_fork_from_fixed_to_density_regrowth_runs_and_its_radius_counts(db_url):
    """The issue's grid forks: fixed -> density regrowth runs (it raised TypeError); under density regrowth a new radius
    changes the apples after the branch (it changed nothing)."""
    parent = cli_json("run", "gathering", "--set", "map=small", "--set", "agents=3", "--set", "episode_steps=60",
                      "--set", "strategy=greedy", db=db_url)["run_id"]
    switched = cli_json("fork", parent, "--at", "5", "--set", "regrowth=density", db=db_url)
    assert switched["status"] == "finished"
    dense = cli_json("run", "gathering", "--set", "map=small", "--set", "agents=3", "--set", "episode_steps=60",
                     "--set", "regrowth=density", db=db_url)["run_id"]
    wide = cli_json("fork", dense, "--at", "5", "--set", "density_radius=6", db=db_url)
    store = Store(db_url)
    a, b = store.tick_snapshots(dense), store.tick_snapshots(wide["run_id"])
    assert all(a[t] == b[t] for t in range(1, 6)) and any(a[t] != b[t] for t in range(6, 61))
    proc = cli("fork", parent, "--at", "5", "--set", "density_radius=6", db=db_url)  # fixed regrowth: unread
    assert proc.returncode == 2 and "regrowth=density" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("fork", parent, "--at", "5", "--set", "iterations=4", db=db_url)  # a scripted run: nothing reads it
    assert proc.returncode == 2 and "iterations" in proc.stderr
    assert store.count_runs() == 4


def test_the_horizon_and_the_fields_bounding_it_fork_together(db_url):
    """Social's horizon `ticks` forks and makes rollouts; the donor game's generations forks only with its horizon."""
    parent = cli_json("run", "social", "--set", "agents=12", "--set", "ticks=4", db=db_url)["run_id"]
    longer = cli_json("fork", parent, "--at", "2", "--set", "ticks=6", db=db_url)
    assert longer["ticks"] == 6
    group = cli_json("rollouts", parent, "--at", "2", "-k", "2", "--set", "ticks=3", db=db_url)
    assert len(group["runs"]) == 2
    donor = cli_json("run", "donor", "--set", "agents=4", "--set", "rounds=2", "--set", "generations=1", db=db_url)["run_id"]
    proc = cli("fork", donor, "--at", "2", "--set", "generations=2", db=db_url)
    assert proc.returncode == 2 and "total_rounds" in proc.stderr
    more = cli_json("fork", donor, "--at", "2", "--set", "generations=2", "--set", "total_rounds=8", db=db_url)
    assert more["ticks"] == 8
