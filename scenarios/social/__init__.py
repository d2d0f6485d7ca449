"""The social-network scenario: a Reddit-like community of agents (MoltBook, OASIS)."""

from scenarios.social.model import SocialConfig, SocialModel

__all__ = ["SocialConfig", "SocialModel"]
