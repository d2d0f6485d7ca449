"""The social network as a reader of its stored runs sees it, without its world (no Mesa): its config and metric docs."""

from __future__ import annotations

from scenarios.social import report
from scenarios.social.config import SocialConfig
from scenarios.registry import Description

DESCRIPTION = Description(SocialConfig, report.TICK_METRIC_DOCS, report.FINAL_METRIC_DOCS, reference=report.REFERENCE)
