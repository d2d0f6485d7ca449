"""User-defined scenarios and strategies: from a file or a module, by reference or by decorator, without touching the package."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

import sim
from conftest import cli_json, cli_process
from scenarios import REGISTRY, get_scenario, reference_of, register, register_strategy
from scenarios.registry import BUILTIN, describe
from scenarios.commons import CommonsModel
from sim.core.errors import UsageError
from sim.model import SocietyModel

#: a small complete scenario: each round every agent bids 0..cap; the highest bid wins the pot minus its bid
SCENARIO = '''
from pydantic import Field

from sim.contracts.agent import SocietyAgent
from sim.model import ScenarioConfig, SocietyModel
from sim.core.spaces import Number


class Config(ScenarioConfig):
    agents: int = Field(3, ge=1, le=1000, description="number of bidders")
    rounds: int = Field(4, ge=1, le=1000, description="rounds to play")
    cap: float = Field(10.0, gt=0, le=1000, description="largest bid")
    strategy: str = Field("half", description="scripted strategy")


def half(request, rng):
    return request.observation["cap"] / 2


def lucky(request, rng):
    return float(rng.randint(0, int(request.observation["cap"])))


class Auction(SocietyModel):
    name = "{name}"
    description = "a toy all-pay auction"
    Config = Config
    horizon_field = "rounds"
    strategies = {{"half": half, "lucky": lucky}}
    default_strategy = "half"
    tick_metric_docs = {{"top_bid": "the highest bid this round"}}
    final_metric_docs = {{"mean_top_bid": "mean over rounds of the highest bid"}}

    def setup(self):
        for policy, strategy, persona in self.population_plan(self.config.agents):
            SocietyAgent(self, policy=policy, strategy=strategy, persona=persona, memory=self.new_memory())
        self.tops = []

    def observe(self, agent, phase):
        cap = self.config.cap
        return self.request(agent, phase, Number(0, cap, 1), 0.0, {{"cap": cap}}, "An auction.", "Your bid?")

    def act(self, phase, decisions):
        self.bids = {{d.agent_id: float(d.value) for d in decisions}}

    def payoffs(self):
        winner = max(sorted(self.bids), key=lambda a: self.bids[a])
        return {{a: (self.config.cap if a == winner else 0.0) - b for a, b in self.bids.items()}}

    def scenario_metrics(self):
        self.tops.append(max(self.bids.values()))
        return {{"top_bid": self.tops[-1]}}

    def final_metrics(self):
        return {{"mean_top_bid": sum(self.tops) / len(self.tops)}}

    def state(self):
        return {{"top_bid": self.tops[-1] if self.tops else None}}
'''


def write_scenario(folder, name="auction_user", filename="auction.py", extra=""):
    path = folder / filename
    path.write_text(SCENARIO.format(name=name) + textwrap.dedent(extra))
    return path


@pytest.fixture
def clean_registry(monkeypatch):
    """Registrations made by a test are undone afterwards (the conformance tests iterate REGISTRY)."""
    saved = dict(dict.items(REGISTRY))
    yield REGISTRY
    dict.clear(REGISTRY)
    dict.update(REGISTRY, saved)


def test_a_scenario_file_runs_is_listed_shown_and_replayed_from_the_cli(tmp_path, db_url, monkeypatch, capsys):
    """`societas run file.py:Class` stores the absolute reference; scenarios, show, list and replay load it again."""
    path = write_scenario(tmp_path)
    ref = f"{path}:Auction"
    res = cli_json("run", ref, "--set", "agents=4", "--set", "strategy=lucky", "--seed", "3", db=db_url)
    assert res["status"] == "finished" and res["ticks"] == 4 and res["scenario"] == ref
    assert 0 <= res["metrics"]["mean_top_bid"] <= 10
    replay = cli_process("replay", res["run_id"], "--store", db=db_url)  # another process: the class is loaded from the stored
    # reference; stored (--store) so that `list` shows it
    assert replay.returncode == 0 and "every tick matched" in replay.stdout
    listed = _json(monkeypatch, capsys, "scenarios", ref)
    assert [s["name"] for s in listed] == [ref]
    assert {f["name"] for f in listed[0]["fields"]} >= {"agents", "rounds", "cap", "strategy"}
    assert listed[0]["strategies"] == ["half", "lucky"] and "mean_top_bid" in listed[0]["final_metrics"]
    shown = _json(monkeypatch, capsys, "show", res["run_id"], "--db", db_url)
    assert shown["spec"]["scenario"] == ref and shown["config"]["agents"] == 4
    assert shown["metric_docs"]["final"]["mean_top_bid"] == "mean over rounds of the highest bid"
    runs = _json(monkeypatch, capsys, "list", "--db", db_url)
    assert {r["run_id"] for r in runs} == {res["run_id"], replay.stdout.split(" as ")[1].split(":")[0]}


def _json(monkeypatch, capsys, *args):
    """`societas ARGS --json` in this process: its JSON output."""
    code, _ = _main(monkeypatch, capsys, *args, "--json")
    assert code in (0, None)
    return json.loads(_OUT[0])


_OUT: list[str] = [""]


RAISES = 'raise RuntimeError("boom\\nsecond line")\n'


def _main(monkeypatch, capsys, *args):
    """`societas ARGS` in this process (fast): returns (exit code, stderr lines); stdout goes to _OUT."""
    from societas.cli import main

    monkeypatch.setattr(sys, "argv", ["societas", *args])
    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit) as exc:
        main()
    captured = capsys.readouterr()
    _OUT[0] = captured.out
    return exc.value.code, captured.err.strip().splitlines()


@pytest.mark.parametrize("make, expected", [
    (lambda p: "missing.py:Auction", "scenario file 'missing.py' does not exist"),
    (lambda p: f"{write_scenario(p)}:Nope", "has no class 'Nope'; scenario classes there: Auction"),
    (lambda p: f"{write_scenario(p)}:Config", "is not a SocietyModel subclass (it is a class)"),
    (lambda p: f"{write_scenario(p)}:half", "is not a SocietyModel subclass (it is a function)"),
    (lambda p: f"{write_scenario(p, extra='import no_such_module_xyz')}:Auction",
     "cannot import scenario file"),
    (lambda p: f"{write_scenario(p, extra='def broken(:')}:Auction", "SyntaxError"),
    (lambda p: str(write_scenario(p, extra=RAISES)) + ":Auction",
     "RuntimeError: boom second line"),
    (lambda p: "no_such_module_xyz:Auction", "cannot import scenario module 'no_such_module_xyz'"),
    (lambda p: ":Auction", "bad scenario reference"),
])
def test_a_bad_reference_is_one_line_and_exit_2(make, expected, tmp_path, db_url, monkeypatch, capsys):
    """A missing file, class or module, a non-scenario, an import or syntax error: exit 2, one line, nothing stored."""
    ref = make(tmp_path)
    code, lines = _main(monkeypatch, capsys, "run", ref, "--db", db_url)
    assert code == 2 and len(lines) == 1 and expected in lines[0], lines
    assert "Traceback" not in lines[0]
    assert not (tmp_path / "runs.db").exists()
    code, lines = _main(monkeypatch, capsys, "scenarios", ref)
    assert code == 2 and len(lines) == 1 and expected in lines[0]


def test_a_decorated_scenario_runs_through_the_api_and_replays(tmp_path, db_url, monkeypatch, clean_registry):
    """@register makes a name; sim.run(name) stores a reference to its file, so replay loads the class again."""
    from runner.replay import replay_run
    from sim.store.store import Store

    write_scenario(tmp_path, name="auction_deco", filename="auction_deco.py",
                   extra="\nfrom sim import register\nregister(Auction)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__("auction_deco")
    assert clean_registry["auction_deco"] is module.Auction
    result = sim.run("auction_deco", db=db_url, seed=2, agents=5, rounds=3, strategy="lucky")
    assert result.status == "finished" and result.ticks == 3 and result.steps["agent_id"].nunique() == 5
    assert result.spec.scenario == f"{tmp_path / 'auction_deco.py'}:Auction"
    assert get_scenario(result.spec.scenario) is module.Auction  # the imported module, not a second copy
    assert replay_run(Store(db_url), result.run_id)["matched"]
    again = sim.run(module.Auction, db=db_url, seed=2, agents=5, rounds=3, strategy="lucky")  # a class works too
    assert again.metrics == result.metrics


def test_register_refuses_what_it_cannot_name(clean_registry):
    """A built-in name, a missing name, a non-scenario and a name with ':' are refused when registering."""
    with pytest.raises(ValueError, match="built-in"):
        register(type("Fake", (CommonsModel,), {"name": "commons"}))
    with pytest.raises(ValueError, match="no `name`"):
        register(type("Nameless", (SocietyModel,), {}))
    with pytest.raises(TypeError):
        register(dict)
    with pytest.raises(ValueError, match="':'"):
        register(name="a:b")(type("X", (SocietyModel,), {}))
    cls = register(name="renamed")(type("Y", (SocietyModel,), {"name": "y"}))
    assert clean_registry["renamed"] is cls and cls.name == "renamed"
    assert reference_of("commons") == "commons" and reference_of(CommonsModel) == "commons"
    local = type("Local", (SocietyModel,), {"name": "local_x", "__qualname__": "f.<locals>.Local"})
    with pytest.raises(UsageError, match="cannot be named"):
        reference_of(local)


def test_a_strategy_added_from_user_code_decides(db_url, monkeypatch):
    """register_strategy adds a scripted strategy to a scenario (here the fishery); its agents use it."""
    monkeypatch.setattr(CommonsModel, "strategies", CommonsModel.strategies)  # restored afterwards

    @register_strategy("commons", "two_tons")
    def two_tons(request, rng):
        return 2.0 if request.phase == "harvest" else "none"

    r = sim.run("commons", db=db_url, fishers=3, months=2, population=[{"count": 3, "strategy": "two_tons"}])
    assert {json.loads(a)["harvest"] for a in r.steps["action"]} == {2.0} and r.fallbacks == 0
    from scenarios.commons.strategies import STRATEGIES

    assert "two_tons" not in STRATEGIES  # the package's own dict is untouched


def test_a_subclass_with_its_own_strategy_runs_by_reference_from_a_sweep(tmp_path, db_url):
    """A file subclassing the fishery with a new strategy: a sweep file names it relative to itself."""
    from sim.store.store import Store
    from runner.sweeps.backlog import prepare
    from runner.sweeps.executor import run_sweep
    from runner.sweeps.spec import load_sweep

    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "cautious.py").write_text(textwrap.dedent('''
        from scenarios.commons import CommonsModel

        def cautious(request, rng):
            return 1.0 if request.phase == "harvest" else "none"

        class CautiousCommons(CommonsModel):
            name = "cautious_commons"
            strategies = {**CommonsModel.strategies, "cautious": cautious}
    '''))
    sweep = tmp_path / "studies" / "sweep.yaml"
    sweep.write_text("scenario: cautious.py:CautiousCommons\nbase: {months: 2, fishers: 2, population: "
                     "[{count: 2, strategy: cautious}]}\ngrid: {regrowth: [1.5, 2.0]}\nseeds: 1\n")
    definition = load_sweep(sweep)
    assert definition["scenario"] == f"{tmp_path / 'studies' / 'cautious.py'}:CautiousCommons"
    store = Store(db_url)
    report = run_sweep(store, prepare(store, definition), workers=1)
    assert report["ran"] == 2 and not report["failed"]
    for run in store.list_runs():
        assert {s.action["harvest"] for s in store.steps(run.id)} == {1.0}
    assert "cautious" not in CommonsModel.strategies


def test_stored_references_are_found_by_readers_of_runs(tmp_path):
    """REGISTRY.get resolves a stored reference (the app and `show` find the class); a gone file gives None."""
    path = write_scenario(tmp_path)
    assert REGISTRY.get(f"{path}:Auction").name == "auction_user"
    assert REGISTRY.get(f"{tmp_path / 'gone.py'}:Auction") is None
    assert json.loads(json.dumps(reference_of(f"{path}:Auction"))) == f"{path}:Auction"
    assert describe(f"{path}:Auction") is REGISTRY.get(f"{path}:Auction")  # a user scenario describes itself
    assert describe(f"{tmp_path / 'gone.py'}:Auction") is None


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_a_builtin_description_says_what_its_class_says(name):
    """A built-in's Mesa-free description (what `show` reads) has its class's config, metric docs and published
    values: the two cannot drift apart."""
    described, cls = describe(name), get_scenario(name)
    assert described.Config is cls.Config
    assert dict(described.tick_metric_docs) == dict(cls.tick_metric_docs) and described.tick_metric_docs
    assert dict(described.final_metric_docs) == dict(cls.final_metric_docs) and described.final_metric_docs
    assert dict(described.reference) == dict(getattr(cls, "reference", None) or {})


# ----- user strategies and prompt templates by reference ------------------------------------------------------
STRATEGIES_FILE = '''
def one_ton(request, rng):
    return 1.0 if request.phase == "harvest" else "none"

NOT_A_FUNCTION = 3
'''


def test_a_strategy_file_referenced_from_the_config_decides_and_replays(tmp_path, db_url, monkeypatch):
    """A population group's strategy `file.py:function` (relative) is stored absolute; its agents use it; replay matches."""
    from runner.replay import replay_run
    from sim.store.store import Store

    (tmp_path / "mine.py").write_text(STRATEGIES_FILE)
    monkeypatch.chdir(tmp_path)
    r = sim.run("commons", db=db_url, fishers=3, months=2,
                population=[{"count": 2, "strategy": "mine.py:one_ton"}, {"count": 1, "strategy": "greedy"}])
    ref = f"{tmp_path / 'mine.py'}:one_ton"
    assert [g["strategy"] for g in r.spec.config["population"]] == [ref, "greedy"]
    harvests = [json.loads(a)["harvest"] for a in r.steps.sort_values(["tick", "agent_id"])["action"]]
    assert harvests.count(1.0) >= 4 and r.fallbacks == 0  # the two one_ton fishers, both months
    monkeypatch.chdir("/")  # another directory: the stored absolute reference still loads
    assert replay_run(Store(db_url), r.run_id)["matched"]


