"""The verifiers plugin `societas-verifiers`: verifiers finds a taskset (and its env and harness) by importing a
top-level module named after its id, so this one re-exports `societas.adapters.verifiers` under that name
(`eval societas-verifiers ...`, `validate societas-verifiers ...`, `--env.taskset.id societas-verifiers`)."""

from societas.adapters.verifiers import (SocietasData, SocietasEnv, SocietasEnvConfig, SocietasHarness, SocietasTask,
                                         SocietasTaskset, SocietasTasksetConfig, SocietasWorld)

__all__ = ["SocietasData", "SocietasEnv", "SocietasEnvConfig", "SocietasHarness", "SocietasTask", "SocietasTaskset",
           "SocietasTasksetConfig", "SocietasWorld"]
