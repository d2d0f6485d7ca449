"""The reward layer: material payoffs in, rewards and feedback out.

Modes as in Coopetition-Gym: `private` r_i = p_i; `integrated` r_i = p_i + lam * mean_{j!=i} p_j;
`cooperative` r_i = mean_j p_j. Feedback `sparse` shows an agent its own reward only,
`dense` adds the group's social metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sim.reward.components import DEFAULT_WEIGHTS, RewardColumns

RewardMode = Literal["private", "integrated", "cooperative"]
FeedbackMode = Literal["sparse", "dense", "none"]


def compute_rewards(payoffs: Mapping[int, float], mode: RewardMode, lam: float = 0.0) -> dict[int, float]:
    """Turn per-agent payoffs into per-agent rewards in the given mode."""
    if not payoffs:
        return {}
    if mode == "private":
        return dict(zip(payoffs, map(float, payoffs.values())))
    ids = list(payoffs)
    total = float(sum(payoffs.values()))
    n = len(ids)
    if mode == "cooperative":
        return {i: total / n for i in ids}
    if mode == "integrated":
        if n == 1:
            return {i: float(payoffs[i]) for i in ids}
        return {i: float(payoffs[i]) + lam * (total - payoffs[i]) / (n - 1) for i in ids}
    raise ValueError(f"unknown reward mode {mode!r}; valid: private, integrated, cooperative")


@dataclass(frozen=True)
class RewardLayer:
    """Configured reward mode, lambda, feedback and component weights for one run."""

    mode: RewardMode = "private"
    lam: float = 0.0
    feedback: FeedbackMode = "sparse"
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))

    def rewards(self, payoffs: Mapping[int, float], components: RewardColumns | None = None) -> dict[int, float]:
        """Rewards in the configured mode over the weighted components (over the payoffs themselves when no
        components are given or the weights are the default, {payoff: 1})."""
        if components is None or dict(self.weights) == DEFAULT_WEIGHTS:
            return compute_rewards(payoffs, self.mode, self.lam)
        return compute_rewards(components.weigh(self.weights), self.mode, self.lam)

    def feedback_for(self, agent_id: int, rewards: Mapping[int, float], metrics: Mapping[str, float]) -> dict[str, float]:
        """What the agent is told after a tick: its reward, plus group metrics when dense; nothing when none
        (a paper protocol whose agents are not told their payoff each round)."""
        seen: dict[str, float] = {}
        if self.feedback == "none":
            return seen
        if agent_id in rewards:
            seen["reward"] = round(float(rewards[agent_id]), 3)
        if self.feedback == "dense":
            seen.update({k: round(float(v), 3) for k, v in metrics.items() if isinstance(v, (int, float))})
        return seen


def describe_feedback(seen: Mapping[str, float]) -> str:
    """Feedback as one line for prompts."""
    if not seen:
        return ""
    return "Last round: " + ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in seen.items())
