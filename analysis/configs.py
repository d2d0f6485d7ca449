"""The Runs list's config columns and search text: a stored run's config flattened into short strings."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd


def short_value(value: Any, limit: int = 40) -> str:
    """A config value as a short string: JSON for lists and mappings, `true`/`false`, cut to `limit` characters."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def flat_config(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config as `{"key.sub": value}` (lists kept whole)."""
    out: dict[str, Any] = {}
    if not isinstance(config, dict):
        return out
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flat_config(v, key + "."))
        else:
            out[key] = v
    return out


def varying_config(configs: list[Any], skip: tuple[str, ...] = ()) -> pd.DataFrame:
    """One `config.KEY` column (short strings) for each flattened config key whose value differs among `configs`
    (a key some configs lack differs too), in first-seen key order; `skip` keys are left out."""
    flats = [{k: short_value(v, 10_000) for k, v in flat_config(c).items()} for c in configs]
    keys: dict[str, None] = {}
    for f in flats:
        keys.update(dict.fromkeys(f))
    varying = [k for k in keys if k not in skip and len({f.get(k) for f in flats}) > 1]
    return pd.DataFrame({f"config.{k}": [short_value(f.get(k)) if k in f else "" for f in flats] for k in varying},
                        index=range(len(flats)))


def config_text(config: Any) -> str:
    """Every config value as `key=value` words: what the Runs search matches (`strategy=greedy`, `greedy`)."""
    return " ".join(f"{k}={short_value(v, 10_000)}" for k, v in flat_config(config).items())
