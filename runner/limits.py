"""The bounds the runner enforces and the CLI's help states: a sweep's size and executors, a probe's seeds.

Plain numbers in a module of their own, so that `societas --help` reads them without loading the runner.
"""

from __future__ import annotations

#: runs a sweep may have without `--yes`, and with it (every run's spec is built and checked before the first starts)
MAX_RUNS = 10_000
MAX_RUNS_CONFIRMED = 1_000_000
#: where a sweep's runs can execute: a local process pool, or Ray
EXECUTORS = ("local", "ray")

#: seeds per level unless told otherwise, the fewest that give a usable interval, and the most a probe may ask for
DEFAULT_SEEDS = 20
MIN_SEEDS = 10
MAX_SEEDS = 10_000
#: the most rewordings a probe may be asked under (runner.paraphrase ships this many per question)
MAX_PARAPHRASES = 5
