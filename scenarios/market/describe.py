"""The marketplace as a reader of its stored runs sees it, without its world (no Mesa): its config and metric docs."""

from __future__ import annotations

from scenarios.market import report
from scenarios.market.config import MarketConfig
from scenarios.registry import Description

DESCRIPTION = Description(MarketConfig, report.TICK_METRIC_DOCS, report.FINAL_METRIC_DOCS)
