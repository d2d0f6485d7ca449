"""MkDocs hook: the parts of the site that come from the code, generated at build time.

A page asks for generated content with a marker on a line of its own:

    <!-- gen: config NAME -->     the scenario's Config fields: type, default, bounds, description
    <!-- gen: metrics NAME -->    its per-tick and final metrics with their formulas and sources
    <!-- gen: configs NAME -->    its built-in config files with their leading comment
    <!-- gen: scenarios -->       every registered scenario, with a link to its page
    <!-- gen: llm -->             the llm.* keys (sim.core.spec.LLMSpec)
    <!-- gen: cli -->             every `societas` command: usage, help and options (walked from the typer app)
    <!-- gen: prompt NAME -->     the scenario's representative LLM prompt (its first probe's request), as a run sends it
    <!-- gen: components NAME --> its reward components (its own and the common ones)

Nothing generated is committed, so nothing can go stale. A registered scenario without a
hand-written page (docs/scenarios/NAME.md) gets a generated one with its description, config
and metrics. An unknown marker or scenario name is an error, so `mkdocs build --strict` fails.
"""

from __future__ import annotations

import inspect
import logging
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path[:1]:
    sys.path.insert(0, str(ROOT))  # this checkout's code, not another one installed in the environment

log = logging.getLogger("mkdocs.plugins.societas")
MARKER = re.compile(r"^<!--[ \t]*gen:[ \t]*([\w-]+)(?:[ \t]+([\w.@-]+))?[ \t]*-->[ \t]*$", re.M)


# ----- helpers -------------------------------------------------------------------------------------------
def _cell(value: Any) -> str:
    """Text safe inside a Markdown table cell."""
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _code(value: Any) -> str:
    text = _cell(value)
    return f"`{text}`" if text else ""


def _registry() -> dict[str, Any]:
    from scenarios import REGISTRY

    return dict(sorted(REGISTRY.items()))


def _scenario(name: str) -> Any:
    reg = _registry()
    if name not in reg:
        raise ValueError(f"docs: unknown scenario {name!r} in a gen marker; registered: {', '.join(reg)}")
    return reg[name]


def _fields_table(model: Any, prefix: str = "") -> str:
    from sim.core.fields import describe_fields
    from sim.tick.config import ScenarioConfig

    shared = set(ScenarioConfig.model_fields) if model is not ScenarioConfig else set()
    rows = ["| key | type | default | bounds | meaning |", "| --- | --- | --- | --- | --- |"]
    # the scenario's own keys first, then those every scenario has (reward layer, population, memory)
    for f in sorted(describe_fields(model), key=lambda f: f.name in shared):
        default = "—" if f.default is None else _code(f.default if not isinstance(f.default, list) else f.default or "[]")
        rows.append(f"| `{prefix}{f.name}` | {_cell(f.type_name)} | {default} | {_cell(f.bounds)} | {_cell(f.help)} |")
    return "\n".join(rows)


# ----- generators ----------------------------------------------------------------------------------------
def gen_config(name: str, page: str = "") -> str:
    cls = _scenario(name)
    strategies = ", ".join(f"`{s}`" for s in sorted(cls.strategies)) or "none"
    return (f"Set any key with `--set key=value`, in a YAML file (`--config FILE`), or from Python "
            f"(`sim.run(\"{name}\", key=value)`). The horizon (what `--ticks` overrides) is `{cls.horizon_field}`; "
            f"scripted strategies: {strategies}.\n\n" + _fields_table(cls.Config))


def gen_metrics(name: str, page: str = "") -> str:
    from sim.reward.docs import BASE_FINAL_DOCS, BASE_TICK_DOCS

    cls = _scenario(name)
    parts = []
    for title, own, base, where in (
        ("Final metrics", cls.final_metric_docs, BASE_FINAL_DOCS,
         "the whole run's summary: `run --json`, `societas show`, `runs.final_metrics`, `Result.metrics`"),
        ("Per-tick metrics", cls.tick_metric_docs, BASE_TICK_DOCS,
         "this tick's figures: the `ticks` table, `Result.per_tick`"),
    ):
        rows = [f"### {title}", "", f"Where: {where}.", "", "| metric | formula and source |", "| --- | --- |"]
        rows += [f"| `{k}` | {_cell(v)} |" for k, v in own.items()]
        shared = [k for k in base if k not in own]
        if shared:
            rows += [f"| `{k}` | {_cell(base[k])} (every scenario) |" for k in shared]
        parts.append("\n".join(rows))
    return "\n\n".join(parts)


