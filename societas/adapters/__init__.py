"""Adapters to the RL libraries researchers train with: TRL (`societas.adapters.trl`), OpenEnv
(`societas.adapters.openenv`) and verifiers (`societas.adapters.verifiers`). Each imports its library only
when used, so societas works without them (`pip install societas[rl]` brings them); `FocalGame`
(`societas.adapters.focal`) is what they share: one focal agent's episodes in text."""

from societas.adapters.focal import FocalGame, Turn

__all__ = ["FocalGame", "Turn"]
