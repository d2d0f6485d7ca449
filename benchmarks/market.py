"""Market benchmark: a 1,000 x 3,000 scripted market end to end, and how an LLM market batches. Writes JSON.

    python benchmarks/market.py [--customers 1000] [--businesses 3000] [--llm-customers 10] [--no-llm]
                                [--out benchmarks/results/market-cpu.json]

scripted: the synthetic market through `execute` into a fresh SQLite store (what `societas run`
does), plus the same run without a store, and the one-off search-index build.
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
from scenarios.market.data import generate  # noqa: E402
from scenarios.market.search import SearchIndex  # noqa: E402
from sim.tick.broker import DecisionBroker  # noqa: E402
from sim.runner.config import build_spec  # noqa: E402
from sim.runner.execution import execute  # noqa: E402
from sim.store.store import Store  # noqa: E402


def scripted(customers: int, businesses: int, search: str) -> dict:
    sets = [f"customers_n={customers}", f"businesses_n={businesses}", f"search={search}"]
    market = generate(customers, businesses, 0)
    t = time.perf_counter()
    SearchIndex(market.businesses)
    index_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/bench.db")
        t = time.perf_counter()
        r = execute(build_spec("market", sets=sets), store)
        stored_s = time.perf_counter() - t
    cfg = MarketConfig(customers_n=customers, businesses_n=businesses, search=search)
    t = time.perf_counter()
    model = MarketModel(cfg, seed=0, broker=DecisionBroker({"scripted": ScriptedBackend(MarketModel.strategies)}))
    while model.running and model.tick < cfg.max_steps:
        model.step()
    model_s = time.perf_counter() - t
    return {"customers": customers, "businesses": businesses, "search": search, "ticks": r.ticks,
            "run_with_store_s": round(stored_s, 2), "run_without_store_s": round(model_s, 2), "index_build_s": round(index_s, 3),
            "welfare_ratio": r.metrics["welfare_ratio"], "needs_met_rate": r.metrics["needs_met_rate"],
            "first_proposal_rate": r.metrics["first_proposal_rate"], "messages": r.metrics["messages_total"]}


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
    ap.add_argument("--customers", type=int, default=1000)
    ap.add_argument("--businesses", type=int, default=3000)
    ap.add_argument("--llm-customers", type=int, default=10)
    ap.add_argument("--no-llm", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "market-cpu.json"))
    args = ap.parse_args()
    out = {"machine": platform.platform(), "python": platform.python_version(), "when": time.strftime("%Y-%m-%d"),
           "scripted": [scripted(args.customers, args.businesses, s) for s in ("lexical", "optimal")]}
    print(json.dumps(out["scripted"], indent=1), flush=True)
    if not args.no_llm:
        out["llm"] = llm(args.llm_customers, 3 * args.llm_customers)
        print(json.dumps({k: v for k, v in out["llm"].items() if k != "batches"}, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
