"""GovSim's protocol, word for word where the scenario can: the texts a fisher reads and the phases of its month.

Source: giorgiopiatti/GovSim at `SOURCE` (the same texts at b0b33e50, which docs/protocols.md cited before), the
baseline experiment `simulation/scenarios/fishing/conf/experiment/fish_baseline_concurrent.yaml` (agent
`persona_v3`, system prompt `v3`, `think_step_by_step`, the mayor's report, at most 10 chat entries). `COG` below
is `simulation/scenarios/fishing/agents/persona_v3/cognition/`; every text is quoted with its file and lines.

A config with `protocol: govsim` runs GovSim's month (`scenarios.commons.model` picks this module's phases):

- harvest: GovSim's system text (it is the start of GovSim's single user turn: no system message is sent),
  "Location: lake", the date, the fisher's key memories (GovSim's dated lines), then GovSim's task and its
  "Let's think step-by-step. Put the final answer after "Answer:", example Answer: N tons.";
- after the harvest each fisher remembers "{name} wanted to catch W tons of fish, and caught C tons.", and the
  mayor opens the group chat with every catch;
- converse1..R: "Scenario: ... are engaged in a group chat.", "Conversation so far:", "Task: What would you say
  next in the group chat? Ensure the conversation flows naturally and avoids repetition.";
- agree: the framework reads the conversation with GovSim's prompt and answers a limit or "N/A"; a limit is
  remembered by every fisher as "The community agreed on a maximum limit of X tons of fish per person.";
- plan, memorize: GovSim's two thoughts per fisher on the conversation;
- reflect: "What high-level insights can you infere from the above statements? ..." over numbered memories;
- a month whose harvest leaves fewer than `collapse_below` tons still holds its chat, agreement, thoughts and
  reflection ("We want to see also the discussion in case no fish remain"); the run ends after it.

What still departs, and why, is listed in docs/protocols.md (tests/test_protocols.py checks both lists).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from string import Template
from typing import TYPE_CHECKING, Any, Optional

from scenarios.commons.norms import NORM
from sim.core.contracts import Decision, DecisionRequest
from sim.core.spaces import Choice, Text

if TYPE_CHECKING:
    from scenarios.commons.model import CommonsModel, Fisher

SOURCE = "giorgiopiatti/GovSim@1d11adf047b24fa2ba0d44a1d4931015ea2e5210"
COG = "simulation/scenarios/fishing/agents/persona_v3/cognition/"

#: the baseline's five personas (conf/experiment/fish_baseline_concurrent.yaml); fisher k > 5 is "Fisher k"
NAMES = ("John", "Kate", "Jack", "Emma", "Luke")
#: what the system text says in words ("four other fishermen", "the five fishermen"); larger counts in digits
COUNT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
               "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty")
#: a prompt names at most this many fishers (the system text's others, the chat's scenario, the mayor's report): in a
#: larger fishery the system text counts the others and the chat lists the first ones and how many more
MAX_NAMED = 20
#: a prompt shows the mayor's report and at most this many of the chat's messages, the latest (GovSim's chat has at
#: most 9; a fishery of thousands talks more than a prompt holds)
MAX_CHAT_SHOWN = 40
CAPACITY, REGROWTH = 100.0, 2.0  # the lake the system text describes

# ----- the texts (verbatim; `$name` fields filled as GovSim's f-strings are) ------------------------------------------
#: COG utils.py 150-170 (get_sytem_prompt_v3): one string in GovSim, its literals concatenated. With 5 fishers the
#: counts read "four" and "five", as GovSim's; other counts are said in words the same way
SYSTEM_V3 = Template(
    "You are $name, a fisherman, and you fish every month in a lake along with $others_count other fishermen$others."
    " The lake has a carrying capacity of 100 tons of fish."
    " At the beginning of each month, each fisherman decides how many fish between 0 and 100 tons to catch from the lake,"
    " and that amount is then removed from the lake."
    " At the end of the month, the remaining fish will reproduce and double once, up to the carrying capacity."
    " For every ton of fish caught, a fisherman earns one thousand dollars."
    " Each fisherman's goal is to optimize his income in the long run over many months."
    " At the end of each month, the number of fish caught by each fisherman will be revealed, and the fishermen will have"
    " the opportunity to communicate with each other."
    " They can use this as an opportunity to negotiate and persuade others to influence their behavior in the next month."
    " For example, if there are 90 tons of fish at the beginning of the month and the $count fishermen catch a total of 30"
    " fish, there will be 60 tons of fish left at the end of the month before reproduction, and 100 tons after"
    " reproduction."
)
#: COG utils.py 92-95 (location_time_info)
WHERE_AND_WHEN = Template("Location: $location\nDate: $date")
#: COG utils.py 51-61 (memory_prompt): the header, then "- YYYY-MM-DD: memory" a line
KEY_MEMORIES = Template("Key memories of $name (format: YYYY-MM-DD: memory):")
#: COG act_prompts.py 36
HARVEST_TASK = Template("Task: With a fishing range set between $lo-$hi, how many tons of fish would you catch this month?")
#: COG utils.py 85 (reasoning_steps_prompt, `cot_prompt: think_step_by_step`)
STEP_BY_STEP = "Let's think step-by-step."
#: COG act_prompts.py 37-38
HARVEST_ANSWER = STEP_BY_STEP + ' Put the final answer after "Answer:", example Answer: N tons.'
#: simulation/scenarios/fishing/environment/env.py 7 (tons_in_lake): the month's first memory
LAKE = Template("Before everyone fishes, there are $stock tons of fish in the lake.")
#: env.py 12 (tons_caught): each fisher's own memory after the harvest
CAUGHT = Template("$name wanted to catch $wanted tons of fish, and caught $caught tons.")
#: COG converse.py 66 and 71: the mayor's report, the chat's first entry
MAYOR = "Mayor"
MAYOR_REPORT = "Ladies and gentlemen, let me give you the monthly fishing report. "
MAYOR_LINE = Template("$name caught $caught tons of fish. ")
MAYOR_REST = Template("$count more fishermen caught $caught tons of fish. ")  # (ours, past MAX_NAMED fishers)
#: COG converse_prompts.py 44-48
CHAT_SCENARIO = Template("Scenario: $names are engaged in a group chat.\nConversation so far:")
#: COG converse_prompts.py 52-53 (GovSim goes on: "Determine if your response concludes the conversation. If not,
#: identify the next speaker.", which the rounds of this scenario have no use for)
CHAT_TASK = "Task: What would you say next in the group chat? Ensure the conversation flows naturally and avoids repetition."
#: COG reflect_prompts.py 130-137 and 138 (the framework's reading of the agreed limit)
AGREEMENT_READING = (
    "In the following conversation, the participants discuss their fishing"
    " activities and activities and the weight of fish they caught. Determine"
    " whether there was an explicit agreement on a concrete fishing limit. Look"
    " for direct mention or agreement on a numerical catch limit that the group"
    " agreed to keep during this conversation."
)
AGREEMENT_ASK = ("Please provide the specific fishing limit per person as agreed upon in the conversation, if no limit "
                 "was agreed upon, please answer N/A.")
#: COG reflect_prompts.py 139-140
AGREEMENT_ANSWER = STEP_BY_STEP + ' Put the final answer after "Answer:".'
NO_AGREEMENT = "N/A"
#: what the framework may answer: N/A or a limit of 0 to 100 tons (GovSim: `option_fish_num = range(0, 101)`)
AGREEMENT_SPACE = Choice([NO_AGREEMENT, *(str(k) for k in range(int(CAPACITY) + 1))])
#: COG converse.py 140-141: what every fisher remembers of an agreement (always shown, for 63 days)
AGREED = Template("The community agreed on a maximum limit of $limit tons of fish per person.")
#: COG reflect_prompts.py 79 ("Conversation:") and 81-84, 105-110: the two thoughts on the conversation
CONVERSATION = "Conversation:"
PLAN_THOUGHT = ("Write down if there is anything from the conversation that you need to remember for your planning, "
                "from your own perspective, in a full sentence.")
MEMORIZE_THOUGHT = ("Write down if there is anything from the conversation that you might have found interesting from "
                    "your own perspective, in a full sentence.")
#: COG reflect_prompts.py 26-28 (the typo "infere" is GovSim's)
INSIGHTS = ("What high-level insights can you infere from the above statements? (example format: insight (because of "
            "1,5,3)")

# ----- the month ----------------------------------------------------------------------------------------------------
#: phases after the conversation's rounds: the framework's reading of the limit, then the fishers' two thoughts
AFTER_CHAT = ("agree", "plan", "memorize")
THOUGHTS = {"plan": PLAN_THOUGHT, "memorize": MEMORIZE_THOUGHT}
#: memories a phase retrieves: (focal points, top k) as persona.py 84 (harvest), converse.py 81-88 (a turn: the
#: context, empty in the baseline, and the last 4 utterances) and reflect.py 23 (home: "harvesting")
HARVEST_K, CHAT_K, REFLECT_K = 10, 5, 10
#: how long a thought lasts in memory (conf: store.expiration_delta, 63 days)
LASTS = timedelta(days=63)
MESSAGE_TOKENS, THOUGHT_TOKENS, INSIGHT_TOKENS = 40, 40, 60
#: memory kinds: always shown while they last (GovSim's always_include), and those that last only the month
ALWAYS = frozenset({"event", "agreement"})
THIS_MONTH = frozenset({"event"})


def name_of(agent_id: int) -> str:
    """A fisher's name: GovSim's five first, then "Fisher k"."""
    return NAMES[agent_id - 1] if 1 <= agent_id <= len(NAMES) else f"Fisher {agent_id}"


def listed(names: Sequence[str]) -> str:
    """COG utils.py 15-24 (list_to_comma_string): "John, Kate, Jack, Emma, and Luke"."""
    return "".join(n if i == 0 else f", and {n}" if i == len(names) - 1 else f", {n}" for i, n in enumerate(names))


def said(count: int) -> str:
    """A count as the system text says it: in words up to twenty, else in digits."""
    return COUNT_WORDS[count] if count < len(COUNT_WORDS) else str(count)


def system_text(agent_id: int, fishers: int, persona: str = "") -> str:
    """GovSim's v3 system text for fisher `agent_id` of `fishers` (GovSim appends a persona's goals after it); the
    others named in parentheses up to MAX_NAMED fishers."""
    others = f" ({', '.join(name_of(k) for k in range(1, fishers + 1) if k != agent_id)})" if fishers <= MAX_NAMED else ""
    text = SYSTEM_V3.substitute(name=name_of(agent_id), others_count=said(fishers - 1), others=others, count=said(fishers))
    return f"{text} You are {persona.strip().rstrip('.')}." if persona else text


def named(names: Sequence[str]) -> list[str]:
    """The names a prompt lists: all of them, or the first MAX_NAMED and how many more."""
    if len(names) <= MAX_NAMED:
        return list(names)
    return [*names[:MAX_NAMED - 1], f"{len(names) - MAX_NAMED + 1} more fishermen"]


# ----- GovSim's calendar (concurrent_env.py 20-32: a month's harvest on its first day, the chat the day before its
# last, the reflection on its last; the run starts on 2024-01-01) ----------------------------------------------------
def month_start(month: int) -> date:
    return date(2024 + (month - 1) // 12, (month - 1) % 12 + 1, 1)


def month_end(month: int) -> date:
    return month_start(month + 1) - timedelta(days=1)


def chat_day(month: int) -> date:
    return month_end(month) - timedelta(days=1)


#: the day of each phase of a month (a memory made in a phase is dated by it)
PHASE_DAY = {"harvest": month_start, "converse": chat_day, "agree": chat_day, "thought": chat_day, "reflect": month_end}


def made(month: int, kind: str) -> date:
    """When a memory of `kind` made in `month` is dated: the month's insight at its end, the rest on the chat's day."""
    return month_end(month) if kind == "insight" else chat_day(month)


def lasts_until(month: int, kind: str) -> date:
    """When it stops being retrieved: the month's own events at its end, a thought or an agreement 63 days on."""
    return month_end(month) if kind in THIS_MONTH else made(month, kind) + LASTS


