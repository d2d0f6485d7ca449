"""The lean forward's per-layer kernels: rotary + KV-cache write, attention over a shared prefix plus each row's
own cache, and the MLP's silu(gate) * up, as torch functions (any device, any dtype) and as Triton kernels
(`agents.llm.local.triton_kernels`).

A bucket's KV cache holds each row's own tokens [B, Hk, L, D] (left-padded: a row's first real column is start[b]);
the group's shared prefix is one copy [Hk, P, D]. Query s of a call sits at cache column q = col0 + s and sees
every prefix key and the own columns c with
    c == q,  or  start[b] <= c <= q  and  (seg[b, c] == 0 or seg[b, c] == seg[b, q])
(`seg`, only for a Choice's options: 0 on the prompt, k on option k, so each option sees the prompt and its own
earlier tokens; a padding query sees at least itself, so no row is ever empty). `col0` is a one-element int32
tensor on the device, so a captured CUDA graph replays with the column it is given.

`Kernels(device, dtype)` picks the Triton kernels on CUDA for 16- and 32-bit floats after checking them against
the torch functions on random inputs (any failure or mismatch: the torch functions, and `note` says why), and the
torch functions elsewhere. The MLP's kernel is checked on its own (for the model's intermediate size): where it
alone fails, torch's silu and mul run beside the Triton attention.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

import torch

#: largest relative error a kernel may show against the torch reference in its first-use check, per dtype
CHECK_TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 5e-3, torch.float32: 1e-4}


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_write_torch(qkv: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     k_cache: torch.Tensor, v_cache: torch.Tensor, col0: torch.Tensor, seq: int, hq: int, hk: int,
                     d: int) -> None:
    """Rotate the queries inside `qkv` [B*S, (Hq + 2 Hk) * D] in place, and write the rotated keys and the values into
    the caches [B, Hk, L, D] at columns col0 .. col0 + S - 1. The same operations, in the same order and dtype, as
    transformers' Llama (q * cos + rotate_half(q) * sin), with cos/sin [positions, D] in the model's dtype."""
    b = qkv.shape[0] // seq
    c, s = cos[positions].unsqueeze(1).to(qkv.dtype), sin[positions].unsqueeze(1).to(qkv.dtype)  # [B*S, 1, D]
    q = qkv[:, :hq * d].view(-1, hq, d)
    k = qkv[:, hq * d:(hq + hk) * d].view(-1, hk, d)
    v = qkv[:, (hq + hk) * d:].reshape(b, seq, hk, d)
    q.copy_((q * c) + (rotate_half(q) * s))
    k = ((k * c) + (rotate_half(k) * s)).view(b, seq, hk, d)
    cols = col0.long() + torch.arange(seq, device=qkv.device)
    k_cache.index_copy_(2, cols, k.transpose(1, 2))
    v_cache.index_copy_(2, cols, v.transpose(1, 2))


def silu_mul_torch(gu: torch.Tensor, inter: int) -> torch.Tensor:
    """The MLP's activation on the fused gate-up product gu [T, 2 * inter]: silu(gate) * up [T, inter], as transformers'
    Llama computes it (torch's silu, then the product, each rounded to the dtype)."""
    return torch.nn.functional.silu(gu[:, :inter]) * gu[:, inter:]


def visible(start: torch.Tensor, col0: torch.Tensor, seq: int, columns: int, seg: Optional[torch.Tensor]) -> torch.Tensor:
    """[B, S, L] bool: which own cache columns each query sees (the rule in the module's docstring)."""
    cols = torch.arange(columns, device=start.device)
    qcol = col0.long() + torch.arange(seq, device=start.device)  # [S]
    keep = (cols >= start.long()[:, None, None]) & (cols <= qcol[None, :, None])
    if seg is not None:
        seg_q = seg.gather(1, qcol.clamp(max=columns - 1).expand(seg.shape[0], seq))[:, :, None]
        seg_k = seg[:, None, :]
        keep &= (seg_k == 0) | (seg_k == seg_q)
    return keep | (cols == qcol[None, :, None])


def attend_torch(q: torch.Tensor, prefix_k: Optional[torch.Tensor], prefix_v: Optional[torch.Tensor],
                 k_cache: torch.Tensor, v_cache: torch.Tensor, start: torch.Tensor, col0: torch.Tensor,
                 seg: Optional[torch.Tensor], scale: float) -> torch.Tensor:
    """Attention of q [B, S, Hq, D] over [prefix] + [own visible columns]; [B, S, Hq, D].

    One fused SDPA call over the prefix expanded per row and the whole cache (static shapes: the masked columns
    cost a little, and a captured graph stays valid as the column advances)."""
    b, s = q.shape[:2]
    keep = visible(start, col0, s, k_cache.shape[2], seg)
    keys, values = k_cache, v_cache
    if prefix_k is not None and prefix_k.shape[1]:
        keys = torch.cat([prefix_k.unsqueeze(0).expand(b, -1, -1, -1), k_cache], dim=2)
        values = torch.cat([prefix_v.unsqueeze(0).expand(b, -1, -1, -1), v_cache], dim=2)
        keep = torch.cat([keep.new_ones((b, s, prefix_k.shape[1])), keep], dim=-1)
    out = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), keys, values, attn_mask=keep[:, None],
                                                           scale=scale, enable_gqa=True)
    return out.transpose(1, 2)


