"""The lean engine (agents.llm.local.lean, lean_engine, kernels) on a CPU: the same decisions as the transformers
engine, its kernels against plain per-row references, and what it does with models and devices it cannot serve.
The Triton kernels run here under Triton's interpreter where Triton is installed (skipped otherwise); on a GPU,
tests/test_cuda.py runs them compiled."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agents.llm.local.kernels import Kernels, attend_torch, check, check_silu_mul, rope_write_torch, silu_mul_torch  # noqa: E402
from agents.llm.local.lean import unsupported  # noqa: E402
from tests.tiny_lm import char_tokenizer, tiny_lm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _prompts(lm, n: int = 30) -> list[list[int]]:
    """Three families sharing a system prefix, each with a long text of its own, tails of different lengths."""
    out = []
    for i in range(n):
        family = ["You fish a shared lake with others. " * 3, "You give to strangers in a donor game. " * 3,
                  "You run a shop in the market square. " * 3][i % 3]
        msgs = [{"role": "system", "content": "You take part in a simulation with other agents."},
                {"role": "user", "content": f"{family}Member {i}: {'so far so good. ' * (i % 5)}What do you do now?"}]
        out.append(lm.encode([lm.render(msgs)])[0])
    return out


def _decide(lm, prompts, temperature):
    seeds = [1000 + 7 * i for i in range(len(prompts))]
    picks = lm.choose(prompts, [["stay", "leave", "fine member 3", "x"][: 2 + i % 3] for i in range(len(prompts))],
                      temperature, seeds)
    return {"choices": [k for k, _ in picks], "scores": [s for _, s in picks],
            "numbers": lm.decode_numbers(prompts, [(i % 4, 10 + 37 * i) for i in range(len(prompts))], temperature, seeds),
            "text": lm.generate(prompts, [1 + i % 9 for i in range(len(prompts))], temperature, seeds)}


@pytest.fixture(scope="module")
def pair():
    return tiny_lm(), tiny_lm(engine="lean")


@pytest.mark.parametrize("batch_tokens", [8_192, 500])  # one bucket a group; buckets small enough to split groups
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_lean_engine_decides_as_the_transformers_engine(pair, batch_tokens, temperature):
    """Choices, scores, constrained numbers and text equal the transformers engine's, with prefix trees and buckets."""
    hf, lean = pair
    assert (hf.engine, lean.engine) == ("transformers", "lean") and lean.fwd.kernels == "torch"
    hf.batch_tokens = lean.batch_tokens = batch_tokens
    prompts = _prompts(hf)
    before = dict(lean.counters)
    got, want = _decide(lean, prompts, temperature), _decide(hf, prompts, temperature)
    assert got["choices"] == want["choices"] and got["numbers"] == want["numbers"] and got["text"] == want["text"]
    for a, b in zip(got["scores"], want["scores"]):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9)
    assert lean.counters["prefix_forwards"] > before["prefix_forwards"]  # the shared prefixes were used
    assert lean.counters["decode_steps"] > before["decode_steps"]


def _qwen2_lm(**kw):
    """A tiny random Qwen2 (biases on q, k, v; tied embeddings) in float64 on the CPU."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from agents.llm.local.model import LocalLM

    tok = char_tokenizer()
    torch.manual_seed(1)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=1, max_position_embeddings=4096, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, tie_word_embeddings=True)
    model = Qwen2ForCausalLM(cfg).to(torch.float64)
    with torch.no_grad():
        for layer in model.model.layers:  # non-zero biases, so that dropping one would show
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    return LocalLM(hf_model=model, tokenizer=tok, device="cpu", **kw)


def test_a_qwen2_model_with_attention_biases_decides_alike_on_both_engines():
    """Qwen2's q/k/v biases ride in the fused product; a kv head shared by four query heads."""
    hf, lean = _qwen2_lm(), _qwen2_lm(engine="lean")
    assert lean.fwd.dec.layers[0].qkv_bias is not None
    prompts = _prompts(hf, 12)
    got, want = _decide(lean, prompts, 0.8), _decide(hf, prompts, 0.8)
    assert got["choices"] == want["choices"] and got["numbers"] == want["numbers"] and got["text"] == want["text"]
    for a, b in zip(got["scores"], want["scores"]):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9)


def test_lean_weights_are_views_of_the_fused_products_and_transformers_answers_stay_the_same():
    """Building the lean engine lays q, k, v (and gate, up) side by side without copies; the model's own answers
    do not change."""
    lm = tiny_lm(seed=3)
    prompts = _prompts(lm, 9)
    before = _decide(lm, prompts, 0.0)
    lm.engine = "lean"
    fused = lm.fwd.dec.layers[0].qkv
    attn = lm.model.model.layers[0].self_attn
    assert attn.q_proj.weight.data_ptr() == fused.data_ptr()
    assert attn.v_proj.weight.data_ptr() == fused[-attn.v_proj.weight.shape[0]:].data_ptr()
    lm.engine = "transformers"
    assert _decide(lm, prompts, 0.0) == before


