"""The fishery commons (GovSim).

Its classes are imported when first named (`from scenarios.commons import ...`): importing a submodule that needs
no world (its config, its metric docs) loads no Mesa.
"""

from __future__ import annotations

from sim.core.lazy import lazy_exports

#: exported name -> the submodule that defines it
_EXPORTS = {"CommonsConfig": "config", "CommonsModel": "model"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
