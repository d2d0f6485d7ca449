"""LLM inference at scale (issue 13): batched ticks, prefix sharing across personas, threads, and
decisions per second by batch size beside the device's physical limits. Writes JSON.

    python benchmarks/llm_scale.py [--quick] [--sizes 1,64,256,1024,4096] [--out FILE]

Sections:
- `cpu`: the 32-agent fishery tick batched against one call per agent in months 1, 2 and 4, each
  the median ratio of 5 rounds (a round times the batched tick and the calls one by one, back to
  back, each side first in turn; from decision contract 3 each month adds a line of the fisher's
  own memory, and a line of the shared history, which a batch forwards once); a mixed-persona
  tick (two personas of 16: the situation forwarded once, each persona's extension once) against a
  single-persona one (32); torch threads 1 against 2 on the same tick. Run on every machine.
- `scale`: Number, Choice (4 options) and Text (32 tokens) decisions per second at each batch
  size (default 1, 64, 256, 1,024, 4,096 on CUDA; 1, 16, 64 on a CPU), prompt and generated
  tokens per second, the batched tick against one call per agent on a sample of 16, and each
  figure beside its limit on this device: prefill 2 x parameters x tokens FLOPs at the measured
  matmul rate (bf16 on CUDA), decode weight bytes per step at the measured memory bandwidth.

Every ratio is measured within one run, on one model, machine and prompt set. The JSON names
the device; a CPU file never stands in for a GPU figure.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.llm.local.llm import LocalLLM  # noqa: E402
from agents.llm.prompts import render_messages  # noqa: E402
from benchmarks.llm_throughput import harvest_requests, timed  # noqa: E402  (~200-token prompts after one month)
from benchmarks.timing import rounds, wall  # noqa: E402
from scenarios.commons.model import DISPOSITIONS  # noqa: E402
from sim.core.spaces import Choice, Text  # noqa: E402

OPTIONS = ["none", "fisher 3", "fisher 7", "fisher 12"]
TARGET_MONTHS = (1, 2)  # months whose 32-agent tick must be >= 4x one call per agent (issue 13)


def as_space(reqs: list, kind: str) -> list:
    """The same prompts asking for a Number (as is), a Choice of 4 or a 32-token Text."""
    if kind == "number":
        return reqs
    if kind == "choice":
        return [replace(r, space=Choice(OPTIONS), default="none", question="Whom do you fine?") for r in reqs]
    return [replace(r, space=Text(32), default="ok", question="Write one short message to the other fishers.") for r in reqs]


def sync(lm) -> None:
    if lm.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def device_limits(lm) -> dict:
    """Measured peak matmul rate (model dtype) and memory bandwidth of this device."""
    import torch

    on_gpu = lm.device.startswith("cuda")
    n = 8192 if on_gpu else 1024
    a = torch.randn(n, n, device=lm.device, dtype=lm.dtype)
    b = torch.randn(n, n, device=lm.device, dtype=lm.dtype)
    a @ b
    sync(lm)
    reps = 20 if on_gpu else 3
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(lm)
    flops = 2 * n**3 * reps / (time.perf_counter() - t)
    size = (1 << 30) if on_gpu else (1 << 27)  # bytes copied
    x = torch.empty(size // 2, dtype=torch.float16, device=lm.device)
    y = torch.empty_like(x)
    y.copy_(x)
    sync(lm)
    t = time.perf_counter()
    for _ in range(reps):
        y.copy_(x)
    sync(lm)
    bandwidth = 2 * size * reps / (time.perf_counter() - t)  # read + write
    params = sum(p.numel() for p in lm.model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in lm.model.parameters())
    return {"matmul_flops_per_s": flops, "matmul_dtype": str(lm.dtype), "bandwidth_bytes_per_s": bandwidth,
            "parameters": params, "weight_bytes": weight_bytes}


def interleaved(fns: dict, repeat: int) -> dict:
    """Best wall time of each function over `repeat` paired rounds (benchmarks.timing.rounds), so a slow
    spell of this shared VM falls on every side of a ratio, not on one."""
    return {name: min(times) for name, times in rounds({n: wall(fn) for n, fn in fns.items()}, repeat).items()}


def tick_speed(lm, eng, reqs, prompt=None, repeat: int = 2) -> dict:
    """One batched tick against one call per agent on the same requests (rendered with `prompt`,
    default the built-in template), in `repeat` rounds, each round timing the batched tick and the
    calls one by one, back to back (in turn first): tokens forwarded each way, the best time of each
    side, and the speed-up.

    `speedup` is the median over rounds of the round's ratio (one call per agent / batched): each
    ratio compares two timings taken back to back, so a slow spell of this shared VM mostly falls on
    both of its sides; `speedup_best_times` (best single / best batched, possibly from different rounds)
    and every round's ratio are kept beside it.
    """
    msgs = [render_messages(r, prompt) for r in reqs]
    eng.answer(reqs[:2], msgs[:2])  # warm-up
    before = lm.counters["prefix_tokens"] + lm.counters["suffix_tokens"]
    eng.answer(reqs, msgs)
    forwarded = lm.counters["prefix_tokens"] + lm.counters["suffix_tokens"] - before
    times = rounds({"batched": wall(lambda: eng.answer(reqs, msgs)),
                    "single": wall(lambda: [eng.answer([r], [m]) for r, m in zip(reqs, msgs)])}, repeat)
    ratios = [s / b for b, s in zip(times["batched"], times["single"])]
    toks = lm.encode([lm.render(m) for m in msgs])
    return {"prompt_tokens_mean": statistics.fmean(len(t) for t in toks), "tokens_one_call_per_agent": sum(len(t) for t in toks),
            "tokens_forwarded_batched": forwarded, "batched_s": min(times["batched"]), "one_call_per_agent_s": min(times["single"]),
            "repeats": repeat, "speedup": statistics.median(ratios), "speedup_rounds": ratios,
            "speedup_best_times": min(times["single"]) / min(times["batched"])}


def cpu_section(lm, eng) -> dict:
    """The CPU targets: 32-agent tick batched vs per agent, mixed vs single persona, threads."""
    import torch

    out: dict = {}
    ticks, by_month = [], {}
    for month in (1, 2, 4):  # memory grows with the months: 0, 1 and 3 lines of the fisher's own
        by_month[month] = reqs = harvest_requests(32, months_before=month - 1)
        row = {"month": month, **tick_speed(lm, eng, reqs, repeat=5)}
        print(f"  month {month}: {row['speedup']:.2f}x", file=sys.stderr)
        ticks.append(row)
    out["tick_32_number"] = ticks
    reqs = by_month[2]
    msgs = [render_messages(r) for r in reqs]
    alt, selfish = DISPOSITIONS["altruistic"][0], DISPOSITIONS["selfish"][0]
    one = [replace(r, persona=alt) for r in reqs]
    mixed = [replace(r, persona=alt if i < 16 else selfish) for i, r in enumerate(reqs)]
    rows, calls = {}, {}
    for label, rs in {"single_persona": one, "mixed_personas": mixed}.items():
        ms = [render_messages(r) for r in rs]
        before = dict(lm.counters)
        eng.answer(rs, ms)
        rows[label] = {f"{k}_per_call": lm.counters[k] - before[k] for k in ("prefix_forwards", "prefix_tokens", "suffix_tokens")}
        calls[label] = lambda rs=rs, ms=ms: eng.answer(rs, ms)
    for label, seconds in interleaved(calls, 4).items():
        rows[label]["seconds"] = seconds
    rows["mixed_over_single"] = rows["mixed_personas"]["seconds"] / rows["single_persona"]["seconds"]
    out["personas_32"] = rows
    threads = {}
    if lm.device == "cpu":
        chosen = torch.get_num_threads()
        for n in sorted({1, 2, chosen}):
            torch.set_num_threads(n)
            threads[str(n)] = timed(lambda: eng.answer(reqs, msgs), 2)
        torch.set_num_threads(chosen)
        threads["chosen_by_engine"] = chosen
    out["threads_tick_32_s"] = threads
    # the target is the fishery's tick in months 1 and 2; month 4 (three months of memory) is measured, not a target
    out["targets_met"] = {f"tick_32_month_{r['month']}_batched_ge_4x_one_call_per_agent": r["speedup"] >= 4
                          for r in ticks if r["month"] in TARGET_MONTHS}
    out["targets_met"].update({
                          "mixed_personas_as_fast_as_single_(within_10pct)": rows["mixed_over_single"] <= 1.10})
    return out


def scale_section(lm, eng, sizes: list[int], limits: dict) -> dict:
    """Decisions/s by batch size and space, tokens/s, beside the device's limits."""
    base = harvest_requests(max(sizes), months_before=1)
    rows = []
    for kind in ("number", "choice", "text"):
        reqs = as_space(base, kind)
        msgs = [render_messages(r) for r in reqs]
        eng.answer(reqs[:2], msgs[:2])
        for n in sizes:
            rs, ms = reqs[:n], msgs[:n]
            before = dict(lm.counters)
            t = time.perf_counter()
            answers = eng.answer(rs, ms)
            sync(lm)
            s = time.perf_counter() - t
            tokens_in = sum(a.tokens_in for a in answers)
            tokens_out = sum(a.tokens_out for a in answers)
            forwarded = (lm.counters["prefix_tokens"] - before["prefix_tokens"]) + (lm.counters["suffix_tokens"] - before["suffix_tokens"])
            steps = lm.counters["decode_steps"] - before["decode_steps"]
            prefill_limit_s = 2 * limits["parameters"] * forwarded / limits["matmul_flops_per_s"]
            decode_limit_s = steps * limits["weight_bytes"] / limits["bandwidth_bytes_per_s"]
            rows.append({"space": kind, "requests": n, "seconds": s, "decisions_per_s": n / s,
                         "prompt_tokens_per_s": tokens_in / s, "generated_tokens_per_s": tokens_out / s,
                         "forwarded_prompt_tokens": forwarded, "decode_steps": steps,
                         "prefill_limit_s": prefill_limit_s, "decode_limit_s": decode_limit_s,
                         "fraction_of_limit": (prefill_limit_s + decode_limit_s) / s})
            print(f"  {kind:6s} {n:5d} requests: {n / s:9.1f} decisions/s", file=sys.stderr)
    sample = as_space(base, "number")[:16]
    sms = [render_messages(r) for r in sample]
    per_call = timed(lambda: [eng.answer([r], [m]) for r, m in zip(sample, sms)], 1) / len(sample)
    number = {r["requests"]: r for r in rows if r["space"] == "number"}
    top = max(number)
    return {"rows": rows, "one_call_per_agent_s_per_decision_sample16": per_call,
            "batched_vs_one_call_per_agent_at_max": per_call * top / number[top]["seconds"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the CPU section only (no batch-size sweep)")
    ap.add_argument("--sizes", default=None, help="comma-separated batch sizes for the scale section")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    from agents.llm.local.model import shared_lm

    t = time.perf_counter()
    lm = shared_lm()
    on_gpu = lm.device.startswith("cuda")
    results: dict = {"machine": {"python": platform.python_version(), "torch": torch.__version__, "device": lm.device,
                                 "device_name": torch.cuda.get_device_name(0) if on_gpu else (platform.processor() or platform.machine()),
                                 "cpu_threads": torch.get_num_threads(), "dtype": str(lm.dtype),
                                 "batch_tokens": lm.batch_tokens, "model_load_s": time.perf_counter() - t}}
    eng = LocalLLM(lm=lm, temperature=0.7)
    results["cpu"] = cpu_section(lm, eng)
    print(json.dumps(results["cpu"], indent=1), file=sys.stderr)
    if not args.quick:
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([1, 64, 256, 1024, 4096] if on_gpu else [1, 16, 64])
        results["limits"] = device_limits(lm)
        results["scale"] = scale_section(lm, eng, sizes, results["limits"])
        if on_gpu:
            num = {r["requests"]: r for r in results["scale"]["rows"] if r["space"] == "number"}
            cho = {r["requests"]: r for r in results["scale"]["rows"] if r["space"] == "choice"}
            near = min(num, key=lambda n: abs(n - 1000))
            results["gpu_targets_met"] = {
                f"number_ge_5000_per_s_at_{near}": num[near]["decisions_per_s"] >= 5000,
                f"choice_ge_10000_per_s_at_{near}": cho[near]["decisions_per_s"] >= 10000,
                f"prefill_ge_50pct_of_limit_at_{max(num)}": num[max(num)]["prefill_limit_s"] / num[max(num)]["seconds"] >= 0.5,
            }
    dev = "cuda" if on_gpu else "cpu"
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"llm_scale-{dev}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
