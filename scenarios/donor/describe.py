"""The donor game as a reader of its stored runs sees it, without its world (no Mesa): its config and metric docs."""

from __future__ import annotations

from scenarios.donor import report
from scenarios.donor.config import DonorConfig
from scenarios.registry import Description

DESCRIPTION = Description(DonorConfig, report.TICK_METRIC_DOCS, report.FINAL_METRIC_DOCS)