def gen_components(name: str, page: str = "") -> str:
    """The scenario's reward components (its own, then the common ones): what `reward_weights` may weigh."""
    from sim.reward.components import COMMON_COMPONENTS

    cls = _scenario(name)
    rows = ["| component | what it is |", "| --- | --- |"]
    rows += [f"| `{k}` | {_cell(v)} |" for k, v in cls.component_docs.items()]
    rows += [f"| `{k}` | {_cell(v)} (every scenario) |" for k, v in COMMON_COMPONENTS.items()]
    return "\n".join(rows)


def gen_configs(name: str, page: str = "") -> str:
    """The scenario's built-in configs (scenarios/NAME/configs/*.yaml) with their leading comment."""
    cls = _scenario(name)
    folder = Path(inspect.getfile(cls)).parent / "configs"
    rows = ["| file | what it sets up |", "| --- | --- |"]
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        comment = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            comment.append(line.lstrip("#").strip())
        text = " ".join(comment) or ", ".join(k for k in _yaml_keys(path))
        rows.append(f"| `{path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name}` | {_cell(text)} |")
    if len(rows) == 2:
        return "No built-in configs."
    return "\n".join(rows)


def _yaml_keys(path: Path) -> list[str]:
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [f"{k}={v}" for k, v in data.items()] if isinstance(data, dict) else []


def gen_scenarios(_: str | None = None, page: str = "") -> str:
    import posixpath

    base = posixpath.dirname(page)
    rows = ["| scenario | what it is | horizon | strategies |", "| --- | --- | --- | --- |"]
    for name, cls in _registry().items():
        rows.append(f"| [`{name}`]({posixpath.relpath(f'scenarios/{name}.md', base or '.')}) | {_cell(cls.description)} | `{cls.horizon_field}` | "
                    f"{', '.join(f'`{s}`' for s in sorted(cls.strategies))} |")
    return "\n".join(rows)


def gen_llm(_: str | None = None, page: str = "") -> str:
    from sim.core.spec import LLMSpec

    return _fields_table(LLMSpec, prefix="llm.")


def _type_text(p: Any) -> str:
    from sim.core.fields import type_name

    desc = getattr(p, "type_descriptor", None)
    annotation = getattr(desc, "annotation", None)
    if annotation is None:
        return getattr(getattr(p, "type", None), "name", "") or ""
    text = type_name(annotation)
    return text[len("list["):-1] if p.multiple and text.startswith("list[") else text


def _param_row(p: Any) -> str:
    # duck-typed: typer >= 0.20 ships its own copy of click, so no isinstance checks against click
    if p.param_type_name == "argument":
        name = f"`{p.name.upper()}`"
        kind = f"argument ({_type_text(p)})" + (", required" if p.required else "")
    else:
        name = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
        kind = "flag" if getattr(p, "is_flag", False) else _type_text(p)
        if p.multiple:
            kind += ", repeatable"
        if p.required:
            kind += ", required"
    default = p.default
    if callable(default) or default is None or default == [] or default == () or getattr(p, "is_flag", False):
        default_text = ""
    else:
        default_text = _code(default)
    return f"| {name} | {_cell(kind)} | {default_text} | {_cell(getattr(p, 'help', None))} |"


def _usage(cmd: Any, path: list[str]) -> str:
    pieces = [*path, "[OPTIONS]"]
    for p in cmd.params:
        if p.param_type_name == "argument":
            pieces.append(p.name.upper() if p.required else f"[{p.name.upper()}]")
    return " ".join(pieces)


