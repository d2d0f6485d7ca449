"""Running specs: config at the boundary (YAML, --set) into a RunSpec, the backends a spec needs, how a run
starts (fresh, resumed, forked, replayed, a sweep's cell: `plans`), the execution that commits every tick,
and sweeps. Stands on everything below it: `sim.core`, `sim.reward`, `sim.store`, `agents`, `sim.tick` and
`scenarios`.

    from sim.runner import execute, RunFailed    # what scripts have long imported from here
"""

from sim.runner.backends import make_backends
from sim.runner.execution import Progress, RunFailed, RunInterrupted, RunResult, execute, horizon, versions

__all__ = ["execute", "RunFailed", "RunInterrupted", "RunResult", "make_backends", "horizon", "versions", "Progress"]
