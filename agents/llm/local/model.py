"""The local causal LM (`LocalLM`): transformers on torch, every call batched, loaded once per process.

A batch is laid out as a prefix tree of buckets (`agents.llm.local.layout`); each group's common
prefix is forwarded once and kept as one copy of its keys and values, which every row attends to.
An engine turns ids into logits: on a CPU, and for architectures the lean forward does not know,
transformers' own modules with the shared-prefix attention (`agents.llm.local.hf_engine`); on a GPU,
for Llama-family models, the lean forward with fused kernels and CUDA graphs (`agents.llm.local.lean_engine`).

Prompts become ids without running the chat template per prompt where the template only pastes the
messages' contents (`agents.llm.local.chat_render`), and with the batch's common beginning tokenised
once where the tokenizer allows a cut there (`agents.llm.local.prefix_encode`): the same text and ids.

Decoding runs on the device, for all rows at once, with at most one host synchronisation per
decoding step (to stop when every row is done). On a GPU the next step is queued before that check
where its launch would otherwise leave the device idle: the first step (its launches overlap the
prefill still running) and every step a captured CUDA graph replays; a step queued after the last
one is discarded, so answers never change:
- `choose`: one prefill; the options of a prompt go in one row after it with a tree-shaped
  mask; each option's score is its mean token log-likelihood, gathered for the option tokens
  only (logit minus logsumexp), summed per option with scatter_add; the pick is made on device.
- `decode_numbers`: constrained decoding of digits (`agents.llm.local.numbers`), so every answer
  lies in [lo, hi].
- `generate`: top-k sampling (greedy at temperature 0) for free text.

Every pick draws seeded Gumbel noise (`agents.llm.local.sampling`), and the transformers engine computes each row
as it would in any batch (`agents.llm.local.hf_engine`: tested on a CPU in bf16): a request's answer does not
depend on its batch, its row or the other requests.
"""

from __future__ import annotations

import functools
from dataclasses import replace
import os
import threading
from collections.abc import Sequence
from typing import Any, Optional

import torch

from agents.llm.local.attention import ATTN_NAME, register_attention
from agents.llm.local.chat_render import ChatRenderer
from agents.llm.local.device import default_batch_tokens, pick_device, pick_dtype, pick_threads
from agents.llm.local.hf_engine import HFEngine
from agents.llm.local.ids import ModelNotFound, resolve_model
from agents.llm.local.layout import LayoutRules, layout
from agents.llm.local.lean import unsupported as lean_unsupported
from agents.llm.local.numbers import MAX_NUMBER_DIGITS, NumberState
from agents.llm.local.prefix_encode import PrefixEncoder
from agents.llm.local.sampling import STREAM_CHOICE, STREAM_NUMBER, STREAM_TEXT, seeded_pick

ENGINES = ("transformers", "lean")
#: a bucket of this many rows keeps the GPU busy with its prefill while the host launches its first step (an eager
#: step's launches took 14.6 ms of an H200 machine's host; 1,000 rows' prefill ~40 ms of its device)
QUEUE_AHEAD_ROWS = 64


