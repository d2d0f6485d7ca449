"""The lean forward's fused kernels in Triton (imported only on a GPU, or on a CPU under TRITON_INTERPRET=1).

- `rope_write`: one program per token applies the rotary embedding to its query heads in place and writes its
  rotated keys and its values into the bucket's KV cache at their column (15 torch launches become one).
- `attend`: one program per (row, KV head, block of query rows) runs an online softmax over the shared prefix's
  one copy of keys [Hk, P, D] (read by every row from the L2, never copied per row) and then over the row's own
  cache columns under the visibility rule of `agents.llm.local.kernels` (left padding, causality, Choice options),
  so a layer's attention is one launch with no scores, masks or expanded keys in memory. The query heads sharing
  a KV head (GQA) are folded into the block's rows, so each key tile is loaded once for all of them.
- `silu_mul`: the MLP's activation, silu(gate) * up, read from the fused gate-up product in one pass (torch's
  silu and mul were two passes over strided halves, 29% of a 1,000-request call's device time on an H200).

The torch functions of the same names in `agents.llm.local.kernels` are the reference they are tested against.
"""

from __future__ import annotations

import math

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the module still imports; agents.llm.local.kernels never launches these without Triton
    triton = tl = None

LOG2E = 1.0 / math.log(2.0)


def _jit(*args, **kwargs):
    """triton.jit, or where Triton is missing a decorator that leaves the function as it is."""
    if triton is not None:
        return triton.jit(*args, **kwargs)
    return args[0] if args and callable(args[0]) else (lambda fn: fn)


