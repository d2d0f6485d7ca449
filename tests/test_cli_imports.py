"""The CLI answers at once: a command imports what it runs when it runs (issue 38).

Each case runs `societas ARGS` in a fresh process and reads which libraries it loaded (sys.modules),
so an import that slips back to a module's top level fails here, naming the library.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, cli

#: what `--help` and `--version` must not load: the model, the world, the frames and the statistics
HEAVY = ("torch", "transformers", "mesa", "pandas", "scipy")

PROBE = """
import json, sys
report, args = sys.argv[1], sys.argv[2:]
code = None
if args != ["--import-only"]:
    sys.argv = ["societas", *args]
    from societas.cli import main
    try:
        main()
    except SystemExit as exc:
        code = exc.code
else:
    import societas.cli
with open(report, "w") as f:
    json.dump({"code": code, "loaded": sorted({name.split(".")[0] for name in sys.modules})}, f)
"""


def loaded_by(tmp_path: Path, *args: str) -> tuple[object, set[str]]:
    """(exit code, top-level packages in sys.modules) after `societas ARGS` in a fresh process."""
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(report), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert report.exists(), proc.stderr
    data = json.loads(report.read_text())
    return data["code"], set(data["loaded"])


@pytest.mark.parametrize("args", [["--import-only"], ["--version"], ["--help"], ["run", "--help"], ["sweep", "--help"],
                                  ["probe", "--help"], ["db", "--help"],
                                  ["check", "--help"]])
def test_starting_the_cli_loads_no_heavy_library(tmp_path, args):
    """Importing the CLI, `--version` and any `--help` load neither torch, transformers, Mesa, pandas nor SciPy."""
    code, loaded = loaded_by(tmp_path, *args)
    assert code in (None, 0)
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))
    assert "sqlalchemy" not in loaded and "alembic" not in loaded  # no command has opened a store


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> tuple[str, str]:
    """A store holding a scripted sweep of two short runs: (its URL, the sweep id)."""
    folder = tmp_path_factory.mktemp("store")
    sweep = folder / "sweep.yaml"
    sweep.write_text("scenario: commons\npolicy: scripted\nticks: 2\ngrid: {regrowth: [2.0]}\nseeds: [0, 1]\n")
    url = f"sqlite:///{folder / 'runs.db'}"
    proc = cli("sweep", str(sweep), "--workers", "1", "--json", db=url)
    assert proc.returncode == 0, proc.stderr
    return url, json.loads(proc.stdout)["sweep_id"]


@pytest.mark.parametrize("command", ["list", "sweep-status"])
def test_reading_a_store_loads_no_scenario_and_no_migration_tool(tmp_path, small_store, command):
    """`list` and `sweep-status` read the store alone: no Mesa (no scenario), no pandas, SciPy or model, and no
    Alembic (the store is at the newest schema: nothing to migrate)."""
    url, sweep_id = small_store
    args = ["list", "--json", "--db", url] if command == "list" else ["sweep-status", sweep_id, "--json", "--db", url]
    code, loaded = loaded_by(tmp_path, *args)
    assert code == 0
    assert loaded.isdisjoint((*HEAVY, "alembic")), sorted(loaded & {*HEAVY, "alembic"})


@pytest.mark.parametrize("as_json", [False, True])
def test_showing_a_run_loads_no_world(tmp_path, small_store, as_json):
    """`show RUN` reads the run's scenario through its description (config, metric docs, published values): no Mesa,
    no pandas, SciPy or model, no Alembic; and it still prints the metrics' meanings."""
    url, _ = small_store
    run_id = json.loads(cli("list", "--json", db=url).stdout)[0]["run_id"]
    code, loaded = loaded_by(tmp_path, "show", run_id, *(["--json"] if as_json else []), "--db", url)
    assert code == 0
    assert loaded.isdisjoint((*HEAVY, "alembic")), sorted(loaded & {*HEAVY, "alembic"})
    summary = json.loads(cli("show", run_id, "--json", db=url).stdout)
    assert summary["metric_docs"]["final"]["survival_time"].startswith("months harvested")
    assert summary["metric_docs"]["tick"]["perolat_peace"]


def test_naming_the_scenarios_loads_none():
    """The registry lists every built-in name without importing a scenario (or Mesa); each name, once used, is
    the class that bears it."""
    code = ("import sys\nfrom scenarios import REGISTRY, BUILTIN\nnames = sorted(REGISTRY)\n"
            "print(names == sorted(BUILTIN), 'mesa' in sys.modules, any(m.startswith('scenarios.') and m != "
            "'scenarios.registry' for m in sys.modules))\nprint(all(REGISTRY[n].name == n for n in names))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "False", "False", "True"]
