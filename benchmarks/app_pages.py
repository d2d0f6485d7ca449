"""How long each page of the app takes to show, the first time after the app starts and again, in a real browser.

For every page (a run that suits it, as `tests/screenshots.py` picks it, on the rich screenshot store by default),
a fresh server is started as `societas app` starts it (`python -m app_pages.serve`, which imports the pages' modules
before it listens); once it answers, the page's URL is opened in headless Chromium, and the clock runs until its
heading is there, the app is idle and its charts are drawn: the first render (a visitor's first view after the app
said where it listens), in a browser that never opened an app at that address (a new port each page: Streamlit's
scripts are fetched and compiled afresh). The page is then opened again: warm. Then the server is stopped and a new
one started on the same port, and the page opened once more: `first_returning`, the first render after a start for
a browser that has the app's files cached (Streamlit serves them immutable for a year), as someone who opens
`societas app` at its usual address meets it. Beside the wall time (which a shared machine inflates),
the CPU seconds the app's server and the browser spent on it, the seconds from starting the server to its first
answer (`start_s`, the warming included) and the load average. Writes benchmarks/results/app_pages-cpu.json.

    python benchmarks/app_pages.py                          # builds (or reuses) shots/rich/runs.db
    python benchmarks/app_pages.py --db sqlite:///runs.db   # another store
    python benchmarks/app_pages.py --root /tmp/base         # another checkout's app (a before/after on one store)
    python benchmarks/app_pages.py --pages run,compare      # only these pages
    python benchmarks/app_pages.py --cold                   # a plain `streamlit run app.py`: nothing imported before
                                                            # the first visit (what the launcher saves)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import browser, screenshots  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (0 for one that is gone)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / TICK


def descendants(pid: int) -> list[int]:
    """`pid` and every process under it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def pages(url: str, root: Path) -> list[tuple[str, str, str]]:
    """(label, path with query, heading) of the first screenshot of each page that `root`'s app has (an app whose
    Runs page is its default one serves it at `/`)."""
    from sim.store import queries

    runs_at_root = 'default=(slug == "runs")' in (root / "app.py").read_text()
    runs = queries.list_runs(queries.open_reader(url))
    seen, out = set(), []
    for slug, heading, _, pick, extra in screenshots.PAGES:
        if slug in seen or not (root / "app_pages" / f"{slug}.py").exists():
            continue
        seen.add(slug)
        run_id, chosen = None, ""
        if pick.startswith("compare:"):
            chosen = screenshots.CHOICES[pick.split(":", 1)[1]](runs)
        elif pick:
            run_id = screenshots.PICKS[pick](runs)
        query = "&".join(p for p in ((f"run={run_id}" if run_id else ""), chosen, extra) if p)
        address = "" if slug == "runs" and runs_at_root else slug
        out.append((slug, address + (f"?{query}" if query else ""), heading))
    return out


def measure(url: str, root: Path, log_dir: Path, warm: bool = True, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Each page's (or each of `only`'s) server start, its first and second render, and its first render on a new
    server for a browser that has the app's files cached: wall seconds, the server's and the browser's CPU seconds."""
    results: dict[str, Any] = {}
    with browser.chrome() as driver:
        chrome = descendants(driver.service.process.pid)
        for slug, path, heading in pages(url, root):
            if only and slug not in only:
                continue
            port, row = browser._free_port(), {}
            for visits in (("first", "second"), ("first_returning",)):
                box: dict[str, Any] = {"start": time.perf_counter()}
                with browser.served_app(url, log_dir / f"{slug}.log", root=root, warm=warm, port=port,
                                        started=lambda p: box.update(server=p, answered=time.perf_counter())) as base:
                    server = box["server"].pid
                    if visits[0] == "first":
                        row.update(start_s=round(box["answered"] - box["start"], 2),
                                   start_server_cpu_s=round(cpu_seconds([server]), 2))
                    for label in visits:
                        chrome = descendants(driver.service.process.pid)
                        before = (time.perf_counter(), cpu_seconds([server]), cpu_seconds(chrome))
                        charts = slug not in ("runs", "launch", "policies", "conversations", "events")
                        browser.open_page(driver, f"{base}/{path}", heading, charts=charts, charts_required=False, settle=0.0,
                                          text=False)
                        chrome = descendants(driver.service.process.pid)
                        row[label] = {"wall_s": round(time.perf_counter() - before[0], 2),
                                      "server_cpu_s": round(cpu_seconds([server]) - before[1], 2),
                                      "browser_cpu_s": round(max(0.0, cpu_seconds(chrome) - before[2]), 2)}
            results[slug] = {"path": path, **row}
            print(slug, row, flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="the store (default: shots/rich/runs.db, built by tests/screenshots.py if absent)")
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose app.py is served")
    ap.add_argument("--cold", action="store_true", help="start a plain `streamlit run app.py` (nothing imported "
                    "before the first visit) instead of the app's launcher")
    ap.add_argument("--pages", default="", help="only these pages (comma-separated slugs: run,network)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "app_pages-cpu.json"))
    args = ap.parse_args()
    url = args.db
    if url is not None and "://" not in url:  # a path, as the help says "the store"
        url = f"sqlite:///{Path(url).resolve()}"
    if url is None:
        path = ROOT / "shots" / "rich" / "runs.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{path}"
        if not path.exists():
            screenshots.build_store("rich", url)
    log_dir = Path(args.out).parent / "app_pages-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    results = measure(url, Path(args.root), log_dir, warm=not args.cold, only=tuple(p for p in args.pages.split(",") if p))
    out = {"benchmark": "app_pages", "date": datetime.now(timezone.utc).date().isoformat(),
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "processor": platform.processor()},
           "root": str(args.root), "store": url,
           "launcher": ("python -m app_pages.serve (as societas app)" if not args.cold and
                        (Path(args.root) / "app_pages" / "serve.py").exists() else "streamlit run app.py"), "load_average_1min": {"before": round(load[0], 2),
                                                                         "after": round(os.getloadavg()[0], 2)},
           "pages": results}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