_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def key_memories(fisher: "Fisher", month: int, today: date, focal: Sequence[str], k: int,
                 lake: Optional[str] = None) -> list[tuple[date, str]]:
    """The memories GovSim's retrieval gives (simulation/persona/cognition/retrieve.py 116-185), oldest first.

    Of the memories not yet expired (associative_memory.py 311-319), those always included first, then by 0.5 x
    0.99^i (i: the memory's place, oldest first, as GovSim's code counts it) + 2 x relevance; the top `k` per focal
    point, each memory once, sorted by date. GovSim's relevance is an embedding's cosine and it adds 3 x an
    importance the LLM rates 1-10; here relevance is the share of the focal point's words the memory holds, and
    there is no importance (docs/protocols.md). `lake`: the month's "Before everyone fishes ..." (always included
    while the month lasts).
    """
    nodes: list[tuple[date, str, bool]] = []
    for item in fisher.memory.items:
        if lasts_until(item.tick, item.kind) > today:
            nodes.append((made(item.tick, item.kind), item.text, item.kind in ALWAYS))
    if lake is not None and month_end(month) > today:
        nodes.append((month_start(month), lake, True))
        nodes.sort(key=lambda n: n[0])  # (stable: the lake's line first of its month)
    if not nodes:
        return []
    chosen: set[int] = set()
    for point in focal:
        words = _words(point)
        scores = [0.5 * 0.99 ** i + (2 * len(words & _words(text)) / len(words) if words else 0.0)
                  for i, (_, text, _) in enumerate(nodes)]
        top = max(scores) + 1
        scores = [top if always else s for s, (_, _, always) in zip(scores, nodes)]
        chosen.update(sorted(range(len(nodes)), key=lambda i: (-scores[i], i))[:k])
    return [(nodes[i][0], nodes[i][1]) for i in sorted(chosen, key=lambda i: (nodes[i][0], i))]