@pytest.mark.parametrize("strategy, expected", [
    ("mine.py:nope", "has no function 'nope'; functions there: one_ton"),
    ("mine.py:NOT_A_FUNCTION", "is not a function (request, rng) -> value (it is a int)"),
    ("gone.py:f", "gone.py' does not exist"),
    ("cautious", "bad value for 'population.strategy': 'cautious'; valid:"),
])
def test_a_bad_strategy_reference_is_one_line_and_exit_2(strategy, expected, tmp_path, db_url, monkeypatch, capsys):
    (tmp_path / "mine.py").write_text(STRATEGIES_FILE)
    monkeypatch.chdir(tmp_path)
    code, lines = _main(monkeypatch, capsys, "run", "commons", "--set", "fishers=2",
                        "--set", f"population=[{{count: 2, strategy: '{strategy}'}}]", "--db", db_url)
    assert code == 2 and len(lines) == 1 and expected in lines[0], lines
    assert not (tmp_path / "runs.db").exists()


TEMPLATE_FILE = '''
from sim import PromptTemplate

TERSE = PromptTemplate(system="You are a terse fisher.", user="${context}\\n${persona}${own}\\nQ: ${question} (${space})")


def plain(request):
    return [{"role": "user", "content": "PLAIN " + request.question}]
'''


