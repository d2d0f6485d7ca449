"""Per-decision randomness: the seed each request gets and the generator a scripted strategy draws from.

Both are pure functions of (run seed, tick, agent, phase), so a decision never depends on which
other requests share its batch. Two stream versions exist; a run's decision profile
(`sim.core.profiles`, `DecisionProfile.rng`) names the one its spec was made under:

- **1**: blake2b of the labels for every request, and a Mersenne Twister (`random.Random(seed)`)
  per drawing strategy. Correct, but ~9 µs per request.
- **2**: blake2b once per (tick, phase), then the SplitMix64 finaliser of
  `base + agent_id × golden ratio` per agent; strategies draw from `CounterRandom`, a SplitMix64
  counter stream behind `random.Random`'s interface. ~1.5 µs per request.

Both stay, so that every stored run replays, resumes and forks exactly (its LLM cache keys and
scripted draws were made with its own stream).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

RNG_VERSIONS = (1, 2)  # the stream versions (see the module doc)


def derive_seed(seed: int, *parts: Any) -> int:
    """A 63-bit seed derived from the run seed and any labels (tick, agent, phase).

    Used so that a decision's randomness depends only on who decides when, never on
    which other requests happened to share its batch.
    """
    if (len(parts) == 3 and type(seed) is int and type(parts[0]) is int and type(parts[1]) is int
            and _SAFE_TEXT.get(parts[2]) is True):  # the hot path: (seed, tick, agent, phase)
        text = f'[{seed}, {parts[0]}, {parts[1]}, "{parts[2]}"]'
    else:
        text = _fast_json(seed, parts) or json.dumps([seed, *parts], default=str)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") >> 1


_SAFE = re.compile(r"[A-Za-z0-9_.:\- ]*\Z")
_SAFE_TEXT: dict[str, bool] = {}  # phase names and other labels repeat: test each once


def _fast_json(seed: Any, parts: tuple[Any, ...]) -> Optional[str]:
    """`json.dumps([seed, *parts])` for ints and plain strings, built directly (the hot path); None otherwise."""
    out = []
    for p in (seed, *parts):
        if type(p) is int:
            out.append(str(p))
        elif type(p) is str:
            safe = _SAFE_TEXT.get(p)
            if safe is None:
                safe = bool(_SAFE.match(p))
                if len(_SAFE_TEXT) < 10_000:
                    _SAFE_TEXT[p] = safe
            if not safe:
                return None
            out.append(f'"{p}"')
        else:
            return None
    return "[" + ", ".join(out) + "]"


_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(z: int) -> int:
    """SplitMix64's finaliser: a bijection of 64-bit ints that scatters neighbouring inputs."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


class SeedStream:
    """The request seeds of one run: `seed_for(tick, agent_id, phase)` under the run's rng version."""

    __slots__ = ("seed", "version", "_bases", "rollout")

    def __init__(self, seed: int, version: int = 2, rollout: Optional[tuple[int, int]] = None) -> None:
        """`rollout` = (index, after): a rollout's decisions after tick `after` draw seeds of their own, keyed by the
        index, and those up to it the run's very seeds (`societas rollouts`: continuations that differ only so)."""
        if version not in RNG_VERSIONS:
            raise ValueError(f"unknown rng version {version!r} (known: {', '.join(map(str, RNG_VERSIONS))})")
        self.seed = seed
        self.version = version
        self.rollout = rollout
        self._bases: dict[tuple[int, str], int] = {}

    def _salt(self, tick: int) -> tuple[Any, ...]:
        """What a tick's seeds are derived with beyond (seed, tick, ...): nothing, or a rollout's index after its tick."""
        r = self.rollout
        return () if r is None or tick <= r[1] else ("rollout", r[0])

    def seed_for(self, tick: int, agent_id: Any, phase: str) -> int:
        """A 63-bit seed for one agent's decision in one phase of one tick."""
        if self.version == 1 or type(agent_id) is not int:
            return derive_seed(self.seed, tick, agent_id, phase, *self._salt(tick))
        key = (tick, phase)
        base = self._bases.get(key)
        if base is None:
            if len(self._bases) > 64:  # only the current tick's phases are ever asked for again
                self._bases.clear()
            base = self._bases[key] = derive_seed(self.seed, tick, phase, *self._salt(tick))
        return _mix64((base + (agent_id + 1) * _GOLDEN) & _M64) >> 1

    def seeds_for_many(self, tick: int, agent_ids: Sequence[Any], phase: str) -> np.ndarray:
        """`seed_for(tick, a, phase)` for every agent id at once, as uint64 (equal to the one-by-one seeds).

        Version 2 with non-negative int ids (or a uint64 array of them) is computed in numpy (~0.02 µs
        an agent instead of ~0.6); anything else goes one by one.
        """
        n = len(agent_ids)
        ids = agent_ids if isinstance(agent_ids, np.ndarray) and agent_ids.dtype == np.uint64 else seed_keys(agent_ids)
        if self.version != 1 and ids is not None:
            self.seed_for(tick, 0, phase)  # caches the (tick, phase) base
            base = np.uint64(self._bases[(tick, phase)])
            return mix64_array((ids + np.uint64(1)) * _GOLDEN_U + base) >> np.uint64(1)
        return np.fromiter((self.seed_for(tick, int(a) if ids is not None else a, phase) for a in agent_ids),
                           dtype=np.uint64, count=n)


def seed_keys(agent_ids: Sequence[Any]) -> np.ndarray | None:
    """The ids as a uint64 array when `seeds_for_many` can compute their seeds in numpy (non-negative
    ints below 2**62), else None (they go one by one)."""
    ids = list(agent_ids)
    if ids and set(map(type, ids)) == {int} and min(ids) >= 0 and max(ids) < 1 << 62:
        return np.fromiter(ids, dtype=np.uint64, count=len(ids))
    return None


