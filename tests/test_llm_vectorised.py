"""The device-side decoding of the local LM, on a tiny random Llama (fast), against simple per-row references."""

from __future__ import annotations

import math
import random
from collections import Counter
from contextlib import contextmanager
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from agents.llm.local import attention  # noqa: E402
from agents.llm.local.attention import prefix_attention, prefix_by_reference, shared_prefix  # noqa: E402
from agents.llm.local.layout import layout  # noqa: E402
from agents.llm.local.numbers import feasible as _feasible  # noqa: E402
from agents.llm.local.sampling import gumbel as _gumbel  # noqa: E402
from agents.llm.local.llm import LocalLLM  # noqa: E402
from agents.llm.prompts import render_messages  # noqa: E402
from sim.core.contracts import DecisionRequest  # noqa: E402
from sim.core.spaces import Choice, Number, Text  # noqa: E402
from tests.tiny_lm import tiny_lm  # noqa: E402

NO_SHARING = 10**9  # a min_shared_prefix no prompt reaches: every row forwards its whole prompt


@contextmanager
def planning(lm, **knobs):
    """The engine's batch-planning settings (`min_shared_prefix`, `split_cost`) set for the block, then restored."""
    old = {k: getattr(lm, k) for k in knobs}
    for k, v in knobs.items():
        setattr(lm, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(lm, k, v)


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


def _prompt(lm, i: int, system: str = "You take part in a simulation.") -> list[int]:
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": f"Fisher {i}: {'ab ' * (i % 7)}how many tons?"}]
    return lm.encode([lm.render(msgs)])[0]


def _step_scores(lm, ids: list[int], digits: str, lo: int, hi: int) -> tuple[list[str], list[float]]:
    """Per-row reference: candidates (digits, "" = stop) and their log-probs after `ids` + `digits`, no cache."""
    x = torch.tensor([ids + [lm.digit_ids[int(c)] for c in digits]])
    with torch.no_grad():
        logits = lm.model(input_ids=x).logits[0, -1].to(torch.float64)
    logp = torch.log_softmax(logits, -1)
    cands, lps = [], []
    for d in range(10):
        if _feasible(digits + str(d), lo, hi):
            cands.append(str(d))
            lps.append(float(logp[lm.digit_ids[d]]))
    if digits and lo <= int(digits) <= hi:
        cands.append("")
        lps.append(math.log(max(1e-300, 1 - sum(math.exp(float(logp[t])) for t in lm.digit_ids))))
    return cands, lps


def _reference_greedy(lm, ids, lo, hi) -> int:
    digits = ""
    while True:
        cands, lps = _step_scores(lm, ids, digits, lo, hi)
        pick = cands[max(range(len(lps)), key=lambda k: (lps[k], -k))]
        if pick == "":
            return int(digits)
        digits += pick
        if not any(_feasible(digits + str(d), lo, hi) for d in range(10)):
            return int(digits)


def _reference_distribution(lm, ids, lo, hi, temperature) -> dict[int, float]:
    """The exact distribution of the decoded value: every path enumerated, softmax(lp / T) at each step."""
    out: dict[int, float] = {}

    def walk(digits: str, p: float) -> None:
        cands, lps = _step_scores(lm, ids, digits, lo, hi)
        top = max(lps)
        w = [math.exp((x - top) / temperature) for x in lps]
        for c, wi in zip(cands, w):
            q = p * wi / sum(w)
            if c == "":
                out[int(digits)] = out.get(int(digits), 0) + q
            elif not any(_feasible(digits + c + str(d), lo, hi) for d in range(10)):
                out[int(digits + c)] = out.get(int(digits + c), 0) + q
            else:
                walk(digits + c, q)

    walk("", 1.0)
    return out


def _bounds(rng: random.Random) -> tuple[int, int]:
    kind = rng.choice(["zero", "one", "four", "any", "point"])
    if kind == "zero":
        return 0, rng.choice([0, 1, 9, 10, 100])
    if kind == "one":
        lo = rng.randint(0, 9)
        return lo, rng.randint(lo, 9)
    if kind == "four":
        lo = rng.randint(1000, 9999)
        return lo, rng.randint(lo, 9999)
    if kind == "point":
        v = rng.randint(0, 5000)
        return v, v
    lo = rng.randint(0, 3000)
    return lo, lo + rng.randint(0, 20000)


def test_numbers_always_in_range_for_random_bounds(lm):
    rng = random.Random(7)
    bounds = [_bounds(rng) for _ in range(120)]
    prompts = [_prompt(lm, i) for i in range(len(bounds))]
    for temperature in (0.0, 1.0, 3.0):
        got = lm.decode_numbers(prompts, bounds, temperature, list(range(len(bounds))))
        for (lo, hi), (value, n) in zip(bounds, got):
            assert lo <= value <= hi, (lo, hi, value)
            assert len(str(value)) <= n <= len(str(value)) + 1


def test_numbers_at_temperature_zero_equal_the_per_row_reference(lm):
    rng = random.Random(3)
    bounds = [_bounds(rng) for _ in range(24)]
    prompts = [_prompt(lm, i) for i in range(len(bounds))]
    got = lm.decode_numbers(prompts, bounds, 0.0, [0] * len(bounds))
    assert [v for v, _ in got] == [_reference_greedy(lm, p, lo, hi) for p, (lo, hi) in zip(prompts, bounds)]


@pytest.mark.parametrize("lo,hi,temperature", [(3, 27, 1.0), (0, 9, 2.0)])
def test_numbers_sampled_match_the_exact_distribution(lm, lo, hi, temperature):
    """Over 3,000 seeds the empirical distribution is within sampling error of the exact one."""
    ids = _prompt(lm, 5)
    exact = _reference_distribution(lm, ids, lo, hi, temperature)
    assert abs(sum(exact.values()) - 1) < 1e-9
    n = 3000
    got = Counter(v for v, _ in lm.decode_numbers([ids] * n, [(lo, hi)] * n, temperature, range(10_000, 10_000 + n)))
    tv = 0.5 * sum(abs(got.get(v, 0) / n - p) for v, p in exact.items())
    assert set(got) <= set(exact) and tv < 0.05, (tv, exact, got)


def test_choice_picks_follow_softmax_of_scores_and_greedy_is_argmax(lm):
    ids = _prompt(lm, 2)
    options = ["none", "fisher 3", "fisher 12", "all"]
    (_, scores), = lm.choose([ids], [options], 0.0, [0])
    n, temperature = 3000, 0.5
    picks = Counter(k for k, _ in lm.choose([ids] * n, [options] * n, temperature, range(n)))
    top = max(scores)
    w = [math.exp((s - top) / temperature) for s in scores]
    tv = 0.5 * sum(abs(picks.get(k, 0) / n - w[k] / sum(w)) for k in range(len(options)))
    assert tv < 0.04, (tv, scores, picks)
    assert lm.choose([ids], [options], 0.0, [5])[0][0] == max(range(4), key=lambda k: (scores[k], -k))


def test_choice_scores_equal_per_option_reference(lm):
    """Mean token log-likelihood of each option, computed by one full forward per option."""
    ids = _prompt(lm, 4)
    options = ["a", "fisher 3", "none"]
    (_, scores), = lm.choose([ids], [options], 0.0, [0])
    for opt, s in zip(options, scores):
        toks = lm.tokenizer.encode(opt, add_special_tokens=False)
        with torch.no_grad():
            logp = torch.log_softmax(lm.model(input_ids=torch.tensor([ids + toks])).logits[0].double(), -1)
        ref = sum(float(logp[len(ids) - 1 + j, t]) for j, t in enumerate(toks)) / len(toks)
        assert s == pytest.approx(ref, abs=1e-6)


def test_gumbel_noise_is_a_pure_function_of_seed_step_and_token():
    seeds = torch.tensor([1, 2**62 + 5, 1])
    ids = torch.tensor([[7, 8, 9], [7, 8, 9], [9, 8, 7]])
    g = _gumbel(seeds, 2, 3, ids)
    assert torch.equal(g[0], g[2].flip(0))  # same seed and token: same noise, wherever it sits
    assert not torch.equal(g[0], g[1]) and not torch.equal(g, _gumbel(seeds, 2, 4, ids))
    big = _gumbel(torch.arange(4000), 1, 0, torch.zeros(4000, 1, dtype=torch.long)).flatten()
    assert abs(float(big.mean()) - 0.5772) < 0.06 and abs(float(big.std()) - math.pi / math.sqrt(6)) < 0.06


def _req(agent: int, kind: str, persona: str, phase: str, filler: int) -> DecisionRequest:
    ctx = "You fish in a lake with others. The lake holds 80 tons." + " It rained." * filler
    if kind == "number":
        space, default = Number(0, 80 + agent % 5, 1), 0.0
    elif kind == "choice":
        space, default = Choice(["none", f"fisher {agent % 4}", "fisher 9"]), "none"
    else:
        space, default = Text(6), "ok"
    return DecisionRequest(agent_id=agent, tick=1, phase=phase, space=space, default=default, backend="llm", context=ctx,
                           own_context=f"You are fisher {agent}.", question=f"What now ({phase})?", persona=persona,
                           memory="month 1: caught 3" if agent % 3 == 0 else "", seed=1000 + agent)


def test_batch_independence_alone_in_three_and_in_two_hundred_mixed(lm):
    eng = LocalLLM(lm=lm, temperature=0.9)
    kinds, personas, phases = ["number", "choice", "text"], ["", "a cautious fisher", "a greedy newcomer"], ["harvest", "talk"]
    crowd = [_req(i, kinds[i % 3], personas[(i // 3) % 3], phases[i % 2], i % 5) for i in range(200)]
    probes = [crowd[0], crowd[61], crowd[122], crowd[199], crowd[104]]

    def answer(reqs):
        return [(a.value, a.tokens_out) for a in eng.answer(reqs, [render_messages(r) for r in reqs])]

    alone = [answer([r])[0] for r in probes]
    assert answer(probes[:3]) == alone[:3]
    everyone = answer(crowd)
    assert [everyone[crowd.index(r)] for r in probes] == alone
    assert lm.counters["prefix_forwards"] > 0


def test_two_templates_compute_two_shared_prefixes_with_answers_equal_to_no_sharing(lm):
    prompts = [_prompt(lm, i, "You take part in a simulation of a fishing village, and of its lake." if i % 2 else
                       "Answer briefly; you are an agent in a market game with many traders.") for i in range(16)]
    bounds = [(0, 50)] * 16
    before = dict(lm.counters)
    shared = lm.decode_numbers(prompts, bounds, 0.8, range(16))
    assert lm.counters["prefix_forwards"] - before["prefix_forwards"] == 2
    plan = layout(prompts, lm.rules)
    assert len(plan) == 2 and all(p >= 16 for p, _, _ in plan)
    with planning(lm, min_shared_prefix=NO_SHARING):
        before = dict(lm.counters)
        unshared = lm.decode_numbers(prompts, bounds, 0.8, range(16))
        assert lm.counters["prefix_forwards"] == before["prefix_forwards"]
    assert shared == unshared


def test_two_personas_extend_one_shared_situation_with_answers_equal_to_no_sharing(lm):
    """Mixed personas: the situation before the personas differ is forwarded once, each persona only
    extends it (a prefix tree), and the answers equal those of a batch computed without sharing."""
    situation = "You fish in a lake shared by many fishers. " + "The lake is deep and the water is cold. " * 6
    def prompt(i: int) -> list[int]:
        persona = "a careful fisher who saves fish for next year" if i % 2 else "a greedy newcomer who wants money now"
        msgs = [{"role": "system", "content": "You take part in a simulation."},
                {"role": "user", "content": f"{situation}\nYou are {persona}. You are fisher {i}. How many tons?"}]
        return lm.encode([lm.render(msgs)])[0]

    prompts = [prompt(i) for i in range(12)]
    plan = layout(prompts, lm.rules)
    assert len(plan) == 2
    (p1, chain1, _), (p2, chain2, _) = plan
    assert chain1 == chain2 and len(chain1) == 1 and 16 <= chain1[0] < min(p1, p2)  # one common ancestor
    before = dict(lm.counters)
    shared = lm.decode_numbers(prompts, [(0, 50)] * 12, 0.8, range(12))
    assert lm.counters["prefix_forwards"] - before["prefix_forwards"] == 3  # the situation, then each persona's extension
    assert lm.counters["prefix_tokens"] - before["prefix_tokens"] == max(p1, p2) + min(p1, p2) - chain1[0]
    with planning(lm, min_shared_prefix=NO_SHARING):
        unshared = lm.decode_numbers(prompts, [(0, 50)] * 12, 0.8, range(12))
    assert shared == unshared


def _trie_size(prefixes: set) -> int:
    """Tokens a prefix tree forwards: each prefix's extension beyond the longest shorter one in the set."""
    total = 0
    for p in prefixes:
        parent = max((len(q) for q in prefixes if len(q) < len(p) and p[:len(q)] == q), default=0)
        total += len(p) - parent
    return total


def test_a_two_level_prefix_tree_forwards_each_prefix_once_with_answers_equal_to_no_sharing(lm):
    """Two personas, each with two moods: the situation, each persona and each mood are forwarded once."""
    situation = "You fish in a lake shared by many fishers. " + "The lake is deep and the water is cold. " * 4
    personas = ["a careful fisher who saves fish for next year", "a greedy newcomer who wants money now"]
    moods = ["Today the sky is grey and a storm is coming over the hills.",
             "Today the sun is bright and the market pays well for fish."]

    def prompt(i: int) -> list[int]:
        msgs = [{"role": "system", "content": "You take part in a simulation."},
                {"role": "user", "content": f"{situation}\nYou are {personas[i % 2]}. {moods[(i // 2) % 2]} "
                                            f"You are fisher {i}. How many tons?"}]
        return lm.encode([lm.render(msgs)])[0]

    prompts = [prompt(i) for i in range(24)]
    plan = layout(prompts, lm.rules)
    prefixes = {tuple(prompts[b[0][0]][:n]) for shared, chain, b in plan for n in (*chain, shared) if n}
    assert len(plan) == 4 and max(len(chain) for _, chain, _ in plan) == 2
    before = dict(lm.counters)
    shared = lm.decode_numbers(prompts, [(0, 50)] * 24, 0.8, range(24))
    assert lm.counters["prefix_forwards"] - before["prefix_forwards"] == len(prefixes) == 7
    assert lm.counters["prefix_tokens"] - before["prefix_tokens"] == _trie_size(prefixes)
    with planning(lm, min_shared_prefix=NO_SHARING):
        unshared = lm.decode_numbers(prompts, [(0, 50)] * 24, 0.8, range(24))
    assert shared == unshared


def test_rows_whose_own_extension_does_not_pay_stay_in_one_group(lm):
    """A GPU-sized split cost: 300 rows of one text and 30 with texts of their own make 2 groups, not 31."""
    base = list(range(100, 180))
    ids = [base + [7, 8, 9, i % 50 + 200] for i in range(300)] + [base + [500 + i] * 6 + [1] for i in range(30)]
    with planning(lm, split_cost=4096):
        plan = layout(ids, lm.rules)
    rows = sorted(i for _, _, buckets in plan for b in buckets for i in b)
    assert rows == list(range(330)) and len(plan) == 1 and plan[0][0] == len(base)
    with planning(lm, split_cost=48):
        plan = layout(ids, lm.rules)
    assert len(plan) == 2 and sorted(len(sum(b, [])) for _, _, b in plan) == [30, 300]


@pytest.mark.parametrize("steps", [5, 1])  # a prefill of 5 own tokens; a decode step (1 query, 6 own keys)
def test_prefix_attention_on_cpu_and_by_reference_equal_a_plain_reference(steps, monkeypatch):
    """The CPU path (prefix expanded per bucket, fused SDPA) and the GPU path (prefix by reference) give
    the attention of each row over [prefix] + [its own unpadded keys], as a plain softmax computes it."""
    from types import SimpleNamespace

    g = torch.Generator().manual_seed(3)
    b, hq, hk, d, p, own = 3, 6, 2, 8, 7, 6
    s = steps if steps == 1 else own
    query = torch.randn(b, hq, s, d, generator=g)
    key, value = torch.randn(b, hk, own, d, generator=g), torch.randn(b, hk, own, d, generator=g)
    pk, pv = torch.randn(1, hk, p, d, generator=g), torch.randn(1, hk, p, d, generator=g)
    pads = [0, 2, 4]  # left padding per row
    mask = torch.zeros(b, 1, s, own, dtype=torch.bool)
    for r, pad in enumerate(pads):
        for i in range(s):
            q_pos = own - s + i  # the query's column among the row's own keys
            mask[r, 0, i, pad:q_pos + 1] = True
    module = SimpleNamespace(layer_idx=0)
    with shared_prefix([(pk, pv)]):
        fused, _ = prefix_attention(module, query, key, value, mask)
    by_ref, _ = prefix_by_reference(query, key, value, mask, pk, pv, None)
    monkeypatch.setitem(attention.EXPAND_PREFIX_TOKENS, "cpu", b * p - 1)  # a bucket too big to copy the prefix
    with shared_prefix([(pk, pv)]):
        guarded, _ = prefix_attention(module, query, key, value, mask)
    assert torch.equal(guarded, by_ref)
    ref = torch.empty(b, s, hq, d)
    for r in range(b):
        for h in range(hq):
            kv = h // (hq // hk)
            k_all = torch.cat([pk[0, kv], key[r, kv]])
            v_all = torch.cat([pv[0, kv], value[r, kv]])
            logits = query[r, h] @ k_all.T / math.sqrt(d)
            keep = torch.cat([torch.ones(s, p, dtype=torch.bool), mask[r, 0]], dim=-1)
            ref[r, :, h] = torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1) @ v_all
    assert torch.allclose(fused, ref, atol=1e-5)
    assert torch.allclose(by_ref, ref, atol=1e-5)


def test_gpu_layout_counts_decoding_steps_in_a_groups_cost(lm):
    """On a GPU a forward costs a fixed launch time whatever its rows, so a prefix group that decodes 40 steps
    costs 41 forwards: families that a one-forward split would cut apart stay together for long decodes.
    A CPU's rule is unchanged (its runs keep their layouts)."""
    prompts = []
    for i in range(30):
        family = ["You fish a shared lake. " * 6, "You give to strangers. " * 6, "You run a shop here. " * 6][i % 3]
        msgs = [{"role": "system", "content": "You take part in a simulation with other agents."},
                {"role": "user", "content": family + f"Member {i}: what now?"}]
        prompts.append(lm.encode([lm.render(msgs)])[0])
    assert lm.plan_rules(40) == lm.rules  # the CPU: as before
    device = lm.device
    try:
        lm.device = "cuda"  # plan_rules reads only the device's kind
        one, forty = lm.plan_rules(0), lm.plan_rules(40)
    finally:
        lm.device = device
    assert forty.split_cost == 41 * one.split_cost
    gpu_rules = replace(one, split_cost=1000)  # a split cost at which one forward's saving pays
    assert len(layout(prompts, gpu_rules)) > 1
    assert len(layout(prompts, replace(gpu_rules, split_cost=41 * 1000))) == 1


@pytest.mark.parametrize("dtype", ["bfloat16", pytest.param("float32", marks=pytest.mark.xfail(
    reason="float32's fused attention on a CPU rounds a query otherwise at some key counts (docs/architecture.md)"))])
def test_a_rows_logits_are_bit_identical_alone_and_in_any_batch(dtype):
    """Prefill, decoding steps and option scores of a prompt: the same bits alone, beside longer and shorter prompts,
    and with part of it forwarded once as a group's shared prefix (rows, padding and key layout differ)."""
    lm = tiny_lm(dtype=dtype)
    base = "You take part in a simulation of a fishing village. " * 3
    texts = [base + "Fisher 1: how many tons?", base + "Fisher 22: " + "ab " * 9 + "how many?", "Short one.",
             base + "Fisher 3: ok?", "Another village entirely. " * 4 + "What now?"]
    prompts = [lm.encode([lm.render([{"role": "user", "content": t}])])[0] for t in texts]
    fwd = lm.fwd

    def trace(rows, shared):
        kv = fwd.prefix_kv(rows[0][:shared]) if shared else None
        logits, state = fwd.prefill(rows, shared, kv, 4)
        out = [logits[0].clone()]
        for step in range(3):
            out.append(fwd.step(torch.full((len(rows),), 40 + step), state, kv)[0].clone())
        return out

    with torch.inference_mode():
        alone = trace(prompts[:1], 0)
        for rows, shared in ((prompts, 0), (prompts[:1] + prompts[2:], 0), ([prompts[0], prompts[1], prompts[3]], 40)):
            got = trace(rows, shared)
            assert all(torch.equal(a, b) for a, b in zip(alone, got))
    options = [["none", "fisher 2", "all of the fishers"]]
    assert lm.score_choices(prompts[:1], options) == lm.score_choices(prompts, options * 5)[:1]


def test_a_decoding_state_caches_and_attends_only_the_buckets_rows(monkeypatch):
    """A bucket of 3 rows decodes in a block of 8 (rows of padding feed the products), but the cache keeps 3 rows, and
    the logits are the same bits as when the padding rows were cached and attended too (the layout before)."""
    from agents.llm.local import hf_engine

    lm = tiny_lm(dtype="bfloat16")
    prompts = [lm.encode([lm.render([{"role": "user", "content": t}])])[0]
               for t in ("How many tons?", "A longer question about the lake, " * 3, "Ok?")]
    fwd = lm.fwd

    def trace():
        logits, state = fwd.prefill(prompts, 0, None, 4)
        out = [logits.clone()]
        for step in range(3):
            out.append(fwd.step(torch.full((3,), 40 + step), state, None).clone())
        options = torch.tensor([[5, 6, 7], [5, 8, 0], [9, 0, 0]])
        seg, off = torch.tensor([[0, 0, 1], [0, 1, 2], [0, 2, 2]]), torch.tensor([[0, 1, 0], [0, 0, 0], [0, 0, 0]])
        out.append(fwd.option_logits(options, seg, off, 2, state, None).clone())
        return out, state

    with torch.inference_mode():
        got, state = trace()
        assert state.mask.shape[0] == hf_engine.ROW_ALIGN and state.rows == 3
        assert all(layer.keys.shape[0] == 3 for layer in state.cache.layers)
        assert getattr(attention._LOCAL, "rows", None) is None  # restored after every forward

        def every_row(cache, mask, next_pos, rows):  # the layout before: zero keys for the padding rows, all attended
            extra = rows - mask.shape[0]
            for layer in cache.layers:
                layer.keys = torch.cat([layer.keys, layer.keys.new_zeros((extra, *layer.keys.shape[1:]))])
                layer.values = torch.cat([layer.values, layer.values.new_zeros((extra, *layer.values.shape[1:]))])
            return cache, torch.cat([mask, mask.new_zeros((extra, mask.shape[1]))]), torch.cat([next_pos, next_pos.new_zeros(extra)])

        monkeypatch.setattr(hf_engine, "_grow_rows", every_row)
        monkeypatch.setattr(hf_engine, "shared_prefix", lambda kv, real=None, rows=None: shared_prefix(kv, real))
        before, state = trace()
        assert all(layer.keys.shape[0] == hf_engine.ROW_ALIGN for layer in state.cache.layers)
    assert all(torch.equal(a, b) for a, b in zip(got, before))


def test_buckets_decoded_in_threads_at_once_are_the_bits_of_each_alone():
    """Two buckets of different sizes (3 and 5 rows, each padded to a block of 8) decoded by two threads at once give
    the same bits as each decoded alone: the rows each forward computes (`shared_prefix(..., rows)`) are its own
    thread's, never the other bucket's."""
    import threading

    lm = tiny_lm(dtype="bfloat16")
    texts = ["How many tons?", "A longer question about the lake, " * 3, "Ok?", "Five", "Six and seven", "Eight?"]
    prompts = [lm.encode([lm.render([{"role": "user", "content": t}])])[0] for t in texts]
    buckets = [prompts[:3], prompts[1:]]

    def decode(rows, steps: int = 6) -> list[torch.Tensor]:
        logits, state = lm.fwd.prefill(rows, 0, None, steps)
        out = [logits.clone()]
        for step in range(steps):
            out.append(lm.fwd.step(torch.full((len(rows),), 40 + step), state, None).clone())
        return out

    with torch.inference_mode():
        alone = [decode(b) for b in buckets]
        got: list = [None, None]
        start = threading.Barrier(2)

        def run(k: int) -> None:
            with torch.inference_mode():
                start.wait()
                got[k] = decode(buckets[k])

        threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert getattr(attention._LOCAL, "rows", None) is None
    for a, b in zip(alone, got):
        assert b is not None and len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))
