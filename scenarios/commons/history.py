"""How what every fisher saw reaches the fishers: one shared history in the situation all of them read.

The month's public events (the catches in all, the messages, the proposals, the vote, the mayor's report)
are lines of one history that the situation text quotes ("What everyone saw:"), the same for every fisher,
so the local engine forwards it once per batch; a fisher's own memory keeps its own catches, fines and
notes. Runs made under decision contracts 1 and 2 put the public events in every fisher's memory instead
(`scenarios.commons.legacy.MemoryLines`); the model holds whichever its run's edition names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Protocol

from sim.contracts.memory import Memory
from scenarios.commons import templates as tpl

if TYPE_CHECKING:
    from scenarios.commons.model import CommonsModel, Fisher


class Chronicle(Protocol):
    """What a fishery does with the events every fisher sees (`CommonsEdition.chronicle`)."""

    #: the shared history (None: the events are in the fishers' memories)
    memory: Optional[Memory]

    def tell(self, kind: str, text: str) -> None:
        """An event every fisher taking part sees."""

    def caught(self, total: float, stock: float) -> str:
        """The month's harvest in all: told, or returned as the end of each fisher's own "I caught ..." line."""

    def own_last(self, fisher: "Fisher") -> str:
        """The situation's line about the fisher's own catch last month, where its memory does not say it."""

    def others_said(self, fisher: "Fisher") -> str:
        """The situation's part with this month's messages of the other fishers, where no history holds them."""

    def block(self, question: str) -> str:
        """The history as the situation quotes it for `question` ("" without one)."""

    def state(self) -> dict[str, Any]:
        """What the tick's state stores of it."""


class SharedHistory:
    """One history of what everyone saw, quoted in every fisher's situation (decision contract 3 on)."""

    def __init__(self, model: "CommonsModel") -> None:
        self.model = model
        self.memory: Optional[Memory] = model.new_memory()
        self._text: dict[str, str] = {}  # the history rendered for a question, at memory.version

    def tell(self, kind: str, text: str) -> None:
        if self.model.listeners:  # (a fishery of scripted fishers keeps no history)
            self.memory.add(self.model.tick, kind, text)

    def caught(self, total: float, stock: float) -> str:
        self.tell("observation", f"All fishers caught {total:g} tons; {stock:g} tons were left.")
        return ""  # (the fisher's memory line is its own catch only)

    def own_last(self, fisher: "Fisher") -> str:
        return ""  # (its memory says it: "I caught ...")

    def others_said(self, fisher: "Fisher") -> str:
        return ""  # (the month's messages are in the history: "The fishers said: ...")

    def block(self, question: str) -> str:
        if not self.memory:
            return ""
        key = f"{self.memory.version}:{question}"
        if key not in self._text:  # rendered once per phase, not once per fisher
            self._text = {key: self.memory.render(question, noun=self.model.memory_noun)}
        return tpl.HISTORY.substitute(history=self._text[key])

    def state(self) -> dict[str, Any]:
        return {"history": self.memory.snapshot()} if self.memory else {}  # what every LLM fisher saw
