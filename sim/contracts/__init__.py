"""The contracts between the tick and what it calls, in one package (as Concordia's `typing/`):

- `agent`: `SocietyAgent`, the Mesa agent every scenario builds on (policy, persona, memory);
- `memory`: `Memory`, an agent's bounded, typed memory;
- `strategy`: what a scripted strategy is (`Strategy`) and the marks of its columnar forms;
- `backend`: the `Backend` protocol every decider implements (scripted, LLM, sandboxed programs), `CallCache`,
  `ReplayMode`.

The tick (`sim.tick`) and the scenarios stand on these; the decision backends (`agents/`) implement them.

Public: this package's own names are what scenario and strategy files have long imported from `sim.contracts`:
requests, decisions, events and run specs (they live in `sim.core`), and the strategy marks. Importing it loads
no Mesa (`SocietyAgent` is `sim.model`'s, and `sim.contracts.agent`'s).
"""

from sim.contracts.strategy import Strategy, answers_many, observation_only
from sim.core.contracts import Decision, DecisionColumns, DecisionRequest, Event, RequestBatch, columns_of, values_by_agent
from sim.core.profiles import CONTRACT
from sim.core.rng import derive_seed
from sim.core.spec import LLMSpec, RunSpec

__all__ = ["DecisionRequest", "Decision", "Event", "RequestBatch", "DecisionColumns", "columns_of", "values_by_agent",
           "RunSpec", "LLMSpec", "CONTRACT", "derive_seed", "Strategy", "observation_only", "answers_many"]
