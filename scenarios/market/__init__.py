"""The two-sided market of Magentic Marketplace (microsoft/multi-agent-marketplace)."""

from scenarios.market.config import MarketConfig
from scenarios.market.model import MarketModel

__all__ = ["MarketConfig", "MarketModel"]
