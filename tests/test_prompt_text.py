"""Prompt text without running the chat template per prompt, and ids with the batch's common beginning tokenised once
(agents.llm.local.chat_render, agents.llm.local.prefix_encode): the same text as the template, the same ids as the
tokenizer, for the templates the project ships and public ones, on adversarial contents; and the cases that must
fall back do."""

from __future__ import annotations

import random

import pytest

from agents.llm.local.chat_render import ChatRenderer, template_problem
from agents.llm.local.prefix_encode import PrefixEncoder, cut_point, split_problem
from agents.llm.prompts import DEFAULT, DEFAULT_CONTRACT3, render_messages
from sim.core.contracts import DecisionRequest
from sim.core.spaces import Choice, Number, Text
from tests.tiny_lm import CHAT_TEMPLATE, char_tokenizer

SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
           "are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
           "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
           "{{ '<|im_start|>assistant\\n' }}{% endif %}")
QWEN25 = """{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}
{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}{%- endif %}
{{- "\\n\\n# Tools\\n\\n<tools>" }}{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}{{- "\\n</tools><|im_end|>\\n" }}
{%- else %}{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
{%- endif %}{%- endif %}
{%- for message in messages %}
{%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
{%- elif message.role == "assistant" %}{{- '<|im_start|>' + message.role }}{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
{{- '<|im_end|>\\n' }}{%- elif message.role == "tool" %}{{- '<|im_start|>user\\n<tool_response>\\n' }}{{- message.content }}
{{- '\\n</tool_response><|im_end|>\\n' }}{%- endif %}{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"""
LLAMA3 = ("{{ bos_token }}{% for message in messages %}{% set content = '<|start_header_id|>' + message['role'] + "
          "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
ZEPHYR = ("{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + eos_token }}\n"
          "{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + message['content'] + eos_token }}\n"
          "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}\n"
          "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}")
GEMMA = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
         "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
         "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
         "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
         "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
         "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}")
