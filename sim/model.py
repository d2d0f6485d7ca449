"""Public: what a scenario file imports to define a scenario (the tick lives in `sim.tick`, the agent base in
`sim.contracts`).

    from sim.model import ScenarioConfig, SocietyAgent, SocietyModel
"""

from sim.contracts.agent import SocietyAgent
from sim.core.contracts import Decision, DecisionRequest, Event, RequestBatch
from sim.core.records import AgentStepRecord, StepColumns, TickRecord
from sim.reward.docs import BASE_FINAL_DOCS, BASE_TICK_DOCS
from sim.tick.config import PopulationGroup, ScenarioConfig
from sim.tick.model import SocietyModel
from sim.tick.roster import Roster

__all__ = ["SocietyModel", "ScenarioConfig", "SocietyAgent", "PopulationGroup", "DecisionRequest", "Decision", "Event", "RequestBatch",
           "TickRecord", "AgentStepRecord", "StepColumns", "Roster", "BASE_TICK_DOCS", "BASE_FINAL_DOCS"]
