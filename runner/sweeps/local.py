"""The local executor of sweeps: a process pool on this machine, every worker writing to the same store.

Workers die with the driver: each watches the driver's process and exits when it is gone (a `kill -9` of
`societas sweep` must not leave workers running the rest of the queue). A run a worker leaves behind is
stale, and the next `societas sweep` of the same file resumes it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Optional

from runner.sweeps.backlog import SweepBacklog
from runner.sweeps.worker import Outcome, run_one
from sim.store.store import Store


def run_local(store: Store, backlog: SweepBacklog, *, workers: Optional[int], on_done: Callable[[Outcome], None]) -> None:
    """A process pool (forkserver: workers start clean, with the engine preloaded); one worker runs inline."""
    n = max(1, min(workers or os.cpu_count() or 1, len(backlog.todo)))
    if n == 1:
        for rid, mode, spec in backlog.todo:
            on_done(run_one(backlog.url, backlog.sweep_id, rid, mode, spec))
        return
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["runner.sweeps.worker"])
    store.close()  # no pooled connection crosses into a worker
    pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=watch_driver, initargs=(os.getpid(),))
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


WATCH_EVERY_S = 0.5


def watch_driver(driver: int) -> None:
    """In a worker: exit as soon as the driver process `driver` is gone (checked every WATCH_EVERY_S)."""
    def watch() -> None:
        while True:
            time.sleep(WATCH_EVERY_S)
            try:
                os.kill(driver, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # alive, under another user: never the case for our own driver
                pass

    threading.Thread(target=watch, name="societas-watch-driver", daemon=True).start()
