"""The `llm` policy: prompts rendered from decision requests, an LLM that answers them in batches (the
embedded local model or any LangChain chat model), and the cache around it that makes runs replayable."""
