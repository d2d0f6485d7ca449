"""The ground every package stands on: contracts, action spaces, run specs, decision profiles, records,
the backend protocol, references, randomness, errors and stop signals.

Plain data and pure functions: nothing here imports Mesa, a database or an LLM, or any other part
of the project.
"""
