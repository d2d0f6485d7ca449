"""Rewordings of a prompt's instructions that keep its facts (`societas probe --paraphrases K`).

A finding about an LLM means little if it flips when the question is asked in other words. A probe is
answered under its original wording and under K rewordings; wording k (1..K) changes two pieces of
trusted text and nothing else:

- the **system message**, where it is the platform's built-in one (`agents/llm/templates/system.txt`,
  which holds no fact): replaced by the k-th of `SYSTEM_REWORDINGS`. A user's or a protocol's own
  system text may hold facts (a persona, a price), so it is never touched;
- the **question**, where the request asks the scenario's standard question of its phase (the probe's
  `questions[phase][0]` filled with the request's facts gives the request's question exactly): replaced
  by the probe's k-th rewording, filled with the same facts (`string.Template.substitute`: a rewording
  that names a fact the request lacks is refused). A question a config rewrote is left as it is.

The situation (`context`, `own_context`), the persona, memory, feedback and the answer's form (the
action space and how it is read) are never reworded, and text an agent or a data file wrote stays where
it was, quoted: a rewording swaps one trusted string for another in the same place, so the prompt's
structure is the same. `tests/test_probes.py` renders every probe's requests under every rewording and
checks that only those two pieces differ and that every number of the original question is still there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from string import Template
from typing import Any, Optional

from agents.llm.prompts import DEFAULT, DEFAULT_CONTRACT3, Template as PromptLike, render_messages
from runner.limits import MAX_PARAPHRASES
from sim.core.contracts import DecisionRequest

#: the built-in system message (every built-in template's), the only system text a rewording replaces
BUILTIN_SYSTEM = frozenset({DEFAULT.system.strip(), DEFAULT_CONTRACT3.system.strip()})

#: rewordings of the built-in system message ("You take part in a simulation with other agents. Answer every
#: question briefly and exactly in the form asked."): the same two instructions, other words
SYSTEM_REWORDINGS = (
    "You are one of several agents in a simulation. Keep every answer short and give it exactly in the requested form.",
    "This is a simulation in which you act alongside other agents. Reply to each question briefly, in precisely "
    "the format requested.",
    "You are a participant in a simulated world shared with other agents. For each question, answer concisely and "
    "in exactly the form that is asked for.",
    "Several agents, you among them, take part in this simulation. Answer briefly and follow the requested answer "
    "format exactly.",
    "You play a part in a multi-agent simulation. Give short answers, in the exact form each question asks for.",
)
if len(SYSTEM_REWORDINGS) != MAX_PARAPHRASES:  # the CLI states the bound without importing this module
    raise RuntimeError("runner.limits.MAX_PARAPHRASES must count SYSTEM_REWORDINGS")


@dataclass(frozen=True)
class Wording:
    """Wording k of a probe's prompts: 0 is the original; the system text and question rewordings it uses."""

    k: int
    system: Optional[str]  # None: the system message is left as it is


def wordings(k: int) -> list[Wording]:
    """The original wording and K rewordings."""
    return [Wording(0, None)] + [Wording(i, SYSTEM_REWORDINGS[i - 1]) for i in range(1, k + 1)]


def reword_question(request: DecisionRequest, questions: Mapping[str, Sequence[str]], facts: Mapping[str, Any],
                    k: int) -> tuple[DecisionRequest, bool]:
    """`request` with its question in rewording `k` (0: as it is), and whether the question was reworded.

    Reworded only where the request asks the phase's standard question (`questions[phase][0]` filled with
    `facts` is the request's question), so that a question a config wrote itself is never replaced."""
    bank = questions.get(request.phase, ())
    if k == 0 or len(bank) <= k:
        return request, False
    if Template(bank[0]).safe_substitute(facts) != request.question:  # (a fact it lacks leaves a $name: no match)
        return request, False
    return replace(request, question=Template(bank[k]).substitute(facts)), True


class RewordedSystem:
    """A prompt template that renders as `inner` does, with the built-in system message replaced by `system`.

    Any other system text (a user's template, a protocol's persona) is kept: it may hold facts."""

    def __init__(self, inner: Optional[PromptLike], system: str) -> None:
        self.inner = inner
        self.system = system
        self.__name__ = "reworded"

    def __call__(self, request: DecisionRequest) -> list[dict[str, str]]:
        messages = render_messages(request, self.inner)
        return [dict(m, content=self.system) if m.get("role") == "system" and m.get("content", "").strip() in BUILTIN_SYSTEM
                else m for m in messages]

    def rewords(self, request: DecisionRequest) -> bool:
        """Whether this template's system message for `request` is the built-in one (so it is reworded)."""
        return any(m.get("role") == "system" and m.get("content", "").strip() in BUILTIN_SYSTEM
                   for m in render_messages(request, self.inner))
