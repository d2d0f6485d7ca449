"""Seeded sampling noise: a pick is argmax(logprob / T + Gumbel noise), the noise a pure function of
(request seed, stream, step, candidate id) computed by a counter-based hash in integer tensor ops,
identical on CPU and GPU. A request's draws never depend on its batch, its row or the other requests,
and the Gumbel-max trick makes each pick an exact draw from softmax(logprob / T) over the candidates.
"""

from __future__ import annotations

import torch

#: noise streams: the same request seed draws independent noise for each kind of decision
STREAM_CHOICE, STREAM_NUMBER, STREAM_TEXT = 1, 2, 3
_M32 = 0xFFFFFFFF


def _mul32(h: torch.Tensor, c: int) -> torch.Tensor:
    """(h * c) mod 2**32 for uint32 values held in int64, without ever overflowing int64."""
    return ((h & 0xFFFF) * c + ((((h >> 16) * c) & 0xFFFF) << 16)) & _M32


def _mix32(h: torch.Tensor) -> torch.Tensor:
    """The murmur3 32-bit finaliser: a bijective avalanche mix of uint32 values."""
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def _row_keys(seeds: torch.Tensor, stream: int, step: int) -> torch.Tensor:
    """One uint32 key per row from (request seed, stream, step)."""
    h = _mix32(torch.full_like(seeds, (stream * 0x9E3779B1 + step) & _M32))
    h = _mix32(h ^ (seeds >> 32))
    return _mix32(h ^ (seeds & _M32))


def gumbel(seeds: torch.Tensor, stream: int, step: int, ids: torch.Tensor) -> torch.Tensor:
    """Gumbel(0, 1) noise [B, K] that is a pure function of (seeds[b], stream, step, ids[b, k])."""
    h = _mix32(_row_keys(seeds, stream, step)[:, None] ^ _mix32(ids.to(torch.int64) & _M32))
    u = ((h >> 8).to(torch.float32) + 0.5) * (1.0 / (1 << 24))  # in (0, 1)
    return -torch.log(-torch.log(u))


def seeded_pick(scores: torch.Tensor, temperature: float, seeds: torch.Tensor, stream: int, step: int, ids: torch.Tensor) -> torch.Tensor:
    """Index per row: argmax (first on ties) at T = 0, else an exact draw from softmax(scores / T)."""
    if temperature <= 0:
        return scores.argmax(dim=-1)
    return (scores / temperature + gumbel(seeds, stream, step, ids).to(scores.dtype)).argmax(dim=-1)

