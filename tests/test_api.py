"""The Python API: runs from code are stored runs like the CLI's, and read back as DataFrames."""

import pytest

import sim
from sim.core.errors import UsageError


def test_run_from_code_stores_a_run_the_cli_can_read(db_url):
    r = sim.run("commons", db=db_url, seed=4, fishers=6, months=5, strategy="sustainable")
    assert r.status in ("finished", "collapsed") and r.ticks == 5 and r.fallbacks == 0
    assert set(r.per_tick.index) == {1, 2, 3, 4, 5} and "stock" in r.per_tick.columns
    assert len(r.steps) == 6 * 5 and r.steps["agent_id"].nunique() == 6
    again = sim.load_run(r.run_id[:8], db=db_url)
    assert again.run_id == r.run_id and again.metrics == r.metrics
    listed = sim.runs(db_url)
    assert list(listed["run_id"]) == [r.run_id] and listed.loc[0, "metric_survival_time"] == r.metrics["survival_time"]
    assert r.spec.seed == 4 and r.spec.config["fishers"] == 6
    # the same spec reproduces the run's metrics exactly
    assert sim.run(r.spec, db=db_url).metrics == r.metrics


def test_fields_from_code_are_validated_like_the_cli():
    with pytest.raises(UsageError, match="fishers"):
        sim.spec("commons", fishers=-1)
    with pytest.raises(UsageError, match="unknown scenario"):
        sim.configure("nope")
    cfg = sim.configure("commons", fishers=7)
    assert cfg.fishers == 7
    s = sim.spec("commons", sets=["months=3"], months=4, seed=2)
    assert s.config["months"] == 4 and s.seed == 2  # fields given in code win over sets


def test_run_of_a_spec_takes_no_overrides(db_url):
    s = sim.spec("commons", months=2)
    with pytest.raises(TypeError):
        sim.run(s, db=db_url, fishers=3)


def test_reading_a_missing_store_creates_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'none.db'}"
    with pytest.raises(UsageError):
        sim.load_run("abc", db=url)
    assert not (tmp_path / "none.db").exists()
