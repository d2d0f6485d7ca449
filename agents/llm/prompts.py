"""Render a DecisionRequest into chat messages, from templates (agents/llm/templates/*.txt).

The prompt holds the persona, the situation (the scenario's context), the agent's memory,
the feedback the reward layer allows, the question and the action space.
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
    persona = f" You are {request.persona.strip()}." if request.persona else ""
    memory = f"What you remember:\n{request.memory}\n" if request.memory else ""
    feedback = f"{request.feedback}\n" if request.feedback else ""
    user = template("user").format(
        context=request.context, memory=memory, feedback=feedback, question=request.question,
        space=request.space.describe(), answer_hint=HINTS[type(request.space)],
    )
    return [
        {"role": "system", "content": template("system").format(persona=persona).strip()},
        {"role": "user", "content": user.replace("\n\n", "\n").strip()},
    ]


def retry_message(error: str, request: DecisionRequest) -> dict[str, str]:
    """The follow-up sent after an answer that could not be parsed."""
    return {"role": "user", "content": f"That answer could not be used ({error}). Answer again with {request.space.describe()} only."}
