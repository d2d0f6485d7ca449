"""How the fishery buckets its LLM fishers' requests under `llm.archetypes` (agents.llm.archetypes).

A fisher decides on the lake it sees and the limit it believes in: requests of one tick share a call when the
fishers have the same persona, the stock lies in the same 10-ton bin and their believed limits in the same 1-ton
bin (whether the limit was copied from a peer, too). Their own last catch and name (in their own part of the
prompt) are not part of the bucket: the bucket's one prompt stands for them all.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from sim.core.contracts import DecisionRequest

STOCK_BIN = 10.0  # tons
BELIEF_BIN = 1.0  # tons


def _binned(value: object, width: float) -> object:
    return math.floor(float(value) / width) if isinstance(value, (int, float)) else value


def archetype(request: DecisionRequest) -> Hashable:
    """(persona, stock bin, belief bin, copied) of a fisher's request."""
    obs = request.observation
    return (request.persona, _binned(obs.get("stock"), STOCK_BIN), _binned(obs.get("belief"), BELIEF_BIN),
            obs.get("copied"), request.reason_tokens)
