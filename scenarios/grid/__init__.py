"""Spatial social dilemmas on a Mesa grid: Gathering and Cleanup (scripted, LLM or synthesised policies)."""

from scenarios.grid.model import CleanupConfig, CleanupModel, GatheringConfig, GatheringModel

__all__ = ["GatheringModel", "GatheringConfig", "CleanupModel", "CleanupConfig"]
