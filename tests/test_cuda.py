"""The CUDA path gives the decisions the CPU path gives (skipped where no GPU is visible).

Same random model (float64 on both, so no tie is decided by rounding), same prompts and seeds: choices,
constrained numbers and free text must match exactly, sampled and greedy, the GPU on its default engine
(the lean forward; float64 runs its torch kernels) and buckets cut small enough that prefixes and buckets
split. Then the GPU's own pieces: the Triton kernels against the torch ones for every public shape's heads and
MLP widths, the lean engine with them in float32 against the CPU, and decoding steps replayed as CUDA graphs
against the same steps launched one by one.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")

from tests.tiny_lm import tiny_lm  # noqa: E402


def _prompts(lm, n: int = 40) -> list[list[int]]:
    """Prompts in three families sharing a long system prefix, with own tails of different lengths."""
    out = []
    for i in range(n):
        system = ["You fish a shared lake with others.", "You give to strangers in a donor game.", "You run a shop."][i % 3]
        msgs = [{"role": "system", "content": "You take part in a simulation with other agents. " + system * 3},
                {"role": "user", "content": f"Member {i}: {'so far so good. ' * (i % 5)}What do you do now?"}]
        out.append(lm.encode([lm.render(msgs)])[0])
    return out


@pytest.fixture(scope="module")
def pair():
    return tiny_lm(device="cpu"), tiny_lm(device="cuda")


@pytest.mark.parametrize("batch_tokens", [None, 600])  # the device default; small buckets that split the groups
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_cuda_and_cpu_decide_the_same(pair, batch_tokens, temperature):
    cpu, gpu = pair
    if batch_tokens:
        cpu.batch_tokens = gpu.batch_tokens = batch_tokens
    else:
        cpu.batch_tokens, gpu.batch_tokens = 8_192, 262_144
    prompts = _prompts(cpu)
    assert prompts == _prompts(gpu)
    seeds = [1000 + 7 * i for i in range(len(prompts))]
    options = [["stay", "leave", "fine member 3", "x"][: 2 + i % 3] for i in range(len(prompts))]
    bounds = [(i % 4, 10 + 37 * i) for i in range(len(prompts))]
    lengths = [1 + i % 9 for i in range(len(prompts))]
    got = {}
    for name, lm in (("cpu", cpu), ("cuda", gpu)):
        picks = lm.choose(prompts, options, temperature, seeds)
        got[name] = {
            "choices": [k for k, _ in picks],
            "scores": [s for _, s in picks],
            "numbers": lm.decode_numbers(prompts, bounds, temperature, seeds),
            "text": lm.generate(prompts, lengths, temperature, seeds),
        }
    assert got["cuda"]["choices"] == got["cpu"]["choices"]
    assert got["cuda"]["numbers"] == got["cpu"]["numbers"]
    assert got["cuda"]["text"] == got["cpu"]["text"]
    for a, b in zip(got["cuda"]["scores"], got["cpu"]["scores"]):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-6)  # rotary tables are float32 in transformers: ~1e-8 apart
    assert all(lo <= v <= hi for (v, _), (lo, hi) in zip(got["cuda"]["numbers"], bounds))
    assert gpu.counters["prefix_forwards"] > 0  # the shared prefix was used on the GPU, not bypassed
    assert gpu.engine == "lean"


def test_bf16_on_cuda_decides_numbers_in_range_with_the_default_settings():
    """The dtype a GPU run gets by default: every number in its bounds, every batch the same answers as one row."""
    gpu = tiny_lm(device="cuda", dtype="bfloat16", seed=1)
    prompts = _prompts(gpu, 24)
    bounds = [(0, 100)] * len(prompts)
    seeds = list(range(len(prompts)))
    batched = gpu.decode_numbers(prompts, bounds, 0.7, seeds)
    assert all(0 <= v <= 100 for v, _ in batched)
    single = [gpu.decode_numbers([p], [b], 0.7, [s])[0] for p, b, s in zip(prompts, bounds, seeds)]
    agree = sum(a == b for a, b in zip(batched, single)) / len(prompts)
    assert agree >= 0.75  # bf16: a batch's different kernels may round a near-tie the other way, rarely


@pytest.mark.parametrize("dtype,heads", [("bfloat16", (9, 3, 64)), ("bfloat16", (14, 2, 64)), ("bfloat16", (32, 32, 64)),
                                         ("bfloat16", (12, 2, 128)), ("bfloat16", (28, 4, 128)), ("float32", (9, 3, 64))])
def test_triton_kernels_pass_their_check_for_the_public_shapes(dtype, heads):
    """Compiled on this GPU, the Triton kernels equal the torch functions for the head counts and sizes of SmolLM2
    and Qwen2.5 (the shapes benchmarks/shapes.py prices), prefill and step, with and without options."""
    from agents.llm.local import triton_kernels
    from agents.llm.local.kernels import check

    assert check(triton_kernels.rope_write, triton_kernels.attend, "cuda", getattr(torch, dtype), *heads, seed=3) == ""


@pytest.mark.parametrize("dtype,inter", [("bfloat16", 1536), ("bfloat16", 4864), ("bfloat16", 8960), ("bfloat16", 18944),
                                         ("float32", 1536)])
def test_the_fused_mlp_kernel_passes_its_check_for_the_public_shapes(dtype, inter):
    """Compiled on this GPU, silu(gate) * up in one pass equals torch's silu and mul for the intermediate sizes of
    SmolLM2-135M, Qwen2.5-0.5B, -1.5B and -7B, on a prefill's rows and a one-row step."""
    from agents.llm.local import triton_kernels
    from agents.llm.local.kernels import check_silu_mul

    assert check_silu_mul(triton_kernels.silu_mul, "cuda", getattr(torch, dtype), inter, seed=3) == ""


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_lean_engine_with_triton_kernels_in_float32_decides_as_the_cpu(temperature):
    """The GPU's fused path in float32 (its Triton kernels in IEEE float32) against the CPU's transformers engine."""
    cpu, gpu = tiny_lm(device="cpu", dtype="float32"), tiny_lm(device="cuda", dtype="float32")
    assert gpu.engine == "lean" and gpu.fwd.kernels == "triton" and gpu.fwd.dec.kernels.mlp == "triton", gpu.fwd.notes
    prompts = _prompts(cpu, 30)
    seeds = [500 + i for i in range(len(prompts))]
    options = [["stay", "leave", "fine member 3", "x"][: 2 + i % 3] for i in range(len(prompts))]
    bounds = [(i % 4, 10 + 37 * i) for i in range(len(prompts))]
    got = {}
    for name, lm in (("cpu", cpu), ("cuda", gpu)):
        picks = lm.choose(prompts, options, temperature, seeds)
        got[name] = ([k for k, _ in picks], [s for _, s in picks], lm.decode_numbers(prompts, bounds, temperature, seeds),
                     lm.generate(prompts, [6] * len(prompts), temperature, seeds))
    for k in (0, 2, 3):  # float32 on two kernels: a near-tie may go the other way, rarely
        agree = sum(a == b for a, b in zip(got["cuda"][k], got["cpu"][k])) / len(prompts)
        assert agree >= 0.9, (k, agree)
    for a, b in zip(got["cuda"][1], got["cpu"][1]):
        assert a == pytest.approx(b, abs=1e-3)


