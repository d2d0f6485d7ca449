"""Shared-prefix attention for the transformers engine (agents.llm.local.hf_engine): every row of a batch attends to
its group's common prefix. (The lean engine has its own kernels: agents.llm.local.kernels.)

Registered with transformers (`register_attention`) under `ATTN_NAME`; `shared_prefix(kv)` makes a
prefix's keys and values the one every attention call of the block sees (per thread).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Optional

import torch

ATTN_NAME = "societas_shared_prefix"
_LOCAL = threading.local()  # .prefix: per layer (keys, values) of the current group's shared prefix
#: rows x prefix tokens a bucket may copy per device type (CPU fp32: ~100 MB of keys and values a layer)
EXPAND_PREFIX_TOKENS: dict[str, int] = {"cpu": 65_536, "cuda": 1 << 62}
#: and on a GPU at most this many bytes of copied keys and values per layer (2 GiB: 4,096 rows x 1,000
#: prefix tokens of a 7B model with 4 KV heads; a wide-KV model such as SmolLM2-1.7B copies fewer rows)
EXPAND_PREFIX_BYTES: dict[str, int] = {"cuda": 1 << 31}


def prefix_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: Optional[float] = None, **kwargs):
    """Attention over [one shared prefix] + [each row's own keys].

    query [B, Hq, S, D]; key/value [B, Hk, K, D] (the row's own tokens, from the cache);
    attention_mask [B, 1, S, K] bool (True = attend) over the row's own keys; the prefix is
    visible to every query. Without a prefix this is the stock SDPA attention.

    On an H100 (benchmarks/results/llm_scale-cuda.json, `knobs`), copying the prefix per row into the
    fused SDPA kernel beat the by-reference path, which materialises float32 scores over [prefix + own]:
    1,000 Number decisions 0.32 s against 0.42 s, Text 1.53 s against 1.68 s (SmolLM2-135M shape); so a
    GPU copies unless the copy would pass `EXPAND_PREFIX_BYTES` a layer. On a CPU a bucket is bounded by `batch_tokens`, so its rows' copy of the
    prefix is small, and expanding it lets the fused SDPA kernel do the work: measured on 2 fp32
    cores (32-fisher harvest tick, runs taken in turns), the tick ran 1.06-1.44x faster in month 2
    and 1.10-1.89x in month 4 than with the by-reference path, with the same answers. A bucket whose
    copy would pass `EXPAND_PREFIX_TOKENS` (rows x prefix tokens) keeps the prefix by reference.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    prefix = getattr(_LOCAL, "prefix", None)
    if prefix is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    pk, pv = prefix[module.layer_idx]  # [1, Hk, P, D]
    b, p = query.shape[0], pk.shape[2]
    kind = query.device.type
    copy_bytes = 2 * b * p * pk.shape[1] * pk.shape[3] * pk.element_size()
    if b * p > EXPAND_PREFIX_TOKENS.get(kind, 0) or copy_bytes > EXPAND_PREFIX_BYTES.get(kind, copy_bytes):
        return prefix_by_reference(query, key, value, attention_mask, pk, pv, scaling)
    keys = torch.cat([pk.expand(b, -1, -1, -1), key], dim=2)
    values = torch.cat([pv.expand(b, -1, -1, -1), value], dim=2)
    mask = None
    if attention_mask is not None:
        own = attention_mask.to(torch.bool)
        mask = torch.cat([own.new_ones((*own.shape[:3], p)), own], dim=-1)
    out = torch.nn.functional.scaled_dot_product_attention(query, keys, values, attn_mask=mask, scale=scaling,
                                                           enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def prefix_by_reference(query, key, value, attention_mask, pk, pv, scaling: Optional[float]):
    """The prefix's one copy [1, Hk, P, D] attended by every row: the batch folded into its query rows."""
    b, hq, s, d = query.shape
    hk, p = key.shape[1], pk.shape[2]
    g = hq // hk
    scale = scaling if scaling is not None else d ** -0.5
    # query heads are kv-major (head = kv * g + j, as in repeat_kv): fold the batch into the rows
    q_rows = query.reshape(b, hk, g * s, d)
    sp = torch.bmm(q_rows.transpose(0, 1).reshape(hk, b * g * s, d), pk[0].transpose(1, 2))  # [Hk, B*G*S, P]
    sp = sp.view(hk, b, g, s, p).transpose(0, 1)  # [B, Hk, G, S, P]
    ss = torch.matmul(q_rows, key.transpose(2, 3)).view(b, hk, g, s, -1)  # [B, Hk, G, S, K]
    scores = torch.cat([sp, ss], dim=-1).to(torch.promote_types(query.dtype, torch.float32)) * scale
    if attention_mask is not None:
        keep = attention_mask.to(torch.bool)[:, :, None]  # [B, 1, 1, S, K]
        scores[..., p:] = scores[..., p:].masked_fill(~keep, float("-inf"))
    w = torch.softmax(scores, dim=-1).to(value.dtype)
    wp = w[..., :p].transpose(0, 1).reshape(hk, b * g * s, p)
    out = torch.bmm(wp, pv[0]).view(hk, b, g * s, d).transpose(0, 1)  # [B, Hk, G*S, D]
    out = out + torch.matmul(w[..., p:].reshape(b, hk, g * s, -1), value)
    return out.reshape(b, hq, s, d).transpose(1, 2).contiguous(), None


def register_attention() -> None:
    """Make the shared-prefix attention available to transformers under ATTN_NAME."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTN_NAME, prefix_attention)


@contextmanager
def shared_prefix(kv):
    """Make `kv` (per layer (keys, values), or None) the prefix every attention call sees."""
    before = getattr(_LOCAL, "prefix", None)
    _LOCAL.prefix = kv
    try:
        yield
    finally:
        _LOCAL.prefix = before