def _plain_attention(q, pk, pv, kc, vc, start, col0, seg, scale):
    """Each row, query and head on its own: softmax over the prefix and the own columns the rule lets it see."""
    b, s, hq, d = q.shape
    hk, length = kc.shape[1], kc.shape[2]
    out = torch.zeros(b, s, hq, d, dtype=torch.float64)
    for r in range(b):
        for i in range(s):
            qc = col0 + i
            cols = [c for c in range(length) if c == qc or (start[r] <= c <= qc and (seg is None or int(seg[r, c]) in (0, int(seg[r, qc]))))]
            for h in range(hq):
                kv = h // (hq // hk)
                keys = ([pk[kv, j] for j in range(pk.shape[1])] if pk is not None else []) + [kc[r, kv, c] for c in cols]
                values = ([pv[kv, j] for j in range(pk.shape[1])] if pk is not None else []) + [vc[r, kv, c] for c in cols]
                logits = torch.tensor([float(q[r, i, h].double() @ k.double()) for k in keys], dtype=torch.float64)
                w = torch.softmax(logits * scale, 0)
                out[r, i, h] = sum(wj * v.double() for wj, v in zip(w, values))
    return out


def _cases(dtype=torch.float64, device="cpu", hq=6, hk=2, d=16):
    """(name, q, prefix k, prefix v, k cache, v cache, start, col0, seg) for a prefill, a decode step and options."""
    g = torch.Generator().manual_seed(11)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)

    b, p, length = 3, 5, 12
    start = torch.tensor([0, 2, 4], dtype=torch.int32, device=device)
    seg = torch.zeros(b, length, dtype=torch.int32, device=device)
    seg[:, 7:12] = torch.tensor([1, 1, 2, 3, 3], dtype=torch.int32, device=device)  # three options after 7 prompt columns
    pk, pv = rnd(hk, p, d), rnd(hk, p, d)
    out = []
    for name, s, col0, prefix, sg in (("prefill", 7, 0, True, None), ("prefill_no_prefix", 7, 0, False, None),
                                      ("step", 1, 9, True, None), ("options", 5, 7, True, seg)):
        out.append((name, rnd(b, s, hq, d), pk if prefix else None, pv if prefix else None, rnd(b, hk, length, d),
                    rnd(b, hk, length, d), start, col0, sg))
    return out


@pytest.mark.parametrize("case", range(4))
def test_torch_attention_equals_a_plain_per_row_softmax(case):
    """Prefix + left padding, no prefix, a one-token step, and options that see the prompt and themselves only."""
    name, q, pk, pv, kc, vc, start, col0, seg = _cases()[case]
    col = torch.tensor([col0], dtype=torch.int32)
    got = attend_torch(q, pk, pv, kc, vc, start, col, seg, 0.25)
    want = _plain_attention(q, pk, pv, kc, vc, start.tolist(), col0, seg, 0.25)
    assert torch.allclose(got, want, atol=1e-10), name


