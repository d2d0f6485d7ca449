"""The two-sided market of Magentic Marketplace (microsoft/multi-agent-marketplace)."""

from scenarios.market.model import MarketConfig, MarketModel

__all__ = ["MarketConfig", "MarketModel"]
