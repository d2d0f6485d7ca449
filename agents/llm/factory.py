"""Build the `llm` backend a RunSpec asks for: embedded/local model or a LangChain chat model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.llm.backend import LLMBackend
from sim.contracts import RunSpec
from sim.errors import UsageError


def make_llm_backend(spec: RunSpec, store: Any, *, cache_only: bool = False) -> LLMBackend:
    """The LLM backend for `spec.llm`; models load lazily (never, if the cache answers everything)."""
    llm = spec.llm
    if llm.provider == "local" and llm.model is not None:
        path = Path(llm.model).expanduser()
        if not (path.is_dir() or (path.is_file() and path.suffix == ".gguf")):
            raise UsageError(f"bad value for '--model': {llm.model!r} is neither a model directory nor a .gguf file")
    if llm.provider == "langchain" and not llm.cls:
        raise UsageError("llm.provider is 'langchain' but no chat model class is given (--llm module:Class)")
    if llm.provider == "local":
        from agents.llm.local_engine import LocalEngine, local_sampling, model_id_for

        return LLMBackend(model_id_for(llm.model), local_sampling(llm.temperature), store=store, cache_only=cache_only,
                          engine_factory=lambda: LocalEngine(llm.model, llm.device, llm.dtype, llm.temperature))
    from agents.llm.langchain_engine import LangChainEngine, load_chat_model

    model_id = f"langchain:{llm.cls}:" + ",".join(f"{k}={v}" for k, v in sorted(llm.args.items()) if "key" not in k.lower())
    sampling = {"temperature": llm.temperature}

    def build() -> LangChainEngine:
        chat = load_chat_model(llm.cls or "", dict(llm.args))
        return LangChainEngine(chat, model_id, max_concurrency=llm.max_concurrency, timeout_s=llm.timeout_s,
                               max_retries=llm.max_retries, sampling=sampling)

    if cache_only:
        return LLMBackend(model_id, sampling, engine_factory=build, store=store, cache_only=True)
    return LLMBackend(model_id, sampling, engine=build(), store=store)
