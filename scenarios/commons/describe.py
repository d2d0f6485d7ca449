"""The fishery as a reader of its stored runs sees it, without its world (no Mesa): its config and metric docs."""

from __future__ import annotations

from scenarios.commons import report
from scenarios.commons.config import CommonsConfig
from scenarios.registry import Description

DESCRIPTION = Description(CommonsConfig, report.TICK_METRIC_DOCS, report.FINAL_METRIC_DOCS)
