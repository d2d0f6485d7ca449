"""Public: what a scenario file imports to define a scenario (the tick lives in `sim.tick`).

    from sim.model import ScenarioConfig, SocietyModel
"""

from sim.core.contracts import Decision, DecisionRequest, Event, RequestBatch
from sim.tick.config import PopulationGroup, ScenarioConfig
from sim.tick.model import SocietyModel

__all__ = ["SocietyModel", "ScenarioConfig", "PopulationGroup", "DecisionRequest", "Decision", "Event", "RequestBatch"]