_GOLDEN_U = np.uint64(_GOLDEN)
_FIRST_STEPS = np.arange(1, 5, dtype=np.uint64) * _GOLDEN_U  # the counter after a stream's 1st..4th draw (mod 2**64)


def mix64_array(z: np.ndarray) -> np.ndarray:
    """`_mix64` of every element of a uint64 array (numpy's uint64 arithmetic wraps modulo 2**64, as `& _M64` does)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def randbelow_many(seeds: np.ndarray, n: int) -> list[int]:
    """`CounterRandom(s).randrange(n)` for every seed `s` (the stream's first draw, with its rejections), at once.

    `randint(a, b)` is `a + randbelow_many(seeds, b - a + 1)`. Identical to the one-by-one draws:
    `random.Random._randbelow_with_getrandbits` takes `getrandbits(n.bit_length())` until it is
    below n, and the i-th `getrandbits(k)` of a stream is `_mix64(seed + i × golden) >> (64 - k)`.
    """
    if n < 1:
        raise ValueError("empty range for randrange()")
    if n.bit_length() > 64:  # beyond the fast path of getrandbits: one by one
        return [CounterRandom(int(s))._randbelow(n) for s in np.asarray(seeds, dtype=np.uint64).tolist()]
    return randbelow_array(seeds, n).tolist()


def randbelow_array(seeds: np.ndarray, n: int) -> np.ndarray:
    """`randbelow_many` as a uint64 array, for 1 <= n < 2**64."""
    k = n.bit_length()
    if not 1 <= k <= 64:
        raise ValueError(f"randbelow_array needs 1 <= n < 2**64, not {n}")
    seeds = np.asarray(seeds, dtype=np.uint64)
    shift, limit = np.uint64(64 - k), np.uint64(n)
    # the first 4 draws of every stream at once (each is accepted with probability at least 1/2), then the
    # few streams that rejected all 4 one round at a time
    draws = mix64_array(seeds[:, None] + _FIRST_STEPS[None, :]) >> shift
    accepted = draws < limit
    first = accepted.argmax(axis=1)
    rows = np.arange(len(seeds))
    out = draws[rows, first]
    todo = np.flatnonzero(~accepted[rows, first])
    if not todo.size:
        return out
    state = seeds + _FIRST_STEPS[-1]
    while todo.size:
        state[todo] += _GOLDEN_U
        r = mix64_array(state[todo]) >> shift
        ok = r < limit
        out[todo[ok]] = r[ok]
        todo = todo[~ok]
    return out


class CounterRandom(random.Random):
    """`random.Random`'s interface over a SplitMix64 counter stream: seeding costs nothing.

    `randint`, `choice`, `shuffle`, `uniform`, `gauss`, ... all work (they are built on `random()`
    and `getrandbits()`). Statistically sound for simulation (SplitMix64 passes BigCrush); not for
    cryptography.
    """

    __slots__ = ("_state", "gauss_next")

    def __init__(self, seed: Any = 0) -> None:  # no super().__init__: that would seed a Mersenne Twister
        if type(seed) is int:
            self._state = seed & _M64
            self.gauss_next = None  # random.Random.gauss keeps its second value here
        else:
            self.seed(seed)

    def seed(self, a: Any = None, version: int = 2) -> None:
        if a is None:
            a = int.from_bytes(os.urandom(8), "big")
        elif type(a) is not int:
            a = derive_seed(0, str(a))
        self._state = a & _M64
        self.gauss_next = None

    def getrandbits(self, k: int) -> int:
        if 0 <= k <= 64:  # the common case, _mix64 inlined (randint and choice come through here)
            s = self._state = (self._state + _GOLDEN) & _M64
            s = ((s ^ (s >> 30)) * 0xBF58476D1CE4E5B9) & _M64
            s = ((s ^ (s >> 27)) * 0x94D049BB133111EB) & _M64
            return (s ^ (s >> 31)) >> (64 - k)
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        out, have = 0, 0
        while have < k:
            s = self._state = (self._state + _GOLDEN) & _M64
            out = (out << 64) | _mix64(s)
            have += 64
        return out >> (have - k)

    def random(self) -> float:
        s = self._state = (self._state + _GOLDEN) & _M64
        return (_mix64(s) >> 11) * 1.1102230246251565e-16  # 53 bits / 2**53

    def getstate(self) -> tuple[str, int, Any]:
        return ("counter", self._state, self.gauss_next)

    def setstate(self, state: Any) -> None:
        if not (isinstance(state, tuple) and len(state) == 3 and state[0] == "counter"):
            raise ValueError("not a CounterRandom state")
        self._state = int(state[1]) & _M64
        self.gauss_next = state[2]


class LazyRandom:
    """Stands in for `random.Random(seed)` (rng version 1), but seeds the generator only on first use.

    Most scripted strategies never draw; seeding a Mersenne Twister costs more than their
    whole decision. Draws are identical to `random.Random(seed)`'s (every attribute is the
    real generator's, bound and cached on first access).
    """

    __slots__ = ("_seed", "_rng", "__dict__")

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._rng: random.Random | None = None

    def __getattr__(self, name: str):
        if self._rng is None:
            self._rng = random.Random(self._seed)
        value = getattr(self._rng, name)
        self.__dict__[name] = value
        return value


def strategy_rng_class(version: int = 2) -> type:
    """The generator class a scripted strategy draws from under rng `version` (called with the request's seed)."""
    return CounterRandom if version != 1 else LazyRandom
