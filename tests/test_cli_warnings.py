"""No library's warning reaches the user's terminal in normal use; `societas -v` shows them (issue 38)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from tests.conftest import ROOT
from tests.test_user_scenarios import write_scenario

#: a library that warns when imported, as transformers does on every LLM run
LIBRARY = 'import warnings\nwarnings.warn("fakelib 2.0 will change this call", FutureWarning)\n'


def societas(*args: str) -> subprocess.CompletedProcess:
    """`societas ARGS` in a new process with Python's default warning filters (no -W, no $PYTHONWARNINGS)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    return subprocess.run([sys.executable, "-m", "societas.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=600)


@pytest.fixture
def warning_scenario(tmp_path) -> str:
    """A scenario file that imports a library which warns: its reference."""
    (tmp_path / "fakelib.py").write_text(LIBRARY)
    return f"{write_scenario(tmp_path, extra='import fakelib  # noqa: F401')}:Auction"


def test_a_library_warning_is_hidden_and_verbose_shows_it(warning_scenario):
    """The library's FutureWarning is not printed by `scenarios REF`; `societas -v scenarios REF` prints it."""
    quiet = societas("scenarios", warning_scenario, "--json")
    assert quiet.returncode == 0, quiet.stderr
    assert "Warning" not in quiet.stderr and "fakelib" not in quiet.stderr
    loud = societas("-v", "scenarios", warning_scenario, "--json")
    assert loud.returncode == 0, loud.stderr
    assert "FutureWarning: fakelib 2.0 will change this call" in loud.stderr
    assert loud.stdout == quiet.stdout


def test_a_warning_filter_the_user_chose_is_kept(warning_scenario):
    """`python -W error` still turns the library's warning into an error: the user's filter wins over the default."""
    proc = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-m", "societas.cli", "scenarios", warning_scenario],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 2 and "fakelib 2.0 will change this call" in proc.stderr


def test_a_command_run_in_process_leaves_the_filters_as_they_were(monkeypatch, capsys, warning_scenario):
    """After `main()` in this process the warning filters and $PYTHONWARNINGS are what they were before."""
    from societas.cli import main

    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    monkeypatch.setattr(sys, "argv", ["societas", "scenarios", warning_scenario, "--json"])
    before = list(warnings.filters)
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 0, capsys.readouterr().err
    assert list(warnings.filters) == before
    assert "PYTHONWARNINGS" not in os.environ


@pytest.mark.slow
def test_an_llm_run_prints_no_warning(tmp_path):
    """A run of the embedded LLM prints its progress and nothing else on stderr: no library warning."""
    proc = societas("run", "commons", "--policy", "llm", "--ticks", "1", "--set", "fishers=2", "--db",
                    str(tmp_path / "runs.db"))
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "warn" not in proc.stderr.lower(), proc.stderr
