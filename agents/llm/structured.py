"""A decision's action space as a served model's output constraint, and the output bound it needs.

Modes (`llm.structured`):

- ``json_schema``: OpenAI-style ``response_format={"type": "json_schema", ...}`` (OpenAI, vLLM,
  SGLang). A Form is its own object; any other space is wrapped as ``{"answer": <value>}``.
- ``vllm``: vLLM's guided decoding fields in the request body: ``guided_choice`` (Choice, small
  grids), ``guided_regex`` (Number, Text), ``guided_json`` (Form).
- ``llama_cpp``: a GBNF grammar in the request body (``grammar``), as llama.cpp's servers take it
  (llama-cpp-python's ``llama_cpp.server`` and llama.cpp's ``llama-server``).
- ``none``: no constraint; the answer is parsed strictly (`agents.llm.parse.parse_strict`).
- ``auto``: ``json_schema`` for OpenAI-compatible chat classes (those with an ``extra_body``
  field, e.g. ``langchain_openai:ChatOpenAI``), else ``none``.

Every served call also gets ``max_tokens`` bounded by what its space needs (`max_tokens_for`).
All builders are pure functions of the space: they are unit-tested without a server.
"""

from __future__ import annotations

import json
import math
from typing import Any

from sim.core.spaces import Choice, Form, Number, Space, Text

MODES = ("auto", "json_schema", "vllm", "llama_cpp", "none")
MAX_GRID_AS_CHOICE = 64  # a non-unit Number grid up to this size is constrained as a choice list
TEXT_CHARS_PER_TOKEN = 6  # a Text of n tokens is allowed at most 6n characters (a generous bound)
DECIMALS = 3  # a continuous Number: at most this many decimals


# ---------------------------------------------------------------------------------------------
# integer ranges as patterns
# ---------------------------------------------------------------------------------------------

def _range_pieces(lo: int, hi: int) -> list[list[tuple[str, str]]]:
    """Non-negative integers lo..hi as a union of digit-class sequences, no leading zeros.

    Each piece is a list of (first digit, last digit) pairs, one per position; e.g. 0..20 gives
    [[0-9]], [[1-1],[0-9]], [[2-2],[0-0]] (the classic range-to-pattern split).
    """
    assert 0 <= lo <= hi
    pieces: list[list[tuple[str, str]]] = []
    for width in range(len(str(lo)), len(str(hi)) + 1):
        a = max(lo, 10 ** (width - 1) if width > 1 else 0)
        b = min(hi, 10 ** width - 1)
        if a <= b:
            pieces.extend(_same_width(str(a), str(b)))
    return pieces


def _same_width(a: str, b: str) -> list[list[tuple[str, str]]]:
    """a..b (decimal strings of one width) as digit-class sequences."""
    if len(a) == 1:
        return [[(a, b)]]
    if a[0] == b[0]:
        return [[(a[0], a[0])] + p for p in _same_width(a[1:], b[1:])]
    n = len(a) - 1
    zeros, nines = "0" * n, "9" * n
    pieces: list[list[tuple[str, str]]] = []
    first, last = int(a[0]), int(b[0])
    if a[1:] != zeros:  # a partial first block
        pieces += [[(a[0], a[0])] + p for p in _same_width(a[1:], nines)]
        first += 1
    tail: list[list[tuple[str, str]]] = []
    if b[1:] != nines:  # a partial last block
        tail = [[(b[0], b[0])] + p for p in _same_width(zeros, b[1:])]
        last -= 1
    if first <= last:  # whole blocks in between
        pieces.append([(str(first), str(last))] + [("0", "9")] * n)
    return pieces + tail


def _pieces_regex(pieces: list[list[tuple[str, str]]]) -> str:
    alts = []
    for piece in pieces:
        alts.append("".join(x if x == y else f"[{x}-{y}]" for x, y in piece))
    return alts[0] if len(alts) == 1 else "(" + "|".join(alts) + ")"


