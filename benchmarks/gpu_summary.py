"""Merge the parts one benchmarks/gpu_run.sh call wrote into one results file, and print its summary table.

    python benchmarks/gpu_summary.py PART.json... --status STATUS --tests TESTS.log --out llm_scale-cuda.json \\
        [--previous benchmarks/results/llm_scale-cuda.json]

Each part is benchmarks/llm_scale.py's (or gpu_profile.py's) JSON of some sections; the merged file has every
section once, the issue's targets read off them (benchmarks.llm_scale.gpu_targets), what each script section did
(status: exit code and seconds; 124 = its time ran out), and the previous results file's headline figures under
`previous_run`, so one file shows before and after. A section this run did not measure (a short rerun: SECTIONS=...)
is carried from the previous file when that was measured on the same kind of device, and `carried` names each such
section with the date of the run that measured it (a target read off a carried section is that run's). The table
is printed last, for the tail of the log.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.llm_scale import gpu_targets  # noqa: E402


def merge(parts: list[Path]) -> dict:
    """Every part's sections in one dict; the first part's machine, model and limits; section seconds summed up."""
    out: dict = {}
    for path in parts:
        try:
            part = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            out.setdefault("unreadable_parts", []).append(f"{path.name}: {exc}")
            continue
        if not isinstance(part, dict):
            out.setdefault("unreadable_parts", []).append(f"{path.name}: not a JSON object")
            continue
        for key, value in part.items():
            if key == "section_seconds":
                out.setdefault(key, {}).update(value)
            elif key in ("prefix_cut", "engine_counters"):  # one process's each: kept by part
                out.setdefault(f"{key}_by_part", {})[path.stem] = value
            elif key not in out or key not in ("machine", "model", "limits"):
                out[key] = value
    return out


def previous(path: Path) -> dict:
    """The headline figures of an earlier results file (its scale rows at 1,000 requests, targets, social tick)."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    rows = [r for r in old.get("scale", {}).get("rows", []) if r.get("requests") in (1000, 4096)]
    social = old.get("ticks", {}).get("social", {})
    engines = {kind: {k: row.get(k) for k in ("decisions_per_s", "split_lean")}
               for kind, row in (old.get("engines") or {}).items() if isinstance(row, dict) and "decisions_per_s" in row}
    return {"runs": old.get("runs"), "machine": old.get("machine"), "scale_rows_1000_4096": rows,
            "social_tick_wall_s": social.get("tick_wall_s"), "social_engine_batches": social.get("engine_batches"),
            "engines_at_1000": engines, "gpu_targets_met": old.get("gpu_targets_met"),
            "profile_number_1000": old.get("profile_number_1000_by_reference") or old.get("profile")}


#: the sections a results file holds, which a short rerun may leave to the previous file
SECTIONS = ("scale", "engines", "ticks", "profile", "shapes", "versus_single", "hf", "knobs", "limits", "tokenize_probe")


def carry(results: dict, old: dict) -> dict:
    """Copy into `results` each section it lacks from `old` (a previous results file of the same device kind):
    {section: date of the run that measured it}. Sections carried there already keep their first date."""
    if not old or old.get("machine", {}).get("device") != results.get("machine", {}).get("device"):
        return {}
    date = (old.get("runs") or {}).get("date", "?")
    earlier = old.get("carried", {})
    done = {}
    for name in SECTIONS:
        if name not in results and name in old:
            results[name] = old[name]
            done[name] = earlier.get(name, date)
    return done


