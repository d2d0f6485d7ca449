"""Stop signals during a run: Ctrl-C, SIGTERM and SIGHUP interrupt the work, never a store write.

A signal handler raises in the main thread wherever it happens to be. Raised inside SQLAlchemy
(a pool lock held, a transaction half-committed) it can leave the store's engine deadlocked, so
the run could never record that it was interrupted. Store writes therefore run `shielded()`: a
signal that arrives inside one is held and raised when the outermost shielded block ends.
Outside a shielded block it is raised at once, so a long LLM batch stops promptly.

A signal that was ignored when the run started (`nohup`, a background job) stays ignored.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_depth = 0  # shielded blocks open in the main thread
_pending: Optional[int] = None  # the first signal held while shielded
_installed = False  # whether our handler is in place (otherwise shielding is a no-op)


class Terminated(BaseException):
    """Raised in the main thread when SIGTERM or SIGHUP stops a run (as KeyboardInterrupt is for SIGINT)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _interrupt(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def _handler(signum: int, _frame: Any) -> None:
    global _pending
    if _depth > 0:
        if _pending is None:
            _pending = signum
        return
    raise _interrupt(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def stop_signals() -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM/SIGHUP raise KeyboardInterrupt/Terminated, held during shielded work.

    Handlers are restored after; outside the main thread (where Python cannot set handlers) a no-op.
    """
    global _installed, _pending
    if not _in_main_thread() or _installed:
        yield
        return
    previous: dict[int, Any] = {}
    for sig in STOP_SIGNALS:
        current = signal.getsignal(sig)
        if current is signal.SIG_IGN:
            continue  # the user asked for this signal to be ignored (nohup, background job)
        previous[sig] = signal.signal(sig, _handler)
    _installed, _pending = True, None
    try:
        yield
    finally:
        _installed, _pending = False, None
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextmanager
def shielded(*, then_raise: bool = True) -> Iterator[None]:
    """Hold stop signals until the block ends; then raise the held one (or drop it: `then_raise=False`)."""
    global _depth, _pending
    if not _installed or not _in_main_thread():
        yield
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _pending is not None:
            signum, _pending = _pending, None
            if then_raise:
                raise _interrupt(signum)
