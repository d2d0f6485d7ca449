"""Adapters to the RL libraries researchers train with: TRL (`societas.adapters.trl`), OpenEnv
(`societas.adapters.openenv`) and verifiers (`societas.adapters.verifiers`, a multi-agent env: every focal
agent a seat). Each imports its library only when used, so societas works without them (`pip install
societas[rl]` brings them); `FocalGame` (`societas.adapters.focal`) is one focal agent's episodes in text, and
`read_answer` the parsing of a model's answer they share."""

from societas.adapters.focal import FocalGame, Turn, read_answer

__all__ = ["FocalGame", "Turn", "read_answer"]