def memory_block(name: str, memories: Sequence[tuple[date, str]], numbered: bool = False) -> str:
    """COG utils.py 51-74 (memory_prompt, numbered_memory_prompt): the header, then a line per memory."""
    lines = [f"{f'{i}) ' if numbered else '- '}{when.isoformat()}: {text}" for i, (when, text) in enumerate(memories, 1)]
    return "\n".join([KEY_MEMORIES.substitute(name=name), *lines])


def first_sentence(text: str) -> str:
    """A thought as GovSim keeps it: the text before its first "." (reflect_prompts.py 87, 113: `stop_regex=r"\\."`)."""
    return text.split(".", 1)[0].strip()


_NUMBERED = re.compile(r"(?:^|\s)\d{1,2}[.)]\s+")
_EVIDENCE = re.compile(r"\s*\(because of[^)]*\)?", re.I)


def insights(text: str) -> list[str]:
    """The insights of a reflection: GovSim prefills "1." and keeps each numbered insight without its "(because of
    ...)" (reflect_prompts.py 33-60); here the text is split at its numbers."""
    parts = (_EVIDENCE.sub("", p).strip(" .\n") for p in _NUMBERED.split(text))
    return [p for p in parts if p]


# ----- what is said in the month (kept on the model) ----------------------------------------------------------------
@dataclasses.dataclass
class Chat:
    """This month's group chat: (speaker, utterance as it enters a prompt) entries, the mayor's report first; and the
    limits each message of the last round stated (a scripted framework reads them)."""

    entries: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    stated: list[Optional[float]] = dataclasses.field(default_factory=list)
    _text: tuple[int, str] = (-1, "")  # the dashed text and the entries it shows (built once a round, not per fisher)

    def dashed(self) -> str:
        """COG utils.py 8-12 (conversation_to_string_with_dash): "-Speaker: utterance" a line; the mayor's report and
        the latest MAX_CHAT_SHOWN messages."""
        if self._text[0] != len(self.entries):
            shown = self.entries[:1] + self.entries[max(1, len(self.entries) - MAX_CHAT_SHOWN):]
            self._text = (len(self.entries), "\n".join(f"-{speaker}: {said}" for speaker, said in shown))
        return self._text[1]

    def last(self, n: int) -> list[str]:
        return [said for _, said in self.entries[-n:]]


