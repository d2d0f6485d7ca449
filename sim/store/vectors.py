"""A tick's reward vectors packed into one binary value (the `reward_vectors` table, one row per tick).

Each agent step once carried its reward vector as JSON in its own row (`agent_steps.components`):
~130 bytes a step, more than the rest of the row. A tick's vectors are columns over its agents
(sim.core.records.RewardVectors), and columns pack small: most components take few distinct values
in a tick (`welfare` and a group's stock change one; catches, counts and the inequity terms, which
are functions of the payoff, a handful), so each is stored as its distinct values (in the order
they first appear) and one small code per agent, and the whole is compressed. Reading gives back what the JSON rows gave: each
agent's non-zero components by name, the payoff always, a value that is not finite as None.

Layout (little-endian), compressed with zlib:

    b"RV" version:u8 agents:u32 components:u16
    per component: name length:u16, name (UTF-8)
    ids: width:u8 (1, 2, 4 or 8), the sorted agent ids as differences (the first from 0), unsigned
    per component: kind:u8, then
        0 (one value for all):   value:f64
        1 (distinct values):     count:u32, values:f64[count], width:u8, codes (unsigned, width bytes each)[agents]
        2 (as they are):         values:f64[agents]
"""

from __future__ import annotations

import math
import struct
import zlib
from typing import Any

import numpy as np

from sim.core.records import RewardVectors

VERSION = 1
_MAGIC = b"RV"
_WIDTHS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_CONSTANT, _CODED, _RAW = 0, 1, 2


def pack(vectors: RewardVectors) -> bytes:
    """The tick's vectors as one compressed binary value (see the module's layout)."""
    ids = np.asarray(vectors.agent_ids, dtype=np.int64)
    n = len(ids)
    if n and ((ids[0] < 0) or (n > 1 and (np.diff(ids) <= 0).any())):
        raise ValueError("reward vectors are packed by agent id: sorted, unique, non-negative ids")
    names = list(vectors.columns)
    parts = [_MAGIC, struct.pack("<BIH", VERSION, n, len(names))]
    for name in names:
        raw = name.encode()
        parts.append(struct.pack("<H", len(raw)) + raw)
    parts.append(_unsigned(np.diff(ids, prepend=0) if n else ids))
    for name in names:
        parts.append(_column(np.asarray(vectors.columns[name], dtype=np.float64)))
    return zlib.compress(b"".join(parts), 6)


def unpack(data: bytes) -> RewardVectors:
    """The RewardVectors `pack` was given (a -0.0 read as 0.0: both read as no component)."""
    buf = zlib.decompress(data)
    if buf[:2] != _MAGIC:
        raise ValueError("not a packed reward vector")
    version, n, k = struct.unpack_from("<BIH", buf, 2)
    if version != VERSION:
        raise ValueError(f"packed reward vectors of version {version}; this societas reads {VERSION}")
    at = 2 + struct.calcsize("<BIH")
    names = []
    for _ in range(k):
        (size,) = struct.unpack_from("<H", buf, at)
        names.append(buf[at + 2:at + 2 + size].decode())
        at += 2 + size
    deltas, at = _read_unsigned(buf, at, n)
    ids = np.cumsum(deltas.astype(np.int64)).tolist()
    columns = {}
    for name in names:
        columns[name], at = _read_column(buf, at, n)
    return RewardVectors(ids, columns)


def read_vectors(data: bytes) -> dict[int, dict[str, Any]]:
    """agent id -> its reward vector as the store gives it back: non-zero components by name, the payoff always,
    a value that is not finite as None (the JSON round trip the vectors once took)."""
    vectors = unpack(data)
    finite = all(np.isfinite(v).all() for v in vectors.columns.values())
    out = {}
    for i, aid in enumerate(vectors.agent_ids):
        vec = vectors.vector(i)
        out[aid] = vec if finite else {k: (v if math.isfinite(v) else None) for k, v in vec.items()}
    return out


def _column(values: np.ndarray) -> bytes:
    """One component: a single value, its distinct values and a code per agent, or the values as they are."""
    if not len(values):
        return struct.pack("<B", _RAW)
    distinct, first, codes = np.unique(values, return_index=True, return_inverse=True)
    if len(distinct) == 1:
        return struct.pack("<Bd", _CONSTANT, float(values[0]))
    # distinct values in the order they first appear, so that components that are functions of one another (the
    # payoff, the catch, envy and guilt) get the very same codes, which the compression then stores once
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    distinct, codes = distinct[order], rank[codes.reshape(-1)]
    if len(distinct) * 8 + len(values) * _width(len(distinct) - 1) < len(values) * 8:
        return (struct.pack("<BI", _CODED, len(distinct)) + distinct.astype("<f8").tobytes()
                + _unsigned(codes.astype(np.uint64)))
    return struct.pack("<B", _RAW) + values.astype("<f8").tobytes()


def _read_column(buf: bytes, at: int, n: int) -> tuple[np.ndarray, int]:
    (kind,) = struct.unpack_from("<B", buf, at)
    at += 1
    if kind == _CONSTANT:
        (value,) = struct.unpack_from("<d", buf, at)
        return np.full(n, value), at + 8
    if kind == _CODED:
        (m,) = struct.unpack_from("<I", buf, at)
        at += 4
        distinct = np.frombuffer(buf, dtype="<f8", count=m, offset=at).astype(np.float64)
        codes, at = _read_unsigned(buf, at + 8 * m, n)
        return distinct[codes], at
    if kind == _RAW:
        return np.frombuffer(buf, dtype="<f8", count=n, offset=at).astype(np.float64), at + 8 * n
    raise ValueError(f"unknown packed column kind {kind}")


def _width(largest: int) -> int:
    return next(w for w in (1, 2, 4, 8) if largest < 1 << (8 * w))


def _unsigned(values: np.ndarray) -> bytes:
    """Non-negative integers as the narrowest unsigned width that holds them: width:u8, then the values."""
    width = _width(int(values.max())) if len(values) else 1
    return struct.pack("<B", width) + values.astype(np.dtype(_WIDTHS[width]).newbyteorder("<")).tobytes()


def _read_unsigned(buf: bytes, at: int, n: int) -> tuple[np.ndarray, int]:
    (width,) = struct.unpack_from("<B", buf, at)
    dtype = np.dtype(_WIDTHS[width]).newbyteorder("<")
    return np.frombuffer(buf, dtype=dtype, count=n, offset=at + 1), at + 1 + width * n

