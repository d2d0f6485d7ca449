"""Plain Mesa models of the scenarios' rules: the yardsticks `benchmarks/engine.py` times the engine against.

Each is what a competent Mesa user would write for the same rules: agents with a `step`, the model's
`shuffle_do`, dicts and lists, scripted strategies written in place, no store, no LLM, no reward layer,
no records. They reuse the scenarios' pure helpers where those are data or library code rather than the
tick (the market's data and search index, the grid games' map and rules, the community's follow graph and
feed ranking), so that a ratio measures the engine around the rules, not two versions of a search.

Each model reproduces the engine's numbers on a config whose draws it can follow (its own draws come from
the model's RNG in the engine's order; see each module): `benchmarks/engine.py` checks it before timing and
`tests/test_plain_models.py` on a small size.
"""
