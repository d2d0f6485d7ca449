"""Scenarios as PettingZoo environments: `societas.env.parallel_env("commons", ...)` (see `societas.env.parallel`);
users import it as `sim.env`."""

from societas.env.parallel import SocietyEnv, agent_name, parallel_env

__all__ = ["SocietyEnv", "parallel_env", "agent_name"]
