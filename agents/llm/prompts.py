"""Render a DecisionRequest into chat messages, from templates (agents/llm/templates/*.txt).

Layout contract (so that a batch's prompts share their beginning, computed once by the local
engine): text shared by every agent first, then by the agent's group, then the agent's own,
then the question and the answer format:

    system: the simulation's fixed instructions            (same for every agent)
    user:   request.context                                (the situation every agent shares)
            "You are <persona>." + request.own_context     (group, then the agent's own part)
            memory, feedback                               (the agent's own)
            question, answer format                        (last)
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from sim.contracts import DecisionRequest
from sim.spaces import Choice, Form, Number, Text

TEMPLATES = Path(__file__).with_name("templates")

HINTS = {
    Choice: " Reply with the option only.",
    Number: " Reply with the number only.",
    Text: "",
    Form: " Reply with a JSON object with exactly these keys.",
}


_FIELD = re.compile(r"\$\{(\w+)\}")


@lru_cache(maxsize=None)
def template(name: str) -> str:
    """A template file (`${field}` placeholders) compiled once to a `str.format` pattern (fast to fill)."""
    parts = _FIELD.split((TEMPLATES / f"{name}.txt").read_text())
    # split() alternates literal text and field names: escape the text, brace the names
    return "".join(p.replace("{", "{{").replace("}", "}}") if i % 2 == 0 else "{" + p + "}" for i, p in enumerate(parts))


def render_messages(request: DecisionRequest) -> list[dict[str, str]]:
    """System and user messages for one request."""
    persona = f"You are {request.persona.strip().rstrip('.')}." if request.persona else ""
    own = request.own_context.strip()
    if persona and own:
        own = " " + own
    memory = f"What you remember:\n{request.memory}\n" if request.memory else ""
    feedback = f"{request.feedback}\n" if request.feedback else ""
    user = template("user").format(
        context=request.context.strip(), persona=persona, own=own, memory=memory, feedback=feedback,
        question=request.question, space=request.space.describe(), answer_hint=HINTS[type(request.space)],
    )
    while "\n\n" in user:
        user = user.replace("\n\n", "\n")
    return [
        {"role": "system", "content": template("system").strip()},
        {"role": "user", "content": user.strip()},
    ]


def retry_message(error: str, request: DecisionRequest) -> dict[str, str]:
    """The follow-up sent after an answer that could not be parsed."""
    return {"role": "user", "content": f"That answer could not be used ({error}). Answer again with {request.space.describe()} only."}
