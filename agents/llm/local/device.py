"""Where and how the local model runs: device, dtype, CPU threads and the token budget of a forward."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

import torch

from agents.llm.local.ids import ModelNotFound


def cpu_supports_bf16() -> bool:
    """Whether this CPU has native bf16 matrix instructions (AVX512-BF16 or AMX)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


def pick_device(device: Optional[str] = None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def device_problem(device: Optional[str]) -> Optional[str]:
    """Why `device` (`llm.device`) cannot run a model on this machine, or None when it can.

    Checked before a run stores anything, so that `llm.device=cuda` on a machine without a GPU is
    refused at once instead of after the model has loaded for half a minute.
    """
    if device is None or device == "cpu":
        return None
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            built = "built without CUDA" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, but no GPU is visible"
            return f"this machine has no CUDA device (torch {torch.__version__}: {built})"
        index, count = (int(device.split(":")[1]) if ":" in device else 0), torch.cuda.device_count()
        if index >= count:
            return f"there is no {device}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}"
        return None
    if device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        return "this machine has no MPS device (Apple silicon)"
    return None


def pick_dtype(device: str, dtype: Optional[str] = None) -> torch.dtype:
    """bf16 on CUDA and on CPUs with bf16 instructions, else float32; `dtype` overrides."""
    if dtype:
        try:
            return {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
                    "fp32": torch.float32, "float32": torch.float32, "fp64": torch.float64}[dtype]
        except KeyError:
            raise ModelNotFound(f"unknown dtype {dtype!r}; valid: bf16, fp16, fp32") from None
    if device.startswith("cuda"):
        return torch.bfloat16
    return torch.bfloat16 if cpu_supports_bf16() else torch.float32


def pick_threads(device: str, threads: Optional[int] = None) -> int:
    """Torch CPU threads: `threads` (`llm.threads`) if given; else every core on a quiet machine and
    half of them on a busy one (1-minute load average at least the core count).

    Measured on 2 cores (benchmarks/llm_scale.py, fp32 AVX2): quiet, 2 threads ran the 32-agent
    tick 1.7x faster than 1; with other processes on both cores, 1 thread beat 2 by 1.3-5x.
    """
    if threads:
        return max(1, int(threads))
    cores = os.cpu_count() or 1
    if device.startswith("cuda"):
        return min(4, cores)
    try:
        busy = os.getloadavg()[0] >= cores
    except OSError:
        busy = False
    return max(1, cores // 2) if busy else cores


def default_batch_tokens(device: str) -> int:
    """Token budget of one forward (rows x padded suffix width): large on a GPU, modest on a CPU."""
    return 262_144 if device.startswith("cuda") else 8_192
