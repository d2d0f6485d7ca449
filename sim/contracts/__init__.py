"""Public: requests, decisions, events and run specs, where scenario and strategy files have long imported them
from (they live in `sim.core`)."""

from sim.core.contracts import Decision, DecisionColumns, DecisionRequest, Event, RequestBatch, columns_of, values_by_agent
from sim.core.profiles import CONTRACT
from sim.core.rng import derive_seed
from sim.core.spec import LLMSpec, RunSpec

__all__ = ["DecisionRequest", "Decision", "Event", "RequestBatch", "DecisionColumns", "columns_of", "values_by_agent",
           "RunSpec", "LLMSpec", "CONTRACT", "derive_seed"]
