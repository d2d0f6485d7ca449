"""What the grid games' runs measure: metric docs, units and reward components (no Mesa: `societas show` reads them)."""

from __future__ import annotations

#: per-tick metrics of both games (the `ticks` table)
TICK_METRIC_DOCS: dict[str, str] = {
    "episode": "the episode this step belongs to (1-based)",
    "apples": "live apples after the step",
    "collected": "apples taken this step",
    "tagged": "agents tagged out after the step",
    "beams": "tagging (penalty) beams fired this step",
    "hits": "agents hit by a beam this step",
    "fallbacks": "agents whose action this step was replaced by `stand` (a failed call, no program, a stopped program)",
}
#: the run's final summary of both games
FINAL_METRIC_DOCS: dict[str, str] = {
    "apples_collected": "apples taken over the run",
    "reward_per_agent": "mean over agents of their summed rewards over the run",
    "beams_fired": "tagging (penalty) beams fired over the run",
    "tags": "times an agent was tagged out",
    "episodes": "episodes played (started)",
    "code_versions": "synthesis: programs the LLM wrote (accepted or refused)",
    "code_accepted": "synthesis: programs that passed the checks",
    "best_iteration": "synthesis: the episode whose program earned the most reward per agent",
    "best_reward": "synthesis: that episode's reward per agent",
    "last_reward": "synthesis: the last episode's reward per agent",
    "incidents": "synthesis: agent-steps whose program call failed, was stopped or tried a hack (each replaced by stand)",
    "hack_attempts": "synthesis: agent-steps (and programs read) with a reward-hacking write to the observation",
    "violations": "synthesis: programs stopped for reaching outside the sandbox",
}
#: Cleanup's own, beside both games'
CLEANUP_TICK_METRIC_DOCS: dict[str, str] = {
    **TICK_METRIC_DOCS,
    "waste_share": "share of the river's cells polluted after the step",
    "cleaned": "waste cells cleared this step",
}
CLEANUP_FINAL_METRIC_DOCS: dict[str, str] = {
    **FINAL_METRIC_DOCS,
    "mean_waste_share": "the river's polluted share, averaged over the steps",
}
#: units of the metrics and state fields, for axes and tables
UNITS: dict[str, str] = {
    "apples": "apples", "collected": "apples", "tagged": "agents", "beams": "beams", "hits": "agents",
    "fallbacks": "agents", "waste_share": "share", "cleaned": "cells", "apples_collected": "apples",
    "reward_per_agent": "apples", "beams_fired": "beams", "tags": "tags", "mean_waste_share": "share",
    "payoff": "apples", "efficiency": "apples per step"}
#: the games' own reward components, beside the common ones
COMPONENT_DOCS: dict[str, str] = {
    "apples": "apples the agent collected this step",
    "fired": "beams the agent fired this step (tagging, or Cleanup's penalty beam; each costs fire_cost)",
    "tagged": "1 when the agent is tagged out (in its timeout) this step: the sanction received",
}