def test_rope_write_equals_transformers_rotary_and_fills_the_cache_columns():
    """Queries rotated in place and keys written rotated, values as they are, at columns col0.., as transformers does."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    lm = tiny_lm()
    dec = tiny_lm(engine="lean").fwd.dec
    b, s, hq, hk, d = 2, 3, dec.hq, dec.hk, dec.d
    g = torch.Generator().manual_seed(5)
    qkv = torch.randn(b * s, (hq + 2 * hk) * d, generator=g, dtype=torch.float64)
    positions = torch.tensor([[4, 5, 6], [0, 1, 2]])
    kc, vc = torch.zeros(b, hk, 8, d, dtype=torch.float64), torch.zeros(b, hk, 8, d, dtype=torch.float64)
    x = qkv.clone()
    rope_write_torch(x, positions.reshape(-1), *dec._tables, kc, vc, torch.tensor([2], dtype=torch.int32), s, hq, hk, d)
    cos, sin = lm.model.model.rotary_emb(qkv, positions)
    q = qkv[:, :hq * d].view(b, s, hq, d).transpose(1, 2)
    k = qkv[:, hq * d:(hq + hk) * d].view(b, s, hk, d).transpose(1, 2)
    want_q, want_k = apply_rotary_pos_emb(q, k, cos, sin)
    assert torch.equal(x[:, :hq * d].view(b, s, hq, d).transpose(1, 2), want_q)
    assert torch.equal(kc[:, :, 2:5], want_k) and not kc[:, :, :2].any() and not kc[:, :, 5:].any()
    assert torch.equal(vc[:, :, 2:5], qkv[:, (hq + hk) * d:].view(b, s, hk, d).transpose(1, 2))


def test_the_first_use_check_passes_the_torch_kernels_and_catches_a_wrong_one():
    """The check a GPU runs before trusting its Triton kernels: right kernels pass, a kernel that drops the options'
    rule or rotates wrongly does not."""
    assert check(rope_write_torch, attend_torch, "cpu", torch.float32, 6, 2, 16) == ""

    def no_options(q, pk, pv, kc, vc, start, col0, seg, scale):
        return attend_torch(q, pk, pv, kc, vc, start, col0, None, scale)

    def no_rotation(qkv, positions, cos, sin, *rest):
        rope_write_torch(qkv, positions, torch.ones_like(cos), torch.zeros_like(sin), *rest)

    assert "attention off" in check(rope_write_torch, no_options, "cpu", torch.float32, 6, 2, 16)
    assert "rotary write off" in check(no_rotation, attend_torch, "cpu", torch.float32, 6, 2, 16)


def test_the_mlp_check_passes_torch_silu_mul_and_catches_a_wrong_one():
    """The fused MLP kernel's first-use check: torch's silu(gate) * up passes, one that swaps gate and up, or uses
    sigmoid for silu, does not; on a CPU the MLP runs torch's functions."""
    assert check_silu_mul(silu_mul_torch, "cpu", torch.float32, 48) == ""
    swapped = lambda gu, inter: silu_mul_torch(torch.cat([gu[:, inter:], gu[:, :inter]], 1), inter)  # noqa: E731
    sigmoid = lambda gu, inter: torch.sigmoid(gu[:, :inter]) * gu[:, inter:]  # noqa: E731
    assert "off by" in check_silu_mul(swapped, "cpu", torch.float32, 48)
    assert "off by" in check_silu_mul(sigmoid, "cpu", torch.float32, 48)
    assert Kernels("cpu", torch.float32, 6, 2, 16, inter=48).mlp == "torch"


def test_kernels_fall_back_to_torch_and_say_why():
    """Triton where it cannot run (a CPU without the interpreter, float64, an odd head size): torch, with the reason."""
    env = os.environ.get("TRITON_INTERPRET")
    os.environ.pop("TRITON_INTERPRET", None)
    try:
        cases = {"CUDA": Kernels("cpu", torch.float32, 6, 2, 64, prefer="triton"),
                 "float64": Kernels("cpu", torch.float64, 6, 2, 64, prefer="triton"),
                 "power-of-two": Kernels("cpu", torch.float32, 6, 2, 48, prefer="triton")}
    finally:
        if env is not None:
            os.environ["TRITON_INTERPRET"] = env
    for word, k in cases.items():
        assert k.name == "torch" and word in k.note and "torch kernels run" in k.note
    assert Kernels("cpu", torch.float32, 6, 2, 64).name == "torch" and Kernels("cpu", torch.float32, 6, 2, 64).note == ""


def test_models_the_lean_forward_does_not_know_stay_on_transformers():
    """A GPT-2 gets the transformers engine with the reason; asking for lean (or an unknown engine) is refused."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from agents.llm.local.model import LocalLM

    tok = char_tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_positions=512,
                                       pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id))
    assert "architecture 'gpt2'" in unsupported(model)
    lm = LocalLM(hf_model=model, tokenizer=tok, device="cpu")
    assert lm.engine == "transformers" and "gpt2" in lm.lean_problem
    with pytest.raises(ValueError, match="cannot run this model"):
        lm.engine = "lean"
    with pytest.raises(ValueError, match="unknown engine"):
        lm.engine = "vllm"
    assert unsupported(tiny_lm().model) is None


def test_a_step_past_the_room_its_prefill_gave_is_refused():
    """A bucket's cache is sized at its prefill; a step beyond it raises instead of writing out of bounds."""
    lm = tiny_lm(engine="lean")
    ids = _prompts(lm, 2)
    with torch.inference_mode():
        _, state = lm._prefill(ids, 0, None, room=1)
        lm._step(torch.tensor([5, 6]), state, None)
        with pytest.raises(RuntimeError, match="cache is full"):
            lm._step(torch.tensor([5, 6]), state, None)