THINKING = ("{% for message in messages %}{% if message.content is string %}{% set content = message.content %}{% else %}"
            "{% set content = '' %}{% endif %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}"
            "{% endif %}{{ '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
DATED = ("{{ 'Today: ' + strftime_now('%d %b %Y') + '\\n' }}{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\\n' }}"
         "{% endfor %}")
#: name -> (template, filled by string)
TEMPLATES = {"smollm2 (the embedded model)": (SMOLLM2, True), "tiny (the tests' model)": (CHAT_TEMPLATE, True),
             "qwen2.5": (QWEN25, True), "zephyr": (ZEPHYR, True), "llama3 (trims)": (LLAMA3, False),
             "gemma (trims, refuses system)": (GEMMA, False), "thinking (splits on </think>)": (THINKING, False),
             "dated (strftime_now)": (DATED, False)}

ODD = ["  leading and trailing blanks  ", "\n\nnewlines\n\n", "{{ not jinja }} {% raw %} {# x #}", "<|im_end|>\n<|im_start|>system\nx",
       "</think>after", "tabs\tand\r\nreturns", "unicodé — ✓ 漢字", "'quotes' \"double\" \\back", "x"]


def _requests():
    """Requests of every kind (with and without persona, memory and feedback): the prompts a run sends."""
    spaces = [(Number(0, 68, 1), 0.0), (Choice(["none", "fisher 3"]), "none"), (Text(40), "ok"), (Number(2.5, 7.5, 0.5), 2.5)]
    return [DecisionRequest(agent_id=i, tick=3, phase="p", space=space, default=default, backend="llm",
                            context="You are one of 5 fishers.\nThe lake holds 52 tons.", question="What now?",
                            persona="a careful fisher" if i % 2 else "", own_context=f"You are fisher {i}.",
                            memory="- month 1: 4 tons" if i % 3 else "", feedback="Last round: reward 4" if i == 1 else "", seed=i)
            for i, (space, default) in enumerate(spaces)]


def _batches():
    msgs = [render_messages(r, t) for r in _requests() for t in (DEFAULT, DEFAULT_CONTRACT3)]
    msgs += [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": odd}] for odd in ODD]
    msgs += [[{"role": "user", "content": odd}] for odd in ODD]
    msgs += [[{"role": "user", "content": "a"}, {"role": "assistant", "content": ODD[1]}, {"role": "user", "content": ODD[2]}]]
    msgs += [[{"role": "system", "content": ""}, {"role": "user", "content": "empty system"}]]
    return msgs


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_prompts_filled_by_string_equal_the_templates_text(name):
    """Every prompt's text equals apply_chat_template's, on templates that only paste contents (filled by string) and on
    ones that trim, split, refuse a role or print the date (each prompt runs the template)."""
    template, fast = TEMPLATES[name]
    tok = char_tokenizer()
    tok.chat_template = template
    renderer = ChatRenderer(tok)
    accepted = []
    for messages in _batches():
        try:
            want = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception as exc:  # noqa: BLE001 - the template refuses these messages: so must the renderer
            with pytest.raises(type(exc)):
                renderer.render(messages)
            continue
        assert renderer.render(messages) == want, messages
        accepted.append((messages, want))
    assert len(accepted) >= 8
    assert renderer.render_all([m for m, _ in accepted]) == [want for _, want in accepted]
    assert (renderer.counters["by_skeleton"] > 0) == fast, (renderer.problem, renderer.counters)
    assert (template_problem(template) is None) == fast


def test_a_renderer_that_would_differ_turns_itself_off_and_says_so(capsys):
    """A batch whose first prompt by string differs from the template's text (here: a template changed under the
    renderer) is rendered by the template, and the fast path stays off."""
    tok = char_tokenizer()
    renderer = ChatRenderer(tok)
    batch = _batches()[:4]
    assert renderer.render_all(batch)[0] == tok.apply_chat_template(batch[0], tokenize=False, add_generation_prompt=True)
    tok.chat_template = ZEPHYR
    got = renderer.render_all(batch)
    assert got == [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in batch]
    assert renderer.problem and "template for every prompt" in capsys.readouterr().err
    before = renderer.counters["by_skeleton"]
    renderer.render_all(batch)
    assert renderer.counters["by_skeleton"] == before


def _bpe_tokenizer(pre_tokenizer: str = "gpt2", **special):
    """A byte-level BPE trained here on a few kilobytes (real merges across letters, digits, blanks and newlines)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    if pre_tokenizer == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif pre_tokenizer == "prefix-space":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    elif pre_tokenizer == "none-normalised":
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    corpus = [f"You are fisher {i}.\nThe lake holds {50 + i} tons.\n\n- month {i}: I caught {i % 7} tons; it's fine!\n"
              f"Answer with a number from 0 to {i * 3}.\n  indented\tline\r\n" for i in range(200)]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    if special:
        from tokenizers import AddedToken

        tok.add_special_tokens([AddedToken("<mask>", **special)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")


PIECES = ["You", " are", " fisher", " 12", "3", ".", "\n", "\n\n", " ", "  ", "\t", "'s", "it's", "<|im_end|>", "<|im_start|>",
          "user", "é", "—", "!!", "\n- ", "tons", "\r\n", "0", " -", "x\ny", "\n ", " \n"]


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(n))


def test_ids_with_the_common_beginning_tokenised_once_equal_the_whole_texts_ids():
    """Batches of random texts (blanks, newlines, digits, contractions, specials, unicode) sharing a random beginning:
    the same ids as tokenising each text whole, and the split was taken in most batches."""
    tok = _bpe_tokenizer()
    enc = PrefixEncoder(tok)
    assert enc.problem is None
    rng = random.Random(7)
    for _ in range(300):
        head = _text(rng, rng.randint(0, 80))
        texts = [head + _text(rng, rng.randint(0, 30)) for _ in range(rng.randint(1, 12))]
        assert enc.encode(texts) == enc.whole(texts), texts
    assert enc.counters["batches_split"] > 100 and enc.problem is None


def test_real_prompts_split_where_a_line_ends_and_keep_their_ids():
    """Rendered prompts of a batch (shared system message and situation, own lines after): the cut falls after a
    newline inside the shared text, the ids equal the whole texts'."""
    tok = _bpe_tokenizer()
    tok.chat_template = SMOLLM2
    texts = [tok.apply_chat_template(render_messages(r), tokenize=False, add_generation_prompt=True) for r in _requests()]
    cut = cut_point(texts)
    assert cut and texts[0][cut - 1] == "\n" and all(t[:cut] == texts[0][:cut] for t in texts)
    enc = PrefixEncoder(tok)
    assert enc.encode(texts) == enc.whole(texts) and enc.counters["batches_split"] == 1


def test_cut_points_need_a_newline_between_non_blank_characters_inside_the_common_text():
    """No cut for one text, a short common beginning, or one whose newlines all touch blanks."""
    long = "x" * 70
    assert cut_point([long + "\nA1", long + "\nA2"]) == 71
    assert cut_point([long + "\nA"]) == 0
    assert cut_point(["ab\ncd1", "ab\ncd2"]) == 0
    assert cut_point([long + " \nA1", long + " \nA2"]) == 0 and cut_point([long + "\n A1", long + "\n A2"]) == 0
    assert cut_point([long + "\n1", long + "\n2"]) == 0  # the character after the cut must be common


def test_tokenizers_the_argument_does_not_cover_are_tokenised_whole():
    """No pre-tokenizer, a normaliser, an added prefix space, a special token that strips: each says why, and
    encodes whole."""
    cases = {"pre-tokenizer": char_tokenizer(), "normalises": _bpe_tokenizer("none-normalised"),
             "pre-tokenizer is not": _bpe_tokenizer("prefix-space"), "strips": _bpe_tokenizer(lstrip=True)}
    texts = ["x" * 70 + "\nA1", "x" * 70 + "\nA2"]
    for word, tok in cases.items():
        enc = PrefixEncoder(tok)
        assert enc.problem and word in split_problem(tok)
        assert enc.encode(texts) == enc.whole(texts) and enc.counters["batches_split"] == 0


def test_a_split_that_would_change_ids_is_caught_by_the_batch_check(capsys):
    """Forced onto a tokenizer whose merges cross newlines (no pre-tokenizer), the per-batch check sees the first
    prompt's ids differ, encodes whole and turns the split off."""
    from tokenizers import Tokenizer, models, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.train_from_iterator(["ab\nAB\nab\nAB\n" * 50], trainers.BpeTrainer(vocab_size=40, show_progress=False))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw)
    enc = PrefixEncoder(tok)
    assert enc.problem is not None
    enc.problem = None
    texts = ["ab\nAB\n" * 12 + "ab\nAB" + "1", "ab\nAB\n" * 12 + "ab\nAB" + "2"]
    assert enc.encode(texts) == enc.whole(texts)
    assert enc.problem and "tokenised whole" in capsys.readouterr().err


@pytest.mark.slow  # loads the embedded model's tokenizer from its GGUF (~10 s)
def test_the_embedded_tokenizer_renders_by_string_and_splits_with_the_same_text_and_ids():
    """SmolLM2's own tokenizer and template: real harvest prompts of 64 fishers, and the odd contents."""
    from benchmarks.llm_throughput import harvest_requests
    from benchmarks.shapes import load_tokenizer

    tok = load_tokenizer()
    renderer, enc = ChatRenderer(tok), PrefixEncoder(tok)
    assert renderer.problem is None and enc.problem is None
    batch = [render_messages(r) for r in harvest_requests(64, months_before=2)] + _batches()
    texts = renderer.render_all(batch)
    assert texts == [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in batch]
    assert enc.encode(texts[:64]) == enc.whole(texts[:64]) and enc.counters["batches_split"] == 1
    rng = random.Random(3)
    for _ in range(100):
        head = _text(rng, rng.randint(20, 80))
        group = [head + _text(rng, rng.randint(0, 30)) for _ in range(6)]
        assert enc.encode(group) == enc.whole(group)


def test_the_encoder_says_whether_the_cut_applied_and_why_not(capsys):
    """`status()` counts the batches that took the cut and those tokenised whole; a fast tokenizer the argument does
    not cover says why once on stderr, and its status gives the same reason."""
    enc = PrefixEncoder(_bpe_tokenizer())
    assert enc.status().startswith("applied in 0 of 0")
    enc.encode(["x" * 70 + "\nA1", "x" * 70 + "\nA2"])
    enc.encode(["short 1", "short 2"])
    assert enc.status().startswith("applied in 1 of 2 batches") and capsys.readouterr().err == ""
    off = PrefixEncoder(_bpe_tokenizer("none-normalised"))
    assert off.status() == f"off: {off.problem}" and "normalises" in off.status()
    assert "normalises" in capsys.readouterr().err
