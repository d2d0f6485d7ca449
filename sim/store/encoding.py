"""How the store writes JSON: strict (non-finite floats become null), compact, the same bytes every time.

`dumps` is the engine's JSON serializer and what the tick's step rows are encoded with; `plain`
turns any data into what the store will give back (the JSON round trip), which is how a replayed
tick is compared with a stored one.
"""

from __future__ import annotations

import json
import math
from typing import Any

_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> str:
    """The store's JSON serializer: strict JSON (non-finite floats become null), compact.

    The fast path is one `json.dumps`; only data that it refuses (NaN/inf, odd keys or types)
    is cleaned recursively first.
    """
    try:
        return _ENCODER.encode(value)
    except (ValueError, TypeError):
        return _ENCODER.encode(json_safe(value))


def json_safe(value: Any) -> Any:
    """JSON-safe plain data: tuples to lists, non-finite floats to None, mapping keys to str."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_safe(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def plain(value: Any) -> Any:
    """What the store gives back for `value` (its JSON round trip)."""
    return json.loads(dumps(value))
