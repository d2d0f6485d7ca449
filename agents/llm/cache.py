"""Cache keys for LLM calls: a hash of (model id, prompt, action space, sampling params, seed)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sim.spaces import Space, space_key


def cache_key(model_id: str, messages: Sequence[Mapping[str, str]], space: Space, sampling: Mapping[str, Any], seed: int) -> str:
    """A stable hex digest; equal inputs give equal keys across processes and machines."""
    h = hashlib.blake2b(digest_size=20)
    for part in (model_id, json.dumps(list(messages), sort_keys=True), space_key(space),
                 json.dumps(dict(sampling), sort_keys=True), str(seed)):
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()
