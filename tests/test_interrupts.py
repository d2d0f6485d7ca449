"""Stop signals are held while the store writes and raised at once elsewhere (sim.core.interrupts)."""

from __future__ import annotations

import os
import signal

import pytest

from sim.core.interrupts import Terminated, shielded, stop_signals


def test_a_signal_inside_a_shielded_block_is_raised_when_it_ends():
    reached_end = False
    with pytest.raises(KeyboardInterrupt), stop_signals():
        with shielded():
            os.kill(os.getpid(), signal.SIGINT)
            with shielded():  # nested: held until the outermost block ends
                pass
            reached_end = True
    assert reached_end


def test_outside_a_shielded_block_the_signal_is_raised_at_once():
    with pytest.raises(Terminated) as info, stop_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000_000):  # the handler runs between bytecodes, long before this ends
            pass
        pytest.fail("SIGTERM did not interrupt the work")
    assert info.value.signum == signal.SIGTERM


def test_a_held_signal_can_be_dropped_and_handlers_are_restored():
    before = signal.getsignal(signal.SIGTERM)
    with stop_signals():
        with shielded(then_raise=False):
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_ignored_signal_stays_ignored():
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # nohup: the run goes on
    finally:
        signal.signal(signal.SIGHUP, old)
