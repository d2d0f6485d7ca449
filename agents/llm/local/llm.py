"""The embedded (or any local) model as an `LLM`: choices scored, numbers decoded under constraint, text sampled.

The torch model (`agents.llm.local.model.LocalLM`) is loaded on the first answer, so importing this
module, or running from the cache, never imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

from agents.llm.base import Answer, Messages
from agents.llm.local.ids import EMBEDDED_ID
from agents.llm.parse import cut_reasoning, parse_answer
from agents.llm.prompts import reasoned
from sim.core.contracts import DecisionRequest
from sim.core.errors import ModelLoadError
from sim.core.spaces import Choice, Form, Number, SpaceError, Text

MAX_GRID_AS_CHOICE = 256
ANSWER_CUE = "Answer: "  # after a request's reasoning: the constrained answer follows it


class LocalLLM:
    """Runs a `LocalLM` (loaded lazily on first answer) for batches of requests."""

    def __init__(self, model: Optional[str] = None, device: Optional[str] = None, dtype: Optional[str] = None,
                 temperature: float = 0.7, max_batch: Optional[int] = None, lm: Any = None,
                 threads: Optional[int] = None, batch_tokens: Optional[int] = None) -> None:
        self._lm = lm
        self._args = dict(model=model, device=device, dtype=dtype, max_batch=max_batch, threads=threads, batch_tokens=batch_tokens)
        self.temperature = temperature
        self.sampling = local_sampling(temperature)
        self.model_id = model_id_for(model)

    @property
    def lm(self) -> Any:
        """The torch model, loaded (once per process and settings) on first use."""
        if self._lm is None:
            from agents.llm.local.model import shared_lm  # torch: only when a model is needed

            try:
                self._lm = shared_lm(**self._args)
            except Exception as exc:  # noqa: BLE001 - whatever transformers raises, the model is unusable
                raise ModelLoadError(f"cannot load model {self._args['model'] or 'embedded SmolLM2'}: "
                                     f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}") from exc
        return self._lm

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        # tokenized once here: the LM methods take the ids, and their lengths are the calls' tokens_in
        prompts = self.lm.encode(self.lm.render_all(messages))
        reasoned = self._reason(requests, prompts)
        out: list[Optional[Answer]] = [None] * len(requests)
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(self._kind(r), []).append(i)
        for kind, idx in groups.items():
            getattr(self, f"_{kind}")([requests[i] for i in idx], [prompts[i] for i in idx], idx, out)
        for i, (reasoning, n, prompt_len, lead) in reasoned.items():
            a = out[i]
            ids = lps = None
            if a.completion_ids is not None:  # the kept reasoning and its cue as tokens (not sampled as such: no lp)
                ids, lps = lead + a.completion_ids, [None] * len(lead) + list(a.logprobs or [])
            out[i] = Answer(a.value, raw=f"{reasoning}\nAnswer: {a.raw}", tokens_in=prompt_len,
                            tokens_out=n + a.tokens_out, attempts=a.attempts, error=a.error, completion_ids=ids, logprobs=lps)
        return out  # type: ignore[return-value]

    def _reason(self, requests: Sequence[DecisionRequest], prompts: list[list[int]]) -> dict[int, tuple[str, int, int, list[int]]]:
        """Reasoning first, for the requests that ask for it (`reason_tokens`): the reasoning is sampled as text
        (cut before the model's own "Answer:"), and the prompt extended with it and "Answer: ", after which the
        answer is decoded under its space's constraint as any other. {index: (reasoning, its tokens, prompt tokens,
        the token ids the prompt was extended with)}."""
        idx = [i for i, r in enumerate(requests) if reasoned(r)]
        if not idx:
            return {}
        got = self.lm.generate([prompts[i] for i in idx], [requests[i].reason_tokens for i in idx], self.temperature,
                               [requests[i].seed for i in idx])
        texts = [cut_reasoning(text) for text, _ in got]
        tails = self.lm.encode([f"{t}\n{ANSWER_CUE}" if t else ANSWER_CUE for t in texts])
        out = {}
        for i, text, (_, n), tail in zip(idx, texts, got, tails):
            out[i] = (text, n, len(prompts[i]), list(tail))
            prompts[i] = prompts[i] + tail
        return out

    @staticmethod
    def _kind(r: DecisionRequest) -> str:
        s = r.space
        if isinstance(s, Number):
            integral = float(s.lo).is_integer() and (s.step == 0 or float(s.step).is_integer())
            if s.lo >= 0 and integral:
                return "number"
            return "grid" if s.step and len(s.grid()) <= MAX_GRID_AS_CHOICE else "number"
        return {Choice: "choice", Text: "text", Form: "form"}[type(s)]

    def _choose(self, requests, prompts, idx, out, options: list[list[str]], values: list[list[Any]]) -> None:
        tokens: list = [None] * len(requests)
        picks = self.lm.choose(prompts, options, self.temperature, [r.seed for r in requests], tokens=tokens)
        option_ids = self.lm.option_ids([[opts[k]] for opts, (k, _) in zip(options, picks)])  # each distinct text once
        for r, p, i, opts, vals, (k, _), ids, (got, lps) in zip(requests, prompts, idx, options, values, picks, option_ids, tokens):
            tokens_out = len(ids[0]) if opts[k] else 0
            out[i] = Answer(vals[k], raw=opts[k], tokens_in=len(p), tokens_out=tokens_out, completion_ids=got, logprobs=lps)

    def _choice(self, requests, prompts, idx, out) -> None:
        options = [list(r.space.options) for r in requests]
        self._choose(requests, prompts, idx, out, options, options)

    def _grid(self, requests, prompts, idx, out) -> None:
        values = [r.space.grid() for r in requests]
        self._choose(requests, prompts, idx, out, [[f"{v:g}" for v in vs] for vs in values], values)

    def _number(self, requests, prompts, idx, out) -> None:
        bounds = [(max(0, math.ceil(r.space.lo)), max(0, math.floor(r.space.hi))) for r in requests]
        live = [k for k, (lo, hi) in enumerate(bounds) if lo <= hi]
        for k, (r, p, i) in enumerate(zip(requests, prompts, idx)):
            if bounds[k][0] > bounds[k][1]:  # no integer in the range: its only value, snapped, without the model
                out[i] = Answer(r.space.snap(r.space.lo), raw=f"{r.space.lo:g}", tokens_in=len(p), tokens_out=0)
        tokens: list = [None] * len(live)
        got = self.lm.decode_numbers([prompts[k] for k in live], [bounds[k] for k in live], self.temperature,
                                     [requests[k].seed for k in live], tokens=tokens) if live else []
        for k, (value, n), (ids, lps) in zip(live, got, tokens):
            r, p, i = requests[k], prompts[k], idx[k]
            out[i] = Answer(r.space.snap(value), raw=str(value), tokens_in=len(p), tokens_out=n, completion_ids=ids, logprobs=lps)

    def _text(self, requests, prompts, idx, out) -> None:
        tokens: list = [None] * len(requests)
        got = self.lm.generate(prompts, [r.space.max_tokens for r in requests], self.temperature, [r.seed for r in requests],
                               tokens=tokens)
        for r, p, i, (text, n), (ids, lps) in zip(requests, prompts, idx, got, tokens):
            err = None if text else "empty text"
            out[i] = Answer(text, raw=text, tokens_in=len(p), tokens_out=n, error=err, completion_ids=ids, logprobs=lps)

    def _form(self, requests, prompts, idx, out) -> None:
        tokens: list = [None] * len(requests)
        got = self.lm.generate(prompts, [128] * len(requests), self.temperature, [r.seed for r in requests], tokens=tokens)
        for r, p, i, (text, n), (ids, lps) in zip(requests, prompts, idx, got, tokens):
            try:
                out[i] = Answer(parse_answer(text, r.space), raw=text, tokens_in=len(p), tokens_out=n,
                                completion_ids=ids, logprobs=lps)
            except SpaceError as exc:
                out[i] = Answer(None, raw=text, tokens_in=len(p), tokens_out=n, error=f"unparseable: {exc}",
                                completion_ids=ids, logprobs=lps)


def local_sampling(temperature: float) -> dict[str, Any]:
    """The sampling parameters that enter the cache key."""
    return {"temperature": temperature, "top_k": 50, "method": "score-choice/constrained-number/topk-text",
            "noise": "gumbel-hash-v1"}


def model_id_for(model: Optional[str]) -> str:
    """The id used in cache keys: the embedded model's name, or the given path."""
    if model is None:
        return EMBEDDED_ID
    return f"local:{model}"
