"""Rewards you can learn from: reward components and weights, the PettingZoo environment, rollout groups,
trajectories with token log-probabilities, and the training study."""

from __future__ import annotations

import csv
import json
import random
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from analysis.rollouts import advantages
from conftest import cli, cli_json
from scenarios.registry import REGISTRY
from sim.core.spaces import Number, space_key
from sim.env import parallel_env
from sim.reward.components import COMMON_COMPONENTS, inequity, weigh
from sim.reward.rewards import compute_rewards
from runner.rollouts import rollout_runs
from sim.store.store import Store

ROOT = Path(__file__).resolve().parent.parent


# ----- components and weights ---------------------------------------------------------------------------------------
def test_inequity_is_fehr_schmidt_against_the_brute_force_sums():
    rng = random.Random(2)
    for n in (1, 2, 5, 40):
        pays = {i: float(rng.choice([0, 1, 3, 3, 7.5, -2])) for i in range(n)}
        envy, guilt = inequity(pays)
        for i, x in pays.items():
            others = [y for j, y in pays.items() if j != i]
            want_envy = sum(max(y - x, 0) for y in others) / max(1, n - 1)
            want_guilt = sum(max(x - y, 0) for y in others) / max(1, n - 1)
            assert envy[i] == pytest.approx(want_envy, abs=1e-12) and guilt[i] == pytest.approx(want_guilt, abs=1e-12)


def test_default_weights_give_the_payoff_bit_for_bit():
    comps = {"payoff": {1: 0.1 + 0.2, 2: -0.0, 3: 5.0}, "envy": {1: 3.0}}
    assert weigh(comps, {"payoff": 1.0}, [1, 2, 3]) == {1: 0.1 + 0.2, 2: 0.0, 3: 5.0}


def _stored(store: Store, run_id: str):
    return [(s.tick, s.agent_id, s.reward, s.payoff, s.components) for s in store.steps(run_id)]


def test_stored_reward_is_the_weighted_components_under_the_mode(db_url):
    weights = {"payoff": 1.0, "envy": -0.5, "guilt": -0.25, "norm_broken": -2.0, "stock_change": 0.01}
    got = cli_json("run", "commons", "--set", "sanctions=true", "--set", "reward_mode=integrated", "--set", "lam=0.5",
                   "--set", f"reward_weights={json.dumps(weights)}", "--set",
                   "population=[{count: 3, strategy: sustainable}, {count: 2, strategy: greedy}]", db=db_url)
    store = Store(db_url)
    rows = _stored(store, got["run_id"])
    assert rows and all(c is not None and "payoff" in c for *_, c in rows)
    assert any(c.get("envy") for *_, c in rows) and any(c.get("norm_broken") for *_, c in rows)
    for tick in sorted({r[0] for r in rows}):
        at = [r for r in rows if r[0] == tick]
        base = {aid: sum(w * c.get(name, 0.0) for name, w in weights.items()) for _, aid, _, _, c in at}
        want = compute_rewards(base, "integrated", 0.5)
        for _, aid, reward, payoff, c in at:
            assert reward == pytest.approx(want[aid], abs=1e-9)
            assert c["payoff"] == payoff
    # and under the default weights the reward is the payoff
    plain = cli_json("run", "commons", "--set", "strategy=random", db=db_url)
    assert all(reward == payoff for _, _, reward, payoff, _ in _stored(store, plain["run_id"]))


@pytest.mark.parametrize("value, says", [
    ('{payoff: 1, bogus: 2}', "'bogus' is not a reward component of commons; valid: catch, envy"),
    ('{payoff: .inf}', "reward_weights"),
    ('[1, 2]', "reward_weights"),
])
def test_bad_weights_are_refused_before_anything_is_stored(db_url, tmp_path, value, says):
    proc = cli("run", "commons", "--set", f"reward_weights={value}", db=db_url)
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs.db").exists() or Store(db_url).count_runs() == 0


def test_every_scenario_documents_its_own_components_apart_from_the_common_ones():
    for name, cls in REGISTRY.items():
        assert not set(cls.component_docs) & set(COMMON_COMPONENTS), name
    assert {"catch", "stock_change"} <= set(REGISTRY["commons"].component_docs)
    assert {"upvotes", "downvotes", "replies"} <= set(REGISTRY["social"].component_docs)


