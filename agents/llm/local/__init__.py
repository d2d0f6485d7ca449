"""The embedded local model: SmolLM2 (or any local transformers model) answering whole batches.

`llm.LocalLLM` is the `LLM` the `llm` backend uses; it loads `model.LocalLM` (torch) on first use.
The torch modules (model, device, attention, sampling, numbers) are imported only when a model is
needed; `ids` and `layout` are plain Python.
"""
