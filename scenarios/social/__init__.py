"""The social-network scenario: a Reddit-like community of agents (MoltBook, OASIS).

Its classes are imported when first named (`from scenarios.social import ...`): importing a submodule that needs
no world (its config, its metric docs) loads no Mesa.
"""

from __future__ import annotations

from sim.core.lazy import lazy_exports

#: exported name -> the submodule that defines it
_EXPORTS = {"SocialConfig": "config", "SocialModel": "model"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
