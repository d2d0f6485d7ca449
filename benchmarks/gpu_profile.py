"""Where a batched call's time goes on this device: the one-token forward's fixed cost, the kernel-launch
floor, and torch.profiler tables (by host and by device time) of Number, Choice and Text calls.

    python benchmarks/gpu_profile.py --shape smollm2-135m --tokenizer DIR [--out FILE]
    python benchmarks/gpu_profile.py --shape tiny --device cpu          # check the script on a CPU

How the README's profile figures were read (an H100: three quarters of a 1,000-request Number call's
CUDA time in elementwise copies, products, concatenations and sums; ~20 ms for a one-row forward).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.llm.local.llm import LocalLLM  # noqa: E402
from agents.llm.prompts import render_messages  # noqa: E402
from benchmarks.llm_scale import as_space, median_time, sync  # noqa: E402
from benchmarks.llm_throughput import harvest_requests  # noqa: E402
from benchmarks.shapes import SHAPES, load_tokenizer, random_lm  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="smollm2-135m", choices=sorted(SHAPES))
    ap.add_argument("--tokenizer", default=None, help="a saved tokenizer folder (benchmarks/shapes.py --export)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--out", default=None, help="also write the report to this file")
    args = ap.parse_args()
    import torch

    lm = random_lm(args.shape, load_tokenizer(args.tokenizer), args.device)
    eng = LocalLLM(lm=lm, temperature=0.7)
    from torch.profiler import ProfilerActivity, profile  # after transformers: importing it first can break that import

    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    ids = torch.randint(0, lm.tokenizer.vocab_size - 1, (1, 200), device=lm.device)
    with torch.inference_mode():
        cache = lm.model(input_ids=ids, use_cache=True).past_key_values
        one = median_time(lm, lambda: lm.model(input_ids=ids[:, :1], past_key_values=cache, use_cache=True, logits_to_keep=1), repeat=5)
    say(f"one-token forward, 1 row, 200 cached: {one * 1000:.2f} ms")
    x = torch.ones(8, device=lm.device)

    def launches() -> None:
        for _ in range(1200):
            x.add_(1)
    say(f"1,200 tiny kernels: {median_time(lm, launches, repeat=5) * 1000:.2f} ms")
    base = harvest_requests(args.requests, months_before=1)
    on_gpu = lm.device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    for kind, n in (("number", args.requests), ("choice", args.requests), ("number", 1), ("text", 1)):
        reqs = as_space(base, kind)[:n]
        msgs = [render_messages(r) for r in reqs]
        say(f"{kind} x {n}: {median_time(lm, lambda: eng.answer(reqs, msgs)):.4f} s")
        with profile(activities=activities) as prof:
            eng.answer(reqs, msgs)
            sync(lm)
        for key in ("self_cpu_time_total", "self_cuda_time_total") if on_gpu else ("self_cpu_time_total",):
            say(f"==== {kind} x {n}, by {key}")
            say(prof.key_averages().table(sort_by=key, row_limit=15, max_name_column_width=60))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
