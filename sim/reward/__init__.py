"""The reward layer: payoffs into rewards (private, integrated, cooperative) and feedback, the norm
ledger, and social metrics as pure functions of plain data. Stands on `sim.core` only."""
