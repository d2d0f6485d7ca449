"""Any LangChain chat model as an `LLM`: batched with `.batch(max_concurrency=k)`, parsed, retried.

- each call runs under a per-call timeout and a process-wide concurrency limit per model;
- timeouts and connection errors are retried with exponential backoff;
- the decision's space goes to the server as its structured-output constraint (`llm.structured`:
  a JSON schema, vLLM guided fields or a llama.cpp grammar, see agents/llm/structured.py) and
  every call's `max_tokens` is bounded by what the space needs;
- answers are parsed strictly (`parse_strict`: the answer is the value, or a marked
  `ANSWER: value`); a number picked out of a ramble is a parse failure;
- an answer that cannot be parsed is retried with a corrective message (bounded), then the
  request falls back to its default (recorded by the backend);
- when every call of a batch fails with an error (the server is unreachable), it raises
  BackendUnavailable and the run stops, marked failed with the reason;
- where the server returns the answer's log-probabilities (OpenAI-compatible `logprobs`: ask for them with
  `--llm-arg logprobs=true` on ChatOpenAI), each answer keeps them, and its token ids where the server gives
  tokens as ids (vLLM's `return_tokens_as_token_ids`: `token_id:N`), for trajectories (`served_logprobs`).

A served model gets the whole tick at once, so its server's continuous batching sees it: the batch's calls are
all in flight together, up to `max_concurrency` (set it to the server's parallel slots or more; vLLM and SGLang
batch hundreds). They go out sorted by their prompt text, so calls that share a beginning (the system message, the
situation every agent reads) are sent together, and the first call of the batch is sent alone first (`prime`):
the server computes the shared prefix once and the rest reuse it from its prefix cache (vLLM's automatic prefix
caching, SGLang's radix cache, llama.cpp's slot cache: `cache_prompt`, asked for in llama.cpp mode). Answers do
not depend on the order: each call carries its own seed.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Optional

from agents.llm.base import Answer, Messages
from agents.llm.parse import parse_strict, reasoned_answer
from agents.llm.prompts import reasoned, retry_message
from agents.llm.structured import call_kwargs, resolve_mode
from sim.contracts.backend import BackendUnavailable
from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from sim.core.refs import check_permitted
from sim.core.spaces import SpaceError

_LIMITS: dict[str, threading.BoundedSemaphore] = {}
_LIMITS_LOCK = threading.Lock()


def _limit(model_id: str, size: int) -> threading.BoundedSemaphore:
    with _LIMITS_LOCK:
        return _LIMITS.setdefault(model_id, threading.BoundedSemaphore(size))


def load_chat_model(path: str, args: dict[str, Any]) -> Any:
    """Instantiate `module:Class` with `args`; UsageError if it cannot be imported or built."""
    from langchain_core.language_models import BaseChatModel

    if ":" not in path:
        raise UsageError(f"--llm expects module:Class, got {path!r}")
    check_permitted(path, "chat model class")
    module_name, cls_name = path.split(":", 1)
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot import chat model {path!r}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, BaseChatModel)):
        raise UsageError(f"{path!r} is not a LangChain BaseChatModel")
    try:
        return cls(**args)
    except Exception as exc:  # noqa: BLE001 - any constructor error is the user's input
        raise UsageError(f"cannot build {path!r} with {args}: {exc}") from None


def _to_lc(messages: Sequence[dict[str, str]]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


class ChatLLM:
    """Wraps a `BaseChatModel` so a whole batch goes out through one `.batch` call per attempt."""

    transient = (TimeoutError, FutureTimeout, ConnectionError, OSError)

    def __init__(self, chat_model: Any, model_id: str, *, max_concurrency: int = 8, timeout_s: float = 60.0,
                 max_retries: int = 2, backoff_s: float = 0.5, sampling: dict[str, Any] | None = None,
                 structured: str = "auto", prime: bool = True) -> None:
        self.chat_model = chat_model
        self.structured = resolve_mode(structured, chat_model)
        self.model_id = model_id
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.sampling = dict(sampling or {})
        self.prime = prime  # the batch's first call alone first: the server caches the prefix the others share
        self._limit = _limit(model_id, max_concurrency)
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="societas-llm")

    def _invoke(self, call: tuple[list[Any], dict[str, Any]]) -> Any:
        messages, kwargs = call
        with self._limit:
            future = self._pool.submit(self.chat_model.invoke, messages, **kwargs)
            try:
                return future.result(timeout=self.timeout_s)
            except FutureTimeout:
                future.cancel()
                raise TimeoutError(f"no answer within {self.timeout_s:g}s") from None

    def _batch(self, conversations: list[tuple[list[Any], dict[str, Any]]]) -> list[Any]:
        """Every call of a batch, all in flight at once (up to `max_concurrency`); with `prime`, the first alone first."""
        from langchain_core.runnables import RunnableLambda

        runnable = RunnableLambda(self._invoke)
        config = {"max_concurrency": self.max_concurrency}
        if self.prime and len(conversations) > 2:
            first = runnable.batch(conversations[:1], config=config, return_exceptions=True)
            return first + runnable.batch(conversations[1:], config=config, return_exceptions=True)
        return runnable.batch(conversations, config=config, return_exceptions=True)

    def _kwargs(self, request: DecisionRequest) -> dict[str, Any]:
        """The call's keyword arguments; a request that reasons first is not constrained (the reasoning is free
        text) and may use its reasoning budget beyond the answer's own bound."""
        if not reasoned(request):
            return call_kwargs(request.space, self.structured, self.chat_model, request.seed)
        kwargs = call_kwargs(request.space, "none", self.chat_model, request.seed)
        own = getattr(self.chat_model, "max_tokens", None)  # the user's own cap stays a cap
        for where in (kwargs, kwargs.get("extra_body") or {}):  # (llama.cpp reads the body's max_tokens only)
            if "max_tokens" in where:
                bound = where["max_tokens"] + request.reason_tokens
                where["max_tokens"] = min(bound, own) if isinstance(own, int) and own > 0 else bound
        return kwargs

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        convo = [list(m) for m in messages]
        kwargs = [self._kwargs(r) for r in requests]
        out: list[Answer | None] = [None] * len(requests)
        attempts = [0] * len(requests)
        errors: dict[int, str] = {}
        crashed: set[int] = set()
        asked_bare: set[int] = set()  # requests whose conversation now ends with a retry asking for the bare answer
        # sorted by prompt text: calls that share their beginning go out together (the server's prefix cache)
        todo = sorted(range(len(requests)), key=lambda i: [m["content"] for m in convo[i]])
        for attempt in range(self.max_retries + 1):
            if not todo:
                break
            if attempt:
                time.sleep(min(self.backoff_s * 2 ** (attempt - 1), 10.0) if crashed & set(todo) else 0.0)
            results = self._batch([(_to_lc(convo[i]), kwargs[i]) for i in todo])
            again = []
            for i, res in zip(todo, results):
                attempts[i] += 1
                if isinstance(res, BaseException):
                    errors[i] = f"{type(res).__name__}: {res}"
                    crashed.add(i)
                    again.append(i)
                    continue
                crashed.discard(i)
                text = str(getattr(res, "content", res))
                usage = getattr(res, "usage_metadata", None) or {}
                try:  # a reasoned answer is read after its "Answer:", until a retry has asked for the bare value
                    value = (reasoned_answer(text, requests[i].space) if reasoned(requests[i]) and i not in asked_bare
                             else parse_strict(text, requests[i].space))
                except SpaceError as exc:
                    errors[i] = f"unparseable: {exc}"
                    convo[i] = convo[i] + [{"role": "assistant", "content": text}, retry_message(str(exc), requests[i])]
                    asked_bare.add(i)
                    out[i] = Answer(None, raw=text, tokens_in=usage.get("input_tokens", 0),
                                    tokens_out=usage.get("output_tokens", 0), attempts=attempts[i], error=errors[i])
                    again.append(i)
                    continue
                # (an answer to a corrected conversation is not the answer to the prompt the trajectory holds)
                ids, logprobs = served_logprobs(res) if len(convo[i]) == len(messages[i]) else (None, None)
                out[i] = Answer(value, raw=text, tokens_in=usage.get("input_tokens", 0),
                                tokens_out=usage.get("output_tokens", 0), attempts=attempts[i],
                                completion_ids=ids, logprobs=logprobs)
            todo = again
        if crashed and len(crashed) == len(requests):
            raise BackendUnavailable(f"{self.model_id} unreachable: every call of the batch failed ({errors[min(crashed)]})")
        for i in range(len(requests)):
            if out[i] is None or i in crashed:
                out[i] = Answer(None, raw="", attempts=attempts[i], error=errors.get(i, "no answer"))
            elif out[i].error is not None:
                out[i].attempts = attempts[i]
        return out  # type: ignore[return-value]


def served_logprobs(message: Any) -> tuple[Optional[list[int]], Optional[list[Optional[float]]]]:
    """(token ids, log-probabilities) of a served answer, from its OpenAI-compatible `logprobs`
    (`response_metadata["logprobs"]["content"]`: one `{token, logprob}` per token), or (None, None) where the server
    returned none. The ids are given only where every token is an id (`token_id:N`, vLLM's
    `return_tokens_as_token_ids`): a token's text alone does not say which id the model sampled."""
    meta = getattr(message, "response_metadata", None) or {}
    content = (meta.get("logprobs") or {}).get("content") if isinstance(meta.get("logprobs"), dict) else None
    if not isinstance(content, list) or not content:
        return None, None
    logprobs: list[Optional[float]] = []
    ids: Optional[list[int]] = []
    for entry in content:
        lp = entry.get("logprob") if isinstance(entry, dict) else None
        logprobs.append(float(lp) if isinstance(lp, (int, float)) and not isinstance(lp, bool) else None)
        token = entry.get("token") if isinstance(entry, dict) else None
        if ids is not None and isinstance(token, str) and token.startswith("token_id:") and token[9:].isdigit():
            ids.append(int(token[9:]))
        else:
            ids = None
    return ids, logprobs