def test_a_space_key_does_not_depend_on_what_the_process_saw_before():
    assert space_key(Number(0, 100.0, 1)) == '{"hi": 100.0, "lo": 0, "step": 1, "type": "number"}'
    assert space_key(Number(0, 100, 1)) == '{"hi": 100, "lo": 0, "step": 1, "type": "number"}'


# ----- the PettingZoo environment -----------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", sorted(REGISTRY))
def test_parallel_api_test_passes_and_a_random_episode_replays(scenario, db_url):
    from pettingzoo.test import parallel_api_test

    env = parallel_env(scenario, db=db_url, seed=1)
    assert env.possible_agents
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the api test warns where an agent misses a key: that is a failure here
        parallel_api_test(env, num_cycles=5000)
    assert env.result is not None and env.result.status in ("finished", "collapsed")
    # the last episode is a stored run, replayed exactly by `societas replay` (the cache answers the env's decisions)
    got = cli_json("replay", env.result.run_id, db=db_url)
    assert got["matched"] and got["ticks"] == env.result.ticks


def test_env_observations_rewards_and_bad_actions(db_url):
    env = parallel_env("commons", db=db_url, seed=3, months=3,
                       population=[{"count": 2, "policy": "llm"}, {"count": 3, "policy": "scripted", "strategy": "fixed"}])
    assert env.possible_agents == ["agent_1", "agent_2"]
    obs, infos = env.reset(seed=5)
    o = obs["agent_1"]
    assert o["phase"] == "harvest" and o["request"]["spec"]["type"] == "number" and "fisher 1" in o["prompt"]
    assert o["messages"][-1]["role"] == "user" and env.action_space("agent_1").contains(3.0)
    assert not env.action_space("agent_1").contains(10_000.0)
    obs, rew, term, trunc, info = env.step({"agent_1": 4.0, "agent_2": "many fish"})  # agent 2: outside the space
    assert rew == {"agent_1": 4.0, "agent_2": 0.0}  # private reward = own catch; the default (0) for agent 2
    assert info["agent_1"]["reward_vector"]["catch"] == 4.0
    while env.agents:
        obs, rew, term, trunc, info = env.step({a: 1.0 for a in env.agents})
    store = Store(db_url)  # read once the episode has ended: its ticks are committed in groups (commit_every)
    steps = {s.agent_id: s for s in store.steps(env.run_id) if s.tick == 1}
    assert steps[2].fallback and "outside the space" in steps[2].reason
    assert all(trunc.values()) and not any(term.values()) and store.get_run(env.run_id).status == "finished"
    env.reset(seed=6)
    first = env.run_id
    env.reset(seed=7)  # an episode left unfinished is stored as failed, its ticks kept
    assert store.get_run(first).status == "failed"
    env.close()


def test_env_without_focal_agents_is_refused():
    from sim.core.errors import UsageError

    with pytest.raises(UsageError, match="no focal agents"):
        parallel_env("commons", sets=["strategy=fixed"], policy="scripted")


# ----- rollout groups -----------------------------------------------------------------------------------------------
def test_rollouts_share_the_parent_up_to_the_branch_and_their_advantages_sum_to_zero(db_url):
    parent = cli_json("run", "commons", "--set", "strategy=random", "--seed", "4", db=db_url)["run_id"]
    store = Store(db_url)
    results = rollout_runs(store, parent, 3, 8)
    assert len(results) == 8 and len({r.run_id for r in results}) == 8
    mine = store.tick_snapshots(parent)
    later = set()
    for r in results:
        snaps = store.tick_snapshots(r.run_id)
        assert all(snaps[t] == mine[t] for t in (1, 2, 3))
        later.add(json.dumps([snaps[t].steps for t in sorted(snaps) if t > 3], sort_keys=True))
    assert len(later) > 1  # the decision seeds after the branch differ
    report = advantages(store, [r.run_id for r in results], 3)
    assert sum(g["advantage"] for g in report["runs"]) == pytest.approx(0.0, abs=1e-9)
    for aid in {a["agent_id"] for a in report["agents"]}:
        assert sum(a["advantage"] for a in report["agents"] if a["agent_id"] == aid) == pytest.approx(0.0, abs=1e-9)
    # a rollout replays exactly, and the CLI makes and reports a group
    assert cli_json("replay", results[2].run_id, db=db_url)["matched"]
    got = cli_json("rollouts", parent, "--at", "3", "-k", "2", db=db_url)
    assert len(got["runs"]) == 2 and got["after"] == 3


