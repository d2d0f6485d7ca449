"""Render a DecisionRequest into chat messages, from templates (agents/llm/templates/*.txt).

The prompt holds the persona, the situation (the scenario's context), the agent's memory,
the feedback the reward layer allows, the question and the action space.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from string import Template

from sim.contracts import DecisionRequest
from sim.spaces import Choice, Form, Number, Text

TEMPLATES = Path(__file__).with_name("templates")

HINTS = {
    Choice: " Reply with the option only.",
    Number: " Reply with the number only.",
    Text: "",
    Form: " Reply with a JSON object with exactly these keys.",
}


@lru_cache(maxsize=None)
def template(name: str) -> Template:
    return Template((TEMPLATES / f"{name}.txt").read_text())


def render_messages(request: DecisionRequest) -> list[dict[str, str]]:
    """System and user messages for one request."""
    persona = f"{request.persona.strip()} " if request.persona else ""
    memory = f"What you remember:\n{request.memory}\n" if request.memory else ""
    feedback = f"{request.feedback}\n" if request.feedback else ""
    user = template("user").substitute(
        context=request.context, memory=memory, feedback=feedback, question=request.question,
        space=request.space.describe(), answer_hint=HINTS[type(request.space)],
    )
    return [
        {"role": "system", "content": template("system").substitute(persona=persona).strip()},
        {"role": "user", "content": user.replace("\n\n", "\n").strip()},
    ]


def retry_message(error: str, request: DecisionRequest) -> dict[str, str]:
    """The follow-up sent after an answer that could not be parsed."""
    return {"role": "user", "content": f"That answer could not be used ({error}). Answer again with {request.space.describe()} only."}
