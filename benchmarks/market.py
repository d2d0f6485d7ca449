"""Market benchmark: scripted synthetic markets at two sizes (how the cost grows), and how an LLM market batches.

    python benchmarks/market.py [--sizes 1000x3000,10000x30000] [--llm-customers 10] [--no-llm]
                                [--out benchmarks/results/market-cpu.json]

scripted, per size (customers x businesses) and search: the synthetic market through `execute` into a fresh
SQLite store (what `societas run` does), then the same run without a store split into its phases (setup with the
search index and the optimal reference, the ticks, the final metrics with their random-match baselines);
`growth` divides each phase's time at the largest size by its time at the smallest, next to how many times more
agents there are and how many times more inquiries they sent (with `optimal` search a customer of a larger market
finds more sellers of its items, up to `bandwidth`, so the work of a tick grows faster than the agents): a phase
linear in its work grows about as much as that.
llm: the embedded model plays both sides of a small synthetic market; every `decide_batch` is
counted, so the JSON shows one engine call per phase per tick holding every LLM decision of it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.scripted import ScriptedBackend  # noqa: E402
from scenarios.market import MarketConfig, MarketModel  # noqa: E402
from runner.config import build_spec  # noqa: E402
from runner.execution import execute  # noqa: E402
from sim.store.store import Store  # noqa: E402
from sim.tick.broker import DecisionBroker  # noqa: E402


def scripted(customers: int, businesses: int, search: str) -> dict:
    sets = [f"customers_n={customers}", f"businesses_n={businesses}", f"search={search}"]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/bench.db")
        t = time.perf_counter()
        r = execute(build_spec("market", sets=sets), store)
        stored_s = time.perf_counter() - t
    cfg = MarketConfig(customers_n=customers, businesses_n=businesses, search=search)
    t = time.perf_counter()
    model = MarketModel(cfg, seed=0, broker=DecisionBroker({"scripted": ScriptedBackend(MarketModel.strategies)}))
    setup_s = time.perf_counter() - t
    t = time.perf_counter()
    while model.running and model.tick < cfg.max_steps:
        model.step()
    ticks_s = time.perf_counter() - t
    t = time.perf_counter()
    model.final_metrics()
    final_s = time.perf_counter() - t
    return {"customers": customers, "businesses": businesses, "search": search, "ticks": r.ticks,
            "run_with_store_s": round(stored_s, 2), "setup_s": round(setup_s, 2), "ticks_s": round(ticks_s, 2),
            "final_metrics_s": round(final_s, 2), "run_without_store_s": round(setup_s + ticks_s + final_s, 2),
            "welfare_ratio": r.metrics["welfare_ratio"], "needs_met_rate": r.metrics["needs_met_rate"],
            "first_proposal_rate": r.metrics["first_proposal_rate"], "messages": r.metrics["messages_total"]}


def growth(rows: list[dict]) -> dict:
    """Per search: the largest size's time over the smallest's, per phase, and the agents' ratio."""
    out = {}
    for search in sorted({r["search"] for r in rows}):
        mine = sorted((r for r in rows if r["search"] == search), key=lambda r: r["customers"] + r["businesses"])
        small, big = mine[0], mine[-1]
        agents = (big["customers"] + big["businesses"]) / (small["customers"] + small["businesses"])
        out[search] = {"agents_x": round(agents, 2), "messages_x": round(big["messages"] / small["messages"], 2), **{
            k.removesuffix("_s") + "_x": round(big[k] / small[k], 2) if small[k] else None
            for k in ("run_with_store_s", "setup_s", "ticks_s", "final_metrics_s", "run_without_store_s")}}
    return out


def llm(customers: int, businesses: int) -> dict:
    from agents.llm.backend import LLMBackend
    from agents.llm.local.llm import LocalLLM

    batches: list[dict] = []

    class Counted(LLMBackend):
        def decide_batch(self, requests):
            t = time.perf_counter()
            out = super().decide_batch(requests)
            batches.append({"tick": requests[0].tick, "phase": requests[0].phase, "requests": len(requests),
                            "agents": len({r.agent_id for r in requests}), "seconds": round(time.perf_counter() - t, 2)})
            return out

    engine = LocalLLM()
    t = time.perf_counter()
    engine.lm
    load_s = time.perf_counter() - t
    backend = Counted(engine.model_id, engine.sampling, llm=engine)
    cfg = MarketConfig(customers_n=customers, businesses_n=businesses, search="optimal", max_steps=2)
    backends = {"scripted": ScriptedBackend(MarketModel.strategies), "llm": backend}
    model = MarketModel(cfg, seed=0, broker=DecisionBroker(backends), policy="llm")
    t = time.perf_counter()
    while model.running and model.tick < cfg.max_steps:
        model.step()
    run_s = time.perf_counter() - t
    m = model.summary()
    per_phase = {}
    for b in batches:
        per_phase.setdefault(f"{b['tick']}:{b['phase']}", []).append(b["requests"])
    return {"customers": customers, "businesses": businesses, "model_load_s": round(load_s, 1), "run_s": round(run_s, 1),
            "engine_batches": backend.llm_batches, "batches": batches,
            "one_call_per_phase": all(len(v) == 1 for v in per_phase.values()),
            "welfare_ratio": m["welfare_ratio"], "first_proposal_rate": m["first_proposal_rate"],
            "payment_rate": m["payment_rate"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000x3000,10000x30000", help="customers x businesses, comma-separated")
    ap.add_argument("--llm-customers", type=int, default=10)
    ap.add_argument("--no-llm", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "market-cpu.json"))
    args = ap.parse_args()
    out = {"machine": platform.platform(), "python": platform.python_version(), "when": time.strftime("%Y-%m-%d"),
           "scripted": []}
    for size in args.sizes.split(","):
        customers, businesses = (int(x) for x in size.lower().split("x"))
        for search in ("lexical", "optimal"):
            out["scripted"].append(scripted(customers, businesses, search))
            print(json.dumps(out["scripted"][-1]), flush=True)
    out["growth"] = growth(out["scripted"])
    print(json.dumps(out["growth"], indent=1), flush=True)
    if not args.no_llm:
        out["llm"] = llm(args.llm_customers, 3 * args.llm_customers)
        print(json.dumps({k: v for k, v in out["llm"].items() if k != "batches"}, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