@pytest.mark.parametrize("args, says", [(["-k", "0"], "'-k'"), (["--at", "99"], "'--at'")])
def test_bad_rollouts_are_refused(db_url, args, says):
    parent = cli_json("run", "commons", "--set", "strategy=random", db=db_url)["run_id"]
    base = ["rollouts", parent] + (["--at", "3"] if "--at" not in args else [])
    proc = cli(*base, *args, db=db_url)
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr
    assert Store(db_url).count_runs() == 1


# ----- trajectories (the real embedded model) ------------------------------------------------------------------------
@pytest.mark.slow
def test_trajectories_load_with_datasets_and_their_logprobs_recompute(db_url, tmp_path):
    import datasets
    import torch
    from transformers import AutoModelForCausalLM

    from agents.llm.local.ids import resolve_model

    weights = {"payoff": 1.0, "envy": -0.3, "stock_change": 0.05}
    run = cli_json("run", "commons", "--policy", "llm", "--ticks", "2", "--seed", "3", "--set", "talk=true",
                   "--set", "llm.dtype=fp32", "--set", "reward_mode=integrated", "--set", "lam=0.4",
                   "--set", f"reward_weights={json.dumps(weights)}", db=db_url)
    out = tmp_path / "traj"
    proc = cli("export", run["run_id"], "--format", "trajectories", "--out", str(out), db=db_url)
    assert proc.returncode == 0, proc.stderr
    data = datasets.load_dataset("parquet", data_files=str(out / "trajectories.parquet"))["train"]
    assert len(data) == 20 and set(data["phase"]) == {"talk", "harvest"}  # 5 fishers x 2 months x 2 phases
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    assert [json.loads(x)["completion_ids"] for x in lines] == data["completion_ids"]
    directory, gguf, _ = resolve_model(None)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=gguf, dtype=torch.float32).eval()
    worst = 0.0
    for row in data:
        assert row["completion_ids"] and len(row["completion_ids"]) == len(row["logprobs"])
        ids = row["prompt_ids"] + row["completion_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)
        n = len(row["prompt_ids"])
        for k, (tok, stored) in enumerate(zip(row["completion_ids"], row["logprobs"])):
            worst = max(worst, abs(lp[n - 1 + k, tok].item() - stored))
    assert worst < 1e-4
    # the reward vectors, weighted and put through the run's mode, are the stored rewards
    for tick in (1, 2):
        at = {r["agent_id"]: r for r in data if r["tick"] == tick and r["phase"] == "harvest"}
        base = {a: sum(w * json.loads(r["reward_vector"]).get(k, 0.0) for k, w in weights.items()) for a, r in at.items()}
        want = compute_rewards(base, "integrated", 0.4)
        assert all(at[a]["reward"] == pytest.approx(want[a], abs=1e-9) for a in at)
    assert data[0]["weights_sha256"] and len(data[0]["weights_sha256"]) == 64


# ----- the training study ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_training_study_small_pairs_held_out_worlds_per_training_seed_and_saves_models_that_run(tmp_path, db_url):
    """--small: in each reward mode, held-out worlds change the lake and the co-players, before/after pair per (world,
    seed) for each of several training seeds, the probe carries its controls, the adapters are kept (not the 540 MB
    merged models) and make a model that runs with --model."""
    out = tmp_path / "study"
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "train_commons.py"), "--small", "--out", str(out)],
                          capture_output=True, text=True, timeout=3000, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reward_modes"] == ["private", "integrated", "cooperative"] and list(summary["modes"]) == summary["reward_modes"]
    train_world, worlds = summary["training_world"], summary["worlds"]
    lake = ("capacity", "start_fraction", "regrowth")
    assert summary["held_out_worlds"] and set(summary["held_out_worlds"]) < set(worlds)
    for name in summary["held_out_worlds"]:  # each held-out world differs in its lake and in its co-players
        w = worlds[name]
        assert any(w[k] != train_world[k] for k in lake) and w["co_players"] != train_world["co_players"]
    episode_seeds = {s * 10_000 + i for s in summary["train_seeds"] for i in range(summary["iterations"])}
    assert not set(summary["held_out_seeds"]) & episode_seeds
    evaluation = list(csv.DictReader((out / "evaluation.csv").open()))
    keys = lambda rows: sorted((r["world"], r["seed"]) for r in rows)  # noqa: E731
    n_held = len(summary["held_out_worlds"]) * len(summary["held_out_seeds"])
    for mode, got_mode in summary["modes"].items():
        mine = [r for r in evaluation if r["reward_mode"] == mode]
        before = [r for r in mine if r["model"] == "before"]
        assert {r["world"] for r in before} == set(worlds)
        assert len(summary["train_seeds"]) >= 2 and set(got_mode["per_training_seed"]) == {str(s) for s in summary["train_seeds"]}
        for s, got in got_mode["per_training_seed"].items():
            assert keys([r for r in mine if r["train_seed"] == s]) == keys(before)  # the same worlds and seeds
            c = got["comparison"]
            assert c["held_out_worlds"]["pairs"] == n_held and c["training_world"]["pairs"] == len(summary["held_out_seeds"])
            for key in ("return", "focal_catch", "welfare"):
                d = c["held_out_worlds"][key]
                assert d["difference"]["mean"] == pytest.approx(d["after"]["mean"] - d["before"]["mean"], abs=1e-9)
                lo, hi = d["difference"]["ci95"]
                assert lo <= d["difference"]["mean"] <= hi
            probe = got["probe"]
            assert probe["controls"]["blind"]["responds"] is False and probe["controls"]["follows"]["responds"] is True
            assert probe["controls_behaved"] is (probe["controls"]["blind"]["ok"] and probe["controls"]["follows"]["ok"])
            adapters = Path(got["adapters"])
            assert got["model"] is None and sum(f.stat().st_size for f in adapters.iterdir()) < 20e6
        assert got_mode["pooled"]["held_out_worlds"]["pairs"] == n_held
    # the cooperative fisher's return is the group's: its welfare, row by row; the private one's is its own catch
    for r in evaluation:
        if r["reward_mode"] == "cooperative":
            assert float(r["return"]) == pytest.approx(float(r["welfare"]), abs=1e-9)
        if r["reward_mode"] == "private":
            assert float(r["return"]) == pytest.approx(float(r["focal_catch"]) * int(r["months"]), abs=1e-9)
    assert set(summary["between_modes"]["modes"]) == {"integrated", "cooperative"}
    assert summary["between_modes"]["modes"]["cooperative"]["held_out_worlds"]["pairs"] == n_held
    assert summary["probe_before"]["controls_behaved"] is True
    assert not (out / "models").exists()  # the merged models are removed once evaluated (about 540 MB each)
    # the kept adapters make the model the study evaluated, and it runs with --model
    study = _study_module()
    model = study.merge(Path(summary["modes"]["cooperative"]["per_training_seed"][str(summary["train_seeds"][-1])]["adapters"]),
                        tmp_path / "merged")
    run = cli_json("run", "commons", "--policy", "llm", "--ticks", "1", "--model", str(model), db=db_url)
    assert run["status"] in ("finished", "collapsed")
    shutil.rmtree(tmp_path / "merged")