def _command_doc(cmd: Any, path: list[str], level: int) -> list[str]:
    out = [f"{'#' * level} `{' '.join(path)}`", ""]
    if hasattr(cmd, "commands"):  # a group: its help, then each subcommand one level down
        out += [inspect.cleandoc(cmd.help or ""), ""]
        for sub_name, sub in cmd.commands.items():
            if not sub.hidden:
                out += _command_doc(sub, [*path, sub_name], level + 1)
        return out
    out += ["```", _usage(cmd, path), "```", "", inspect.cleandoc(cmd.help or ""), ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    if params:
        out += ["| argument / option | kind | default | meaning |", "| --- | --- | --- | --- |"]
        out += [_param_row(p) for p in params]
        out.append("")
    return out


def gen_cli(_: str | None = None, page: str = "") -> str:
    import typer.main

    from societas.cli import app

    root = typer.main.get_command(app)
    lines = [inspect.cleandoc(root.help or ""), "",
             "Global options: " + ", ".join(f"`{o}` ({_cell(p.help)})" for p in root.params for o in p.opts), ""]
    for name, cmd in root.commands.items():
        if not cmd.hidden:
            lines += _command_doc(cmd, ["societas", name], 2)
    return "\n".join(lines)


def prompt_of(name: str) -> tuple[Any, list[dict[str, str]]]:
    """(request, chat messages) of the scenario's representative LLM decision: its first validity probe's request at
    the probe's last level (tick 1, one LLM agent, the default config), rendered by the built-in template of the
    current decision contract; what a run with `--policy llm` sends for that decision.

    `name@protocol` renders it under the scenario's built-in config `configs/<protocol>.yaml` (a paper protocol)."""
    from agents.llm.prompts import builtin_template, render_messages
    from sim.core.profiles import CONTRACT, profile
    from runner.config import load_yaml
    from sim.tick.broker import DecisionBroker

    name, _, protocol = name.partition("@")
    cls = _scenario(name)
    if not getattr(cls, "probes", ()):
        raise ValueError(f"docs: scenario {name!r} declares no probe, so it has no representative prompt to render")
    probe = cls.probes[0]
    settings = dict(probe.config)
    if protocol:
        path = ROOT / "scenarios" / name / "configs" / f"{protocol}.yaml"
        fields = cls.Config.model_fields
        settings = {**{k: v for k, v in load_yaml(path).items() if k in fields and k not in ("population",)}, **settings}
    config = cls.Config(**settings)
    model = cls(config, seed=0, broker=DecisionBroker({}), policy="llm", contract=CONTRACT)
    request = probe.situate(model, probe.levels[-1])
    return request, render_messages(request, builtin_template(profile(CONTRACT)))


def gen_prompt(name: str, page: str = "") -> str:
    """The scenario's representative prompt, message by message, as a run sends it."""
    request, messages = prompt_of(name)
    scenario, _, protocol = name.partition("@")
    under = f", config `scenarios/{scenario}/configs/{protocol}.yaml`" if protocol else ""
    head = (f"Rendered from the code (`{scenario}`{under}, probe `{_scenario(scenario).probes[0].name}`: phase `{request.phase}`, "
            f"tick {request.tick}, seed 0, decision contract {_contract()}):\n")
    parts = [head]
    for m in messages:
        parts.append(f"**{m['role']}**\n\n```text\n{m['content']}\n```\n")
    return "\n".join(parts)


def _contract() -> int:
    from sim.core.profiles import CONTRACT

    return CONTRACT


GENERATORS = {"config": gen_config, "configs": gen_configs, "metrics": gen_metrics, "scenarios": gen_scenarios, "llm": gen_llm,
              "cli": gen_cli, "prompt": gen_prompt, "components": gen_components}


def render(markdown: str, where: str = "") -> str:
    """Replace every gen marker of a page by its generated Markdown."""

    def sub(match: re.Match[str]) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind not in GENERATORS:
            raise ValueError(f"docs: unknown gen marker {kind!r} in {where}; known: {', '.join(GENERATORS)}")
        return GENERATORS[kind](arg, page=where)

    return MARKER.sub(sub, markdown)


def scenario_page(name: str) -> str:
    """The page of a registered scenario that has no hand-written one."""
    cls = _scenario(name)
    doc = inspect.getdoc(inspect.getmodule(cls)) or inspect.getdoc(cls) or ""
    return (f"# `{name}`\n\n{cls.description}\n\n{doc}\n\n## Config\n\n<!-- gen: config {name} -->\n\n"
            f"## Metrics\n\n<!-- gen: metrics {name} -->\n")


# ----- mkdocs events -------------------------------------------------------------------------------------
def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for name in _registry():
        uri = f"scenarios/{name}.md"
        if files.get_file_from_path(uri) is None:
            log.info("docs: generating a page for scenario %r (no docs/%s)", name, uri)
            files.append(File.generated(config, uri, content=scenario_page(name)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return render(markdown, page.file.src_uri)
