"""What agents said, in words: who to whom, a market's proposals and payments as sentences, markdown escaped where a
label must show text literally (the Conversations page and a tick opened from a chart share them)."""

from __future__ import annotations

import json
import re
from typing import Any, Optional

import pandas as pd

_MD = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=])")


def md_escape(text: object) -> str:
    """`text` with markdown's special characters escaped, for a caption or label that must show it literally."""
    return _MD.sub(r"\\\1", str(text))


def who(agent: object) -> str:
    """`agent 7`, or `everyone` for no agent."""
    return "everyone" if agent is None or pd.isna(agent) else f"agent {int(agent)}"


def addressee(target: object, data: dict) -> str:
    """The addressee: the event's target, else a `to` list in its data (first three named), else everyone."""
    to = data.get("to") if isinstance(data, dict) else None
    if (target is None or pd.isna(target)) and to:
        names = [str(t) for t in (to if isinstance(to, list) else [to])]
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return who(target)


def _money(value: Any) -> str:
    try:
        return f"${float(value):,.2f}"
    except (TypeError, ValueError):
        return str(value)


def structured_line(kind: str, actor: Any, target: Any, data: dict[str, Any]) -> Optional[str]:
    """A market proposal or payment in words (who proposed what at what price; who paid whom how much)."""
    business = data.get("business", "a business")
    if kind == "proposal":
        items = data.get("items") or {}
        listed = (", ".join(f"{name} {_money(price)}" for name, price in items.items()) if isinstance(items, dict)
                  else ", ".join(map(str, items)))
        rank = f" (offer #{data['arrival_rank']} to arrive)" if data.get("arrival_rank") else ""
        return (f"{business} ({who(actor)}) proposes to {who(target)}: {listed or 'nothing'}, "
                f"total {_money(data.get('total'))}{rank}")
    if kind == "payment":
        met = data.get("needs_met")
        how = "" if met is None else (", needs met" if met else ", needs not met")
        utility = f", utility {float(data['utility']):.3g}" if isinstance(data.get("utility"), (int, float)) else ""
        return f"{who(actor)} paid {business} ({who(target)}) {_money(data.get('amount'))}{how}{utility}"
    return None


def action_words(detail: str) -> str:
    """A decision's action in a few words: its choices and numbers (`harvest 5, sanction none`); what it said is in
    the messages above it."""
    try:
        action = json.loads(detail)
    except ValueError:
        return detail if len(detail) <= 80 else detail[:79] + "…"
    if not isinstance(action, dict):
        return str(action)
    parts = []
    for phase, value in action.items():
        if isinstance(value, float):
            parts.append(f"{phase} {value:.4g}")
        elif isinstance(value, str) and len(value) > 40:
            parts.append(f"{phase} (said)")
        else:
            parts.append(f"{phase} {value}")
    return ", ".join(parts) or "nothing"
