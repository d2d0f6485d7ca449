"""Prompt layout: what each fisher forwards on its own, against how the fishery's catches come out.

The built-in prompt (agents/llm/templates/user-contract4.txt; user.txt before contract 4) puts the
question and the answer format after the agent's own text (identity, memory, feedback), so every
request forwards them on its own. The `shared_question` layout moves them into the shared part and
restates the question last, which shortens what each agent forwards; `question_first` (contract
4's text) asks the question in the shared part and leaves only the answer sentence after the
agent's own text. Decision contract 3 moves what every fisher sees (the month's catches in all,
messages, votes) out of each fisher's memory into one shared history; contract 4's built-in
template asks for a number in one sentence and drops the memory header. Each variant is a
(decision contract, layout) pair; this measures both sides of the trade on the fishery's 32-agent
harvest tick in months 1, 2 and 4 (0, 1 and 3 memory lines):

- speed: the batched tick against one call per agent, and the prompt tokens each forwards;
- decisions: `--draws` catches per fisher (distinct seeds) on the same states under each layout: the
  mean, spread, the share at most the sustainable share, and the share taking half the stock or more.

    python benchmarks/prompt_layout.py [--months 1 2 4] [--draws 8] [--variants ...] [--out FILE]

A change is worth adopting only if it is faster and its decisions are no worse; the JSON says both.
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

from agents.llm.prompts import DEFAULT, DEFAULT_CONTRACT3, PromptTemplate, render_messages  # noqa: E402
from benchmarks.llm_scale import tick_speed  # noqa: E402
from benchmarks.llm_throughput import harvest_requests  # noqa: E402
from scenarios.commons.strategies import sustainable_share  # noqa: E402

SHARED_QUESTION = PromptTemplate(
    user="${context}\n${question}\nAnswer with ${space}.${answer_hint}\n${persona}${own}\n${memory}${feedback}\n${question}")
QUESTION_FIRST = PromptTemplate(
    user="${context}\n${question}\n${persona}${own}\n${memory}${feedback}\n${answer}\n", memory_header="")
LAYOUTS = {"built_in": DEFAULT, "built_in_contract3": DEFAULT_CONTRACT3, "shared_question": SHARED_QUESTION,
           "question_first": QUESTION_FIRST}
#: variant -> (decision contract the fishery's text is made under, layout)
VARIANTS = {"built_in@2": (2, "built_in_contract3"), "built_in@3": (3, "built_in_contract3"),
            "shared_question@3": (3, "shared_question"), "built_in@4": (4, "built_in"), "question_first@4": (4, "question_first")}
_M63 = (1 << 63) - 1


def decisions(eng, reqs, prompt, draws: int) -> dict:
    """`draws` answers per request (seeds spread by the golden ratio), as a distribution."""
    many = [replace(r, seed=(r.seed + k * 0x9E3779B97F4A7C15) & _M63) for k in range(draws) for r in reqs]
    answers = eng.answer(many, [render_messages(r, prompt) for r in many])
    values = [a.value for a in answers if a.error is None]
    share, stock = sustainable_share(reqs[0].observation), reqs[0].space.hi
    return {"decisions": len(many), "valid": len(values), "mean": statistics.fmean(values), "sd": statistics.pstdev(values),
            "median": statistics.median(values), "sustainable_share": share, "stock": stock,
            "within_sustainable_share": sum(v <= share for v in values) / len(values),
            "half_the_stock_or_more": sum(v >= stock / 2 for v in values) / len(values)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--months", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--draws", type=int, default=8, help="answers per fisher and layout for the decision distribution")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    from agents.llm.local.model import shared_lm
    from agents.llm.local.llm import LocalLLM

    lm = shared_lm()
    eng = LocalLLM(lm=lm, temperature=0.7)
    rows = []
    for month in args.months:
        for name in args.variants:
            contract, layout = VARIANTS[name]
            reqs, prompt = harvest_requests(32, months_before=month - 1, contract=contract), LAYOUTS[layout]
            row = {"month": month, "variant": name, "contract": contract, "layout": layout,
                   **tick_speed(lm, eng, reqs, prompt, repeat=1), **decisions(eng, reqs, prompt, args.draws)}
            print(f"month {month} {name:18s} {row['speedup']:.2f}x  mean catch {row['mean']:.2f}  "
                  f"within share {row['within_sustainable_share']:.3f}", file=sys.stderr, flush=True)
            rows.append(row)
    device = lm.device
    out = {"benchmark": "prompt_layout", "scenario": "commons harvest, 32 LLM fishers (conditional history)",
           "templates": {name: layout.user for name, layout in LAYOUTS.items()},
           "machine": {"python": platform.python_version(), "torch": torch.__version__, "device": device,
                       "dtype": str(lm.dtype), "cpu_threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine()},
           "temperature": 0.7, "draws_per_fisher": args.draws, "rows": rows, "when": time.strftime("%Y-%m-%d")}
    path = Path(args.out or ROOT / "benchmarks" / "results" / f"prompt_layout-{'cuda' if device.startswith('cuda') else 'cpu'}.json")
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
