"""The decision backends: scripted strategies (`scripted`), LLMs (`llm/`: prompts, the embedded local model,
LangChain chat models, the cache that makes runs replayable) and programs an LLM writes, run sandboxed
(`sandbox/`). Each implements `sim.contracts.backend.Backend`; the tick never imports them (the runner builds
the backends a run needs)."""
