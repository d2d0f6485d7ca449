"""The fishery's institutions (the Ostrom-grounded CPR studies): a catch limit proposed and voted on, and graduated
sanctions on those who catch above the norm in force."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

NORM = "catch_limit"  # the norm's name in the ledger (norm.statement, adoption, compliance, violation, sanction)
MAX_VOTE_OPTIONS = 8  # a vote lists at most this many proposals (the most proposed ones)
MAX_SANCTION_TARGETS = 8  # a sanction choice lists at most this many violators (the largest catches)


def vote_options(proposals: Iterable[float]) -> dict[str, float]:
    """The ballot: the MAX_VOTE_OPTIONS most proposed limits (ties: the lower), in increasing order, by label."""
    counts: dict[float, int] = {}
    for amount in proposals:
        counts[amount] = counts.get(amount, 0) + 1
    top = sorted(counts, key=lambda a: (-counts[a], a))[:MAX_VOTE_OPTIONS]
    return {f"{a:g} tons": a for a in sorted(top)}


def closest_option(options: Mapping[str, float], own: float) -> str:
    """The option nearest a fisher's own proposal (ties: the lower limit): a fisher's default vote."""
    return min(options, key=lambda k: (abs(options[k] - own), options[k]))


def count_votes(options: Mapping[str, float], votes: Iterable[str], rule: str) -> dict[str, Any]:
    """The vote's outcome: the tally, the winning option (most votes; ties: the lower limit), and whether it is
    adopted (`majority`: more than half the votes cast; `plurality`: the most votes). Empty when no vote was cast."""
    tally = dict.fromkeys(options, 0)
    for vote in votes:
        tally[vote] += 1
    cast = sum(tally.values())
    if not cast:
        return {}
    winner = min(tally, key=lambda k: (-tally[k], options[k]))
    return {"tally": tally, "cast": cast, "winner": winner, "adopted": rule == "plurality" or 2 * tally[winner] > cast}


def graduated_fine(base: float, growth: float, violations: int) -> float:
    """Graduated sanctions: the first violation costs `base`, each earlier one adds `growth` x `base`."""
    return base * (1.0 + growth * max(0, violations - 1))


def top_violators(catches: Iterable[tuple[float, int]], norm: float) -> dict[int, float]:
    """The fishers over `norm` with the largest catches (ties: the lower id), at most MAX_SANCTION_TARGETS + 1 of them
    (a sanctioner never fines itself): fisher id -> catch. `catches` holds (catch, fisher id) pairs."""
    over = [(amount, aid) for amount, aid in catches if amount > norm + 1e-9]
    over.sort(key=lambda t: (-t[0], t[1]))
    return {aid: amount for amount, aid in over[:MAX_SANCTION_TARGETS + 1]}
