"""The embedded local LM as a LangChain chat model whose `batch` is one true batched call.

    from agents.llm.chat_model import LocalChatModel
    chat = LocalChatModel(max_tokens=32)
    chat.batch(["Hello!", "Name a fish."])   # one batched forward pass, not a thread per input
"""

from __future__ import annotations

from typing import Any, Optional

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from pydantic import PrivateAttr

_ROLES = {"system": "system", "human": "user", "ai": "assistant"}


class LocalChatModel(BaseChatModel):
    """SmolLM2 (or any local causal LM) behind LangChain's chat-model interface."""

    model: Optional[str] = None
    device: Optional[str] = None
    dtype: Optional[str] = None
    temperature: float = 0.7
    max_tokens: int = 64
    seed: int = 0
    _lm: Any = PrivateAttr(default=None)

    @property
    def _llm_type(self) -> str:
        return "societas-local"

    @property
    def lm(self) -> Any:
        if self._lm is None:
            from agents.llm.local.model import shared_lm  # torch: only when a model is needed

            self._lm = shared_lm(self.model, self.device, self.dtype)
        return self._lm

    def _prompt(self, messages: list[BaseMessage]) -> str:
        return self.lm.render([{"role": _ROLES.get(m.type, "user"), "content": str(m.content)} for m in messages])

    def _generate(self, messages: list[BaseMessage], stop: Optional[list[str]] = None,
                  run_manager: Optional[CallbackManagerForLLMRun] = None, **kwargs: Any) -> ChatResult:
        (text, n), = self.lm.generate([self._prompt(messages)], [self.max_tokens], self.temperature, [self.seed])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text, usage_metadata=_usage(self, messages, n)))])

    def batch(self, inputs: list[LanguageModelInput], config: RunnableConfig | list[RunnableConfig] | None = None,
              *, return_exceptions: bool = False, **kwargs: Any) -> list[BaseMessage]:
        """All inputs in one batched generation (left padding, length buckets)."""
        convos = [self._convert_input(i).to_messages() for i in inputs]
        prompts = [self._prompt(c) for c in convos]
        got = self.lm.generate(prompts, [self.max_tokens] * len(prompts), self.temperature, [self.seed + k for k in range(len(prompts))])
        return [AIMessage(content=text, usage_metadata=_usage(self, c, n)) for c, (text, n) in zip(convos, got)]


def _usage(model: LocalChatModel, messages: list[BaseMessage], n_out: int) -> dict[str, int]:
    n_in = len(model.lm.tokenizer.encode(model._prompt(messages), add_special_tokens=False))
    return {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
