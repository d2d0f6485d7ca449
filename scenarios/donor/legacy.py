"""The donor game's pieces as runs of earlier decision contracts were made with, frozen so that those runs replay.

Nothing here is used by a new run: `scenarios.donor.editions` points the older contracts at these pieces.
Do not change them; a change of the current behaviour copies the piece it changes here first.

- contracts 1-7: a game's start resets each player's resources only; the reputation trace is cleared at a
  generation's start, so the first donors of game 2 read what their recipients did in game 1.
"""

from __future__ import annotations

from typing import Any


def resources_only(player: Any, endowment: float) -> None:
    """Contracts 1-7: a game's start gives the player `endowment` again and keeps its reputation trace."""
    player.resources = endowment
