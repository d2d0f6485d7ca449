"""Render a DecisionRequest into chat messages, from templates (agents/llm/templates/*.txt).

Layout contract (so that a batch's prompts share their beginning, computed once by the local
engine): text shared by every agent first, then by the agent's group, then the agent's own,
then the question and the answer format:

    system: the simulation's fixed instructions            (same for every agent)
    user:   request.context                                (the situation every agent shares)
            "You are <persona>." + request.own_context     (group, then the agent's own part)
            memory, feedback                               (the agent's own)
            question, answer format                        (last)

A request may carry a paper protocol's own words where the platform has its own: `request.system` replaces the
template's system message ("" sends none: the model's chat template decides, as for a paper that sends one user
turn), and `request.answer_prompt` replaces the answer sentence (${answer} and ${answer_hint}), reasoning or not
(GovSim's "Let's think step-by-step. Put the final answer after "Answer:", example Answer: N tons.").

The built-in template is the one of the run's decision profile (`sim.core.profiles`): with
`compact_prompt` the question is followed by one sentence, "Answer with a number from 0 to 68 in steps
of 1." (templates/user-contract4.txt; the system message already asks for answers "exactly in the form
asked"), and the agent's memory items follow its identity without a header; without it, "Reply with
the number only." follows and memory opens with "What you remember:" (templates/user.txt). Runs keep
the template of their profile (`builtin_template`), so they replay from their cache; a user's
`PromptTemplate` that sets no `user` text renders with templates/user.txt, whatever the profile.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Union

from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from sim.core.profiles import DecisionProfile
from sim.core.refs import is_reference, load_object
from sim.core.spaces import Choice, Form, Number, Text

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
    return _compile((TEMPLATES / f"{name}.txt").read_text())


def _compile(text: str) -> str:
    parts = _FIELD.split(text)
    # split() alternates literal text and field names: escape the text, brace the names
    return "".join(p.replace("{", "{{").replace("}", "}}") if i % 2 == 0 else "{" + p + "}" for i, p in enumerate(parts))


#: the placeholders a user message template may use
FIELDS = ("context", "persona", "own", "memory", "feedback", "question", "space", "answer_hint", "answer")


#: what ${answer} adds after the space's description (the compact built-in template): a Number's
#: description says its form ("a number from 0 to 68 in steps of 1"), so it gets no second sentence
ANSWER_HINTS = {**HINTS, Number: ""}


def reasoning_format(space: Any, described: Optional[str] = None) -> str:
    """The sentence that asks for reasoning before the answer (a request with `reason_tokens`), after
    GovSim's "Let's think step-by-step. Put the final answer after "Answer:", ...": the answer's form
    is said, and it is read after the last "Answer:" (agents.llm.parse.reasoned_answer)."""
    return (f'Think it through step by step in a few sentences, then put your final answer after "Answer:" '
            f"({space.describe() if described is None else described}).")


def answer_format(space: Any, described: Optional[str] = None) -> str:
    """The sentence that asks for the answer (${answer}): "Answer with a number from 0 to 68 in steps of 1.",
    "Answer with one of: none, fisher 3. Reply with the option only.", ... (`described`: `space.describe()`,
    when the caller has it already)."""
    return f"Answer with {space.describe() if described is None else described}.{ANSWER_HINTS[type(space)]}"


@dataclass(frozen=True)
class PromptTemplate:
    """The chat prompt of the `llm` policy: a system message and a user message with `${field}` placeholders.

    `user` may use ${context} (text every agent shares), ${persona} ("You are ..."), ${own} (the agent's own
    context), ${memory}, ${feedback}, ${question}, ${space} (the answer's form, e.g. "a number from 0 to 68 in
    steps of 1"), ${answer_hint} ("Reply with the number only.") and ${answer} (what the built-in template asks:
    "Answer with a number from 0 to 68 in steps of 1."). `memory_header` is the line put before the agent's
    memory items in ${memory} ("" for none). Keep the
    shared text first and the agent's own text last: batches then share their prompt prefix.

        from agents.llm.prompts import PromptTemplate, register_template

        TERSE = register_template("terse")(PromptTemplate(system="Answer in as few words as possible."))
    """

    system: str = field(default_factory=lambda: (TEMPLATES / "system.txt").read_text().strip())
    user: str = field(default_factory=lambda: (TEMPLATES / "user.txt").read_text())
    memory_header: str = "What you remember:"

    def __post_init__(self) -> None:
        unknown = sorted(set(_FIELD.findall(self.user)) - set(FIELDS))
        if unknown:
            raise ValueError(f"prompt template: unknown placeholder ${{{unknown[0]}}}; valid: "
                             + ", ".join(f"${{{f}}}" for f in FIELDS))
        object.__setattr__(self, "_pattern", _compile(self.user))

    def render(self, request: DecisionRequest) -> list[dict[str, str]]:
        """System and user messages for one request."""
        return _render(request, self.system.strip(), self._pattern, self.memory_header)  # type: ignore[attr-defined]


#: a template is a PromptTemplate or any function `request -> [{"role": ..., "content": ...}, ...]`
Template = Union[PromptTemplate, Callable[[DecisionRequest], list]]
#: templates by name (`llm.template: NAME`); "default" is the built-in one
PROMPT_TEMPLATES: dict[str, Template] = {}


def register_template(name: str) -> Callable[[Any], Any]:
    """Decorator (or call on a PromptTemplate): make a template usable as `llm.template: NAME` in this process.

        @register_template("first_person")
        def first_person(request):
            return [{"role": "user", "content": f"I am {request.persona}. {request.context} {request.question}"}]

    A name lives only in the process that registered it: for the CLI and for replays in a new
    process, name the template by reference (`llm.template: my_prompts.py:first_person`).
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"a template name is a non-empty string without ':', not {name!r}")
    if name == "default":
        raise ValueError("'default' is the built-in prompt template; choose another name")

    def apply(obj: Any) -> Any:
        if not (isinstance(obj, PromptTemplate) or callable(obj)) or isinstance(obj, type):
            raise TypeError(f"a prompt template is a PromptTemplate or a function request -> messages, not {obj!r}")
        PROMPT_TEMPLATES[name] = obj
        return obj

    return apply


