"""Build the `llm` backend a RunSpec asks for: embedded/local model or a LangChain chat model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.llm.backend import LLMBackend
from sim.contracts import RunSpec
from sim.errors import UsageError


def check_model_path(model: str) -> None:
    """Refuse, before anything is written, a local model that cannot be loaded: checked from its files.

    A directory must hold a transformers `config.json` and weights; a `.gguf` file must carry the
    GGUF magic number and be large enough to hold a model.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UsageError(f"bad value for '--model': {model!r} is a folder without a config.json (not a transformers model)")
        if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")) and not any(path.glob("*.gguf")):
            raise UsageError(f"bad value for '--model': {model!r} holds no weights (*.safetensors, *.bin or *.gguf)")
        return
    if path.is_file() and path.suffix == ".gguf":
        try:
            with path.open("rb") as handle:
                magic = handle.read(4)
        except OSError as exc:
            raise UsageError(f"bad value for '--model': cannot read {model!r}: {exc.strerror}") from None
        if magic != b"GGUF" or path.stat().st_size < 1024:
            raise UsageError(f"bad value for '--model': {model!r} is not a GGUF model file (corrupt or truncated)")
        return
    raise UsageError(f"bad value for '--model': {model!r} is neither a model directory nor a .gguf file")


def make_llm_backend(spec: RunSpec, store: Any, *, cache_only: bool = False) -> LLMBackend:
    """The LLM backend for `spec.llm`; models load lazily (never, if the cache answers everything)."""
    from agents.llm.prompts import get_template

    llm = spec.llm
    prompt = get_template(llm.template, spec.contract)  # the built-in one is that of the run's contract
    if llm.provider == "local" and llm.model is not None:
        check_model_path(llm.model)
    if llm.provider == "langchain" and not llm.cls:
        raise UsageError("llm.provider is 'langchain' but no chat model class is given (--llm module:Class)")
    if llm.provider == "local":
        from agents.llm.local_engine import LocalEngine, local_sampling, model_id_for

        return LLMBackend(model_id_for(llm.model), local_sampling(llm.temperature), store=store, cache_only=cache_only, prompt=prompt,
                          engine_factory=lambda: LocalEngine(llm.model, llm.device, llm.dtype, llm.temperature))
    from agents.llm.langchain_engine import LangChainEngine, load_chat_model

    model_id = f"langchain:{llm.cls}:" + ",".join(f"{k}={v}" for k, v in sorted(llm.args.items()) if "key" not in k.lower())
    # the constraint changes the answers, so it is part of every cache key
    sampling = {"temperature": llm.temperature, "structured": llm.structured, "parse": "strict"}

    def build() -> LangChainEngine:
        chat = load_chat_model(llm.cls or "", dict(llm.args))
        return LangChainEngine(chat, model_id, max_concurrency=llm.max_concurrency, timeout_s=llm.timeout_s,
                               max_retries=llm.max_retries, sampling=sampling, structured=llm.structured)

    if cache_only:
        return LLMBackend(model_id, sampling, engine_factory=build, store=store, cache_only=True, prompt=prompt)
    return LLMBackend(model_id, sampling, engine=build(), store=store, prompt=prompt)


def preflight(spec: RunSpec) -> None:
    """Check the LLM settings of `spec` before anything is written: the model file, the device, the chat class."""
    llm = spec.llm
    if llm.provider == "local":
        if llm.model is not None:
            check_model_path(llm.model)
        if llm.device not in (None, "cpu"):
            from agents.llm.local import device_problem

            problem = device_problem(llm.device)
            if problem:
                raise UsageError(f"bad value for 'llm.device': {llm.device!r}: {problem}")
        return
    if not llm.cls:
        raise UsageError("llm.provider is 'langchain' but no chat model class is given (--llm module:Class)")
    from agents.llm.langchain_engine import load_chat_model

    load_chat_model(llm.cls, dict(llm.args))