@pytest.mark.parametrize("name, marker", [("TERSE", "You are a terse fisher."), ("plain", "PLAIN ")])
def test_a_prompt_template_by_reference_shapes_the_prompts_and_replays(name, marker, tmp_path, db_url, monkeypatch):
    """llm.template `file.py:NAME` (a PromptTemplate or a function) renders every LLM prompt; the stored
    reference makes the replay's cache keys the same."""
    from runner.replay import replay_run
    from sim.store.store import Store

    (tmp_path / "prompts.py").write_text(TEMPLATE_FILE)
    monkeypatch.chdir(tmp_path)
    r = sim.run("commons", db=db_url, policy="llm", fishers=2, months=1, talk=False,
                llm={"provider": "langchain", "cls": "tests.fakechat:HashChat", "template": f"prompts.py:{name}"})
    assert r.spec.llm.template == f"{tmp_path / 'prompts.py'}:{name}"
    prompts = list(r.llm_calls["prompt"])
    assert prompts and all(marker in p for p in prompts)
    assert not any("You take part in a simulation" in p for p in prompts)  # the built-in system text is gone
    assert replay_run(Store(db_url), r.run_id)["matched"]


def test_a_registered_template_and_bad_templates(tmp_path, db_url, monkeypatch):
    """register_template names a template in this process; unknown names, bad placeholders and
    non-templates are one-line UsageErrors before anything is stored."""
    from agents.llm import prompts

    monkeypatch.setattr(prompts, "PROMPT_TEMPLATES", {})
    sim.register_template("shout")(sim.PromptTemplate(system="SHOUT."))
    llm = {"provider": "langchain", "cls": "tests.fakechat:HashChat"}
    r = sim.run("commons", db=db_url, policy="llm", fishers=2, months=1, talk=False,
                llm={**llm, "template": "shout"})
    assert all(p.startswith("[system] SHOUT.") for p in r.llm_calls["prompt"])
    (tmp_path / "prompts.py").write_text(TEMPLATE_FILE + "\nNUMBER = 3\n")
    (tmp_path / "bad.py").write_text("from sim import PromptTemplate\nT = PromptTemplate(user='${nonsense}')\n")
    for template, expected in [("whisper", "unknown template 'whisper'; valid: default, shout"),
                               (f"{tmp_path}/prompts.py:NUMBER", "is not a PromptTemplate or a function"),
                               (f"{tmp_path}/prompts.py:NOPE", "has no template 'NOPE'; PromptTemplates there: TERSE"),
                               (f"{tmp_path}/bad.py:T", "unknown placeholder ${nonsense}")]:
        with pytest.raises(UsageError, match=None) as err:
            sim.spec("commons", policy="llm", llm={**llm, "template": template})
        assert expected in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="built-in"):
        sim.register_template("default")


