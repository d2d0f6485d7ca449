"""Where a batch's tokenising goes: whole texts against the common beginning cut off (`PrefixEncoder`), under several
tokenizer thread counts (RAYON_NUM_THREADS, fixed per process: one subprocess each), beside what the machine says it
has (CPUs, affinity, the cgroup's quota).

Why: on the H200 the cut was predicted to take a 1,000-prompt batch from ~23 ms to ~8 ms and it stayed at 21.7 ms.
Here the cut is 3-4x faster at every thread count; this says, on the machine itself, whether the cut applied and
whether the tokenizer's threads, not its work, set the time.

    python benchmarks/tokenize_probe.py --tokenizer DIR --texts FILE.json [--threads 0,1,4,8,16] [--json OUT]
      (FILE.json: a list of prompt texts; gpu_profile.py writes the benchmark's; 0: the tokenizer's default)
    python benchmarks/tokenize_probe.py --tokenizer DIR --render 1000 --texts FILE.json ...   (first write FILE.json:
      the benchmark's 1,000 Number prompts, rendered by the saved tokenizer's chat template; imports transformers)
    python benchmarks/tokenize_probe.py --tokenizer DIR --texts FILE.json --one   (one measurement, this process)
    ... --pick FILE   write "N" to FILE when N threads cut the batch at most 2/3 of the default's time (gpu_run.sh
      then runs the benchmarks with RAYON_NUM_THREADS=N, and says so); nothing is written otherwise

Only the `tokenizers` package and agents.llm.local.prefix_encode are imported (no torch, no transformers).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.llm.local.prefix_encode import PrefixEncoder, cut_point  # noqa: E402


def machine_cpus() -> dict:
    """The CPUs this process may use, as the OS, the affinity mask and the cgroup each say."""
    out: dict = {"os_cpu_count": os.cpu_count()}
    try:
        out["affinity"] = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        out["affinity"] = None
    quota = Path("/sys/fs/cgroup/cpu.max")
    out["cgroup_cpu_max"] = quota.read_text().strip() if quota.is_file() else None
    return out


def median_ms(fn, repeat: int = 7) -> float:
    """The median wall time of `fn` in milliseconds, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(1000 * sorted(times)[repeat // 2], 2)


def measure(tokenizer_json: str, texts: list[str]) -> dict:
    """One process's figures: whole, cut, the rests alone, and whether the cut applied with the same ids."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_file(tokenizer_json)
    enc = PrefixEncoder(SimpleNamespace(backend_tokenizer=backend))
    cut = cut_point(texts)
    same = enc.encode(texts) == enc.whole(texts)
    rests = [t[cut:] for t in texts]
    return {"threads_env": os.environ.get("RAYON_NUM_THREADS", "default"), "rows": len(texts), "cut_chars": cut,
            "same_ids": same, "whole_ms": median_ms(lambda: enc.whole(texts)), "cut_ms": median_ms(lambda: enc.encode(texts)),
            "rests_only_ms": median_ms(lambda: backend.encode_batch_fast(rests, add_special_tokens=False)),
            "status": enc.status()}


def probe(tokenizer_json: str, texts_file: str, threads: list[int], limit_s: float = 30.0) -> dict:
    """`measure` in one subprocess per thread count (0: the tokenizer's default), beside the machine's CPUs."""
    rows = []
    for n in threads:
        env = {k: v for k, v in os.environ.items() if k != "RAYON_NUM_THREADS"}
        env["TOKENIZERS_PARALLELISM"] = "true"
        if n:
            env["RAYON_NUM_THREADS"] = str(n)
        try:
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--tokenizer-json", tokenizer_json,
                                   "--texts", texts_file, "--one"], env=env, capture_output=True, text=True,
                                  timeout=limit_s, check=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        except (subprocess.SubprocessError, ValueError, IndexError) as exc:
            rows.append({"threads_env": n or "default", "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
    return {"machine": machine_cpus(), "runs": rows}


def fail(message: str) -> NoReturn:
    """Bad input: one line on stderr, exit code 2."""
    print(f"tokenize_probe: {message}", file=sys.stderr)
    raise SystemExit(2)


def render(tokenizer_dir: str, n: int, path: str) -> None:
    """Write the benchmark's `n` Number prompts (benchmarks/gpu_profile.py's), rendered, as a JSON list to `path`."""
    from agents.llm.local.chat_render import ChatRenderer
    from agents.llm.prompts import render_messages
    from benchmarks.llm_throughput import harvest_requests
    from benchmarks.shapes import load_tokenizer

    renderer = ChatRenderer(load_tokenizer(tokenizer_dir))
    Path(path).write_text(json.dumps(renderer.render_all([render_messages(r) for r in harvest_requests(n, months_before=1)])))


def pick(result: dict) -> int | None:
    """The thread count whose cut batch takes at most 2/3 of the default's time (the fastest such), or None."""
    runs = [r for r in result["runs"] if "error" not in r and r.get("same_ids")]
    default = next((r for r in runs if r["threads_env"] == "default"), None)
    if default is None:
        return None
    best = min((r for r in runs if r["threads_env"] != "default"), key=lambda r: r["cut_ms"], default=None)
    return int(best["threads_env"]) if best and best["cut_ms"] <= default["cut_ms"] * 2 / 3 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=None, help="a saved tokenizer folder (its tokenizer.json is read)")
    ap.add_argument("--tokenizer-json", default=None, help="the tokenizer.json itself")
    ap.add_argument("--texts", required=True, help="a JSON list of prompt texts")
    ap.add_argument("--threads", default="0,1,4,8,16", help="tokenizer thread counts, one subprocess each (0: default)")
    ap.add_argument("--one", action="store_true", help="measure in this process only (one JSON line)")
    ap.add_argument("--json", default=None, help="write the figures to this file")
    ap.add_argument("--render", type=int, default=0, help="first render this many benchmark prompts into --texts")
    ap.add_argument("--pick", default=None, help="write the thread count worth setting to this file (see above)")
    args = ap.parse_args()
    tj = args.tokenizer_json or (str(Path(args.tokenizer) / "tokenizer.json") if args.tokenizer else None)
    if not tj or not Path(tj).is_file():
        fail(f"no tokenizer.json at {tj} (give --tokenizer DIR or --tokenizer-json FILE)")
    if args.render:
        if not args.tokenizer:
            fail("--render needs --tokenizer DIR (its chat template renders the prompts)")
        render(args.tokenizer, args.render, args.texts)
    try:
        texts = json.loads(Path(args.texts).read_text())
    except (OSError, ValueError) as exc:
        fail(f"cannot read texts from {args.texts} ({type(exc).__name__})")
    if not (isinstance(texts, list) and texts and all(isinstance(t, str) for t in texts)):
        fail(f"{args.texts} is not a non-empty JSON list of texts")
    if args.one:
        print(json.dumps(measure(tj, texts)))
        return
    try:
        threads = [int(x) for x in args.threads.split(",")]
    except ValueError:
        fail(f"--threads takes integers separated by commas, not {args.threads!r}")
    result = probe(tj, args.texts, threads)
    for row in result["runs"]:
        print("tokenize", json.dumps(row))
    print("cpus", json.dumps(result["machine"]))
    result["picked_threads"] = pick(result)
    print(f"picked threads: {result['picked_threads'] or 'none (the default is as fast)'}")
    if args.pick and result["picked_threads"]:
        Path(args.pick).write_text(str(result["picked_threads"]))
    if args.json:
        Path(args.json).write_text(json.dumps({"tokenize_probe": result}, indent=2))


if __name__ == "__main__":
    main()