def _study_module():
    """examples/train_commons.py as a module (its functions: population, episodes, between_modes, merge)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_commons", ROOT / "examples" / "train_commons.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _FixedCatch:
    """A stand-in for the study's sampler: the focal fisher always asks for `catch` tons (no model)."""

    def __init__(self, catch: int) -> None:
        self.catch = catch

    def sample(self, prompts, bounds, gen):
        return [(min(max(self.catch, lo), hi), [], []) for lo, hi in bounds]


def test_the_study_trains_each_reward_mode_on_that_modes_reward(db_url, monkeypatch):
    """The study's episodes return the mode's reward: private the focal catch, cooperative the group's mean catch
    each month, integrated the catch plus lam x the others' mean; the catches themselves are the same in every mode."""
    study = _study_module()
    monkeypatch.setattr(study, "encode", lambda tok, messages: [0])  # no tokenizer: the stand-in reads no prompt
    store = Store(db_url)
    got, payoffs = {}, {}
    for mode in ("private", "integrated", "cooperative"):
        (ret, decisions, catches), = study.episodes(_FixedCatch(7), None, seed=3, group=1, months=3, db=store,
                                                    gen=None, mode=mode, lam=0.5)
        run = max(store.list_runs(), key=lambda r: r.created_at)
        assert run.spec["config"]["reward_mode"] == mode and len(decisions) == 3
        by_tick: dict = {}
        for s in store.steps(run.id):
            by_tick.setdefault(s.tick, {})[s.agent_id] = (s.payoff, s.reward)
        payoffs[mode] = {t: {a: p for a, (p, _) in at.items()} for t, at in by_tick.items()}
        got[mode] = ret
        for at in by_tick.values():
            pays = {a: p for a, (p, _) in at.items()}
            mean_others = sum(p for a, p in pays.items() if a != 1) / (len(pays) - 1)
            want = {"private": pays[1], "cooperative": sum(pays.values()) / len(pays),
                    "integrated": pays[1] + 0.5 * mean_others}[mode]
            assert at[1][1] == pytest.approx(want, abs=1e-9)
    assert payoffs["private"] == payoffs["integrated"] == payoffs["cooperative"]
    assert payoffs["private"][1][1] == 7  # the focal fisher's catch, as asked
    assert len({round(v, 6) for v in got.values()}) == 3  # three modes, three different returns of the same catches


