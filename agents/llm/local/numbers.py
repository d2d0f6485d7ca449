"""Constrained decoding of whole numbers: at each step only digits that keep the value completable into
[lo, hi] are allowed, and stopping only once the value is in range, so every answer is valid."""

from __future__ import annotations

from typing import Optional

import torch

MAX_NUMBER_DIGITS = 15  # bounds are clamped below 10**15: int64 arithmetic stays exact


class NumberState:
    """Constrained decimal decoding for a batch of rows, as tensors: value and digit count so far.

    A digit d may follow the digits read so far (value v, n digits) when the string can still
    be completed into an integer in [lo, hi]: no leading zero, "0" only when lo == 0, and for
    some e in 0..(digits of hi) - (n + 1): [(10v + d) 10^e, (10v + d) 10^e + 10^e - 1] meets [lo, hi].
    Stopping is allowed once the digits read a value in [lo, hi]; a row whose value admits no
    further digit is complete without a stop token.
    """

    def __init__(self, lo: torch.Tensor, hi: torch.Tensor, hi_lengths: Optional[list[int]] = None) -> None:
        """`hi_lengths`: the digits of each hi, where the caller has them on the host (else read from `hi`: a
        synchronisation that would wait for the prefill)."""
        dev = lo.device
        self.lo, self.hi = lo, hi
        lengths = hi_lengths if hi_lengths is not None else [len(str(v)) for v in hi.tolist()]
        self.max_digits = max(lengths)
        # copied without waiting for the device (a blocking copy would wait for the prefill queued before it)
        self.pow10 = torch.tensor([10**e for e in range(self.max_digits + 1)]).to(dev, non_blocking=True)
        self.hi_digits = torch.tensor(lengths).to(dev, non_blocking=True)
        n = lo.shape[0]
        self.value = torch.zeros(n, dtype=torch.long, device=dev)
        self.digits = torch.zeros(n, dtype=torch.long, device=dev)
        self.stopped = torch.zeros(n, dtype=torch.bool, device=dev)
        self.done = lo > hi  # an empty range never decodes (the engine answers those without the model)
        self._d = torch.arange(10, device=dev)

    def digit_mask(self) -> torch.Tensor:
        """[B, 10] bool: digits that keep the value completable into [lo, hi]."""
        p = self.value[:, None] * 10 + self._d[None, :]  # [B, 10]
        extra = self.pow10[None, None, :]  # [1, 1, E + 1]
        e = torch.arange(self.pow10.shape[0], device=p.device)[None, None, :]
        e_ok = e <= (self.hi_digits - self.digits - 1)[:, None, None]
        low = p[:, :, None] * extra
        high = low + extra - 1
        meets = (e_ok & (high >= self.lo[:, None, None]) & (low <= self.hi[:, None, None])).any(-1)
        first = self.digits[:, None] == 0
        zero_prefix = (self.digits[:, None] > 0) & (self.value[:, None] == 0)  # "0" takes no more digits
        lone_zero = first & (self._d[None, :] == 0)
        ok = torch.where(lone_zero, (self.lo == 0)[:, None], meets)
        return ok & ~zero_prefix & ~self.done[:, None]

    def may_stop(self) -> torch.Tensor:
        return (self.digits > 0) & (self.value >= self.lo) & (self.value <= self.hi) & ~self.done

    def advance(self, pick: torch.Tensor, digit_index: torch.Tensor, pad_id: int) -> torch.Tensor:
        """Apply each active row's pick (0-9 a digit, 10 stop); the tokens to feed next."""
        active = ~self.done
        is_digit = active & (pick < 10)
        stop = active & (pick == 10)
        d = pick.clamp(max=9)
        self.value = torch.where(is_digit, self.value * 10 + d, self.value)
        self.digits = self.digits + is_digit.long()
        self.stopped = self.stopped | stop
        self.done = self.done | stop
        self.done = self.done | (~self.digit_mask().any(-1) & active)  # complete: no digit can follow
        return torch.where(is_digit, digit_index[d], torch.full_like(pick, pad_id))


def feasible(prefix: str, lo: int, hi: int) -> bool:
    """Whether the digit string `prefix` can be completed into an integer in [lo, hi] (the per-row reference)."""
    if len(prefix) > 1 and prefix[0] == "0":
        return False
    v = int(prefix)
    if prefix == "0":
        return lo <= 0 <= hi
    for extra in range(len(str(hi)) - len(prefix) + 1):
        low, high = v * 10**extra, v * 10**extra + 10**extra - 1
        if high >= lo and low <= hi:
            return True
    return False
