"""The social-network scenario: a Reddit-like community of agents (MoltBook, OASIS)."""

from scenarios.social.config import SocialConfig
from scenarios.social.model import SocialModel

__all__ = ["SocialConfig", "SocialModel"]
