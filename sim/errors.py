"""Public: the errors bad input raises (`sim.core.errors`), where scripts have always imported them from."""

from sim.core.errors import ModelLoadError, UsageError

__all__ = ["UsageError", "ModelLoadError"]