class LocalLM:
    """A causal LM with a chat template, loaded once, answering batches."""

    def __init__(self, model: Optional[str] = None, device: Optional[str] = None, dtype: Optional[str] = None,
                 max_batch: Optional[int] = None, top_k: int = 50, threads: Optional[int] = None,
                 batch_tokens: Optional[int] = None, *, hf_model: Any = None, tokenizer: Any = None,
                 engine: Optional[str] = None) -> None:
        """Load `model` (None: the embedded GGUF), or wrap an already built `hf_model` and `tokenizer`.

        `engine`: "transformers" or "lean" (see `engine`); None: lean on CUDA where the model allows it."""
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        register_attention()
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
        self.renderer, self.encoder = ChatRenderer(self.tokenizer), PrefixEncoder(self.tokenizer)
        self.eos_ids = {int(self.tokenizer.eos_token_id)}
        self._eos = torch.tensor(sorted(self.eos_ids), device=self.device)
        on_gpu = self.device.startswith("cuda")
        self.batch_tokens = int(batch_tokens or default_batch_tokens(self.device))
        self.max_batch = int(max_batch or (4096 if on_gpu else 64))  # rows per bucket
        self.top_k = top_k
        self.min_shared_prefix = 16  # a shared prefix shorter than this is not worth a separate forward
        self.split_cost = 4096 if on_gpu else 48  # tokens one extra forward is worth (prefix grouping)
        # page-locked host copies of each bucket's ids: off, measured slower on an H100 (allocating them costs more
        # than the asynchronous copy saves at these sizes; benchmarks/llm_scale.py's `knobs` section)
        self.pin_memory = False
        self.counters = {"prefix_forwards": 0, "prefix_tokens": 0, "suffix_tokens": 0, "buckets": 0, "decode_steps": 0}
        vocab = self.model.get_output_embeddings().weight.shape[0]
        self.digit_ids = [self.tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)]
        if any(i is None or i < 0 or i >= vocab for i in self.digit_ids):
            raise ModelNotFound("the tokenizer has no single-token digits; numbers cannot be decoded")
        self._digit_index = torch.tensor(self.digit_ids, device=self.device)
        self._cand_ids = torch.cat([self._digit_index, self._digit_index.new_tensor([-1])])  # digits, then the stop
        self.fdtype = torch.float64 if self.dtype == torch.float64 else torch.float32  # logits' dtype for decoding
        self.lean_problem = lean_unsupported(self.model)  # why the lean engine cannot run this model (None: it can)
        self._engines: dict[str, Any] = {"transformers": HFEngine(self)}
        self._lean_kernels: Optional[str] = None
        self.engine = engine or ("lean" if on_gpu and self.lean_problem is None else "transformers")

    @property
    def engine(self) -> str:
        """The engine of the next call: "transformers" (the model's own modules; the CPU's, so its answers are the
        ones stored runs were made with) or "lean" (agents.llm.local.lean: Llama-family models; a GPU's default)."""
        return self._engine

    @engine.setter
    def engine(self, name: str) -> None:
        if name not in ENGINES:
            raise ValueError(f"unknown engine {name!r}; valid: {', '.join(ENGINES)}")
        if name == "lean" and self.lean_problem:
            raise ValueError(f"the lean engine cannot run this model: {self.lean_problem}")
        self._engine = name

    def use_lean_kernels(self, kernels: Optional[str]) -> Any:
        """The lean engine with `kernels` ("triton", "torch"; None: Triton where it checks out), built anew (for the
        benchmarks' comparisons; the weights are shared). Returns it."""
        from agents.llm.local.lean_engine import LeanEngine

        self._lean_kernels = kernels
        with torch.inference_mode(False), torch.no_grad():  # the fused weights stay ordinary tensors
            self._engines["lean"] = LeanEngine(self, kernels)
        return self._engines["lean"]

    @property
    def fwd(self) -> Any:
        """The current engine's object (the lean one is built on first use)."""
        if self._engine not in self._engines:
            self.use_lean_kernels(self._lean_kernels)
        return self._engines[self._engine]

    def compile_layers(self) -> int:
        """Compile every normalisation and MLP block with `torch.compile` (dynamic shapes), fusing the
        elementwise work that dominates a small model's forward on a GPU; attention stays eager (the shared
        prefix). Returns the blocks compiled. Measured both ways by benchmarks/llm_scale.py (`knobs`)."""
        done = 0
        for module in self.model.modules():
            name = type(module).__name__
            if name.endswith("RMSNorm") or name.endswith("MLP"):
                module.forward = torch.compile(module.forward, dynamic=True)
                done += 1
        return done

    @property
    def rules(self) -> LayoutRules:
        """How batches are cut (agents.llm.local.layout), from this model's current settings."""
        return LayoutRules(self.batch_tokens, self.max_batch, self.min_shared_prefix, self.split_cost)

    # ----- prompts ------------------------------------------------------------------------------
    def render(self, messages: Sequence[dict[str, str]]) -> str:
        """Chat messages to the model's prompt text, ending where the assistant answers (the chat template's text)."""
        return self.renderer.render(messages)

    def render_all(self, batch: Sequence[Sequence[dict[str, str]]]) -> list[str]:
        """`render` of every prompt of a batch."""
        return self.renderer.render_all(batch)

    def encode(self, prompts: Sequence[str] | Sequence[list[int]]) -> list[list[int]]:
        """Token ids of each prompt; prompts already given as token ids pass through untouched.

        Texts are encoded in one batch by the fast tokenizer's backend (no offsets kept, its own
        threads): 1,000 harvest prompts took 0.25 s one by one, 0.13 s so on 2 cores, with the same ids;
        their common beginning is tokenised once where the tokenizer allows it (`PrefixEncoder`).
        """
        texts = [i for i, p in enumerate(prompts) if not isinstance(p, list)]
        out = list(prompts)
        if texts:
            for i, ids in zip(texts, self.encoder.encode([prompts[i] for i in texts])):  # type: ignore[misc]
                out[i] = ids
        return out  # type: ignore[return-value]

    def option_ids(self, options: Sequence[Sequence[str]]) -> list[list[list[int]]]:
        """Token ids of every option (an empty option: the pad token), each distinct text encoded once."""
        distinct = list(dict.fromkeys(o for row in options for o in row))
        ids = dict(zip(distinct, self.encoder.whole(distinct) if distinct else []))
        return [[ids[o] or [self.pad_id] for o in row] for row in options]

    # ----- forward passes -----------------------------------------------------------------------
    def _prefix_kv(self, tokens: list[int], parent=None, start: int = 0):
        """The KV of a shared prefix: one copy ([1, heads, P, dim] per layer), kept by reference.

        With `parent` (the KV of tokens[:start]) only tokens[start:] are forwarded, attending to it.
        """
        self.counters["prefix_forwards"] += 1
        self.counters["prefix_tokens"] += len(tokens) - start
        return self.fwd.prefix_kv(tokens, parent, start)

    def _prefill(self, rows: Sequence[list[int]], shared: int, prefix_kv, room: int = 0):
        """Forward the rows' own tokens (after `shared` prefix tokens) left-padded; (last logits, decoding state).
        `room`: the tokens each row may still take (decoding steps, a Choice's option tokens)."""
        self.counters["buckets"] += 1
        self.counters["suffix_tokens"] += len(rows) * max(len(r) - shared for r in rows)
        return self.fwd.prefill(list(rows), shared, prefix_kv, room)

    def _step(self, tokens: torch.Tensor, state, prefix_kv) -> torch.Tensor:
        """Feed one token per row; returns the new logits (the state advances)."""
        self.counters["decode_steps"] += 1
        return self.fwd.step(tokens, state, prefix_kv)

    def _ahead(self, step: int, rows: int, state) -> bool:
        """Whether to queue step `step`'s forward before checking that some row still needs it: on a GPU, after a
        prefill of `QUEUE_AHEAD_ROWS` rows or more (step 0: the device is still running the prefill while the host
        launches the step) and where the step replays a captured graph (one launch)."""
        return self.device.startswith("cuda") and ((step == 0 and rows >= QUEUE_AHEAD_ROWS) or self.fwd.replays(state))

    def _next(self, tokens: torch.Tensor, state, prefix_kv, done: torch.Tensor, ahead: bool) -> Optional[torch.Tensor]:
        """The logits after feeding `tokens`, or None when every row is `done` (the step's one host synchronisation).
        With `ahead` the step is queued first (`_ahead`); the flag is copied to the host before it, so the check waits
        for the flag, not for the step, and a step queued for nothing is dropped (its answers are never read)."""
        finished = _HostFlag(done.all())
        if ahead:
            logits = self._step(tokens, state, prefix_kv)
            return None if finished else logits
        return None if finished else self._step(tokens, state, prefix_kv)

    def plan_rules(self, steps: int) -> LayoutRules:
        """The layout rules for a call whose buckets each run `steps` forwards after their prefill.

        On a GPU a forward costs a fixed ~20-30 ms of kernel launches whatever its rows (an H100, SmolLM2-135M
        shape), so an extra prefix group costs its prefix forward and every decoding step of its own buckets:
        the split cost scales with 1 + steps. Measured on a 1,000-member social tick: the write phase (40-token
        texts after ~700-token feeds) ran 15.2 s when its feeds were cut into many groups. A CPU's forward
        costs in proportion to its tokens, so its rule is unchanged (and its runs' layouts with it).
        """
        if not self.device.startswith("cuda") or steps <= 0:
            return self.rules
        return replace(self.rules, split_cost=self.split_cost * (1 + steps))

    def _batches(self, ids: Sequence[list[int]], steps: int = 0, room=None):
        """(bucket indices, (last logits, decoding state), prefix kv) for every bucket of the plan, each prefix
        computed once; `room(bucket)`: the tokens the bucket's rows may still take after their prompt.

        The groups come in tree order, so the prefixes computed so far that are still prefixes of the
        current group's rows are kept (shortest first, each with its KV); a group reuses the one of its
        length or extends the longest shorter one, and the others are dropped (no later group needs them).
        """
        kept: list[tuple[list[int], Any]] = []
        for shared, chain, buckets in layout(ids, self.plan_rules(steps)):
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
                yield bucket, self._prefill([ids[i] for i in bucket], shared, kv, room(bucket) if room else 0), kv

    # ----- choices ------------------------------------------------------------------------------
    @torch.inference_mode()
    def choose(self, prompts: Sequence[str] | Sequence[list[int]], options: Sequence[Sequence[str]], temperature: float,
               seeds: Sequence[int], tokens: Optional[list] = None) -> list[tuple[int, list[float]]]:
        """(picked option index, option scores) per prompt; scores are mean token log-likelihoods.

        The options of a prompt go in one row after it, each option attending to the prompt and
        to its own earlier tokens only (a tree-shaped mask), so the prompt is computed once. With
        `tokens` (a list as long as the prompts) each entry becomes the picked option's (token ids,
        each token's log-probability under the model).
        """
        ids = self.encode(prompts)
        option_ids = self.option_ids(options)
        out: list[tuple[int, list[float]]] = [(0, [])] * len(ids)
        width = [sum(len(o) for o in row) for row in option_ids]
        for bucket, (last, state), kv in self._batches(ids, steps=1, room=lambda b: max(width[i] for i in b)):
            toks = [option_ids[i] for i in bucket]
            scores, lp = self._option_scores(toks, last, state, kv)
            seed_t = on_device(torch.tensor([int(seeds[i]) for i in bucket]), self.device)
            k_ids = torch.arange(scores.shape[1], device=self.device).expand_as(scores)
            picks = seeded_pick(scores, temperature, seed_t, STREAM_CHOICE, 0, k_ids)
            picks_l, scores_l = picks.tolist(), scores.tolist()  # the bucket's one transfer to the host
            lp_l = lp.tolist() if tokens is not None else None
            for b, i in enumerate(bucket):
                out[i] = (picks_l[b], scores_l[b][:len(toks[b])])
                if lp_l is not None:
                    start = sum(len(o) for o in toks[b][:picks_l[b]])
                    ids = toks[b][picks_l[b]]
                    tokens[i] = (list(ids), lp_l[b][start:start + len(ids)])
        return out

    def score_choices(self, prompts: Sequence[str] | Sequence[list[int]], options: Sequence[Sequence[str]]) -> list[list[float]]:
        """Mean token log-likelihood of every option after its prompt."""
        return [s for _, s in self.choose(prompts, options, 0.0, [0] * len(prompts))]

    def _option_scores(self, toks, last, state, kv) -> tuple[torch.Tensor, torch.Tensor]:
        n, kmax = len(toks), max(len(row) for row in toks)
        width = max(sum(len(t) for t in row) for row in toks)
        # built as Python lists, one tensor each (per-row tensor writes cost ~80 ms at 1,000 rows x 4 options)
        ids_l, seg_l, off_l, counts_l, exists_l = [], [], [], [], []
        for row in toks:
            flat = [t for opt in row for t in opt]
            pad = width - len(flat)
            ids_l.append(flat + [self.pad_id] * pad)
            seg_l.append([k for k, opt in enumerate(row) for _ in opt] + [kmax] * pad)  # kmax: the padding's dummy segment
            off_l.append([j for opt in row for j in range(len(opt))] + [0] * pad)
            counts_l.append([len(opt) for opt in row] + [1] * (kmax - len(row)))
            exists_l.append([True] * len(row) + [False] * (kmax - len(row)))
        opt_ids, seg, off = torch.tensor(ids_l), torch.tensor(seg_l), torch.tensor(off_l)
        counts, exists = torch.tensor(counts_l, dtype=torch.float32), torch.tensor(exists_l)
        multi = bool((off > 0).any())  # decided on the host, before anything moves to the device
        opt_ids, seg, off = (on_device(t, self.device) for t in (opt_ids, seg, off))
        lp = last.gather(1, opt_ids) - torch.logsumexp(last, dim=-1, keepdim=True)  # each token as if first
        if multi:
            logits = self.fwd.option_logits(opt_ids, seg, off, kmax, state, kv)  # position j predicts token j + 1
            later = logits.gather(-1, opt_ids[:, 1:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)
            lp = torch.cat([lp[:, :1], torch.where(off[:, 1:] > 0, later, lp[:, 1:])], dim=1)
        sums = torch.zeros((n, kmax + 1), dtype=lp.dtype, device=self.device).scatter_add_(1, seg, lp)[:, :kmax]
        scores = sums / on_device(counts, self.device).to(lp.dtype)
        return scores.masked_fill(~on_device(exists, self.device), float("-inf")), lp

    # ----- numbers ------------------------------------------------------------------------------
    @torch.inference_mode()
    def decode_numbers(self, prompts: Sequence[str] | Sequence[list[int]], bounds: Sequence[tuple[int, int]], temperature: float,
                       seeds: Sequence[int], tokens: Optional[list] = None) -> list[tuple[int, int]]:
        """(value, tokens decoded) per prompt, each value an integer in its [lo, hi] (0 <= lo <= hi).

        With `tokens` (a list as long as the prompts) each entry becomes (token ids, log-probabilities): the
        digits, then the end-of-turn token when the row stopped on its own, each with its log-probability under
        the model (unconstrained, at temperature 1: what a trainer's forward pass recomputes)."""
        ids = self.encode(prompts)
        cap = 10**MAX_NUMBER_DIGITS - 1
        results: list[tuple[int, int]] = [(0, 0)] * len(ids)
        digits = [len(str(min(max(0, int(b[1])), cap))) for b in bounds]
        steps = max(digits, default=1)  # digits of the widest bound
        for bucket, (logits, dstate), kv in self._batches(ids, steps=steps, room=lambda b: max(digits[i] for i in b) + 1):
            lo_l = [min(max(0, int(bounds[i][0])), cap) for i in bucket]
            hi_l = [min(max(0, int(bounds[i][1])), cap) for i in bucket]
            lo, hi = on_device(torch.tensor(lo_l), self.device), on_device(torch.tensor(hi_l), self.device)
            seed_t = on_device(torch.tensor([int(seeds[i]) for i in bucket]), self.device)
            state = NumberState(lo, hi, [len(str(v)) for v in hi_l])
            cand_ids = self._cand_ids.expand(len(bucket), 11)
            trail: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (active, token fed or eos, its lp)
            for step in range(state.max_digits + 1):
                lse = torch.logsumexp(logits, dim=-1, keepdim=True)
                digit_lp = logits[:, self._digit_index] - lse
                stop_lp = torch.log1p(-digit_lp.exp().sum(-1).clamp(max=1 - 1e-7))  # every non-digit token
                allowed = torch.cat([state.digit_mask(), state.may_stop()[:, None]], dim=1)
                scores = torch.cat([digit_lp, stop_lp[:, None]], dim=1).masked_fill(~allowed, float("-inf"))
                pick = seeded_pick(scores, temperature, seed_t, STREAM_NUMBER, step, cand_ids)
                if tokens is not None:
                    tok = torch.where(pick < 10, self._digit_index[pick.clamp(max=9)], self._eos[0])
                    trail.append((~state.done, tok, (logits.gather(1, tok[:, None]) - lse).squeeze(1)))
                feed = state.advance(pick, self._digit_index, self.pad_id)
                if step == state.max_digits:
                    break
                # every row is done after max_digits - 1 steps (a digit or a stop each): never queue that one ahead
                ahead = step < state.max_digits - 1 and self._ahead(step, len(bucket), dstate)
                logits = self._next(feed, dstate, kv, state.done, ahead)
                if logits is None:
                    break
            values, counts = state.value.tolist(), (state.digits + state.stopped.long()).tolist()
            for b, i in enumerate(bucket):
                results[i] = (values[b], counts[b])
            if tokens is not None:
                _collect_tokens(trail, bucket, tokens)
        return results

    # ----- text ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, prompts: Sequence[str] | Sequence[list[int]], max_tokens: Sequence[int], temperature: float,
                 seeds: Sequence[int], tokens: Optional[list] = None) -> list[tuple[str, int]]:
        """(text, tokens generated) per prompt: top-k sampling (greedy at temperature 0).

        With `tokens` (a list as long as the prompts) each entry becomes (token ids, log-probabilities) of the
        completion: every token sampled, the end-of-turn token included when the row stopped on it, each with its
        log-probability under the model (at temperature 1, before top-k)."""
        ids = self.encode(prompts)
        results: list[tuple[str, int]] = [("", 0)] * len(ids)
        longest = max((int(m) for m in max_tokens), default=0)
        room = lambda b: max(int(max_tokens[i]) for i in b)  # noqa: E731
        for bucket, (logits, state), kv in self._batches(ids, steps=longest, room=room):
            n, steps = len(bucket), max(int(max_tokens[i]) for i in bucket)
            limit = on_device(torch.tensor([int(max_tokens[i]) for i in bucket]), self.device)
            seed_t = on_device(torch.tensor([int(seeds[i]) for i in bucket]), self.device)
            out = torch.full((n, max(steps, 1)), self.pad_id, dtype=torch.long, device=self.device)
            length = torch.zeros(n, dtype=torch.long, device=self.device)
            done = limit <= 0
            trail: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (active, token, its lp)
            for step in range(steps):
                if temperature <= 0:
                    tok = logits.argmax(dim=-1)
                else:
                    top_lp, top_ids = logits.topk(min(self.top_k, logits.shape[-1]), dim=-1)
                    tok = top_ids.gather(1, seeded_pick(top_lp, temperature, seed_t, STREAM_TEXT, step, top_ids)[:, None]).squeeze(1)
                if tokens is not None:
                    lp = (logits.gather(1, tok[:, None]) - torch.logsumexp(logits, dim=-1, keepdim=True)).squeeze(1)
                    trail.append((~done, tok, lp))
                eos = torch.isin(tok, self._eos)
                emit = ~done & ~eos
                out[:, step] = torch.where(emit, tok, self.pad_id)
                length += emit.long()
                done = done | eos | (length >= limit)
                if step == steps - 1:
                    break
                logits = self._next(torch.where(emit, tok, self.pad_id), state, kv, done, self._ahead(step, n, state))
                if logits is None:
                    break
            rows, lens = out.tolist(), length.tolist()
            texts = self.tokenizer.batch_decode([r[:k] for r, k in zip(rows, lens)], skip_special_tokens=True)
            for b, i in enumerate(bucket):
                results[i] = (texts[b].strip(), lens[b])
            if tokens is not None:
                _collect_tokens(trail, bucket, tokens)
        return results