def _pieces_gbnf(pieces: list[list[tuple[str, str]]]) -> str:
    alts = []
    for piece in pieces:
        alts.append(" ".join(f'"{x}"' if x == y else f"[{x}-{y}]" for x, y in piece))
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


def int_range_regex(lo: int, hi: int) -> str:
    """A regular expression matching exactly the integers lo..hi (decimal, no leading zeros)."""
    return _signed(lo, hi, _pieces_regex, "|", '-')


def int_range_gbnf(lo: int, hi: int) -> str:
    """A GBNF expression matching exactly the integers lo..hi (decimal, no leading zeros)."""
    return _signed(lo, hi, _pieces_gbnf, " | ", '"-"')


def _signed(lo: int, hi: int, fmt, bar: str, minus: str) -> str:
    if lo > hi:
        raise ValueError(f"empty integer range {lo}..{hi}")
    alts = []
    if lo < 0:  # negatives: "-" then the magnitudes max(1, -hi)..-lo
        alts.append(f"{minus}{' ' if bar != '|' else ''}{fmt(_range_pieces(max(1, -hi), -lo))}")
    if hi >= 0:
        alts.append(fmt(_range_pieces(max(0, lo), hi)))
    return alts[0] if len(alts) == 1 else "(" + bar.join(alts) + ")"


# ---------------------------------------------------------------------------------------------
# what a Number allows
# ---------------------------------------------------------------------------------------------

def number_grid_values(space: Number) -> list[str] | None:
    """A short non-unit grid's values as strings (constrained as a choice list), else None."""
    if not space.step or _unit_integer(space):
        return None
    n = int(math.floor((space.hi - space.lo) / space.step + 1e-9)) + 1
    if n > MAX_GRID_AS_CHOICE:
        return None
    return [f"{v:g}" for v in space.grid()]


def _unit_integer(space: Number) -> bool:
    return space.step == 1 and float(space.lo).is_integer()


def _int_bounds(space: Number) -> tuple[int, int]:
    return math.ceil(space.lo - 1e-9), math.floor(space.hi + 1e-9)


def _integral(space: Number) -> bool:
    """Every admissible value is an integer (so an integer pattern over the range is exact)."""
    return bool(space.step) and float(space.step).is_integer() and float(space.lo).is_integer()


def number_regex(space: Number) -> str:
    grid = number_grid_values(space)
    if grid is not None:
        return "(" + "|".join(g.replace(".", r"\.").replace("-", r"\-") for g in grid) + ")"
    lo, hi = _int_bounds(space)
    if _integral(space) and lo <= hi:
        return int_range_regex(lo, hi)
    # continuous (or an off-integer grid too large to list): integer part in range, a few decimals;
    # the value is then validated (and snapped to the grid) as any other answer
    ilo, ihi = math.floor(space.lo), math.floor(space.hi)
    return int_range_regex(ilo, ihi) + rf"(\.[0-9]{{1,{DECIMALS}}})?"


def number_gbnf(space: Number) -> str:
    grid = number_grid_values(space)
    if grid is not None:
        return "(" + " | ".join(json.dumps(g) for g in grid) + ")"
    lo, hi = _int_bounds(space)
    if _integral(space) and lo <= hi:
        return int_range_gbnf(lo, hi)
    ilo, ihi = math.floor(space.lo), math.floor(space.hi)
    return int_range_gbnf(ilo, ihi) + f' ("." [0-9]{{1,{DECIMALS}}})?'


def number_chars(space: Number) -> int:
    """The longest answer a Number needs, in characters."""
    grid = number_grid_values(space)
    if grid is not None:
        return max(len(g) for g in grid)
    width = max(len(str(math.floor(space.lo))), len(str(math.floor(space.hi))))
    return width if _integral(space) else width + 1 + DECIMALS


# ---------------------------------------------------------------------------------------------
# JSON schema (json_schema, vllm guided_json)
# ---------------------------------------------------------------------------------------------

