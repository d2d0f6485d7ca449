"""The fishery's validity probe: does a fisher's catch respond to the stock (GovSim's premise)?"""

from __future__ import annotations

from typing import Any, Optional

from sim.core.contracts import DecisionRequest
from sim.tick.probe import Probe, enter_first_tick


def _at_stock(model: Any, level: float) -> Optional[DecisionRequest]:
    """Month 1 with `level` tons in the lake; the lowest-id fisher's harvest request."""
    enter_first_tick(model)
    model.stock = model.stock_start = float(level)
    fisher = min(model.agents, key=lambda a: a.unique_id)
    return model.observe(fisher, "harvest")


CATCH_BY_STOCK = Probe(
    name="catch_by_stock", variable="stock (tons)", levels=(10.0, 30.0, 100.0), response="catch (tons)",
    finding="a fisher catches less from a depleted lake (GovSim: sustainability needs catches to follow the stock)",
    situate=_at_stock, measure=lambda value, request: float(value), config={"talk": False, "norm_formation": False},
)

PROBES = (CATCH_BY_STOCK,)