def attend_reference(q, prefix_k, prefix_v, k_cache, v_cache, start, col0, seg, scale) -> torch.Tensor:
    """The same attention as a plain per-row, per-head softmax in float64 (for tests and the first-use check)."""
    b, s, hq, d = q.shape
    hk = k_cache.shape[1]
    keep = visible(start, col0, s, k_cache.shape[2], seg)
    out = torch.empty(b, s, hq, d, dtype=torch.float64, device=q.device)
    for r in range(b):
        for h in range(hq):
            kv = h // (hq // hk)
            keys, values, mask = k_cache[r, kv].double(), v_cache[r, kv].double(), keep[r]
            if prefix_k is not None and prefix_k.shape[1]:
                keys = torch.cat([prefix_k[kv].double(), keys])
                values = torch.cat([prefix_v[kv].double(), values])
                mask = torch.cat([mask.new_ones(s, prefix_k.shape[1]), mask], dim=-1)
            logits = (q[r, :, h].double() @ keys.T) * scale
            out[r, :, h] = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1) @ values
    return out


class Kernels:
    """The rotary-write and attention functions one lean forward uses on a device and dtype, for a model with `hq`
    query heads, `hk` key/value heads of size `head_dim` (the check compiles the shapes the model will run)."""

    def __init__(self, device: str, dtype: torch.dtype, hq: int, hk: int, head_dim: int, prefer: Optional[str] = None,
                 inter: int = 0) -> None:
        """`prefer`: "triton" or "torch" to force one (tests, benchmarks); None: Triton on CUDA where it checks out.
        `inter`: the MLP's intermediate size (0: the MLP runs torch's functions)."""
        self.name, self.note = "torch", ""
        self._triton: Any = None
        self.mlp = "torch"  # "triton" where the fused silu(gate) * up kernel runs
        interpreted = os.environ.get("TRITON_INTERPRET") == "1"
        want = prefer or ("triton" if device.startswith("cuda") else "torch")
        if want != "triton":
            return
        if dtype not in CHECK_TOLERANCE:
            self.note = f"Triton kernels not used for {dtype}: the torch kernels run"
            return
        if head_dim & (head_dim - 1) or head_dim < 16:
            self.note = f"Triton kernels need a power-of-two head size of at least 16, not {head_dim}: the torch kernels run"
            return
        if not device.startswith("cuda") and not interpreted:
            self.note = "Triton kernels run on CUDA (or under TRITON_INTERPRET=1): the torch kernels run"
            return
        try:
            from agents.llm.local import triton_kernels  # triton: only where it is used

            if triton_kernels.triton is None:
                raise ImportError("Triton is not installed")
            problem = check(triton_kernels.rope_write, triton_kernels.attend, device, dtype, hq, hk, head_dim)
        except Exception as exc:  # noqa: BLE001 - a compiler or driver failure of any kind: fall back, and say so
            problem = _one_line(exc)
        if problem:
            self._fall_back(f"Triton kernels failed their check ({problem})")
            return
        self.name, self._triton = "triton", triton_kernels
        if not inter:
            return
        if not triton_kernels.silu_mul_block(inter):
            self.note = f"the fused MLP kernel needs an intermediate size divisible by 16, not {inter}: torch's silu and mul run"
            return
        try:
            problem = check_silu_mul(triton_kernels.silu_mul, device, dtype, inter)
        except Exception as exc:  # noqa: BLE001
            problem = _one_line(exc)
        if problem:
            self.note = f"the fused MLP kernel failed its check ({problem}): torch's silu and mul run"
            print(f"societas: {self.note}", file=sys.stderr)
            return
        self.mlp = "triton"

    def _fall_back(self, why: str) -> None:
        self.name, self._triton, self.mlp = "torch", None, "torch"
        self.note = f"{why}: the torch kernels run"
        print(f"societas: {self.note}", file=sys.stderr)

    def rope_write(self, *args) -> None:
        """rope_write_torch's function, by the chosen kernel (a Triton failure falls back to torch, and says so)."""
        if self._triton is not None:
            try:
                return self._triton.rope_write(*args)
            except Exception as exc:  # noqa: BLE001
                self._fall_back(f"a Triton kernel failed ({_one_line(exc)})")
        return rope_write_torch(*args)

    def attend(self, *args) -> torch.Tensor:
        """attend_torch's function, by the chosen kernel (a Triton failure falls back to torch, and says so)."""
        if self._triton is not None:
            try:
                return self._triton.attend(*args)
            except Exception as exc:  # noqa: BLE001
                self._fall_back(f"a Triton kernel failed ({_one_line(exc)})")
        return attend_torch(*args)

    def silu_mul(self, gu: torch.Tensor, inter: int) -> torch.Tensor:
        """silu_mul_torch's function, by the chosen kernel (a Triton failure falls back to torch, and says so)."""
        if self.mlp == "triton" and self._triton is not None:
            try:
                return self._triton.silu_mul(gu, inter)
            except Exception as exc:  # noqa: BLE001
                self._fall_back(f"a Triton kernel failed ({_one_line(exc)})")
        return silu_mul_torch(gu, inter)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def check(rope_write, attend, device: str, dtype: torch.dtype, hq: int, hk: int, head_dim: int, seed: int = 0) -> str:
    """'' when `rope_write` and `attend` agree with the torch functions on fresh random inputs of the model's head
    counts (a shared prefix, left padding, options, a prefill and a one-token step); else what differed."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    tol = CHECK_TOLERANCE[dtype]

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)

    b, d, p, length = 3, head_dim, 37, 24
    for seq, col in ((17, 0), (1, 19)):
        q, pk, pv = rnd(b, seq, hq, d), rnd(hk, p, d), rnd(hk, p, d)
        kc, vc = rnd(b, hk, length, d), rnd(b, hk, length, d)
        start = torch.tensor([0, 2, 5], dtype=torch.int32, device=device)
        col0 = torch.tensor([col], dtype=torch.int32, device=device)
        seg = torch.zeros(b, length, dtype=torch.int32, device=device)
        seg[:, 4:9] = torch.tensor([1, 1, 2, 2, 3], dtype=torch.int32, device=device)
        for prefix, sg in (((pk, pv), None), ((None, None), seg), ((pk, pv), seg)):
            ref = attend_reference(q, *prefix, kc, vc, start, col0, sg, d ** -0.5)
            got = attend(q, *prefix, kc, vc, start, col0, sg, d ** -0.5).double()
            err = float((got - ref).norm() / ref.norm())
            if not err < tol:
                return f"attention off by {err:.2e} (seq {seq}, prefix {prefix[0] is not None}, options {sg is not None})"
    tokens, seq = 2 * 5, 5
    qkv = rnd(tokens, (hq + 2 * hk) * d)
    positions = torch.arange(3, 3 + tokens, device=device) % 7
    angles = torch.arange(16, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, d // 2)[None]
    cos = torch.cat([angles.cos(), angles.cos()], -1).to(device)
    sin = torch.cat([angles.sin(), angles.sin()], -1).to(device)
    col0 = torch.tensor([2], dtype=torch.int32, device=device)
    outs = []
    for fn, tables in ((rope_write, (cos, sin)), (rope_write_torch, (cos.to(dtype), sin.to(dtype)))):
        x, kc, vc = qkv.clone(), torch.zeros(2, hk, 8, d, dtype=dtype, device=device), torch.zeros(2, hk, 8, d, dtype=dtype, device=device)
        fn(x, positions, *tables, kc, vc, col0, seq, hq, hk, d)
        outs.append(torch.cat([x.flatten(), kc.flatten(), vc.flatten()]).double())
    err = float((outs[0] - outs[1]).norm() / outs[1].norm())
    return "" if err < tol else f"rotary write off by {err:.2e}"


def check_silu_mul(silu_mul, device: str, dtype: torch.dtype, inter: int, seed: int = 0) -> str:
    """'' when `silu_mul` agrees with silu_mul_torch on fresh random inputs (a prefill's rows and a one-row step, each
    gate-up row wider than the product, as the fused product's slices are); else what differed."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    tol = CHECK_TOLERANCE[dtype]
    for tokens in (37, 1):
        gu = (3 * torch.randn(tokens, 2 * inter, generator=g)).to(device=device, dtype=dtype)
        want = silu_mul_torch(gu, inter).double()
        got = silu_mul(gu, inter)
        if got.shape != want.shape:
            return f"silu(gate) * up gave shape {tuple(got.shape)}, not {tuple(want.shape)}"
        err = float((got.double() - want).norm() / want.norm())
        if not err < tol:
            return f"silu(gate) * up off by {err:.2e} ({tokens} rows)"
    return ""
