"""Scenarios as PettingZoo environments: `sim.env.parallel_env("commons", ...)` (see `societas.env.parallel`)."""

from societas.env.parallel import SocietyEnv, agent_name, parallel_env

__all__ = ["SocietyEnv", "parallel_env", "agent_name"]