INTERPRETED = textwrap.dedent("""
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import triton.runtime.interpreter as interp
    from tests.test_lean import _cases, _plain_attention, interpreter_index_fix
    interpreter_index_fix(interp)
    from agents.llm.local import triton_kernels as tk
    from agents.llm.local.kernels import check
    from agents.llm.local.kernels import Kernels, check_silu_mul
    for dtype in (torch.float32, torch.float16):
        for hq, hk, d in ((6, 2, 16), (4, 4, 32)):
            problem = check(tk.rope_write, tk.attend, "cpu", dtype, hq, hk, d, seed=2)
            assert problem == "", (dtype, hq, hk, d, problem)
        for inter in (48, 96, 1536):
            problem = check_silu_mul(tk.silu_mul, "cpu", dtype, inter, seed=2)
            assert problem == "", (dtype, inter, problem)
    k = Kernels("cpu", torch.float32, 6, 2, 16, prefer="triton", inter=48)
    assert (k.name, k.mlp) == ("triton", "triton"), k.note
    assert Kernels("cpu", torch.float32, 6, 2, 16, prefer="triton", inter=40).mlp == "torch"  # 40 = 8 x 5: no block
    for name, q, pk, pv, kc, vc, start, col0, seg in _cases(torch.float32, d=16):
        got = tk.attend(q, pk, pv, kc, vc, start, torch.tensor([col0], dtype=torch.int32), seg, 0.25)
        want = _plain_attention(q, pk, pv, kc, vc, start.tolist(), col0, seg, 0.25)
        assert torch.allclose(got.double(), want, atol=1e-5), name
    print("interpreted kernels ok")
""")


def interpreter_index_fix(interp) -> None:
    """Triton 3.6's interpreter turns one-element arrays into Python ints with int(), which NumPy 2 refuses: a shim
    for the interpreter only (compiled kernels never take that path)."""
    original = interp._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interp._patch_lang_tensor = patched


@pytest.mark.slow  # about a minute: the interpreter runs every program of every launch in Python
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_triton_kernels_under_the_interpreter_equal_the_references():
    """The Triton kernels, run by Triton's interpreter on the CPU: the first-use checks pass in float32 and float16
    (the MLP's for three intermediate sizes), and the attention equals the plain per-row softmax on every case."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", INTERPRETED], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "interpreted kernels ok" in done.stdout, done.stderr[-3000:]



def test_a_prefix_right_padded_to_its_bucket_gives_the_keys_and_values_of_the_prefix_alone():
    """The prefix runner's padded forward (what a CUDA graph replays) equals the exact-length forward: causal
    attention keeps the padding after the prefix out of its keys and values, and the copy is the prefix's length."""
    from agents.llm.local.lean_engine import PREFIX_BUCKET, PrefixRunner

    lm = tiny_lm(engine="lean")
    tokens = _prompts(lm, 1)[0][:PREFIX_BUCKET + 9]
    runner = PrefixRunner(lm.fwd, 2 * PREFIX_BUCKET, graph=False)
    with torch.inference_mode():
        exact = lm.fwd.prefix_kv(tokens)
        padded = runner(tokens)
        again = runner(tokens[:20])  # a shorter prefix through the same buffers
    assert len(padded) == len(exact) == len(lm.fwd.dec.layers)
    for (k, v), (ek, ev) in zip(padded, exact):
        assert k.shape == ek.shape and k.shape[2] == len(tokens)
        assert torch.allclose(k, ek, atol=1e-12) and torch.allclose(v, ev, atol=1e-12)
    assert again[0][0].shape[2] == 20 and torch.allclose(again[0][0], exact[0][0][:, :, :20], atol=1e-12)
    assert not torch.equal(padded[0][0][:, :, :20], torch.zeros_like(padded[0][0][:, :, :20]))


def test_prefix_graphs_stay_off_on_a_cpu():
    """On a CPU every prefix runs eagerly at its own length, as before: no runner, no capture."""
    lm = tiny_lm(engine="lean")
    prompts = _prompts(lm, 12)
    _decide(lm, prompts, 0.0)
    _decide(lm, prompts, 0.0)
    assert lm.fwd._prefix_runners == {} and lm.fwd.counters["prefix_graphs_captured"] == 0


def test_a_prefix_capture_that_fails_turns_graphs_off_and_decides_the_same():
    """Graphs asked for where none can be captured (a CPU): the second prefix of a length tries, fails, says why in
    `notes`, and every decision is the one the eager engine makes."""
    lm = tiny_lm(engine="lean")
    prompts = _prompts(lm, 12)
    want = _decide(lm, prompts, 0.8)
    lm.fwd.graphs = True
    try:
        first, second = _decide(lm, prompts, 0.8), _decide(lm, prompts, 0.8)
    finally:
        lm.fwd.graphs = False
    assert first == want and second == want
    assert any(note.startswith("CUDA graphs off") for note in lm.fwd.notes), lm.fwd.notes
    assert lm.fwd._prefix_runners, "no prefix reached its runner"