def test_between_modes_is_the_change_under_a_mode_minus_the_change_under_the_reference():
    """The between-mode figure pairs by (world, seed): (after - before) in the mode minus (after - before) in the reference."""
    study = _study_module()
    world = study.HELD_OUT_WORLDS and next(iter(study.HELD_OUT_WORLDS))
    row = lambda seed, catch, welfare, survived: {"world": world, "seed": seed, "focal_catch": catch,  # noqa: E731
                                                   "welfare": welfare, "survived": survived}
    runs = {"private": {"before": [row(1, 2.0, 10.0, True), row(2, 3.0, 12.0, True)],
                        "after": [row(1, 12.0, 14.0, False), row(2, 9.0, 13.0, True)]},
            "cooperative": {"before": [row(1, 2.0, 11.0, True), row(2, 3.0, 12.0, True)],
                            "after": [row(1, 4.0, 16.0, True), row(2, 3.0, 12.0, True)]}}
    got = study.between_modes(runs, "private")["cooperative"]["held_out_worlds"]
    assert got["pairs"] == 2
    # catch: (2 - 10) and (0 - 6); welfare: (5 - 4) and (0 - 1); survival: (0 - -1) and (0 - 0)
    assert got["focal_catch"]["mean"] == pytest.approx(-7.0) and got["welfare"]["mean"] == pytest.approx(0.0)
    assert got["survival"]["mean"] == pytest.approx(0.5)
    assert study.between_modes(runs, "private")["cooperative"]["training_world"]["pairs"] == 0


