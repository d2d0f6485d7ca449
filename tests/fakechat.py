"""A deterministic LangChain chat model for tests that need a real `--llm` class in a subprocess.

Answers a digit derived from the prompt's hash (so a replay can be checked), after `delay`
seconds; raises ConnectionError (a server that is down) while the file `down_file` exists.
"""

from __future__ import annotations

import hashlib
import os
import time

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class HashChat(BaseChatModel):
    """Answers `hash(prompt) % 8` as text with usage (words as tokens); `delay` s per call; down while `down_file` exists."""

    delay: float = 0.0
    down_file: str = ""

    @property
    def _llm_type(self) -> str:
        return "hash"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        if self.down_file and os.path.exists(self.down_file):
            raise ConnectionError("connection refused")
        time.sleep(self.delay)
        text = "\n".join(str(m.content) for m in messages)
        digit = hashlib.blake2b(text.encode(), digest_size=4).digest()[0] % 8
        words = len(text.split())  # usage as a served model reports it: prompt and answer tokens (here: words)
        usage = {"input_tokens": words, "output_tokens": 1, "total_tokens": words + 1}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=str(digit), usage_metadata=usage))])