def tests_line(path: Path) -> str:
    """pytest's closing line ('N passed, M failed ...') from a log, or what is missing."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "no log"
    found = re.findall(r"^=*\s*(\d+ (?:passed|failed|error|skipped).*?)\s*=*$", text, re.M)
    return found[-1] if found else "no summary line (see the log)"


def fmt(v, spec: str = ",.0f") -> str:
    return "-" if v is None else format(v, spec)


def table(results: dict, status: list[list[str]], tests: str) -> str:
    """The summary: what ran, the targets, the engines compared, the time split, the shapes, the profile."""
    m = results.get("machine", {})
    lines = [f"== issue 44 on {m.get('device_name', '?')} (torch {m.get('torch', '?')}, {m.get('dtype', '?')}): engine "
             f"{m.get('engine', '?')}, kernels {m.get('lean_kernels', '?')}" + (f"; notes: {m['notes']}" if m.get("notes") else "")]
    lines.append("script sections (exit code 0 ok, 124 out of time; seconds): " +
                 ", ".join(f"{name} {rc} {secs}s" for name, rc, secs in status))
    lines.append(f"tests: {tests}")
    if results.get("carried"):
        lines.append("carried from the previous results file (not rerun): " +
                     ", ".join(f"{k} ({v})" for k, v in results["carried"].items()))
    rows = {(r["space"], r["requests"]): r for r in results.get("scale", {}).get("rows", [])}
    social = results.get("ticks", {}).get("social", {})
    num, cho = rows.get(("number", 1000)), rows.get(("choice", 1000))
    top = max((n for s, n in rows if s == "number"), default=None)
    pre = rows.get(("number", top), {}).get("prefill_fraction_of_limit") if top else None
    lines.append(f"{'figure':46s} {'value':>12s} {'target':>10s}  met")
    targets = results.get("gpu_targets_met", {})

    def met(prefix: str) -> str:
        keys = [k for k in targets if k.startswith(prefix)]
        return ("yes" if targets[keys[0]] else "NO") if keys else "-"
    lines.append(f"{'Number decisions/s at 1,000 requests':46s} {fmt(num and num['decisions_per_s']):>12s} {'>= 10,000':>10s}  {met('number_ge')}")
    lines.append(f"{'Choice decisions/s at 1,000 requests':46s} {fmt(cho and cho['decisions_per_s']):>12s} {'>= 20,000':>10s}  {met('choice_ge')}")
    lines.append(f"{f'prefill fraction of its limit at {top} requests':46s} {fmt(pre, '.3f'):>12s} {'>= 0.40':>10s}  {met('prefill_ge')}")
    walls = social.get("tick_wall_s") or []
    lines.append(f"{'social tick, 1,000 members, slowest of 3 (s)':46s} {fmt(max(walls) if walls else None, '.2f'):>12s} {'<= 3':>10s}  {met('social_tick')}")
    if walls:
        lines.append(f"  social tick walls {[round(w, 2) for w in walls]}; engine batches (phase: s) " +
                     ", ".join(f"{b['tick']}.{b['phase']} {b['seconds']:.2f}" for b in social.get("engine_batches", [])))
    eng = results.get("engines", {})
    if eng.get("variants"):
        names = eng["variants"]
        lines.append(f"engines at {eng.get('requests')} requests, decisions/s (same answers as transformers at T=0):")
        lines.append(f"  {'':8s}" + "".join(f"{n:>26s}" for n in names))
        for kind in ("number", "choice", "text"):
            row = eng.get(kind)
            if row:
                lines.append(f"  {kind:8s}" + "".join(
                    f"{fmt(row['decisions_per_s'][n]):>18s} ({row['same_answers_as_transformers_at_t0'][n]:.2f})" for n in names))
        for kind in ("number", "choice", "text"):
            sp = (eng.get(kind) or {}).get("split_lean")
            if sp:
                lines.append(f"  {kind} split: render {sp['render_s'] * 1000:.1f} ms, tokenize {sp['tokenize_s'] * 1000:.1f} ms, "
                             f"engine alone {sp['engine_only_s'] * 1000:.1f} ms ({fmt(sp['engine_only_decisions_per_s'])}/s)")
        if eng.get("notes"):
            lines.append(f"  notes: {eng['notes']}")
    for name, entry in (results.get("shapes") or {}).items():
        if not isinstance(entry, dict):
            continue
        if "error" in entry:
            lines.append(f"  shape {name}: {entry['error']}")
            continue
        cells = []
        for r in entry.get("rows", []):
            cells.append(f"{r['space']} {fmt(r.get('decisions_per_s'))}/s" + (f" ERR {r['error'][:60]}" if "error" in r else ""))
        r0 = next((r for r in entry.get("rows", []) if r.get("space") == "number"), {})
        lines.append(f"  shape {name:14s} {', '.join(cells)}; prefill {fmt(r0.get('prefill_fraction_of_limit'), '.2f')} of limit; "
                     f"peak {fmt((r0.get('peak_gpu_bytes') or 0) / 2**30, '.1f')} GiB")
    prof = results.get("profile", {})
    if prof:
        lines.append(f"profile ({prof.get('engine')}, {prof.get('requests')} Number requests): {fmt(prof.get('number_call_s'), '.4f')} s, "
                     f"device {fmt(prof.get('device_ms_total'), '.1f')} ms in {fmt(prof.get('device_kernels_launched'))} kernels; "
                     f"one-token step ms {json.dumps({k: round(v, 2) for k, v in prof.get('one_token_step_ms_1_row_200_cached', {}).items()})}")
        if prof.get("share_by_kind"):
            lines.append("  device time by kind: " + ", ".join(f"{k} {v:.0%}" for k, v in prof["share_by_kind"].items()))
        if prof.get("number_split_ms"):
            lines.append("  number call split (ms): " + ", ".join(f"{k} {v}" for k, v in prof["number_split_ms"].items()))
        if prof.get("prefix_cut"):
            lines.append(f"  prefix cut of the tokenizer (profile): {prof['prefix_cut']}")
        if prof.get("engine_counters"):
            lines.append(f"  engine counters (profile): {json.dumps(prof['engine_counters'])}")
        if prof.get("launch_host_us"):
            lines.append("  host us per launch: " + ", ".join(f"{k} {v}" for k, v in prof["launch_host_us"].items()))
    probe = results.get("tokenize_probe") or {}
    for row in probe.get("runs", []):
        lines.append(f"  tokenize probe ({(probe.get('runs') or [{}])[0].get('rows', '?')} prompts), threads {row.get('threads_env')}: " + (
            row["error"] if "error" in row else
            f"whole {row['whole_ms']} ms, cut {row['cut_ms']} ms, rests alone {row['rests_only_ms']} ms, same ids {row['same_ids']}"))
    if probe:
        lines.append(f"  cpus: {json.dumps(probe.get('machine'))}; threads set for the benchmarks: "
                     f"{probe.get('picked_threads') or 'the default'}")
    for part, cut in (results.get("prefix_cut_by_part") or {}).items():
        lines.append(f"  prefix cut of the tokenizer ({part}): {cut}; engine counters "
                     f"{json.dumps((results.get('engine_counters_by_part') or {}).get(part, {}))}")
    for row in results.get("versus_single", {}).get("rows", []):
        lines.append(f"  batched vs one call per agent at {row['agents']}: {row['speedup']:.0f}x")
    for row in results.get("hf", {}).get("rows", []):
        lines.append(f"  generate / engine at {row['rows']} rows: {fmt(row.get('generate_over_engine'), '.2f')}x "
                     f"(same answers {fmt(row.get('same_answers'), '.2f')})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parts", nargs="*", type=Path)
    ap.add_argument("--status", type=Path, default=None, help="lines 'section exit-code seconds' written by gpu_run.sh")
    ap.add_argument("--tests", type=Path, default=None, help="the pytest log")
    ap.add_argument("--previous", type=Path, default=ROOT / "benchmarks" / "results" / "llm_scale-cuda.json")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    results = merge([p for p in args.parts if p.is_file()])
    status = [line.split() for line in args.status.read_text().splitlines() if line.strip()] if args.status and args.status.is_file() else []
    tests = tests_line(args.tests) if args.tests else "not run"
    try:
        old = json.loads(args.previous.read_text())
    except (OSError, ValueError):
        old = {}
    results["carried"] = carry(results, old)
    if results.get("machine", {}).get("device") == "cuda":
        results["gpu_targets_met"] = gpu_targets(results)  # a target read off a carried section: see `carried`
    results["runs"] = {"date": time.strftime("%Y-%m-%d"), "how": "bash benchmarks/gpu_run.sh (random weights, SmolLM2 tokenizer)",
                       "script_sections": status, "tests": tests}
    results["previous_run"] = previous(args.previous)
    if isinstance(results["previous_run"], dict) and old.get("previous_run"):
        results["previous_run"]["its_previous_run"] = {k: old["previous_run"].get(k) for k in ("runs", "machine", "gpu_targets_met")}
    args.out.write_text(json.dumps(results, indent=2))
    print(table(results, status, tests))


if __name__ == "__main__":
    main()
