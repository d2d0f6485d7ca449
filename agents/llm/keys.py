"""Cache keys for LLM calls: a hash of (model id, prompt, action space, sampling params, seed)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from sim.core.spaces import Space, space_key


@lru_cache(maxsize=64)
def _sampling_text(items: tuple) -> str:
    return json.dumps(dict(items), sort_keys=True)


def cache_key(model_id: str, messages: Sequence[Mapping[str, str]], space: Space, sampling: Mapping[str, Any], seed: int,
              reason_tokens: int = 0) -> str:
    """A stable hex digest; equal inputs give equal keys across processes and machines.

    Parts are length-prefixed, so no two different inputs share a byte stream. A request that reasons
    before answering adds its reasoning budget (a key without one is the key it always was).
    """
    parts = [model_id]
    for m in messages:
        parts += (m["role"], m["content"])
    parts += (space_key(space), _sampling_text(tuple(sorted(sampling.items()))), str(seed))
    if reason_tokens:
        parts.append(f"reason_tokens={int(reason_tokens)}")
    data = "".join(f"{len(p)}:{p}" for p in parts).encode()
    return hashlib.blake2b(data, digest_size=20).hexdigest()