# ----- what each phase asks ------------------------------------------------------------------------------------------
def _fishers_text(model: "CommonsModel", fisher: "Fisher", where: Optional[str], kind: str) -> str:
    """The system text (with the fisher's persona), and where GovSim says it, the place and date."""
    text = system_text(fisher.unique_id, model.present(), fisher.persona)
    if where is None:
        return text
    return f"{text}\n" + WHERE_AND_WHEN.substitute(location=where, date=PHASE_DAY[kind](model.tick).isoformat())


def _lake(model: "CommonsModel") -> str:
    return LAKE.substitute(stock=f"{model.stock_start:g}")


def _own_words(request: DecisionRequest, memory: str) -> DecisionRequest:
    """An LLM fisher's request with GovSim's memory block in place of the platform's, and its persona already in the
    system text."""
    if request.backend != "llm":
        return request
    return dataclasses.replace(request, memory=memory, persona="")


def ask_harvest(model: "CommonsModel", fisher: "Fisher", phase: str) -> Optional[DecisionRequest]:
    """COG act_prompts.py 31-38: system text, place and date, key memories, the task and the step-by-step answer."""
    obs = model._obs_base()
    space = model._harvest_space()
    question = HARVEST_TASK.substitute(lo=0, hi=f"{space.hi:g}")
    if fisher.policy != "llm":  # (a scripted fisher reads no prompt)
        return model.request(fisher, phase, space, 0.0, obs, "", question)
    memories = key_memories(fisher, model.tick, month_start(model.tick), ["lake"], HARVEST_K, _lake(model))
    request = model.request(fisher, phase, space, 0.0, obs, "", question, own_context=_fishers_text(model, fisher, "lake", "harvest"),
                            reason_tokens=model.config.reasoning, system="", answer_prompt=HARVEST_ANSWER)
    return _own_words(request, memory_block(name_of(fisher.unique_id), memories))


