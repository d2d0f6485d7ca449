"""The documentation site: builds with warnings as errors, and what comes from the code is in it.

The slow test runs `mkdocs build --strict` (what `make docs` runs) into a temporary folder, so CI
builds the docs; the fast ones check the generator (docs/_gen.py) directly.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios import REGISTRY
from sim.reward.docs import BASE_FINAL_DOCS, BASE_TICK_DOCS

ROOT = Path(__file__).resolve().parents[1]


def _gen():
    spec = importlib.util.spec_from_file_location("societas_docs_gen", ROOT / "docs" / "_gen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands() -> list[tuple[str, object]]:
    """Every `societas` command path (groups walked) with its command object."""
    import typer.main

    from societas.cli import app

    found = []

    def walk(cmd, path):
        for name, sub in cmd.commands.items():
            if hasattr(sub, "commands"):
                walk(sub, [*path, name])
            else:
                found.append((" ".join([*path, name]), sub))

    walk(typer.main.get_command(app), ["societas"])
    return found


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _text(page: Path) -> str:
    """The visible text of a built page's article, tags dropped, entities decoded, whitespace removed
    (compare with `_squash(expected)`)."""
    raw = page.read_text(encoding="utf-8")
    raw = raw[raw.find("<article"):raw.find("</article>")]
    return _squash(html.unescape(re.sub(r"<[^>]+>", "", raw)))


# ----- fast: the generator ---------------------------------------------------------------------------------
def test_generated_config_and_metrics_cover_every_field_and_metric():
    gen = _gen()
    for name, cls in REGISTRY.items():
        config = gen.render(f"<!-- gen: config {name} -->")
        for field, info in cls.Config.model_fields.items():
            assert f"`{field}`" in config, (name, field)
            if info.description:
                assert info.description.replace("|", "\\|") in config, (name, field)
        metrics = gen.render(f"<!-- gen: metrics {name} -->")
        for metric in [*cls.tick_metric_docs, *cls.final_metric_docs, *BASE_TICK_DOCS, *BASE_FINAL_DOCS]:
            assert f"`{metric}`" in metrics, (name, metric)


def test_generated_cli_has_every_command_and_option():
    gen = _gen()
    cli = gen.render("text before\n<!-- gen: cli -->\ntext after")
    assert cli.startswith("text before\n") and cli.endswith("\ntext after")
    for path, cmd in _commands():
        assert f"`{path}`" in cli, path
        for p in cmd.params:
            names = [p.name.upper()] if p.param_type_name == "argument" else p.opts
            assert all(f"`{n}`" in cli for n in names), (path, names)


def test_unknown_marker_or_scenario_fails_the_build():
    gen = _gen()
    with pytest.raises(ValueError, match="unknown scenario"):
        gen.render("<!-- gen: config no_such_scenario -->")
    with pytest.raises(ValueError, match="unknown gen marker"):
        gen.render("<!-- gen: nothing -->")
    assert gen.render("<!-- not a gen marker -->") == "<!-- not a gen marker -->"


def test_a_registered_scenario_without_a_page_gets_a_generated_one(monkeypatch):
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files

    import scenarios
    from scenarios.commons import CommonsModel

    class Extra(CommonsModel):
        """A scenario registered with no hand-written page."""

        name = "extra_scenario"
        description = "a scenario only the registry knows"

    monkeypatch.setitem(scenarios.REGISTRY, Extra.name, Extra)
    gen = _gen()
    config = load_config(str(ROOT / "mkdocs.yml"))
    files = config.plugins.on_files(get_files(config), config=config)  # as `mkdocs build` runs the hook
    page = files.get_file_from_path("scenarios/extra_scenario.md")
    assert page is not None and files.get_file_from_path("scenarios/commons.md") is not None
    text = gen.render(page.content_string, page.src_uri)
    assert "a scenario only the registry knows" in text and "`fishers`" in text and "`survival_time`" in text
    assert "[`extra_scenario`](extra_scenario.md)" in gen.render("<!-- gen: scenarios -->", "scenarios/index.md")


# ----- slow: the strict build ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


@pytest.mark.slow
def test_site_builds_strict_with_every_page(site: Path):
    pages = ["index.html", "concepts/index.html", "architecture/index.html", "scenarios/index.html",
             "reference/cli/index.html", "reference/api/index.html", "reference/model/index.html",
             "reference/spaces/index.html", "reference/registry/index.html", "tutorial/index.html"]
    pages += [f"scenarios/{name}/index.html" for name in REGISTRY]
    missing = [p for p in pages if not (site / p).is_file()]
    assert not missing, missing


@pytest.mark.slow
def test_scenario_pages_hold_their_generated_config_and_metrics(site: Path):
    for name, cls in REGISTRY.items():
        text = _text(site / "scenarios" / name / "index.html")
        for field in cls.Config.model_fields:
            assert field in text, (name, field)
        for metric in [*cls.final_metric_docs, *cls.tick_metric_docs]:
            assert metric in text, (name, metric)
        from sim.core.fields import type_name as _type_name

        numeric = [(f, i) for f, i in cls.Config.model_fields.items() if i.annotation in (int, float)]
        assert numeric, name
        for field, info in numeric:  # the table row: key, type, default
            assert _squash(f"{field}{_type_name(info.annotation)}{info.default}") in text, (name, field)


@pytest.mark.slow
def test_cli_and_api_reference_come_from_the_code(site: Path):
    cli = _text(site / "reference" / "cli" / "index.html")
    for path, cmd in _commands():
        assert _squash(path) in cli, path
        first_line = (cmd.help or "").strip().splitlines()[0]
        assert _squash(first_line.replace("`", "")) in cli, (path, first_line)
    import societas.api

    api = _text(site / "reference" / "api" / "index.html")
    for fn in ("run", "spec", "configure", "load_run", "runs", "load_sweep"):
        doc = getattr(societas.api, fn).__doc__.strip().splitlines()[0]
        assert _squash(doc.replace("`", "")) in api, (fn, doc)
    assert "per_tick" in api and "Result" in api
    model = _text(site / "reference" / "model" / "index.html")
    assert "scenario_metrics" in model and "final_metrics" in model
