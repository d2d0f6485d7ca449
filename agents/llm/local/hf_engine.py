"""The transformers engine: every forward through the model's own modules, the shared prefix through the
registered shared-prefix attention (`agents.llm.local.attention`). Any causal LM runs on it; it is the CPU's
engine (its answers are those runs were stored with) and the GPU's for an architecture the lean forward does not know.

An engine turns token ids into logits for `LocalLM` (agents.llm.local.model), which owns the decoding:
`prefix_kv` (a group's shared prefix, once), `prefill` (a bucket's own tokens after it), `step` (one token per row)
and `option_logits` (a Choice's options after the prompt, in one row each with a tree-shaped mask).

A row's answer must not depend on the other rows of its call. A CPU's matrix products round a row the same way only
when it sits in a full block of the kernel's rows (measured: a bf16 product of 1, 3 or 5 rows rounded some values
of its last row otherwise than one of 8 or 64, and float32's of 1-3, 5-7 or 9 rows did so for most values). So every
forward here runs a multiple of `ROW_ALIGN` token rows: a bucket's prompts are padded to a width that makes it so (and
so are the positions whose logits are computed), its decoding steps and a Choice's options run with rows of padding
after the bucket's, the options with columns of padding, a prefix with padding after it; the attention lays each
row's keys out the same way whatever its batch (`agents.llm.local.attention`). Rows of padding only fill the
products' blocks: their keys are not cached and their attention is not computed (a lone request decoded 2x slower
per token when they were: 77 against 37 ms on 2 cores, bf16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from transformers.cache_utils import DynamicLayer

from agents.llm.local.attention import shared_prefix
from agents.llm.local.layout import left_padded

#: every forward's rows of tokens (batch rows x columns) come in multiples of this: whole blocks of a CPU kernel
ROW_ALIGN = 8


@dataclass
class HFState:
    """A bucket's decoding state: transformers' cache, the key mask [B, K], each row's next position, and how many of
    the B rows are the bucket's (the others pad it to a multiple of `ROW_ALIGN`)."""

    cache: Any
    mask: torch.Tensor
    next_pos: torch.Tensor
    rows: int  # the bucket's rows (the rows after them are padding)


