"""The data files a run reads: paths stored absolute, contents fingerprinted, changes said plainly.

A config's `path_fields` may name files or folders (social's edge-list `graph`, the market's folder); a
relative path is made absolute when the spec is built, so that replay, resume, fork and the app read the
same data from any directory. Each run records a SHA-256 of every file or folder it reads (`data_paths`)
with its versions; a replay, resume or fork of it first checks them, and refuses, naming the file, data
that changed since (a replay could not be faithful).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Optional

from sim.core.errors import UsageError
from sim.tick.config import ScenarioConfig
from sim.tick.model import SocietyModel

#: the key of a run's `versions` that holds its data files: field -> {"path", "sha256"}
DATA_KEY = "data"


def absolute_paths(cls: type[SocietyModel], data: dict[str, Any], base: Optional[Path] = None) -> dict[str, Any]:
    """`data` (raw config fields) with each of the scenario's `path_fields` that names an existing file or folder,
    relative to `base` (default: the current directory), made absolute; names that are not paths stay."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for field in cls.Config.path_fields:
        value = out.get(field)
        if not isinstance(value, str) or not value:
            continue
        path = Path(value).expanduser()
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        if path.exists():
            out[field] = str(path.resolve())
    return out


def fingerprint(path: Path) -> str:
    """SHA-256 of a file's bytes, or of a folder's files (relative names and bytes, in sorted order)."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        if f is not path:
            digest.update(str(f.relative_to(path)).encode() + b"\0")
        with f.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def data_fingerprints(config: ScenarioConfig) -> dict[str, dict[str, str]]:
    """field -> {"path": absolute path, "sha256": fingerprint} of every file or folder the config makes a run read."""
    return {field: {"path": str(path.resolve()), "sha256": fingerprint(path)} for field, path in config.data_paths().items()}


def changed_data(recorded: Optional[dict[str, Any]], config: ScenarioConfig) -> Optional[str]:
    """None when the data a run recorded is still what `config` reads; else which file changed, in words."""
    if not recorded:
        return None
    now = data_fingerprints(config)
    for field, then in recorded.items():
        current = now.get(field)
        if current is None:
            return f"the run read {field} {then['path']!r}, which this config no longer names"
        if current["sha256"] != then["sha256"]:
            return (f"the {field} data {current['path']!r} changed since the run (sha256 {then['sha256'][:12]}... then, "
                    f"{current['sha256'][:12]}... now): restore it to replay, resume or fork the run as it ran")
    return None


def check_data(recorded: Optional[dict[str, Any]], config: ScenarioConfig) -> None:
    """UsageError naming the file when the data a run recorded changed since."""
    problem = changed_data(recorded, config)
    if problem:
        raise UsageError(problem)