def on_device(t: torch.Tensor, device: str) -> torch.Tensor:
    """A small host tensor on `device` without waiting for the device: an ordinary host-to-device copy synchronises
    the stream, so after a prefill's launch it would hold the host until the prefill ends (14 such waits in a
    1,000-request Number call on an H200). The copy is queued behind the work before it, which it never reads."""
    return t.to(device, non_blocking=True)


class _HostFlag:
    """A one-element bool tensor on its way to the host: on CUDA copied without blocking (page-locked) and marked by an
    event, so `bool()` waits for the copy only, not for the work queued after it."""

    def __init__(self, value: torch.Tensor) -> None:
        self.event = None
        if value.is_cuda:
            self.value = value.to("cpu", non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
        else:
            self.value = value

    def __bool__(self) -> bool:
        if self.event is not None:
            self.event.synchronize()
        return bool(self.value)


def _collect_tokens(trail: Sequence[tuple[Any, Any, Any]], bucket: Sequence[int], tokens: list) -> None:
    """Each row's (token ids, log-probabilities) from the per-step (active, token, lp) tensors: a row's tokens
    are those of the steps it was active in (one transfer to the host for the whole bucket)."""
    if not trail:
        for i in bucket:
            tokens[i] = ([], [])
        return
    active = torch.stack([a for a, _, _ in trail], 1).tolist()
    toks = torch.stack([t for _, t, _ in trail], 1).tolist()
    lps = torch.stack([lp.float() for _, _, lp in trail], 1).tolist()
    for b, i in enumerate(bucket):
        keep = [k for k, on in enumerate(active[b]) if on]
        tokens[i] = ([toks[b][k] for k in keep], [lps[b][k] for k in keep])


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


def release_lm(model: Optional[str]) -> int:
    """Forget the loaded copies of `model` (a path; None: the embedded one) that `shared_lm` holds, so their memory is
    freed once no backend holds them (a study that evaluates many models in one process); how many were held."""
    with _SHARED_LOCK:
        keys = [k for k in _SHARED if k[0] == model]
        for k in keys:
            del _SHARED[k]
    return len(keys)


def _quiet_gguf_progress() -> None:
    """Silence transformers' GGUF de-quantisation bar, which would clutter the run's own progress."""
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
        from tqdm.auto import tqdm

        gguf_utils.tqdm = functools.partial(tqdm, disable=True)
    except (ImportError, AttributeError):
        pass
