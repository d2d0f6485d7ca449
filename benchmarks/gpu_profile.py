"""Where a batched call's time goes on this device: a one-token step's fixed cost (each engine; the lean one eager
and replayed as a CUDA graph), the kernel-launch floor, the host's cost of one launch of each kind the lean forward
makes (a torch op, a norm, a product, each Triton kernel), the time split of a Number call (render, tokenize, layout,
the engine; tokenising whole beside it), whether the tokenizer's prefix cut applied and the engine's counters (CUDA
graphs captured and replayed), and torch.profiler tables (by host and by device time) of a Number call of `--requests` requests, with
each operation's share of the device time and the kernels launched.

    python benchmarks/gpu_profile.py --shape smollm2-135m --tokenizer DIR [--out FILE.txt] [--json FILE.json]
    python benchmarks/gpu_profile.py --shape tiny --device cpu --requests 8   # check the script on a CPU

How the README's profile figures were read (issue 28: an H100, the transformers engine; issue 44: the lean one).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.llm.local.layout import layout  # noqa: E402
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


#: kinds of device kernel, by a word in their names (first match wins). cuBLAS's Hopper products are named nvjet_*;
#: torch's elementwise kernels say "nocast" (not a cast), their functor names what they compute (silu, mul...).
KINDS = (("attention (Triton)", ("_attend_kernel",)), ("rotary + cache write (Triton)", ("_rope_write_kernel",)),
         ("MLP silu*mul (Triton)", ("_silu_mul_kernel",)),
         ("attention (SDPA)", ("attention", "fmha", "flash")),
         ("matrix products", ("nvjet", "gemm", "gemv", "xmma", "cutlass", "cublas", "wgmma")),
         ("norms", ("rms_norm", "RowwiseMoments", "layer_norm", "norm_kernel")),
         ("copies", ("copy_kernel", "direct_copy", "Memcpy", "to_copy")),
         ("concatenation", ("CatArray", "cat_")), ("reductions", ("reduce", "Reduce", "softmax", "logsumexp", "max_")),
         ("silu and mul (torch)", ("silu", "MulFunctor", "BinaryFunctor")),
         ("other elementwise", ("elementwise", "vectorized", "unrolled", "Memset", "fill")))


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


def launch_costs(lm, repeat: int = 200) -> dict:
    """Host microseconds of one launch of each kind the lean forward makes, on one row (the device has nothing to
    wait for): `repeat` launches queued back to back, then one synchronisation, divided."""
    import torch
    import torch.nn.functional as F

    if lm.lean_problem is not None:
        return {}
    lm.engine = "lean"
    dec = lm.fwd.dec
    k, layer = dec.kernels, dec.layers[0]
    dev, dt = lm.device, lm.dtype
    x = torch.randn(1, dec.embed.shape[1], device=dev, dtype=dt)
    qkv = F.linear(x, layer.qkv)
    cache = dec.new_cache(1, 8)
    kc, vc = cache[0]
    col0 = torch.zeros(1, dtype=torch.int32, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    gu = F.linear(x, layer.gate_up)
    q = qkv[:, :dec.hq * dec.d].view(1, 1, dec.hq, dec.d)
    o, acc = 0.01 * torch.randn(1, dec.hq * dec.d, device=dev, dtype=dt), torch.randn_like(x)
    cos, sin = dec._tables
    ops = {"torch add_": lambda: x.add_(0), "rms_norm": lambda: dec._norm(x, layer.ln1),
           "linear (qkv)": lambda: F.linear(x, layer.qkv), "addmm_ (o)": lambda: acc.addmm_(o, layer.o.t()),
           f"rope_write ({k.name})": lambda: k.rope_write(qkv, pos, cos, sin, kc, vc, col0, 1, dec.hq, dec.hk, dec.d),
           f"attend ({k.name})": lambda: k.attend(q, None, None, kc, vc, col0, col0, None, dec.scale),
           f"silu_mul ({k.mlp})": lambda: k.silu_mul(gu, dec.inter)}
    out = {}
    with torch.inference_mode():
        for name, fn in ops.items():
            fn()
            sync(lm)
            t = time.perf_counter()
            for _ in range(repeat):
                fn()
            sync(lm)
            out[name] = round(1e6 * (time.perf_counter() - t) / repeat, 1)
    return out


def number_split(lm, eng, reqs, msgs) -> dict:
    """Milliseconds of each part of a Number call: render, tokenize, the layout, and the engine on token ids."""
    texts = lm.render_all(msgs)
    ids = lm.encode(texts)
    bounds = [(int(r.space.lo), int(r.space.hi)) for r in reqs]
    seeds = [r.seed for r in reqs]
    parts = {"render": lambda: lm.render_all(msgs), "tokenize": lambda: lm.encode(texts),
             "tokenize_whole": lambda: lm.encoder.whole(texts),
             "layout": lambda: layout(ids, lm.plan_rules(2)),
             "engine": lambda: lm.decode_numbers(ids, bounds, eng.temperature, seeds)}
    return {name: round(1000 * median_time(lm, fn, repeat=5), 2) for name, fn in parts.items()}


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
    figures["launch_host_us"] = launch_costs(lm)
    lm.engine = default
    say("host microseconds per launch (1 row): " + json.dumps(figures["launch_host_us"]))
    reqs = as_space(harvest_requests(args.requests, months_before=1), "number")
    msgs = [render_messages(r) for r in reqs]
    figures["number_call_s"] = median_time(lm, lambda: eng.answer(reqs, msgs))
    say(f"number x {args.requests} on {lm.engine}: {figures['number_call_s']:.4f} s")
    figures["number_split_ms"] = number_split(lm, eng, reqs, msgs)
    say("number call split (ms): " + json.dumps(figures["number_split_ms"]))
    figures["prefix_cut"] = lm.encoder.status()
    say(f"prefix cut of the tokenizer: {figures['prefix_cut']}")
    figures["engine_counters"] = dict(getattr(lm.fwd, "counters", {}))
    say("engine counters: " + json.dumps(figures["engine_counters"]))
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