def get_template(ref: Optional[str], profile: Optional[DecisionProfile] = None) -> Template:
    """The template `ref` names: None or "default" (built-in: that of `profile`, default the current one), a
    registered name, or `module:NAME` / `file.py:NAME`.

    Raises a one-line UsageError when it cannot be found, loaded, or is not a template.
    """
    if ref is None or ref == "default":
        return DEFAULT if profile is None else builtin_template(profile)
    if ref in PROMPT_TEMPLATES:
        return PROMPT_TEMPLATES[ref]
    if not is_reference(ref):
        raise UsageError(f"bad value for 'llm.template': unknown template {ref!r}; valid: "
                         f"{', '.join(['default', *sorted(PROMPT_TEMPLATES)])}, or a reference module:NAME or path/to/file.py:NAME")
    try:
        module, obj = load_object(ref, "template")
    except ValueError as exc:  # a PromptTemplate with a bad placeholder, built at import
        raise UsageError(f"bad value for 'llm.template': {exc}") from None
    if obj is None:
        found = sorted(n for n, v in vars(module).items() if isinstance(v, PromptTemplate))
        raise UsageError(f"{ref.rpartition(':')[0]} has no template {ref.rpartition(':')[2]!r}; PromptTemplates there: "
                         f"{', '.join(found) or 'none'}")
    if not (isinstance(obj, PromptTemplate) or callable(obj)) or isinstance(obj, type):
        raise UsageError(f"template {ref} is not a PromptTemplate or a function request -> messages "
                         f"(it is a {type(obj).__name__})")
    return obj


def render_messages(request: DecisionRequest, prompt: Optional[Template] = None) -> list[dict[str, str]]:
    """System and user messages for one request, from the `prompt` template (default: the built-in one)."""
    if prompt is None:
        return DEFAULT.render(request)
    if isinstance(prompt, PromptTemplate):
        return prompt.render(request)
    messages = prompt(request)
    if not (isinstance(messages, list) and messages
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                    for m in messages)):
        raise TypeError(f"prompt template {getattr(prompt, '__name__', prompt)!r} must return a non-empty list of "
                        "{'role': str, 'content': str} messages")
    return messages


def _render(request: DecisionRequest, system: str, pattern: str, memory_header: str) -> list[dict[str, str]]:
    persona = f"You are {request.persona.strip().rstrip('.')}." if request.persona else ""
    own = request.own_context.strip()
    if persona and own:
        own = " " + own
    memory = ((f"{memory_header}\n" if memory_header else "") + f"{request.memory}\n") if request.memory else ""
    feedback = f"{request.feedback}\n" if request.feedback else ""
    described = request.space.describe()
    if request.answer_prompt:  # a protocol's own words (a reasoned answer is read after "Answer:")
        if reasoned(request) and "Answer:" not in request.answer_prompt:
            raise ValueError(f'a request that reasons must ask for its answer after "Answer:", not '
                             f"{request.answer_prompt[:80]!r}")
        hint, answer = " " + request.answer_prompt, request.answer_prompt
    elif reasoned(request):
        reasoning = reasoning_format(request.space, described)
        hint, answer = " " + reasoning, reasoning
    else:
        hint, answer = HINTS[type(request.space)], answer_format(request.space, described)
    user = pattern.format(
        context=request.context.strip(), persona=persona, own=own, memory=memory, feedback=feedback,
        question=request.question, space=described, answer_hint=hint, answer=answer,
    )
    while "\n\n" in user:
        user = user.replace("\n\n", "\n")
    user_message = {"role": "user", "content": user.strip()}
    if request.system is None:  # the template's system message (sent even when a user's template leaves it empty)
        return [{"role": "system", "content": system}, user_message]
    own_system = request.system.strip()
    return [{"role": "system", "content": own_system}, user_message] if own_system else [user_message]


def reasons(space: Any) -> bool:
    """Whether a request for `space` may reason before answering: a Number or a Choice (a Text is its own
    reasoning; a Form's JSON has no place for it)."""
    return isinstance(space, (Number, Choice))


def reasoned(request: DecisionRequest) -> bool:
    """Whether `request` is answered after reasoning (it asks for some, and its space admits it)."""
    return request.reason_tokens > 0 and reasons(request.space)


#: the built-in template of profiles with `compact_prompt` (every new run)
DEFAULT = PromptTemplate(user=(TEMPLATES / "user-contract4.txt").read_text(), memory_header="")
#: the built-in template of profiles without it (their runs' cache keys hold its text); it is also what a
#: user's PromptTemplate renders with where it sets no `user`, so that such a template, and the runs made
#: with it, never change under its author
DEFAULT_CONTRACT3 = PromptTemplate()


def builtin_template(profile: DecisionProfile) -> PromptTemplate:
    """The built-in template a run made under decision `profile` renders with."""
    return DEFAULT if profile.compact_prompt else DEFAULT_CONTRACT3


def retry_message(error: str, request: DecisionRequest) -> dict[str, str]:
    """The follow-up sent after an answer that could not be parsed."""
    return {"role": "user", "content": f"That answer could not be used ({error}). Answer again with {request.space.describe()} only."}
