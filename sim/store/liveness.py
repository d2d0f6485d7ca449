"""Whether a run marked `running` still has a live owner: one definition for `list`, `show`, resume and sweeps.

Every run row records its owner (pid and host) and a heartbeat (each committed tick). A run killed
with SIGKILL stays `running` in the store; it is *stale* when its owner is gone: on this host, its
process has exited (or is a zombie, or is this very process: a reused pid); on another host, its
last heartbeat is older than `STALE_AFTER`.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, Optional

#: a running run on another host counts as stale once its heartbeat is this old
STALE_AFTER = timedelta(minutes=10)


def owner_alive(run: Any, now: Optional[datetime] = None) -> bool:
    """Whether the owner of `run` (a runs row) may still be at work on it."""
    if run.owner_host == socket.gethostname() and run.owner_pid:
        if run.owner_pid == os.getpid():
            return False
        try:
            os.kill(run.owner_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not _zombie(run.owner_pid)
    beat = run.heartbeat_at or run.created_at
    if beat is None:
        return False
    if beat.tzinfo is None:
        beat = beat.replace(tzinfo=timezone.utc)
    return (now or datetime.now(timezone.utc)) - beat < STALE_AFTER


def liveness(run: Any) -> Literal["live", "stale", "done"]:
    """`live` (running, its owner at work), `stale` (marked running, its owner gone) or `done` (not running)."""
    if run.status != "running":
        return "done"
    return "live" if owner_alive(run) else "stale"


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False