@_jit(do_not_specialize=["S"])
def _rope_write_kernel(QKV, stride_t, POS, COS, SIN, stride_tab, KC, VC, stride_cb, stride_ch, stride_cn, COL0, S,
                       HQ: tl.constexpr, HK: tl.constexpr, D: tl.constexpr, BH: tl.constexpr):
    t = tl.program_id(0)
    b = (t // S).to(tl.int64)
    col = tl.load(COL0) + t % S
    half: tl.constexpr = D // 2
    j = tl.arange(0, half)
    pos = tl.load(POS + t)
    c1 = tl.load(COS + pos * stride_tab + j)
    c2 = tl.load(COS + pos * stride_tab + half + j)
    s1 = tl.load(SIN + pos * stride_tab + j)
    s2 = tl.load(SIN + pos * stride_tab + half + j)
    h = tl.arange(0, BH)
    row = QKV + t.to(tl.int64) * stride_t
    out_ty = QKV.dtype.element_ty
    # queries, in place: x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1)
    mq = (h < HQ)[:, None]
    pq = row + h[:, None] * D + j[None, :]
    x1 = tl.load(pq, mask=mq, other=0.0).to(tl.float32)
    x2 = tl.load(pq + half, mask=mq, other=0.0).to(tl.float32)
    tl.store(pq, (x1 * c1 - x2 * s1).to(out_ty), mask=mq)
    tl.store(pq + half, (x2 * c2 + x1 * s2).to(out_ty), mask=mq)
    # keys, rotated, and values, as they are, into the cache at this token's column
    mk = (h < HK)[:, None]
    pk = row + HQ * D + h[:, None] * D + j[None, :]
    k1 = tl.load(pk, mask=mk, other=0.0).to(tl.float32)
    k2 = tl.load(pk + half, mask=mk, other=0.0).to(tl.float32)
    dst = b * stride_cb + h[:, None] * stride_ch + col * stride_cn + j[None, :]
    tl.store(KC + dst, (k1 * c1 - k2 * s1).to(out_ty), mask=mk)
    tl.store(KC + dst + half, (k2 * c2 + k1 * s2).to(out_ty), mask=mk)
    pv = row + (HQ + HK) * D + h[:, None] * D + j[None, :]
    tl.store(VC + dst, tl.load(pv, mask=mk, other=0.0), mask=mk)
    tl.store(VC + dst + half, tl.load(pv + half, mask=mk, other=0.0), mask=mk)


@_jit
def _softmax_step(q, k, v, qk_scale, keep, m_i, l_i, acc, PRECISION: tl.constexpr):
    """One tile of an online softmax: scores of `q` against `k` where `keep`, folded into (m_i, l_i, acc)."""
    qk = tl.dot(q, k, input_precision=PRECISION) * qk_scale
    qk = tl.where(keep, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing visible yet stays at zero weight
    alpha = tl.exp2(m_i - m_use)
    p = tl.exp2(qk - m_use[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return m_new, l_i, acc


@_jit(do_not_specialize=["P", "L", "S", "HK", "sseg_b"])
def _attend_kernel(Q, sq_b, sq_s, sq_h, PK, PV, sp_h, sp_n, P, KC, VC, sc_b, sc_h, sc_n, L, O, so_b, so_s, so_h,
                   START, SEG, sseg_b, COL0, S, HK, qk_scale,
                   G: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   HAS_SEG: tl.constexpr, PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // HK
    h = pid_bh % HK
    b64 = b.to(tl.int64)
    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # the block's query rows: (query s, head h * G + g) folded
    s = r // G
    g = r % G
    row_ok = s < S
    d = tl.arange(0, D)
    q = tl.load(Q + b64 * sq_b + s[:, None] * sq_s + (h * G + g)[:, None] * sq_h + d[None, :], mask=row_ok[:, None],
                other=0.0)
    col0 = tl.load(COL0)
    qcol = col0 + s
    start = tl.load(START + b)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for n0 in range(0, P, BLOCK_N):  # the shared prefix: every query sees all of it
        n = n0 + tl.arange(0, BLOCK_N)
        nm = n < P
        k = tl.load(PK + h * sp_h + n[None, :] * sp_n + d[:, None], mask=nm[None, :], other=0.0)
        v = tl.load(PV + h * sp_h + n[:, None] * sp_n + d[None, :], mask=nm[:, None], other=0.0)
        m_i, l_i, acc = _softmax_step(q, k, v, qk_scale, nm[None, :], m_i, l_i, acc, PRECISION)
    s_first = (pid_m * BLOCK_M) // G
    s_last = tl.minimum((pid_m * BLOCK_M + BLOCK_M - 1) // G, S - 1)
    lo = (tl.minimum(start, col0 + s_first) // BLOCK_N) * BLOCK_N
    hi = tl.minimum(col0 + s_last + 1, L)
    if HAS_SEG:
        seg_q = tl.load(SEG + b64 * sseg_b + qcol, mask=row_ok & (qcol < L), other=-1)
    for n0 in range(lo, hi, BLOCK_N):  # the row's own columns, up to the block's last query
        n = n0 + tl.arange(0, BLOCK_N)
        nm = n < hi
        base = b64 * sc_b + h * sc_h
        k = tl.load(KC + base + n[None, :] * sc_n + d[:, None], mask=nm[None, :], other=0.0)
        v = tl.load(VC + base + n[:, None] * sc_n + d[None, :], mask=nm[:, None], other=0.0)
        keep = (n[None, :] >= start) & (n[None, :] <= qcol[:, None])
        if HAS_SEG:
            seg_k = tl.load(SEG + b64 * sseg_b + n, mask=nm, other=-1)
            keep = keep & ((seg_k[None, :] == 0) | (seg_k[None, :] == seg_q[:, None]))
        keep = (keep | (n[None, :] == qcol[:, None])) & nm[None, :]
        m_i, l_i, acc = _softmax_step(q, k, v, qk_scale, keep, m_i, l_i, acc, PRECISION)
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(O + b64 * so_b + s[:, None] * so_s + (h * G + g)[:, None] * so_h + d[None, :], out.to(O.dtype.element_ty),
             mask=row_ok[:, None])


@_jit(do_not_specialize=["T"])
def _silu_mul_kernel(GU, stride_t, OUT, stride_o, T, INTER: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    keep = (t < T)[:, None]
    src = GU + t.to(tl.int64)[:, None] * stride_t + c[None, :]
    g = tl.load(src, mask=keep, other=0.0).to(tl.float32)
    u = tl.load(src + INTER, mask=keep, other=0.0).to(tl.float32)
    out_ty = OUT.dtype.element_ty
    s = (g / (1.0 + tl.exp(-g))).to(out_ty).to(tl.float32)  # rounded where torch's silu rounds, then the product
    tl.store(OUT + t.to(tl.int64)[:, None] * stride_o + c[None, :], (s * u).to(out_ty), mask=keep)


def silu_mul_block(inter: int) -> int:
    """The column block of `silu_mul` for an intermediate size: its largest power-of-two divisor up to 1,024 (0 when
    under 16: such a size runs torch's functions)."""
    block = min(inter & -inter, 1024)
    return block if block >= 16 else 0


def silu_mul(gu: torch.Tensor, inter: int) -> torch.Tensor:
    """See agents.llm.local.kernels.silu_mul_torch: gu [T, 2 * inter] (gate, then up) to silu(gate) * up [T, inter]."""
    tokens = gu.shape[0]
    block_c = silu_mul_block(inter)
    assert gu.stride(1) == 1 and gu.shape[1] == 2 * inter and block_c
    out = torch.empty((tokens, inter), dtype=gu.dtype, device=gu.device)
    block_t = max(1, 2048 // block_c)
    _silu_mul_kernel[(triton.cdiv(tokens, block_t), inter // block_c)](gu, gu.stride(0), out, out.stride(0), tokens, INTER=inter,
                                                                      BLOCK_T=block_t, BLOCK_C=block_c, num_warps=4)
    return out


def rope_write(qkv: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, k_cache: torch.Tensor,
               v_cache: torch.Tensor, col0: torch.Tensor, seq: int, hq: int, hk: int, d: int) -> None:
    """See agents.llm.local.kernels.rope_write (cos and sin: float32 tables [positions, D])."""
    tokens = qkv.shape[0]
    assert qkv.stride(1) == 1 and k_cache.stride(3) == 1 and v_cache.stride() == k_cache.stride()
    _rope_write_kernel[(tokens,)](qkv, qkv.stride(0), positions, cos, sin, cos.stride(0), k_cache, v_cache,
                                  k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), col0, seq,
                                  HQ=hq, HK=hk, D=d, BH=triton.next_power_of_2(max(hq, hk)), num_warps=1)


def attend(q: torch.Tensor, prefix_k, prefix_v, k_cache: torch.Tensor, v_cache: torch.Tensor, start: torch.Tensor,
           col0: torch.Tensor, seg, scale: float) -> torch.Tensor:
    """See agents.llm.local.kernels.attend."""
    b, s, hq, d = q.shape
    hk = k_cache.shape[1]
    g = hq // hk
    rows = s * g
    block_m = 16 if rows <= 16 else 64  # two shapes only: the first-use check compiles both
    block_n = 64 if d <= 64 else 32
    out = torch.empty((b, s, hq, d), dtype=q.dtype, device=q.device)
    p = 0 if prefix_k is None else prefix_k.shape[1]
    pk, pv = (prefix_k, prefix_v) if p else (k_cache, v_cache)  # a dummy pointer when there is no prefix
    assert q.stride(3) == 1 and k_cache.stride(3) == 1 and (not p or (pk.stride(2) == 1 and pv.stride() == pk.stride()))
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    grid = (triton.cdiv(rows, block_m), b * hk)
    _attend_kernel[grid](q, q.stride(0), q.stride(1), q.stride(2), pk, pv, pk.stride(0) if p else 0,
                         pk.stride(1) if p else 0, p, k_cache, v_cache, k_cache.stride(0), k_cache.stride(1),
                         k_cache.stride(2), k_cache.shape[2], out, out.stride(0), out.stride(1), out.stride(2),
                         start, seg if seg is not None else start, seg.stride(0) if seg is not None else 0, col0, s, hk,
                         scale * LOG2E, G=g, D=d, BLOCK_M=block_m, BLOCK_N=block_n, HAS_SEG=seg is not None,
                         PRECISION=precision, num_warps=4, num_stages=2)
    return out
