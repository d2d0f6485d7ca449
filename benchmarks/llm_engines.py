"""The `engines` section of benchmarks/llm_scale.py (issue 44): the fused path against the old one, on the same
weights and requests, in one process.

Variants, each a whole `LocalLLM.answer` call (render, tokenize, layout, forwards, decoding), timed in interleaved
rounds (benchmarks.timing.rounds) so a slow spell falls on every side:
- `transformers`: the old path: the model's own modules, the prefix copied per row into the fused SDPA kernel;
- `lean_torch_kernels`: the lean forward with its torch kernels (the prefix still copied per row, inside SDPA);
- `lean`: the lean forward with the Triton kernels (one copy of the prefix) and CUDA graphs: the GPU's default;
- `lean_no_graphs`: the same with every decoding step and shared prefix launched eagerly.
Beside them: where a call's time goes (`split`: rendering the chat template, tokenizing, and the engine alone on
token ids), and how often each variant's answers at temperature 0 equal the old path's (bf16 kernels that sum in
another order may round a near-tie the other way; on a CPU in float32 or float64 they agree exactly).
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from agents.llm.local.lean_engine import LeanEngine
from agents.llm.prompts import render_messages
from benchmarks.timing import rounds


def _variants(lm: Any) -> dict[str, Any]:
    """name -> (engine name, engine object or None): the lean ones built here, sharing the model's weights."""
    out: dict[str, Any] = {"transformers": ("transformers", None)}
    if lm.lean_problem:
        return out
    torch_kernels = LeanEngine(lm, "torch")
    default = LeanEngine(lm, None)
    eager = LeanEngine(lm, None)
    eager.graphs = False
    out.update({"lean_torch_kernels": ("lean", torch_kernels), "lean": ("lean", default), "lean_no_graphs": ("lean", eager)})
    return out


def _use(lm: Any, variant: tuple[str, Any]) -> None:
    name, engine = variant
    if engine is not None:
        lm._engines["lean"] = engine
    lm.engine = name


def split(lm: Any, eng: Any, reqs: list, msgs: list, repeat: int) -> dict:
    """Median seconds of rendering the chat template, tokenizing, and the engine alone on the token ids."""
    from benchmarks.llm_scale import median_time

    texts = lm.render_all(msgs)
    ids = lm.encode(texts)
    render_s = median_time(lm, lambda: lm.render_all(msgs), repeat=repeat)
    encode_s = median_time(lm, lambda: lm.encode(texts), repeat=repeat)
    kind = eng._kind(reqs[0])
    if kind == "number":
        bounds = [(int(r.space.lo), int(r.space.hi)) for r in reqs]
        call = lambda: lm.decode_numbers(ids, bounds, eng.temperature, [r.seed for r in reqs])  # noqa: E731
    elif kind == "choice":
        call = lambda: lm.choose(ids, [list(r.space.options) for r in reqs], eng.temperature, [r.seed for r in reqs])  # noqa: E731
    else:
        call = lambda: lm.generate(ids, [r.space.max_tokens for r in reqs], eng.temperature, [r.seed for r in reqs])  # noqa: E731
    engine_s = median_time(lm, call, repeat=repeat)
    return {"render_s": render_s, "tokenize_s": encode_s, "engine_only_s": engine_s,
            "engine_only_decisions_per_s": len(reqs) / engine_s}


def engines_section(lm: Any, eng: Any, n: int, repeat: int) -> dict:
    """Each variant on Number, Choice and Text requests (`n` each): median seconds, decisions/s, the speed-up over
    the old path, agreement with it at temperature 0, and the default's time split."""
    from benchmarks.llm_scale import as_space, sync
    from benchmarks.llm_throughput import harvest_requests

    base = harvest_requests(n, months_before=1)
    variants = _variants(lm)
    default_engine = lm.engine
    kept = lm._engines.get("lean")
    out: dict = {"requests": n, "variants": list(variants), "lean_problem": lm.lean_problem}
    if "lean" in variants:
        out["kernels"] = {k: v[1].kernels for k, v in variants.items() if v[1] is not None}
        out["notes"] = sorted({note for _, e in variants.values() if e is not None for note in e.notes})
    try:
        for kind in ("number", "choice", "text"):
            reqs = as_space(base, kind)
            msgs = [render_messages(r) for r in reqs]
            greedy = type(eng)(lm=lm, temperature=0.0)
            answers = {}
            for name, variant in variants.items():  # warm-up (compiles, first captures) and the answers at T = 0
                _use(lm, variant)
                eng.answer(reqs[:4], msgs[:4])
                answers[name] = [a.value for a in greedy.answer(reqs, msgs)]

            def timer(variant):
                def fn() -> float:
                    _use(lm, variant)
                    sync(lm)
                    t = time.perf_counter()
                    eng.answer(reqs, msgs)
                    sync(lm)
                    return time.perf_counter() - t
                return fn
            times = rounds({name: timer(v) for name, v in variants.items()}, repeat)
            med = {name: statistics.median(v) for name, v in times.items()}
            row: dict = {"median_s": med, "rounds_s": times, "decisions_per_s": {k: n / v for k, v in med.items()},
                         "speedup_over_transformers": {k: med["transformers"] / v for k, v in med.items()},
                         "same_answers_as_transformers_at_t0": {k: sum(a == b for a, b in zip(v, answers["transformers"])) / n
                                                                for k, v in answers.items()}}
            best = "lean" if "lean" in variants else "transformers"
            _use(lm, variants[best])
            row["split_" + best] = split(lm, eng, reqs, msgs, repeat=max(1, repeat // 2))
            out[kind] = row
            print(f"  engines {kind}: " + ", ".join(f"{k} {n / v:,.0f}/s" for k, v in med.items()), file=sys.stderr)
    finally:
        if kept is not None:
            lm._engines["lean"] = kept
        lm.engine = default_engine
    return out
