"""Where a batched call's time goes on this device: a one-token step's fixed cost (each engine; the lean one eager
and replayed as a CUDA graph), the kernel-launch floor, and torch.profiler tables (by host and by device time) of a
Number call of `--requests` requests, with each operation's share of the device time and the kernels launched.

    python benchmarks/gpu_profile.py --shape smollm2-135m --tokenizer DIR [--out FILE.txt] [--json FILE.json]
    python benchmarks/gpu_profile.py --shape tiny --device cpu --requests 8   # check the script on a CPU

How the README's profile figures were read (issue 28: an H100, the transformers engine; issue 44: the lean one).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.llm.local.llm import LocalLLM  # noqa: E402
from agents.llm.prompts import render_messages  # noqa: E402
from benchmarks.llm_scale import as_space, median_time, sync  # noqa: E402
from benchmarks.llm_throughput import harvest_requests  # noqa: E402
from benchmarks.shapes import SHAPES, load_tokenizer, random_lm  # noqa: E402


def step_ms(lm, engine: str, graphs: bool) -> float:
    """Median milliseconds of one decoding step of one row with 200 tokens cached, on `engine`."""
    import torch

    lm.engine = engine
    fwd = lm.fwd
    keep = getattr(fwd, "graphs", None)
    if keep is not None:
        fwd.graphs = graphs
    try:
        with torch.inference_mode():
            _, state = lm._prefill([list(range(100, 300))], 0, None, room=64)
            tok = torch.tensor([7], device=lm.device)
            return 1000 * median_time(lm, lambda: lm._step(tok, state, None), repeat=9, warm=3)
    finally:
        if keep is not None:
            fwd.graphs = keep


def device_time(event) -> float:
    """An averaged profiler event's own device microseconds, whichever name this torch gives them."""
    for name in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(event, name):
            return float(getattr(event, name))
    return 0.0


#: kinds of device kernel, by a word in their names (first match wins)
KINDS = (("attention (Triton)", ("_attend_kernel",)), ("rotary + cache write (Triton)", ("_rope_write_kernel",)),
         ("attention (SDPA)", ("attention", "fmha", "flash")), ("matrix products", ("gemm", "xmma", "cutlass", "cublas", "wgmma")),
         ("norms", ("rms_norm", "RowwiseMoments", "norm")), ("copies and casts", ("copy", "Memcpy", "to_copy", "cast")),
         ("concatenation", ("CatArray", "cat_")), ("reductions", ("reduce", "Reduce", "softmax", "logsumexp", "max_")),
         ("elementwise", ("elementwise", "vectorized", "unrolled", "Memset", "fill")))


def kernel_shares(averages) -> dict:
    """Device time per kernel (top 12) and per kind of kernel, and how many kernels one call launched."""
    from torch.autograd import DeviceType

    kernels = [e for e in averages if getattr(e, "device_type", None) == DeviceType.CUDA and device_time(e) > 0]
    total = sum(device_time(e) for e in kernels) or 1.0
    kinds: dict[str, float] = {}
    for e in kernels:
        kind = next((k for k, words in KINDS if any(w in e.key for w in words)), "other")
        kinds[kind] = kinds.get(kind, 0.0) + device_time(e) / total
    top = sorted(kernels, key=device_time, reverse=True)[:12]
    return {"device_ms_total": total / 1000, "device_kernels_launched": sum(e.count for e in kernels),
            "share_by_kind": {k: round(v, 4) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
            "share_by_kernel": {e.key[:120]: round(device_time(e) / total, 4) for e in top}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="smollm2-135m", choices=sorted(SHAPES))
    ap.add_argument("--tokenizer", default=None, help="a saved tokenizer folder (benchmarks/shapes.py --export)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--out", default=None, help="also write the report (tables) to this file")
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    args = ap.parse_args()
    import torch

    lm = random_lm(args.shape, load_tokenizer(args.tokenizer), args.device)
    eng = LocalLLM(lm=lm, temperature=0.7)
    from torch.profiler import ProfilerActivity, profile  # after transformers: importing it first can break that import

    lines: list[str] = []
    figures: dict = {"engine": lm.engine, "requests": args.requests}

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    default = lm.engine
    steps = {"transformers": step_ms(lm, "transformers", False)}
    if lm.lean_problem is None:
        steps["lean_eager"] = step_ms(lm, "lean", False)
        if lm.device.startswith("cuda"):
            steps["lean_cuda_graph"] = step_ms(lm, "lean", True)
        figures["lean_kernels"] = lm.fwd.kernels
        figures["lean_notes"] = lm.fwd.notes
    lm.engine = default
    figures["one_token_step_ms_1_row_200_cached"] = steps
    say("one-token step, 1 row, 200 cached: " + ", ".join(f"{k} {v:.2f} ms" for k, v in steps.items()))
    x = torch.ones(8, device=lm.device)

    def launches() -> None:
        for _ in range(1200):
            x.add_(1)
    figures["launch_floor_ms_1200_tiny_kernels"] = 1000 * median_time(lm, launches, repeat=5)
    say(f"1,200 tiny kernels: {figures['launch_floor_ms_1200_tiny_kernels']:.2f} ms")
    on_gpu = lm.device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    reqs = as_space(harvest_requests(args.requests, months_before=1), "number")
    msgs = [render_messages(r) for r in reqs]
    figures["number_call_s"] = median_time(lm, lambda: eng.answer(reqs, msgs))
    say(f"number x {args.requests} on {lm.engine}: {figures['number_call_s']:.4f} s")
    with profile(activities=activities) as prof:
        eng.answer(reqs, msgs)
        sync(lm)
    averages = prof.key_averages()
    for key in ("self_cpu_time_total", "self_cuda_time_total") if on_gpu else ("self_cpu_time_total",):
        say(f"==== number x {args.requests}, by {key}")
        say(averages.table(sort_by=key, row_limit=20, max_name_column_width=70))
    if on_gpu:
        figures.update(kernel_shares(averages))
        say("device time by kind of kernel: " + json.dumps(figures["share_by_kind"]))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"profile": figures}, indent=2))


if __name__ == "__main__":
    main()
