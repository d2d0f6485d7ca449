"""The tick: `SocietyModel` (the Mesa model every scenario subclasses), its config base, the decision
broker and the roster of agents. Stands on `sim.core`, `sim.reward` and `agents`."""
