"""A lean forward for Llama-family decoders (Llama, Qwen2, Mistral without a sliding window), over the weights of
an already loaded transformers model: about ten launches a layer instead of transformers' ~35.

- the query, key and value projections are one matrix product (their weights laid side by side, the model's own
  parameters becoming views of that one tensor, so nothing is stored twice), and so are the gate and up products;
- the residual additions ride in the output products, in place (`addmm_`: no copy of the residual stream), the
  rotary embedding and the KV-cache write are one kernel, attention over the shared prefix and the row's own cache
  is one kernel, and so is the MLP's silu(gate) * up (`agents.llm.local.kernels`);
- a bucket's KV cache is allocated once, for its prompt and every token it may decode (no concatenation per step);
- normalisation: on a GPU in 16 bits one fused `rms_norm` (no float32 round trip); otherwise transformers'
  arithmetic exactly (float32 statistics), so on a CPU in float64 it computes what transformers computes.

`unsupported(model)` says why a model cannot take this path (None when it can); such a model runs transformers'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.nn.functional as F

from agents.llm.local.kernels import Kernels

ARCHITECTURES = ("llama", "qwen2", "mistral")
ROPE_TYPES = ("default", "linear", "llama3")


def unsupported(model: Any) -> Optional[str]:
    """Why `model` cannot run on the lean forward, or None when it can."""
    cfg = getattr(model, "config", None)
    kind = getattr(cfg, "model_type", None)
    if kind not in ARCHITECTURES:
        return f"architecture {kind!r} (the lean forward knows {', '.join(ARCHITECTURES)})"
    inner = getattr(model, "model", None)
    try:
        layer = inner.layers[0]
        attn, mlp = layer.self_attn, layer.mlp
        _ = (inner.embed_tokens.weight, inner.norm.weight, inner.rotary_emb, attn.q_proj, attn.k_proj, attn.v_proj,
             attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj, layer.input_layernorm, layer.post_attention_layernorm)
    except (AttributeError, IndexError, TypeError):
        return "an unexpected module layout"
    if getattr(cfg, "hidden_act", None) not in ("silu", "swish"):
        return f"activation {getattr(cfg, 'hidden_act', None)!r}"
    if getattr(inner.rotary_emb, "rope_type", "default") not in ROPE_TYPES:
        return f"rotary type {inner.rotary_emb.rope_type!r}"
    if getattr(cfg, "sliding_window", None) and (kind == "mistral" or getattr(cfg, "use_sliding_window", False)):
        return "a sliding attention window"
    head = model.get_output_embeddings()
    qkv_bias = {getattr(attn, n).bias is None for n in ("q_proj", "k_proj", "v_proj")}
    if head is None or getattr(head, "bias", None) is not None or len(qkv_bias) > 1 \
            or any(getattr(mlp, n).bias is not None for n in ("gate_proj", "up_proj", "down_proj")):
        return "biases where Llama and Qwen2 have none"
    return None


def cache_views(buf: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer (keys, values) views of a cache buffer [layers, 2, rows, Hk, columns, D]."""
    return [(buf[i, 0], buf[i, 1]) for i in range(buf.shape[0])]


@dataclass
class Layer:
    """One decoder layer's weights, as the lean forward reads them."""

    ln1: torch.Tensor
    ln2: torch.Tensor
    qkv: torch.Tensor
    qkv_bias: Optional[torch.Tensor]
    o: torch.Tensor
    o_bias: Optional[torch.Tensor]
    gate_up: torch.Tensor
    down: torch.Tensor


def _fuse(linears: list) -> torch.Tensor:
    """One weight tensor for several linear layers side by side; each layer's weight becomes a view of it."""
    fused = torch.cat([m.weight.data for m in linears], dim=0)
    row = 0
    for m in linears:
        n = m.weight.shape[0]
        m.weight.data = fused[row:row + n]
        row += n
    return fused


