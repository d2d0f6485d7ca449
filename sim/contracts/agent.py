"""The agent every scenario builds on: a Mesa agent with a policy, persona and memory."""

from __future__ import annotations

from typing import Optional

import mesa

from sim.contracts.memory import Memory


def split_policy(policy: str) -> tuple[str, str]:
    """(policy, backend) of an agent built with `policy`: `llm:2` (an LLM agent of a group with a model of its own,
    sim.tick.models) plays `llm` through backend `llm:2`; any other policy is its own backend."""
    if policy.startswith("llm:"):
        return "llm", policy
    return policy, policy


class SocietyAgent(mesa.Agent):
    """Small on purpose: who decides for it (`policy`, `strategy`, and the `backend` its requests go to: its policy,
    or `llm:K` for an LLM agent whose group has a model of its own), who it is, what it knows."""

    def __init__(
        self,
        model: mesa.Model,
        policy: str = "scripted",
        strategy: Optional[str] = None,
        persona: str = "",
        memory: Optional[Memory] = None,
    ) -> None:
        super().__init__(model)
        self.policy, self.backend = split_policy(policy)
        self.strategy = strategy
        self.persona = persona
        self.memory = memory if memory is not None else Memory()  # (an empty Memory is falsy)
        self.feedback: dict[str, float] = {}
        self.stored_memory_version = 0  # the memory version last written to the store

    @property
    def last_payoff(self) -> float:
        """Its material payoff in the last tick (0.0 before the first, or when it was not paid); the model keeps every
        agent's in columns (sim.tick.payments)."""
        return self.model.payments.payoffs.get(self.unique_id, 0.0)

    @property
    def last_reward(self) -> float:
        """Its reward in the last tick (0.0 before the first, or when it got none)."""
        return self.model.payments.rewards.get(self.unique_id, 0.0)

    @property
    def total_payoff(self) -> float:
        """Its payoffs summed over the ticks it took part in."""
        return self.model.payments.total(self.unique_id)

    @property
    def remembers(self) -> bool:
        """Only agents whose prompts read memory keep one: a scripted agent remembers nothing."""
        return self.policy == "llm"

    def remember(self, tick: int, kind: str, text: str, source: Optional[int] = None) -> None:
        """Add a memory item if this agent keeps memory (cheap no-op otherwise)."""
        if self.remembers:
            self.memory.add(tick, kind, text, source)  # type: ignore[arg-type]

    def relate(self, peer: int, delta: float) -> None:
        """Update trust in a peer actually interacted with, if this agent keeps memory."""
        if self.remembers:
            self.memory.relate(peer, delta)