def ask_converse(model: "CommonsModel", fisher: "Fisher", phase: str) -> Optional[DecisionRequest]:
    """COG converse_prompts.py 35-53: system text, place and date, key memories, the chat so far and the task."""
    chat: Chat = model.chat
    obs = model._obs_base()
    space, default = Text(max_tokens=MESSAGE_TOKENS), "I will catch a fair share."
    if fisher.policy != "llm":  # (a scripted fisher reads no prompt)
        return model.request(fisher, phase, space, default, obs, "", CHAT_TASK)
    names = listed(named([name_of(f.unique_id) for f in model.present_fishers()]))
    question = f"{CHAT_SCENARIO.substitute(names=names)}\n{chat.dashed()}\n{CHAT_TASK}"
    memories = key_memories(fisher, model.tick, chat_day(model.tick), ["", *chat.last(4)], CHAT_K, _lake(model))
    request = model.request(fisher, phase, space, default, obs, "", question,
                            own_context=_fishers_text(model, fisher, "restaurant", "converse"), system="")
    return _own_words(request, memory_block(name_of(fisher.unique_id), memories))


def scribe(model: "CommonsModel") -> "Fisher":
    """Whose request carries the framework's reading of the chat: the first LLM fisher taking part, else the first."""
    present = model.present_fishers()
    return next((f for f in present if f.policy == "llm"), present[0])


