"""Gathering and Cleanup as a reader of their stored runs sees them, without their world (no Mesa): config and
metric docs."""

from __future__ import annotations

from scenarios.grid import report
from scenarios.grid.config import CleanupConfig, GatheringConfig
from scenarios.registry import Description

GATHERING = Description(GatheringConfig, report.TICK_METRIC_DOCS, report.FINAL_METRIC_DOCS)
CLEANUP = Description(CleanupConfig, report.CLEANUP_TICK_METRIC_DOCS, report.CLEANUP_FINAL_METRIC_DOCS)
