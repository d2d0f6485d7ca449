"""Shared-prefix attention for the transformers engine (agents.llm.local.hf_engine): every row of a batch attends to
its group's common prefix. (The lean engine has its own kernels: agents.llm.local.kernels.)

Registered with transformers (`register_attention`) under `ATTN_NAME`; `shared_prefix(kv, real)` makes a
prefix's keys and values the one every attention call of the block sees (per thread), and says which of the
rows' own key columns hold real tokens.

A row's attention must not depend on its batch: a fused kernel sums a row's scores in vector lanes and blocks
counted from its first key column, so a row's left padding (as wide as its bucket's longest row) or a prefix
split at another token (as its group's other prompts allow) would move its keys to other lanes and change the
rounding of its sums, and with it, in 16 bits, a sampled token now and then (11 of 32 texts of a social tick
differed between one call and two). So every row's keys are laid out the same way whatever its batch: its prefix,
then its own real keys in order (the padding gathered behind them, masked), the columns filled up to a multiple
of `KEY_ALIGN` with masked ones; masked keys add exact zeros. With `real` unset every own key column is real.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Optional

import torch

ATTN_NAME = "societas_shared_prefix"
_LOCAL = threading.local()  # .prefix: per layer (keys, values) of the group's shared prefix; .real: [B, K] own keys real;
# .rows: how many leading rows are the bucket's (None: all; the rows after them pad a block of the CPU's kernel)
#: a row's key columns are padded (masked) to a multiple of this: a fused kernel's vector lanes and blocks fit in it
KEY_ALIGN = 64
#: rows x prefix tokens a bucket may copy per device type (a CPU: any; its buckets are bounded by batch_tokens and
#: max_batch: 64 rows x a 2,000-token prefix copy ~100 MB of keys and values a layer in bf16)
EXPAND_PREFIX_TOKENS: dict[str, int] = {"cpu": 1 << 62, "cuda": 1 << 62}
#: and on a GPU at most this many bytes of copied keys and values per layer (2 GiB: 4,096 rows x 1,000
#: prefix tokens of a 7B model with 4 KV heads; a wide-KV model such as SmolLM2-1.7B copies fewer rows)
EXPAND_PREFIX_BYTES: dict[str, int] = {"cuda": 1 << 31}


def prefix_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: Optional[float] = None, **kwargs):
    """Attention over [one shared prefix] + [each row's own keys], each row's keys laid out as the module says.

    query [B, Hq, S, D]; key/value [B, Hk, K, D] (the row's own tokens, from the cache);
    attention_mask [B, 1, S, K] bool (True = attend) over the row's own keys; the prefix is
    visible to every query.

    On an H100 (benchmarks/results/llm_scale-cuda.json, `knobs`), copying the prefix per row into the
    fused SDPA kernel beat the by-reference path, which materialises float32 scores over [prefix + own]:
    1,000 Number decisions 0.32 s against 0.42 s, Text 1.53 s against 1.68 s (SmolLM2-135M shape); so a
    GPU copies unless the copy would pass `EXPAND_PREFIX_BYTES` a layer. On a CPU a bucket is bounded by
    `batch_tokens` and `max_batch`, so its rows' copy of the prefix is small, and expanding it lets the fused SDPA
    kernel do the work: measured on 2 fp32 cores (32-fisher harvest tick, runs taken in turns), the tick ran
    1.06-1.44x faster in month 2 and 1.10-1.89x in month 4 than with the by-reference path. A CPU always copies:
    a row's arithmetic must not depend on how many rows share its bucket. A bucket whose copy would pass
    `EXPAND_PREFIX_TOKENS` (rows x prefix tokens) keeps the prefix by reference.
    """
    rows = getattr(_LOCAL, "rows", None)
    if rows is not None and rows < query.shape[0]:  # rows of padding: only their shape matters (the products' blocks)
        out, _ = _attention(module, query[:rows], key[:rows], value[:rows],
                            None if attention_mask is None else attention_mask[:rows], scaling, _LOCAL.real)
        return torch.cat([out, out.new_zeros((query.shape[0] - rows, *out.shape[1:]))]), None
    return _attention(module, query, key, value, attention_mask, scaling, getattr(_LOCAL, "real", None))


def _attention(module, query, key, value, attention_mask, scaling: Optional[float], real: Optional[torch.Tensor]):
    """`prefix_attention` of the rows given (`real`: which of their own key columns are real; None: all)."""
    prefix = getattr(_LOCAL, "prefix", None)
    b, p = query.shape[0], 0 if prefix is None else prefix[module.layer_idx][0].shape[2]
    mask = None if attention_mask is None else attention_mask.to(torch.bool)
    real = None if real is None else real[:b]
    if prefix is not None:
        pk, pv = prefix[module.layer_idx]  # [1, Hk, P, D]
        kind = query.device.type
        copy_bytes = 2 * b * p * pk.shape[1] * pk.shape[3] * pk.element_size()
        if b * p > EXPAND_PREFIX_TOKENS.get(kind, 0) or copy_bytes > EXPAND_PREFIX_BYTES.get(kind, copy_bytes):
            return prefix_by_reference(query, key, value, mask, pk, pv, scaling)  # a GPU's path: rows not laid out
    key, value, mask = _own_keys_first(key, value, mask, real, p)
    if prefix is None:
        return _fused(query, key, value, mask, scaling)
    keys = torch.cat([pk.expand(b, -1, -1, -1), key], dim=2)
    values = torch.cat([pv.expand(b, -1, -1, -1), value], dim=2)
    if mask is not None:
        mask = torch.cat([mask.new_ones((*mask.shape[:3], p)), mask], dim=-1)
    return _fused(query, keys, values, mask, scaling)


def _fused(query, keys, values, mask, scaling: Optional[float]):
    """The fused SDPA kernel over keys [B, Hk, K, D] (mask [B, 1, S, K] or None: every key); [B, S, Hq, D]."""
    out = torch.nn.functional.scaled_dot_product_attention(query, keys, values, attn_mask=mask, scale=scaling,
                                                           enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def _own_keys_first(key, value, mask, real, prefix: int):
    """The rows' own keys with each row's real ones first, in order, and its padding after them (masked), the
    columns then filled up to a multiple of `KEY_ALIGN` counting the prefix's `prefix` columns (keys and values
    zero, masked): each real key sits at the column it has in every other batch. `real` [B, K]: which own key
    columns are real (None: all; then only the filling is added). Without a mask (a prompt's first forward,
    causal) the causal mask is made here, so every forward takes the same kernel."""
    b, hk, k, d = key.shape
    s = mask.shape[2] if mask is not None else k
    if mask is None:
        mask = torch.ones((s, k), dtype=torch.bool, device=key.device).tril(k - s)[None, None].expand(b, 1, s, k)
    if real is not None and not bool(real.all()):
        order = torch.argsort((~real).to(torch.int8), dim=1, stable=True)  # real columns first, each side in order
        rows = torch.arange(b, device=key.device)[:, None]
        key = key[rows, :, order].transpose(1, 2)  # [B, K, Hk, D] -> [B, Hk, K, D]
        value = value[rows, :, order].transpose(1, 2)
        mask = mask.gather(-1, order[:, None, None, :].expand(b, mask.shape[1], s, k))
    fill = -(prefix + k) % KEY_ALIGN
    if fill:
        key = torch.cat([key, key.new_zeros((b, hk, fill, d))], dim=2)
        value = torch.cat([value, value.new_zeros((b, hk, fill, d))], dim=2)
        mask = torch.cat([mask, mask.new_zeros((*mask.shape[:3], fill))], dim=-1)
    return key, value, mask


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
def shared_prefix(kv, real: Optional[torch.Tensor] = None, rows: Optional[int] = None):
    """Make `kv` (per layer (keys, values), or None) the prefix every attention call sees, `real` ([B, K] bool,
    or None: all) say which own key columns of the block's calls hold real tokens, and `rows` (None: all) how many
    leading rows are the bucket's: the rows after them pad the products to whole blocks of the CPU kernel's rows,
    and their attention is not computed (zeros; a row's attention does not depend on the others': each row and head
    runs alone in the fused kernel, so computing only the bucket's rows changes none of their bits)."""
    before = getattr(_LOCAL, "prefix", None), getattr(_LOCAL, "real", None), getattr(_LOCAL, "rows", None)
    _LOCAL.prefix, _LOCAL.real, _LOCAL.rows = kv, real, rows
    try:
        yield
    finally:
        _LOCAL.prefix, _LOCAL.real, _LOCAL.rows = before