def value_schema(space: Space) -> dict[str, Any]:
    """A JSON schema for one value of `space` (not a Form)."""
    if isinstance(space, Choice):
        return {"type": "string", "enum": list(space.options)}
    if isinstance(space, Number):
        grid = number_grid_values(space)
        if grid is not None:
            return {"type": "number", "enum": [float(g) if "." in g else int(g) for g in grid]}
        kind = "integer" if _integral(space) else "number"
        return {"type": kind, "minimum": _num(space.lo), "maximum": _num(space.hi)}
    if isinstance(space, Text):
        return {"type": "string", "minLength": 1, "maxLength": space.max_tokens * TEXT_CHARS_PER_TOKEN}
    raise TypeError(f"no value schema for {type(space).__name__}")


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def json_schema(space: Space) -> dict[str, Any]:
    """The object schema of a decision: a Form's fields, or {"answer": value} for any other space."""
    if isinstance(space, Form):
        props = {k: value_schema(sub) for k, sub in space.fields}
    else:
        props = {"answer": value_schema(space)}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def response_format(space: Space) -> dict[str, Any]:
    """OpenAI's structured-output `response_format` for `space`."""
    return {"type": "json_schema", "json_schema": {"name": "decision", "strict": True, "schema": json_schema(space)}}


# ---------------------------------------------------------------------------------------------
# GBNF (llama.cpp)
# ---------------------------------------------------------------------------------------------

_GBNF_STRING_CHAR = r'[^"\\\x7F\x00-\x1F]'


def _gbnf_value(space: Space, *, quoted: bool) -> str:
    """A GBNF expression for one value; `quoted`: inside a JSON object (strings quoted)."""
    if isinstance(space, Choice):
        opts = [json.dumps(json.dumps(o)) if quoted else json.dumps(o) for o in space.options]
        return "(" + " | ".join(opts) + ")"
    if isinstance(space, Number):
        return number_gbnf(space)
    if isinstance(space, Text):
        n = space.max_tokens * TEXT_CHARS_PER_TOKEN
        if quoted:
            return f'"\\"" {_GBNF_STRING_CHAR}{{1,{n}}} "\\""'
        return f"[^\\n\\t ] [^\\n]{{0,{n - 1}}}" if n > 1 else "[^\\n\\t ]"
    raise TypeError(f"no GBNF for {type(space).__name__}")


def gbnf(space: Space) -> str:
    """A llama.cpp grammar whose every sentence is a valid answer for `space`.

    Choice: the option list; Number: the integer range as digits (exact, no leading zeros), a short
    grid as its values, a continuous range as digits with up to 3 decimals; Text: one line of at
    most 6 characters per allowed token; Form: a JSON object with the fields in order.
    """
    if isinstance(space, Form):
        parts = []
        for i, (name, sub) in enumerate(space.fields):
            key = json.dumps(json.dumps(name))
            sep = ' "," ws ' if i else ""
            parts.append(f'{sep}{key} ws ":" ws {_gbnf_value(sub, quoted=True)}')
        return 'root ::= "{" ws ' + " ".join(parts) + ' ws "}"\nws ::= [ ]?\n'
    return f"root ::= {_gbnf_value(space, quoted=False)}\n"


# ---------------------------------------------------------------------------------------------
# vLLM guided decoding
# ---------------------------------------------------------------------------------------------

def vllm_fields(space: Space) -> dict[str, Any]:
    """vLLM's guided-decoding request fields for `space` (sent in the request body)."""
    if isinstance(space, Choice):
        return {"guided_choice": list(space.options)}
    if isinstance(space, Number):
        grid = number_grid_values(space)
        if grid is not None:
            return {"guided_choice": grid}
        return {"guided_regex": number_regex(space)}
    if isinstance(space, Text):
        n = space.max_tokens * TEXT_CHARS_PER_TOKEN
        return {"guided_regex": rf"[^\s][^\n]{{0,{n - 1}}}" if n > 1 else r"[^\s]"}
    return {"guided_json": json_schema(space)}


# ---------------------------------------------------------------------------------------------
# output bound
# ---------------------------------------------------------------------------------------------