class HFEngine:
    """Forwards through the transformers model of `lm` (a LocalLM)."""

    name = "transformers"

    def __init__(self, lm: Any) -> None:
        self.lm = lm

    def prefix_kv(self, tokens: list[int], parent=None, start: int = 0):
        """The KV of a shared prefix: one copy ([1, heads, P, dim] per layer); with `parent` (the KV of tokens[:start])
        only tokens[start:] are forwarded, attending to it. The forwarded tokens are followed by padding up to a
        multiple of `ROW_ALIGN` (attention is causal: tokens after them change none of their keys and values)."""
        lm = self.lm
        n = len(tokens) - start
        width = aligned(n)
        x = torch.full((1, width), lm.pad_id, dtype=torch.long, device=lm.device)
        x[0, :n] = torch.tensor(tokens[start:], device=lm.device)
        positions = torch.arange(start, start + width, device=lm.device)[None]
        causal = torch.ones((width, width), dtype=torch.bool, device=lm.device).tril()
        with shared_prefix(parent):
            out = lm.model(input_ids=x, attention_mask=causal[None, None], position_ids=positions,
                           use_cache=True, logits_to_keep=1)
        own = [(layer.keys[:, :, :n], layer.values[:, :, :n]) for layer in out.past_key_values.layers]
        if parent is None:
            return [(k.contiguous(), v.contiguous()) for k, v in own]
        return [(torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2)) for (pk, pv), (k, v) in zip(parent, own)]

    def prefill(self, rows: list[list[int]], shared: int, prefix_kv, room: int) -> tuple[torch.Tensor, HFState]:
        """Forward the rows' own tokens (after `shared` prefix tokens) left-padded: the last logits and the state.
        The width is padded so that rows x width, and the rows x positions whose logits are computed, are multiples of
        `ROW_ALIGN`; the state then holds rows of padding up to a multiple of `ROW_ALIGN` for the decoding steps
        (see the module's docstring). The logits are the rows'."""
        lm = self.lm
        own = [r[shared:] for r in rows]
        n, per = len(rows), ROW_ALIGN // math.gcd(len(rows), ROW_ALIGN)  # per: columns that make n x columns whole
        width = -(-max(len(r) for r in own) // per) * per
        flat = torch.from_numpy(left_padded(own, lm.pad_id, width))  # left-padded, one tensor
        lengths = torch.tensor([len(r) for r in own])
        if lm.pin_memory and lm.device.startswith("cuda"):
            flat, lengths = flat.pin_memory(), lengths.pin_memory()
        input_ids = flat.to(lm.device, non_blocking=True)
        lengths = lengths.to(lm.device, non_blocking=True)
        cols = torch.arange(width, device=lm.device)
        real = cols[None, :] >= (width - lengths)[:, None]  # [n, width]
        positions = shared + (real.long().cumsum(-1) - 1).clamp(min=0)
        causal = cols[None, :] <= cols[:, None]
        mask4 = (causal[None] & real[:, None, :]) | torch.eye(width, dtype=torch.bool, device=lm.device)[None]
        with shared_prefix(prefix_kv if shared else None, real):
            out = lm.model(input_ids=input_ids, attention_mask=mask4[:, None], position_ids=positions,
                           use_cache=True, logits_to_keep=min(per, width))
        logits = out.logits[:, -1, :].to(lm.fdtype)
        cache, real, next_pos = _grow_rows(out.past_key_values, real, positions[:, -1] + 1, aligned(n))
        return logits, HFState(cache, real, next_pos, n)

    def replays(self, state: HFState) -> bool:
        """Whether the next step replays a captured graph: never here (each step runs the model's modules)."""
        return False

    def step(self, tokens: torch.Tensor, state: HFState, prefix_kv) -> torch.Tensor:
        """Feed one token per row at its next position; the new logits (the state advances)."""
        lm = self.lm
        tokens = _fill_rows(tokens.view(-1), state.mask.shape[0], lm.pad_id)
        state.mask = torch.cat([state.mask, torch.ones((state.mask.shape[0], 1), dtype=torch.bool, device=lm.device)], dim=1)
        with shared_prefix(prefix_kv, state.mask, state.rows):
            out = lm.model(input_ids=tokens.view(-1, 1), attention_mask=state.mask[:, None, None, :],
                           position_ids=state.next_pos.view(-1, 1), past_key_values=state.cache, use_cache=True,
                           logits_to_keep=1)
        state.next_pos = state.next_pos + 1
        return out.logits[:state.rows, -1, :].to(lm.fdtype)

    def option_logits(self, opt_ids: torch.Tensor, seg: torch.Tensor, off: torch.Tensor, kmax: int, state: HFState,
                      prefix_kv) -> torch.Tensor:
        """Logits [B, W - 1, V] after each option token but the row's last: option k's tokens (segment `seg` == k,
        `off` their place in it; `kmax` the padding's segment) see the prompt and their own option's earlier tokens."""
        lm = self.lm
        n, width = opt_ids.shape
        rows, cols = state.mask.shape[0], aligned(width)  # the bucket's rows of padding, and columns to align
        opt_ids = _fill(opt_ids, rows, cols, lm.pad_id)
        seg, off = _fill(seg, rows, cols, kmax), _fill(off, rows, cols, 0)
        valid = seg < kmax
        own = (seg[:, :, None] == seg[:, None, :]) & (off[:, None, :] <= off[:, :, None]) & valid[:, None, :]
        own |= torch.eye(cols, dtype=torch.bool, device=lm.device)[None]  # padding sees itself
        prompt = state.mask[:, None, :].expand(rows, cols, state.mask.shape[1])
        full = torch.cat([prompt, own], dim=-1)[:, None]
        with shared_prefix(prefix_kv, torch.cat([state.mask, valid], dim=1), n):
            hidden = lm.model.model(input_ids=opt_ids, attention_mask=full, position_ids=state.next_pos[:, None] + off,
                                    past_key_values=state.cache, use_cache=True).last_hidden_state
        # position j predicts token j + 1; every row and column computed (whole blocks of rows), the bucket's returned
        return lm.model.get_output_embeddings()(hidden)[:n, :width - 1].to(lm.fdtype)


def aligned(n: int) -> int:
    """`n` rounded up to a multiple of `ROW_ALIGN`."""
    return -(-n // ROW_ALIGN) * ROW_ALIGN


def _grow_rows(cache: Any, mask: torch.Tensor, next_pos: torch.Tensor, rows: int) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """A bucket's cache, key mask and next positions for `rows` rows: the mask and positions get rows of padding
    after the bucket's (masked: such a row attends only to the token it is fed), while the cache keeps the bucket's
    rows alone (`_BucketLayer`): the padding rows' attention is never computed, so their keys are never needed."""
    extra = rows - mask.shape[0]
    if extra <= 0:
        return cache, mask, next_pos
    cache.layers = [_BucketLayer.of(layer, mask.shape[0]) for layer in cache.layers]
    return cache, torch.cat([mask, mask.new_zeros((extra, mask.shape[1]))]), torch.cat([next_pos, next_pos.new_zeros(extra)])


class _BucketLayer(DynamicLayer):
    """A layer's keys and values of a bucket's own rows: a forward's rows after them (padding) are not cached."""

    rows: int

    @classmethod
    def of(cls, layer: DynamicLayer, rows: int) -> "_BucketLayer":
        """`layer`'s keys and values (rows [:rows] of them) in a layer that caches only those rows from now on."""
        out = cls()
        out.keys, out.values, out.rows = layer.keys[:rows], layer.values[:rows], rows
        out.device, out.is_initialized = layer.keys.device, True
        return out

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the bucket's rows of the new keys and values; all of them, as transformers' layer returns."""
        return super().update(key_states[:self.rows], value_states[:self.rows], *args, **kwargs)


def _fill_rows(tokens: torch.Tensor, rows: int, pad: int) -> torch.Tensor:
    """One token per row [n], followed by `pad` for the bucket's rows of padding: [rows]."""
    if tokens.shape[0] == rows:
        return tokens
    return torch.cat([tokens, tokens.new_full((rows - tokens.shape[0],), pad)])


def _fill(t: torch.Tensor, rows: int, cols: int, value: int) -> torch.Tensor:
    """`t` [n, w] filled with `value` to [rows, cols]."""
    if t.shape == (rows, cols):
        return t
    out = t.new_full((rows, cols), value)
    out[:t.shape[0], :t.shape[1]] = t
    return out