def ask_agreement(model: "CommonsModel", fisher: "Fisher", phase: str) -> Optional[DecisionRequest]:
    """COG reflect_prompts.py 128-140: the framework reads the whole chat and answers a limit per person, or N/A.

    GovSim asks its framework model; here the request goes out through one fisher's slot (`scribe`), with none of
    that fisher's text: no system text, persona, memory or feedback. A scripted scribe reads a limit stated by a
    majority of the last round's messages (strategies.py)."""
    if fisher is not scribe(model):
        return None
    chat: Chat = model.chat
    space = AGREEMENT_SPACE
    obs = dict(model._obs_base(), stated=list(chat.stated), present=model.present())
    context = f"{AGREEMENT_READING}\n{CONVERSATION}\n{chat.dashed()}" if fisher.policy == "llm" else ""
    request = model.request(fisher, phase, space, NO_AGREEMENT, obs, context, AGREEMENT_ASK,
                            reason_tokens=model.config.reasoning, system="", answer_prompt=AGREEMENT_ANSWER)
    if request.backend != "llm":
        return request
    return dataclasses.replace(request, persona="", memory="", feedback="")


def ask_thought(model: "CommonsModel", fisher: "Fisher", phase: str) -> Optional[DecisionRequest]:
    """COG reflect_prompts.py 64-111: system text, the conversation, and what to write down (an LLM fisher's own)."""
    if fisher.policy != "llm":
        return None
    question = f"{CONVERSATION}\n{model.chat.dashed()}\n{THOUGHTS[phase]}"
    request = model.request(fisher, phase, Text(max_tokens=THOUGHT_TOKENS), "Nothing in particular.", model._obs_base(), "",
                            question, own_context=_fishers_text(model, fisher, None, "thought"), system="")
    return _own_words(request, "")


def ask_reflection(model: "CommonsModel", fisher: "Fisher", phase: str) -> Optional[DecisionRequest]:
    """COG reflect_prompts.py 16-28: system text, numbered key memories, and the question for insights."""
    if fisher.policy != "llm":
        return None
    memories = key_memories(fisher, model.tick, month_end(model.tick), ["harvesting"], REFLECT_K)
    request = model.request(fisher, phase, Text(max_tokens=INSIGHT_TOKENS), "I will keep my catch sustainable.",
                            model._obs_base(), "", INSIGHTS, own_context=_fishers_text(model, fisher, None, "reflect"), system="")
    return _own_words(request, memory_block(name_of(fisher.unique_id), memories, numbered=True))


# ----- what each phase does ------------------------------------------------------------------------------------------
def harvested(model: "CommonsModel", demand: Mapping[int, float], caught: Mapping[int, float]) -> None:
    """Each fisher remembers what it wanted and caught (not the stock left: GovSim does not tell it), and the mayor
    opens the chat with every catch (GovSim's `manager` report)."""
    present = model.present_fishers()
    for f in present:
        if f.remembers and f.unique_id in caught:
            f.remember(model.tick, "event", CAUGHT.substitute(name=name_of(f.unique_id), wanted=f"{demand[f.unique_id]:g}",
                                                              caught=f"{caught[f.unique_id]:g}"))
    shown, rest = present[:MAX_NAMED], present[MAX_NAMED:]
    report = "".join(MAYOR_LINE.substitute(name=name_of(f.unique_id), caught=f"{caught.get(f.unique_id, 0.0):g}")
                     for f in shown)
    if rest:  # (ours: GovSim has five fishers)
        report += MAYOR_REST.substitute(count=len(rest), caught=f"{sum(caught.get(f.unique_id, 0.0) for f in rest):g}")
    model.chat = Chat([(MAYOR, MAYOR_REPORT + report)])


