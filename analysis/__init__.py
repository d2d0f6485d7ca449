"""Reading stored runs: summaries, frames and exports, comparisons, network and norm views, over-usage, the Runs
list's config columns, rollouts' advantages, sweeps. It reads through the store (`sim.store.store.Store` and the
app's queries, `sim.store.queries`) and runs nothing."""
