"""The fishery commons (GovSim)."""

from scenarios.commons.config import CommonsConfig
from scenarios.commons.model import CommonsModel

__all__ = ["CommonsConfig", "CommonsModel"]