def test_cuda_graph_steps_decode_as_the_same_steps_launched_one_by_one():
    """Text long enough to capture its step as a CUDA graph: the same tokens as eager steps, and a graph was used."""
    lm = tiny_lm(device="cuda", dtype="bfloat16", seed=2)
    prompts = _prompts(lm, 24)
    seeds = list(range(len(prompts)))
    lengths = [lm.fwd.graph_min_steps + 4] * len(prompts)
    before = lm.fwd.counters["graphs_captured"]
    graphed = lm.generate(prompts, lengths, 0.7, seeds)
    assert lm.fwd.counters["graphs_captured"] > before, lm.fwd.notes
    lm.fwd.graphs = False
    try:
        assert lm.generate(prompts, lengths, 0.7, seeds) == graphed
    finally:
        lm.fwd.graphs = True


def test_shared_prefixes_replayed_as_cuda_graphs_decide_as_prefixes_launched_one_by_one():
    """The same calls twice (the second replays each prefix length's captured graph): the same decisions as with
    graphs off, and a prefix graph was captured and replayed."""
    lm = tiny_lm(device="cuda", seed=4)  # float64: no near-tie decided by a product of another shape
    prompts = _prompts(lm, 24)
    seeds = list(range(len(prompts)))
    options = [["stay", "leave", "fine member 3"][: 2 + i % 2] for i in range(len(prompts))]

    def decide():
        return ([k for k, _ in lm.choose(prompts, options, 0.0, seeds)],
                lm.decode_numbers(prompts, [(0, 50 + i) for i in range(len(prompts))], 0.0, seeds),
                lm.generate(prompts, [5] * len(prompts), 0.0, seeds))

    decide()
    graphed = decide()
    assert lm.fwd.counters["prefix_graphs_captured"] > 0 and lm.fwd.counters["prefix_graph_replays"] > 0, lm.fwd.notes
    lm.fwd.graphs = False
    try:
        assert decide() == graphed
    finally:
        lm.fwd.graphs = True
