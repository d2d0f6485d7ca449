"""Start a run in the background from a scenario's config fields, and follow it.

The app's Launch page describes a scenario's `Config` as form fields (`form_fields`),
validates what the user entered into a `RunSpec` exactly as the CLI would, and starts
`python -m sim.cli run ... --json` as a subprocess so that no page ever waits for a run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

import yaml

from scenarios.registry import get_scenario
from sim.core.errors import UsageError
from sim.core.fields import describe_fields
from sim.core.spec import RunSpec
from sim.runner.config import build_spec
from sim.runner.execution import horizon

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class FormField:
    """One config field as a form widget: kind is bool, choice, int, float, text or yaml."""

    name: str
    kind: str
    default: Any
    help: str = ""
    lo: Optional[float] = None
    hi: Optional[float] = None
    options: tuple[Any, ...] = ()
    optional: bool = False


def form_fields(config_cls: type) -> list[FormField]:
    """The scenario Config's fields as widgets, in declaration order, from their types, bounds and descriptions."""
    out = []
    for f in describe_fields(config_cls):
        ann, optional, default, lo, hi = f.kind, f.optional, f.default, f.lo, f.hi
        common = {"name": f.name, "default": default, "help": f.help, "optional": optional}
        if ann is bool:
            out.append(FormField(kind="bool", **common))
        elif f.options:
            out.append(FormField(kind="choice", options=f.options, **common))
        elif ann is int and not optional:
            out.append(FormField(kind="int", lo=lo, hi=hi, **common))
        elif ann is float and not optional:
            out.append(FormField(kind="float", lo=lo, hi=hi, **common))
        elif ann is str and not optional:
            out.append(FormField(kind="text", **common))
        else:
            out.append(FormField(kind="yaml", **{**common, "default": None if default is None else
                                                  yaml.safe_dump(_plain(default), default_flow_style=True).strip()}))
    return out


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def config_from_form(fields: list[FormField], values: dict[str, Any]) -> dict[str, Any]:
    """Form values into config data: YAML fields parsed, blank optional ones left out."""
    data: dict[str, Any] = {}
    for f in fields:
        v = values.get(f.name, f.default)
        if f.kind == "yaml":
            if v is None or str(v).strip() == "":
                continue
            try:
                v = yaml.safe_load(str(v))
            except yaml.YAMLError as exc:
                raise UsageError(f"bad value for {f.name!r}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
        data[f.name] = v
    return data


@dataclass
class Launch:
    """A run started in the background: its process, spec digest, start time and log files."""

    scenario: str
    spec: RunSpec
    digest: str
    started_at: datetime
    process: subprocess.Popen
    workdir: Path
    total: int
    db_url: str = ""
    run_id: Optional[str] = None
    seen_done: bool = False
    logs: dict[str, Path] = field(default_factory=dict)

    def returncode(self) -> Optional[int]:
        return self.process.poll()

    def error_tail(self, chars: int = 800) -> str:
        path = self.logs.get("stderr")
        if not path or not path.exists():
            return ""
        return path.read_text(errors="replace")[-chars:].strip()


def launch(scenario: str, config: dict[str, Any], *, seed: int, policy: str, db_url: str,
           ticks: Optional[int] = None) -> Launch:
    """Validate (UsageError on bad input, nothing started) and start `sim.cli run` in a subprocess."""
    workdir = Path(tempfile.mkdtemp(prefix="societas-launch-"))
    form = workdir / "form.yaml"
    form.write_text(yaml.safe_dump(config))
    try:
        spec = build_spec(scenario, seed=seed, policy=policy, ticks=ticks, config_file=str(form))
    except Exception:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    total = horizon(spec, get_scenario(spec.scenario))
    cfg = workdir / "config.yaml"
    cfg.write_text(yaml.safe_dump({**spec.config, "seed": spec.seed, "policy": spec.policy}))
    logs = {"stdout": workdir / "stdout.json", "stderr": workdir / "stderr.txt"}
    started = datetime.now(timezone.utc) - timedelta(seconds=1)
    cmd = [sys.executable, "-m", "sim.cli", "run", spec.scenario, "--config", str(cfg), "--db", db_url, "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    with open(logs["stdout"], "w") as out, open(logs["stderr"], "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    return Launch(scenario, spec, spec.digest(), started, proc, workdir, total, db_url=db_url, logs=logs)

