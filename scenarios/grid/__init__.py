"""Spatial social dilemmas on a Mesa grid: Gathering and Cleanup (scripted, LLM or synthesised policies).

Its classes are imported when first named (`from scenarios.grid import ...`): importing a submodule that needs
no world (its config, its metric docs) loads no Mesa.
"""

from __future__ import annotations

from sim.core.lazy import lazy_exports

#: exported name -> the submodule that defines it
_EXPORTS = {"GatheringModel": "model", "GatheringConfig": "config", "CleanupModel": "model", "CleanupConfig": "config"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
