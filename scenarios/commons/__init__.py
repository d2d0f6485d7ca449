"""The fishery commons (GovSim)."""

from scenarios.commons.model import CommonsConfig, CommonsModel

__all__ = ["CommonsConfig", "CommonsModel"]