def test_strategy_references_in_a_sweep_file_are_relative_to_it(tmp_path, db_url, monkeypatch):
    """A sweep's base and grid may name strategies `file.py:function` relative to the sweep file."""
    from sim.store.store import Store
    from runner.sweeps.backlog import prepare
    from runner.sweeps.executor import run_sweep
    from runner.sweeps.spec import load_sweep

    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "mine.py").write_text(STRATEGIES_FILE)
    sweep = tmp_path / "study" / "sweep.yaml"
    sweep.write_text("scenario: commons\nbase: {months: 2, fishers: 2}\n"
                     "grid: {population: [[{count: 2, strategy: mine.py:one_ton}], [{count: 2, strategy: greedy}]]}\n")
    monkeypatch.chdir(tmp_path)  # not the sweep's folder
    definition = load_sweep(sweep)
    ref = f"{tmp_path / 'study' / 'mine.py'}:one_ton"
    assert definition["grid"]["population"][0] == [{"count": 2, "strategy": ref}]
    store = Store(db_url)
    assert run_sweep(store, prepare(store, definition), workers=1)["ran"] == 2
    harvests = {r.spec["config"]["population"][0]["strategy"]: {s.action["harvest"] for s in store.steps(r.id)}
                for r in store.list_runs()}
    assert harvests[ref] == {1.0} and harvests["greedy"] != {1.0}