SLACK = 6  # whitespace, an end token, a tokenizer that splits a digit oddly


def max_tokens_for(space: Space, mode: str) -> int:
    """The most output tokens a served answer to `space` needs (an ASCII character is >= 1 token's worth)."""
    json_wrap = mode in ("json_schema",) or isinstance(space, Form)
    if isinstance(space, Form):
        body = sum(len(k) + 6 + _value_chars(sub, quoted=True) for k, sub in space.fields)
        return body + 2 + SLACK
    n = _value_chars(space, quoted=json_wrap)
    if isinstance(space, Text):
        n = space.max_tokens + (2 if json_wrap else 0)  # tokens, not characters
    return n + (len('{"answer": }') if json_wrap else 0) + SLACK


def _value_chars(space: Space, *, quoted: bool) -> int:
    if isinstance(space, Choice):
        return max(len(o) for o in space.options) + (2 if quoted else 0)
    if isinstance(space, Number):
        return number_chars(space)
    if isinstance(space, Text):
        return space.max_tokens + (2 if quoted else 0)
    raise TypeError(type(space).__name__)


# ---------------------------------------------------------------------------------------------
# per-call keyword arguments for a LangChain chat model
# ---------------------------------------------------------------------------------------------

def openai_compatible(chat_model: Any) -> bool:
    """A chat class that sends an OpenAI-style request body (accepts `extra_body`)."""
    fields = getattr(type(chat_model), "model_fields", {}) or {}
    return "extra_body" in fields


def resolve_mode(mode: str, chat_model: Any) -> str:
    """`auto` made concrete for this chat model; a concrete mode is kept."""
    if mode not in MODES:
        raise ValueError(f"llm.structured must be one of {MODES}, got {mode!r}")
    if mode != "auto":
        return mode
    return "json_schema" if openai_compatible(chat_model) else "none"


def call_kwargs(space: Space, mode: str, chat_model: Any, seed: int | None = None) -> dict[str, Any]:
    """Keyword arguments for `chat_model.invoke(messages, **kwargs)`: the constraint and the bound.

    The constraint goes in `extra_body` (merged into the request body by the OpenAI client), so the
    chat class does not reinterpret it. An OpenAI-compatible class also gets the request's `seed`
    (servers that honour it, llama.cpp's and vLLM's, then answer reproducibly). A class without
    `extra_body` gets only `max_tokens`, and that only when it has such a field.
    """
    fields = getattr(type(chat_model), "model_fields", {}) or {}
    kwargs: dict[str, Any] = {}
    if "max_tokens" in fields or "max_completion_tokens" in fields or openai_compatible(chat_model):
        bound = max_tokens_for(space, mode)
        own = getattr(chat_model, "max_tokens", None)  # the user's own cap, if lower, is kept
        kwargs["max_tokens"] = min(bound, own) if isinstance(own, int) and own > 0 else bound
    if not openai_compatible(chat_model):
        return kwargs
    if seed is not None:
        kwargs["seed"] = int(seed) % 2 ** 31
    # langchain-openai sends the bound as `max_completion_tokens` (OpenAI's name, honoured by vLLM);
    # llama.cpp's servers read only the legacy `max_tokens`, so the others get it in the body too
    legacy = {} if mode == "json_schema" or "max_tokens" not in kwargs else {"max_tokens": kwargs["max_tokens"]}
    if mode == "none":
        body: dict[str, Any] = {}
    elif mode == "json_schema":
        body = {"response_format": response_format(space)}
    elif mode == "vllm":
        body = vllm_fields(space)
    elif mode == "llama_cpp":  # (cache_prompt: the slot keeps the prompt's KV for the next call that shares it)
        body = {"grammar": gbnf(space), "cache_prompt": True}
    else:
        raise ValueError(f"unknown structured mode {mode!r}")
    body = {**legacy, **body}
    if body:
        kwargs["extra_body"] = {**(getattr(chat_model, "extra_body", None) or {}), **body}
    return kwargs
