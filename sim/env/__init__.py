"""Public: scenarios as PettingZoo environments, `from sim.env import parallel_env` (the env lives in
`societas.env`, with the other faces; this address re-exports it)."""

from societas.env import SocietyEnv, agent_name, parallel_env

__all__ = ["SocietyEnv", "parallel_env", "agent_name"]