class LeanDecoder:
    """The forward of a Llama-family model over a shared prefix and a bucket's KV cache."""

    def __init__(self, model: Any, device: str, dtype: torch.dtype, kernels: Optional[str] = None) -> None:
        inner = model.model
        attn0 = inner.layers[0].self_attn
        self.hq, self.hk = model.config.num_attention_heads, model.config.num_key_value_heads
        self.d = int(attn0.head_dim)
        self.scale = float(attn0.scaling)
        self.eps = float(getattr(inner.norm, "variance_epsilon", getattr(model.config, "rms_norm_eps", 1e-6)))
        self.dtype, self.device = dtype, device
        self.fused_norm = device.startswith("cuda") and dtype in (torch.bfloat16, torch.float16)
        self.embed = inner.embed_tokens.weight
        self.norm = inner.norm.weight
        self.head = model.get_output_embeddings().weight
        self.layers = []
        for layer in inner.layers:
            a, m = layer.self_attn, layer.mlp
            biases = [p.bias for p in (a.q_proj, a.k_proj, a.v_proj)]
            bias = torch.cat(biases) if all(x is not None for x in biases) else None
            self.layers.append(Layer(layer.input_layernorm.weight, layer.post_attention_layernorm.weight,
                                     _fuse([a.q_proj, a.k_proj, a.v_proj]), bias, a.o_proj.weight, a.o_proj.bias,
                                     _fuse([m.gate_proj, m.up_proj]), m.down_proj.weight))
        self.inter = self.layers[0].down.shape[1]
        self.rotary = inner.rotary_emb
        self.kernels = Kernels(device, dtype, self.hq, self.hk, self.d, prefer=kernels, inter=self.inter)
        self._tables: tuple[torch.Tensor, torch.Tensor] = (torch.empty(0), torch.empty(0))
        self.ensure_positions(4096)

    # ----- rotary tables ------------------------------------------------------------------------
    def ensure_positions(self, n: int) -> None:
        """Rotary tables for positions 0 .. n - 1 at least: the model's own rotary module's values, computed once
        (float32 for the Triton kernel, the model's dtype as transformers applies them for the torch one)."""
        if self._tables[0].shape[0] >= n:
            return
        size = max(4096, 1 << (int(n) - 1).bit_length())
        x = torch.zeros(1, dtype=torch.float32, device=self.device)
        with torch.inference_mode():
            cos, sin = self.rotary(x, torch.arange(size, device=self.device)[None])
        cos, sin = cos[0].float(), sin[0].float()
        if self.kernels.name != "triton":
            cos, sin = cos.to(self.dtype), sin.to(self.dtype)
        self._tables = (cos.contiguous(), sin.contiguous())

    # ----- the forward --------------------------------------------------------------------------
    def new_cache(self, rows: int, columns: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (keys, values) [rows, Hk, columns, D], zeroed, in one allocation."""
        return cache_views(self.cache_buffer(rows, columns))

    def cache_buffer(self, rows: int, columns: int) -> torch.Tensor:
        """The one allocation behind `new_cache`: [layers, 2, rows, Hk, columns, D], zeroed."""
        return torch.zeros((len(self.layers), 2, rows, self.hk, columns, self.d), dtype=self.dtype, device=self.device)

    def _norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if self.fused_norm:
            return F.rms_norm(x, (x.shape[-1],), w, self.eps)
        y = x.to(torch.float32)  # transformers' LlamaRMSNorm, operation for operation
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return w * y.to(x.dtype)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, cache, col0: torch.Tensor, start: torch.Tensor,
                seg: Optional[torch.Tensor] = None, prefix=None) -> torch.Tensor:
        """Hidden states [B, S, H] (before the final norm) of tokens `ids` [B, S] at `positions`, written into
        `cache` at columns col0 .. col0 + S - 1; `prefix`: per layer (keys, values) [1, Hk, P, D] or None."""
        b, s = ids.shape
        tokens = b * s
        hq, hk, d = self.hq, self.hk, self.d
        cos, sin = self._tables
        pos = positions.reshape(-1)
        x = F.embedding(ids.reshape(-1), self.embed)
        k = self.kernels
        for i, layer in enumerate(self.layers):
            h = self._norm(x, layer.ln1)
            qkv = F.linear(h, layer.qkv, layer.qkv_bias)
            kc, vc = cache[i]
            k.rope_write(qkv, pos, cos, sin, kc, vc, col0, s, hq, hk, d)
            q = qkv[:, :hq * d].view(b, s, hq, d)
            pk, pv = (prefix[i][0][0], prefix[i][1][0]) if prefix else (None, None)
            o = k.attend(q, pk, pv, kc, vc, start, col0, seg, self.scale).reshape(tokens, hq * d)
            if layer.o_bias is None:
                x.addmm_(o, layer.o.t())
            else:
                x = x + F.linear(o, layer.o, layer.o_bias)
            h = self._norm(x, layer.ln2)
            x.addmm_(k.silu_mul(F.linear(h, layer.gate_up), self.inter), layer.down.t())
        return x.view(b, s, -1)

    def logits(self, hidden: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Next-token logits (in `dtype`) of hidden states [..., H]: the final norm, then the output layer."""
        return F.linear(self._norm(hidden, self.norm), self.head).to(dtype)
