"""The ground every package stands on: requests, decisions and events (`contracts`), action spaces, run specs,
decision profiles, tick records, references, randomness, errors, stop signals, config fields and observation
views. The interfaces the tick calls through (agent, memory, strategy, backend) are `sim.contracts`'.

Plain data and pure functions: nothing here imports Mesa, a database or an LLM, or any other part
of the project.
"""
