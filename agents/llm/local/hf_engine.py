"""The transformers engine: every forward through the model's own modules, the shared prefix through the
registered shared-prefix attention (`agents.llm.local.attention`). Any causal LM runs on it; it is the CPU's
engine (its answers are those runs were stored with) and the GPU's for an architecture the lean forward does not know.

An engine turns token ids into logits for `LocalLM` (agents.llm.local.model), which owns the decoding:
`prefix_kv` (a group's shared prefix, once), `prefill` (a bucket's own tokens after it), `step` (one token per row)
and `option_logits` (a Choice's options after the prompt, in one row each with a tree-shaped mask).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from agents.llm.local.attention import shared_prefix
from agents.llm.local.layout import left_padded


@dataclass
class HFState:
    """A bucket's decoding state: transformers' cache, the key mask [B, K] and each row's next position."""

    cache: Any
    mask: torch.Tensor
    next_pos: torch.Tensor


class HFEngine:
    """Forwards through the transformers model of `lm` (a LocalLM)."""

    name = "transformers"

    def __init__(self, lm: Any) -> None:
        self.lm = lm

    def prefix_kv(self, tokens: list[int], parent=None, start: int = 0):
        """The KV of a shared prefix: one copy ([1, heads, P, dim] per layer); with `parent` (the KV of tokens[:start])
        only tokens[start:] are forwarded, attending to it."""
        lm = self.lm
        x = torch.tensor([tokens[start:]], device=lm.device)
        positions = torch.arange(start, len(tokens), device=lm.device)[None]
        if parent is None:
            with shared_prefix(None):
                out = lm.model(input_ids=x, position_ids=positions, use_cache=True, logits_to_keep=1)
            return [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        n = len(tokens) - start
        causal = torch.ones((n, n), dtype=torch.bool, device=lm.device).tril()
        with shared_prefix(parent):
            out = lm.model(input_ids=x, attention_mask=causal[None, None], position_ids=positions,
                           use_cache=True, logits_to_keep=1)
        return [(torch.cat([pk, layer.keys], dim=2), torch.cat([pv, layer.values], dim=2))
                for (pk, pv), layer in zip(parent, out.past_key_values.layers)]

    def prefill(self, rows: list[list[int]], shared: int, prefix_kv, room: int) -> tuple[torch.Tensor, HFState]:
        """Forward the rows' own tokens (after `shared` prefix tokens) left-padded: the last logits and the state."""
        lm = self.lm
        own = [r[shared:] for r in rows]
        width = max(len(r) for r in own)
        flat = torch.from_numpy(left_padded(own, lm.pad_id))  # left-padded, one tensor
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
        with shared_prefix(prefix_kv if shared else None):
            out = lm.model(input_ids=input_ids, attention_mask=mask4[:, None], position_ids=positions,
                           use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].to(lm.fdtype), HFState(out.past_key_values, real, positions[:, -1] + 1)

    def replays(self, state: HFState) -> bool:
        """Whether the next step replays a captured graph: never here (each step runs the model's modules)."""
        return False

    def step(self, tokens: torch.Tensor, state: HFState, prefix_kv) -> torch.Tensor:
        """Feed one token per row at its next position; the new logits (the state advances)."""
        lm = self.lm
        state.mask = torch.cat([state.mask, torch.ones((state.mask.shape[0], 1), dtype=torch.bool, device=lm.device)], dim=1)
        with shared_prefix(prefix_kv):
            out = lm.model(input_ids=tokens.view(-1, 1), attention_mask=state.mask[:, None, None, :],
                           position_ids=state.next_pos.view(-1, 1), past_key_values=state.cache, use_cache=True,
                           logits_to_keep=1)
        state.next_pos = state.next_pos + 1
        return out.logits[:, -1, :].to(lm.fdtype)

    def option_logits(self, opt_ids: torch.Tensor, seg: torch.Tensor, off: torch.Tensor, kmax: int, state: HFState,
                      prefix_kv) -> torch.Tensor:
        """Logits [B, W - 1, V] after each option token but the row's last: option k's tokens (segment `seg` == k,
        `off` their place in it; `kmax` the padding's segment) see the prompt and their own option's earlier tokens."""
        lm = self.lm
        n, width = opt_ids.shape
        valid = seg < kmax
        own = (seg[:, :, None] == seg[:, None, :]) & (off[:, None, :] <= off[:, :, None]) & valid[:, None, :]
        own |= torch.eye(width, dtype=torch.bool, device=lm.device)[None]  # padding sees itself
        prompt = state.mask[:, None, :].expand(n, width, state.mask.shape[1])
        full = torch.cat([prompt, own], dim=-1)[:, None]
        with shared_prefix(prefix_kv):
            hidden = lm.model.model(input_ids=opt_ids, attention_mask=full, position_ids=state.next_pos[:, None] + off,
                                    past_key_values=state.cache, use_cache=True).last_hidden_state
        return lm.model.get_output_embeddings()(hidden[:, :-1]).to(lm.fdtype)  # position j predicts token j + 1