def chatted(model: "CommonsModel", phase: str, decisions: Sequence[Decision]) -> None:
    """A round of the chat: each message emitted and its limit recorded as a norm statement (kept out of the
    compact protocol's shared history), then added to the chat in the order it was made, as it enters a prompt
    (quoted: one line); the limit each states is kept for a scripted framework's reading."""
    said, stated = model._hear(decisions, None, model.edition.said_limit, conversation=True)
    chat: Chat = model.chat
    chat.entries.extend((name_of(aid), model.quoted(text)) for aid, text in said)
    chat.stated = list(stated)


def agreed(model: "CommonsModel", phase: str, decisions: Sequence[Decision]) -> None:
    """The framework's reading: a limit is next month's agreed limit and every fisher's memory; N/A is none."""
    value = next((str(d.value) for d in decisions), NO_AGREEMENT)
    limit = None if value == NO_AGREEMENT else float(value)
    model.agreed = limit
    read_by = next((d.agent_id for d in decisions), None)
    model.emit("agreement", None, None, limit=limit, read_by=read_by)
    if limit is None:
        return
    text = AGREED.substitute(limit=f"{limit:g}")
    model.norms.adoption(NORM, {"max_catch": limit}, text, read_by=read_by)
    for f in model.present_fishers():
        f.remember(model.tick, "agreement", text)


def thought(model: "CommonsModel", phase: str, decisions: Sequence[Decision]) -> None:
    """Each fisher's thought on the chat, its first sentence, kept in its memory (quoted: it is the model's text)."""
    fishers = model.agent_map()
    for d in decisions:
        model.emit("thought", d.agent_id, None, about=phase, text=str(d.value))
        kept = first_sentence(str(d.value))
        if kept:
            fishers[d.agent_id].remember(model.tick, "thought", model.quoted(kept))


def reflected(model: "CommonsModel", phase: str, decisions: Sequence[Decision]) -> None:
    """Each fisher's insights, one memory each (quoted)."""
    fishers = model.agent_map()
    for d in decisions:
        for insight in insights(str(d.value)):
            fishers[d.agent_id].remember(model.tick, "insight", model.quoted(insight))


def majority_reading(stated: Sequence[Optional[float]], present: int, capacity: float) -> str:
    """A scripted framework's reading: the limit more than half of the fishers stated in the last round, else N/A."""
    counts: dict[float, int] = {}
    for limit in stated:
        if limit is not None:
            counts[limit] = counts.get(limit, 0) + 1
    for limit, n in sorted(counts.items()):
        if n * 2 > present:
            return str(int(min(max(round(limit), 0), capacity)))
    return NO_AGREEMENT


ASKS = {"harvest": ask_harvest, "converse": ask_converse, "agree": ask_agreement, "thought": ask_thought,
        "reflect": ask_reflection}
DOES = {"converse": chatted, "agree": agreed, "thought": thought, "reflect": reflected}


def checked(config: Any) -> Optional[str]:
    """Why `config` cannot run GovSim's protocol (None when it can): its system text describes GovSim's lake, its
    month has no talk before fishing, no votes and no sanctions, and it has the group chat."""
    if config.capacity != CAPACITY or config.regrowth != REGROWTH:
        return (f"protocol govsim is GovSim's lake, whose system text states a capacity of 100 tons that doubles: set "
                f"capacity=100 and regrowth=2 (not {config.capacity:g} and {config.regrowth:g})")
    if config.fishers < 2:
        return f"protocol govsim has a group chat: at least 2 fishers, not {config.fishers}"
    if config.talk or config.norm_formation or config.sanctions:
        return "protocol govsim has no talk before fishing, votes or sanctions (talk, norm_formation and sanctions must be false)"
    if config.conversation_rounds < 1:
        return ("protocol govsim has GovSim's group chat: conversation_rounds must be at least 1 (its no-language "
                "ablation has another system text)")
    return None
