"""A scenario as a TRL environment: `GRPOTrainer(environment_factory=...)`, the world owning the reward.

TRL's GRPOTrainer (trl 1.16, `environment_factory`) makes one environment per rollout, calls its
`reset(**row)` before generation (a returned string is appended to the prompt's last user message),
exposes its other public methods as tools the model calls while it generates, and, when the
environment defines `get_reward()`, scores the finished rollout by it. `environment_factory(scenario,
...)` returns such a factory over `FocalGame`:

- `reset(seed=...)` starts an episode (a stored run) from the row's `seed`, so the G completions of one
  prompt play the same world (GRPO compares them), and returns the first decision's question;
- the one tool, `act(answer)`, answers the pending decision (parsed as the platform parses an LLM's
  text), runs the world to the agent's next decision and returns what it earned and the next question;
- `get_reward()` is the agent's return over the decisions it answered (the reward layer's, in the
  scenario's reward mode); decisions the model left unanswered are then played with their defaults so the
  stored run is whole, and earn nothing.

`dataset(scenario, seeds, ...)` makes the prompts: one row per episode seed, the scenario's system text
and an instruction to answer through the tool. TRL renders tools only through a chat template that can
show tool calls: for the embedded SmolLM2, whose template cannot, `tool_chat_template()` is TRL's Qwen2.5
template (the same ChatML tokens), which TRL also knows how to parse tool calls from.

TRL is imported only by the functions that need it, so societas works without it (`pip install
societas[rl]`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Optional

from sim.core.text import one_line
from sim.store.store import Store
from societas.adapters.focal import FocalGame

#: appended to the scenario's system text: how the model answers through the tool
INSTRUCTION = ("Answer each question by calling the tool `act` with your answer as its argument; the tool tells you "
               "what happened and asks the next question, until the episode ends.")


class SocietasToolEnv:
    """One rollout's episode, as TRL's `environment_factory` wants it: `reset`, the tool `act`, `get_reward`."""

    def __init__(self, game: FocalGame, ticks: Optional[int] = None) -> None:
        self._game = game
        self._ticks = ticks

    def reset(self, seed: int = 0, **row: Any) -> Optional[str]:
        """Start the row's episode; the first question, appended to the prompt (None when the agent has none)."""
        self._game.reset(seed=int(seed), ticks=self._ticks)  # an unscored episode before it ends, stored as failed
        return self._game.question or None

    def act(self, answer: str) -> str:
        """Answer the question you were asked last.

        Args:
            answer: Your answer, in the form the question asks for (for example a number).

        Returns:
            What your answer earned and the next question, or the end of the episode.
        """
        if self._game.done:
            return f"The episode is over; you earned {self._game.total:g} in all. Stop here."
        turn = self._game.act(answer)
        said = f"Your answer was not understood ({turn.error}); the default was used. " if turn.error else ""
        if turn.done:
            return f"{said}You earned {turn.reward:g}. The episode is over; you earned {self._game.total:g} in all."
        return f"{said}You earned {turn.reward:g}.\n{self._game.question}"

    def get_reward(self) -> float:
        """The agent's return over the decisions it answered; the rest of the episode is played with defaults."""
        total = self._game.total
        self._game.finish()
        return total


def environment_factory(scenario: str = "commons", *, db: Optional[str | Store] = None, ticks: Optional[int] = None,
                        name: str = "trl", **fields: Any) -> Callable[[], SocietasToolEnv]:
    """A factory of `SocietasToolEnv` for `GRPOTrainer(environment_factory=...)`: `scenario` built with `fields` as
    `societas.env.parallel_env` takes them (one focal agent), episodes stored in `db`, `ticks` a shorter horizon.
    The configuration is checked now (one env is built), so bad input fails before training starts."""
    FocalGame(scenario, db=db, name=name, **fields).close()
    return lambda: SocietasToolEnv(FocalGame(scenario, db=db, name=name, **fields), ticks)


def dataset(scenario: str, seeds: Iterable[int], *, db: Optional[str | Store] = None, name: str = "trl",
            **fields: Any) -> Any:
    """A `datasets.Dataset` of GRPO prompts, one row per episode seed: `prompt` (the scenario's system text with
    `INSTRUCTION`, and an empty user message the first question is appended to by `reset`) and `seed`."""
    from datasets import Dataset

    game = FocalGame(scenario, db=db, name=name, **fields)
    try:  # the system text is the scenario's, the same in every episode: read from a one-tick episode
        game.reset(seed=0, ticks=1)
        system = f"{game.system} {INSTRUCTION}".strip()
        game.finish()
    finally:
        game.close()
    rows = [{"prompt": [{"role": "system", "content": system}, {"role": "user", "content": ""}], "seed": int(seed)}
            for seed in seeds]
    return Dataset.from_list(rows)


def plain_answers_as_calls(tokenizer: Any, tool: str = "act", argument: str = "answer") -> Any:
    """`tokenizer`, its `parse_response` (what TRL reads tool calls with) reading a completion that calls no tool as a
    call of `tool` with the completion's text as `argument`: a small model asked to call the tool often writes the
    answer itself ("12"), which TRL would take for the end of the rollout (no call: nothing played, reward 0). The
    text is parsed as the platform parses any LLM's answer, so an unusable one is still the decision's default.
    TRL then renders the call with the chat template: the completion the model is trained on is the call, so it
    learns the tool's format from the answers it gave."""
    parse = tokenizer.parse_response

    def parse_response(ids: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            parsed = parse(ids, *args, **kwargs)
        except (ValueError, TypeError):  # a malformed call: read as plain text, as TRL would
            parsed = {"role": "assistant", "content": tokenizer.decode(ids, skip_special_tokens=True)}
        if not isinstance(parsed, dict) or parsed.get("tool_calls"):
            return parsed
        # one line, its template tokens removed (the end of turn wherever it is): the call is rendered into the
        # completion trained on, where a token in the text would end the turn or open another
        content, eos = parsed.get("content") or "", tokenizer.eos_token
        text = one_line(content.replace(eos, " ") if eos else content)
        if not text:
            return parsed
        call = {"type": "function", "function": {"name": tool, "arguments": {argument: text}}}
        return {**parsed, "content": "", "tool_calls": [call]}

    tokenizer.parse_response = parse_response
    return tokenizer


def tool_chat_template() -> str:
    """TRL's Qwen2.5 chat template: ChatML (the embedded SmolLM2's tokens) that renders tools and tool calls, and
    whose tool calls TRL parses."""
    from trl.chat_template_utils import qwen2_5_chat_template

    return qwen2_5_chat_template


__all__ = ["SocietasToolEnv", "environment_factory", "dataset", "tool_chat_template", "plain_answers_as_calls",
           "INSTRUCTION"]
