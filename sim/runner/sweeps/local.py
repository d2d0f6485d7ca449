"""The local executor of sweeps: a process pool on this machine, every worker writing to the same store."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Optional

from sim.runner.sweeps.backlog import SweepBacklog
from sim.runner.sweeps.worker import Outcome, run_one
from sim.store.store import Store


def run_local(store: Store, backlog: SweepBacklog, *, workers: Optional[int], on_done: Callable[[Outcome], None]) -> None:
    """A process pool (forkserver: workers start clean, with the engine preloaded); one worker runs inline."""
    n = max(1, min(workers or os.cpu_count() or 1, len(backlog.todo)))
    if n == 1:
        for rid, mode, spec in backlog.todo:
            on_done(run_one(backlog.url, backlog.sweep_id, rid, mode, spec))
        return
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["sim.runner.sweeps.worker"])
    store.close()  # no pooled connection crosses into a worker
    pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx)
    try:
        pending = {pool.submit(run_one, backlog.url, backlog.sweep_id, rid, mode, spec) for rid, mode, spec in backlog.todo}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                on_done(f.result())
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
