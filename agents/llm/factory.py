"""Build the `llm` backend a RunSpec asks for (embedded/local model or a LangChain chat model), and check its
settings before anything is stored."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from agents.llm.archetypes import ArchetypeBackend, ArchetypeKey, ScoredLLM, scored_sampling
from agents.llm.backend import LLMBackend
from agents.llm.base import LLM
from agents.llm.cache import CachedBackend
from agents.llm.chat import ChatLLM, load_chat_model
from agents.llm.endpoints import EndpointsLLM
from agents.llm.local.llm import LocalLLM, local_sampling, model_id_for
from agents.llm.pool import pool_llm_factory
from agents.llm.prompts import get_template
from sim.contracts.backend import Backend, CallCache, ReplayMode
from sim.core.errors import UsageError
from sim.core.spec import LLMSpec, RunSpec


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


#: what enters the cache key of a decision made outside (the episode's id is in the model id)
ENV_SAMPLING = {"policy": "external"}


def make_llm_backend(spec: RunSpec, cache: Optional[CallCache] = None, *, replay: Optional[ReplayMode] = None,
                     llm_factory: Optional[Callable[[], LLM]] = None, llm: Optional[LLMSpec] = None,
                     name: str = "llm", archetype: Optional[ArchetypeKey] = None) -> Backend:
    """The backend `name` for `llm` (default: the run's `spec.llm`), behind `cache` (the store) when one is given.

    The model loads lazily (never, if the cache answers everything). A LangChain chat model is built
    at once unless `replay` is given, so that a class that cannot be imported or built is bad input,
    found before the run stores anything. `llm_factory` supplies the LLM instead (e.g. a Ray sweep's
    shared model actor). A population group with a model of its own gets a backend `llm:K` of its own.
    With `llm.archetypes` and the scenario's bucket key `archetype`, the backend answers one request per bucket
    (agents.llm.archetypes): Choice and Number buckets by a distribution where the model is local and ours to load.
    """
    llm = llm if llm is not None else spec.llm
    prompt = get_template(llm.template, spec.profile)  # the built-in one is that of the run's decision profile
    if llm.provider == "local" and llm.model is not None:
        check_model_path(llm.model)
    if llm.provider == "langchain" and not llm.cls:
        raise UsageError("llm.provider is 'langchain' but no chat model class is given (--llm module:Class)")
    if llm.provider == "env":  # decisions made outside (sim.env): stored as calls, so the run replays from the cache
        model_id = f"env:{llm.model or ''}"

        def outside() -> LLM:
            raise UsageError(f"the LLM decisions of this run were made by a policy outside, through the environment "
                             f"({model_id}); they can be replayed from the cache, not made again here")

        inner = LLMBackend(model_id, ENV_SAMPLING, llm_factory=llm_factory or outside, prompt=prompt, name=name)
        # a live episode (its LLM given) has a new id: none of its calls can be in the cache, so none is looked up;
        # a resumed one (its LLM and a replay given) replays its committed ticks from the cache, then asks its LLM
        lookup = llm_factory is None or replay is not None
        return CachedBackend(inner, cache, replay, lookup=lookup) if cache is not None else inner
    if llm.provider == "local":
        model_id, sampling = model_id_for(llm.model), local_sampling(llm.temperature)
        factory = llm_factory or (pool_llm_factory(llm) if llm.replicas else  # (a given factory first)
                                  _once(lambda: LocalLLM(llm.model, llm.device, llm.dtype, llm.temperature,
                                                         threads=llm.threads, batch_tokens=llm.batch_tokens)))
        backend = LLMBackend(model_id, sampling, llm_factory=factory, prompt=prompt, name=name)
        if llm.archetypes and archetype is not None:
            scored = None
            # our own LocalLLM: a shared actor's proxy or a pool (llm.replicas) answers decisions, not distributions
            if llm_factory is None and not llm.replicas:
                scored = LLMBackend(model_id, scored_sampling(sampling), llm_factory=lambda: ScoredLLM(factory()),
                                    prompt=prompt, name=name)
                scored = scored if cache is None else CachedBackend(scored, cache, replay)
            return ArchetypeBackend(backend if cache is None else CachedBackend(backend, cache, replay), scored, archetype)
    else:
        model_id = chat_model_id(llm, args_keyed=spec.profile.served_args_keyed)
        # the constraint changes the answers, so it is part of every cache key
        sampling = {"temperature": llm.temperature, "structured": llm.structured, "parse": "strict"}

        def chat(endpoint: Optional[str], limit_id: str) -> ChatLLM:
            return ChatLLM(load_chat_model(*chat_class(llm, endpoint)), limit_id, max_concurrency=llm.max_concurrency,
                           timeout_s=llm.timeout_s, max_retries=llm.max_retries, sampling=sampling,
                           structured=llm.structured)

        def build() -> LLM:
            if llm.provider == "served" and llm.endpoints:  # each server its own calls in flight (its own limit)
                return EndpointsLLM([chat(url, f"served:{llm.model}@{url}") for url in served_urls(llm)])
            return chat(None, model_id)

        factory = llm_factory or build
        backend = LLMBackend(model_id, sampling, llm=None if replay is not None else factory(), llm_factory=factory,
                             prompt=prompt, name=name, served=True)
    backend = backend if cache is None else CachedBackend(backend, cache, replay)
    return ArchetypeBackend(backend, None, archetype) if llm.archetypes and archetype is not None else backend


def _once(make: Callable[[], LLM]) -> Callable[[], LLM]:
    """`make`, called at most once: the LLM a run's decision and distribution backends share."""
    made: list[LLM] = []

    def get() -> LLM:
        if not made:
            made.append(make())
        return made[0]

    return get


#: ChatOpenAI's arguments a served model takes from elsewhere, and where: its server (in llm.args it would send every
#: server's calls to one URL), its model and temperature (the cache key holds llm.model and llm.temperature: in
#: llm.args they would be asked of the server while the key named others, so one's answers would serve the other) and
#: its API key (from the environment: llm.args is stored with the run)
SPEC_ARGS = {"base_url": ("server", "llm.endpoint (or llm.endpoints)"),
             "openai_api_base": ("server", "llm.endpoint (or llm.endpoints)"),
             "model": ("model", "llm.model"), "model_name": ("model", "llm.model"),
             "temperature": ("temperature", "llm.temperature"),
             "api_key": ("API key", "$OPENAI_API_KEY (never stored)"),
             "openai_api_key": ("API key", "$OPENAI_API_KEY (never stored)")}
#: the chat class a `served` LLM is asked through: any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama)
SERVED_CLASS = "langchain_openai:ChatOpenAI"


def served_urls(llm: LLMSpec) -> list[str]:
    """The servers of a served LLM: `llm.endpoints`, or the one `llm.endpoint`. UsageError when neither or both are
    given, or either for another provider."""
    if llm.provider != "served":
        if llm.endpoints:
            raise UsageError(f"llm.endpoints is for a served model (llm.provider 'served'), not {llm.provider!r}")
        return []
    if llm.endpoint and llm.endpoints:
        raise UsageError("give llm.endpoint (one server) or llm.endpoints (several), not both")
    if not llm.endpoint and not llm.endpoints:
        raise UsageError("llm.provider is 'served' but no llm.endpoint is given (the server's base URL, e.g. "
                         "http://127.0.0.1:8000/v1; several servers: llm.endpoints)")
    named = [k for k in SPEC_ARGS if k in llm.args]
    if named:
        what, where = SPEC_ARGS[named[0]]
        raise UsageError(f"llm.args.{named[0]}: a served model's {what} is given by {where}, not in llm.args")
    return list(llm.endpoints or [llm.endpoint])


def chat_class(llm: LLMSpec, endpoint: Optional[str] = None) -> tuple[str, dict[str, Any]]:
    """The LangChain chat class (`module:Class`) and its arguments for a `langchain` or `served` LLM (a served one at
    `endpoint`, default its first server). A served one's API key comes from $OPENAI_API_KEY (a local server needs
    none): never from the spec, which is stored."""
    urls = served_urls(llm)
    if llm.provider != "served":
        return llm.cls or "", dict(llm.args)
    if not llm.model:
        raise UsageError("llm.provider is 'served' but no llm.model is given (the served model's name, as the server's "
                         "/v1/models lists it)")
    args = {"base_url": endpoint or urls[0], "model": llm.model, "api_key": os.environ.get("OPENAI_API_KEY") or "none",
            "temperature": llm.temperature, "max_retries": 0, "timeout": llm.timeout_s, **dict(llm.args)}
    return SERVED_CLASS, args


def chat_model_id(llm: LLMSpec, *, args_keyed: bool = True) -> str:
    """The model id of a chat model (part of every cache key): its class and arguments, keys left out; a served model
    is its name at its endpoint (the first of `endpoints`: the number of servers is not in it, so a run made on
    several replays on the first alone, and one made on it replays on several), then its `llm.args` where it has some
    and `args_keyed` (decision contract 10 on: `served_args_keyed`; before, a served model's key left them out)."""
    args = ",".join(f"{k}={v}" for k, v in sorted(llm.args.items()) if "key" not in k.lower())
    if llm.provider == "served":
        served = f"served:{llm.model}@{llm.endpoint or (llm.endpoints or [None])[0]}"
        return f"{served}:{args}" if args and args_keyed else served
    return f"langchain:{llm.cls}:" + args


def preflight(spec: RunSpec | LLMSpec) -> None:
    """Check an LLM's settings (a spec's `llm`, or an LLMSpec) before anything is written: the model file, the device,
    the chat class."""
    llm = spec.llm if isinstance(spec, RunSpec) else spec
    if llm.replicas and llm.provider != "local":
        raise UsageError(f"llm.replicas is for the local model (llm.provider 'local'), not {llm.provider!r}: a served "
                         "model's servers are listed in llm.endpoints, a tick's batch split across them")
    served_urls(llm)
    if llm.provider == "env":
        return
    if llm.provider == "local":
        if llm.model is not None:
            check_model_path(llm.model)
        if llm.device not in (None, "cpu") and not llm.replicas:  # replicas run where the cluster puts them
            from agents.llm.local.device import device_problem  # torch: only when a device must be checked

            problem = device_problem(llm.device)
            if problem:
                raise UsageError(f"bad value for 'llm.device': {llm.device!r}: {problem}")
        return
    if llm.provider == "langchain" and not llm.cls:
        raise UsageError("llm.provider is 'langchain' but no chat model class is given (--llm module:Class)")
    for url in served_urls(llm) or [None]:
        load_chat_model(*chat_class(llm, url))