def test_the_study_refuses_bad_reward_modes_in_one_line(tmp_path):
    """--reward-modes takes distinct known modes; anything else is one line and exit 2, before any work."""
    import argparse

    study = _study_module()
    assert study.modes_arg("cooperative, private") == ["cooperative", "private"]
    for value in ("private,private", "", "private,bogus"):
        with pytest.raises(argparse.ArgumentTypeError, match="distinct modes"):
            study.modes_arg(value)
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "train_commons.py"), "--reward-modes", "bogus",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--reward-modes" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_studies_of_single_modes_combine_into_one_with_the_modes_compared(tmp_path):
    """--combine merges studies run apart (one mode each) into one: the modes side by side, compared by
    between_modes over their rows; folders whose settings differ are refused."""
    study = _study_module()
    settings = {"lam": 0.5, "iterations": 1, "group": 2, "months": 2, "train_seeds": [0, 1], "held_out_seeds": [7],
                "probe_seeds": 10, "lr": 1e-3, "rank": 8, "training_world": study.TRAINING_WORLD,
                "worlds": study.EVAL_WORLDS, "held_out_worlds": list(study.HELD_OUT_WORLDS)}
    rows = {}
    for k, mode in enumerate(("private", "cooperative")):
        evaluation = []
        for model, seed, shift in (("before", None, 0.0), ("after", 0, 1.0 + k), ("after", 1, 3.0 + 2 * k)):
            evaluation += [{"reward_mode": mode, "model": model, "train_seed": seed, "world": w, "seed": 7,
                            "return": 1.0 + shift, "survived": shift < 4, "months": 2, "focal_catch": 2.0 + shift,
                            "welfare": 5.0 - shift} for w in study.EVAL_WORLDS]
        strip = lambda r: {x: v for x, v in r.items() if x not in ("reward_mode", "model", "train_seed")}  # noqa: E731
        before = [strip(r) for r in evaluation if r["model"] == "before"]
        rows[mode] = {"before": before, "after": study.pooled_after(before, [[strip(r) for r in evaluation
                                                                                if r["train_seed"] == s] for s in (0, 1)])}
        summary = {**settings, "reward_modes": [mode], "probe_before": {"effect": 0.0}, "minutes": 1.0 + k,
                   "modes": {mode: {"pooled": {}}}, "between_modes": {"reference": mode, "modes": {}, "note": "n"}}
        (tmp_path / mode).mkdir()
        study.write(tmp_path / mode, summary, [{"reward_mode": mode, "iteration": 0}], evaluation)
    got = study.combine([tmp_path / "private", tmp_path / "cooperative"], tmp_path / "both")
    assert got["reward_modes"] == ["private", "cooperative"] and set(got["modes"]) == {"private", "cooperative"}
    assert got["between_modes"]["modes"] == study.between_modes(rows, "private") and got["probe_before_agrees"]
    # cooperative's after is +2 (training seed 0) and +5 (seed 1) over its before: +3.5 pooled; private's +1 and +3: +2
    assert got["between_modes"]["modes"]["cooperative"]["held_out_worlds"]["focal_catch"]["mean"] == pytest.approx(1.5)
    assert json.loads((tmp_path / "both" / "summary.json").read_text())["reward_modes"] == ["private", "cooperative"]
    changed = json.loads((tmp_path / "cooperative" / "summary.json").read_text()) | {"months": 3}
    (tmp_path / "cooperative" / "summary.json").write_text(json.dumps(changed))
    with pytest.raises(ValueError, match="months differ"):
        study.combine([tmp_path / "private", tmp_path / "cooperative"], tmp_path / "both")
    with pytest.raises(ValueError, match="one of the folders"):
        study.combine([tmp_path / "private"], tmp_path / "private")


def test_a_rollout_group_interrupted_and_made_again_holds_k_runs_with_the_same_advantages(tmp_path):
    """Rollouts made again take the stored ones (an ended one as it is, an interrupted one resumed): k runs, one per
    index, and the advantages of a group made without interruption (a rerun left 8 runs for k=3)."""
    from analysis.rollouts import rollout_group
    from runner.config import build_spec
    from runner.execution import RunInterrupted, execute

    stores = [Store(f"sqlite:///{tmp_path / name}.db") for name in ("a", "b")]
    parents = [execute(build_spec("commons", sets=["strategy=random", "months=8"], seed=4), s).run_id for s in stores]
    whole = rollout_runs(stores[0], parents[0], 3, 3)

    def stop(tick, total, record):  # Ctrl-C during rollout 1, after its tick 5
        if stopping and tick == 5:
            raise KeyboardInterrupt

    stopping = False
    done = []
    rollout_runs(stores[1], parents[1], 3, 1)  # rollout 0 made
    stopping = True
    with pytest.raises(RunInterrupted):
        rollout_runs(stores[1], parents[1], 3, 3, progress=stop, on_done=lambda i, r: done.append(i))
    assert done == [0] and len(rollout_group(stores[1], parents[1], 3)) == 2
    stopping = False
    again = rollout_runs(stores[1], parents[1], 3, 3)
    group = rollout_group(stores[1], parents[1], 3)
    assert [r.run_id for r in again] == group and len(group) == 3 and stores[1].count_runs() == 4
    assert all(r.status == "finished" for r in again)
    ours, theirs = (advantages(s, [r.run_id for r in rs], 3) for s, rs in ((stores[0], whole), (stores[1], again)))
    assert [g["return"] for g in ours["runs"]] == [g["return"] for g in theirs["runs"]]
    assert [a["advantage"] for a in ours["agents"]] == [a["advantage"] for a in theirs["agents"]]
    assert rollout_runs(stores[1], parents[1], 3, 3)[1].run_id == group[1] and stores[1].count_runs() == 4
