"""Pure helpers of the local engine: digit feasibility, shared prefixes, device and dtype choice."""

import pytest

from agents.llm.local.device import pick_dtype
from agents.llm.local.ids import ModelNotFound, resolve_model
from agents.llm.local.layout import common_prefix as _common_prefix
from agents.llm.local.numbers import feasible as _feasible


@pytest.mark.parametrize("prefix,lo,hi,ok", [
    ("1", 0, 100, True), ("10", 0, 100, True), ("100", 0, 100, True), ("101", 0, 100, False),
    ("2", 30, 35, False), ("3", 30, 35, True), ("36", 30, 35, False), ("0", 0, 5, True), ("0", 1, 5, False),
    ("05", 0, 10, False), ("7", 7, 7, True), ("1", 10, 19, True),
])
def test_feasible_digits(prefix, lo, hi, ok):
    """A digit prefix is allowed exactly when some completion lies in [lo, hi]."""
    assert _feasible(prefix, lo, hi) is ok


def test_common_prefix():
    assert _common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == 2
    assert _common_prefix([[1, 2], [1, 2]]) == 2
    assert _common_prefix([[9], [1]]) == 0


def test_dtype_overrides_and_cuda_default():
    import torch

    assert pick_dtype("cuda") == torch.bfloat16
    assert pick_dtype("cpu", "fp32") == torch.float32
    with pytest.raises(ModelNotFound, match="valid: bf16, fp16, fp32"):
        pick_dtype("cpu", "int3")


def test_resolve_model_paths(tmp_path):
    """None is the embedded GGUF; a .gguf file or a directory resolve; anything else is refused."""
    directory, gguf, model_id = resolve_model(None)
    assert gguf.endswith(".gguf") and model_id.startswith("SmolLM2")
    f = tmp_path / "m.gguf"
    f.write_bytes(b"")
    assert resolve_model(str(f)) == (str(tmp_path), "m.gguf", "m")
    assert resolve_model(str(tmp_path))[1] is None
    with pytest.raises(ModelNotFound):
        resolve_model(str(tmp_path / "missing.bin"))


def test_lcp_equals_the_token_by_token_count():
    """The chunked common-prefix length equals a plain token-by-token count, around every chunk boundary."""
    import random

    from agents.llm.local.layout import lcp

    def plain(a, b):
        n = min(len(a), len(b))
        return next((k for k in range(n) if a[k] != b[k]), n)

    rng = random.Random(4)
    for _ in range(3000):
        a = [rng.randint(0, 2) for _ in range(rng.randint(0, 100))]
        cut = rng.randint(0, len(a))
        b = a[:cut] + [rng.randint(0, 2) for _ in range(rng.randint(0, 70))]
        assert lcp(a, b) == lcp(b, a) == plain(a, b)


def test_neighbours_lcps_and_left_padding_equal_their_plain_definitions():
    """adjacent_lcps (a guess from the pair before, confirmed) equals lcp pair by pair over sorted groups that share
    prefixes of every length; left_padded puts each row's ids last after the pad, as the nested-list version did."""
    import random

    from agents.llm.local.layout import adjacent_lcps, lcp, left_padded

    rng = random.Random(5)
    for _ in range(2000):
        base = [rng.randint(0, 4) for _ in range(rng.randint(0, 40))]
        ids = [base[:rng.randint(0, len(base))] + [rng.randint(0, 4) for _ in range(rng.randint(0, 8))] for _ in range(rng.randint(1, 9))]
        order = sorted(range(len(ids)), key=lambda i: ids[i])
        assert adjacent_lcps(ids, order) == [lcp(ids[a], ids[b]) for a, b in zip(order, order[1:])]
        width = max(map(len, ids))
        assert left_padded(ids, 9).tolist() == [[9] * (width - len(r)) + r for r in ids]
    assert left_padded([[1], []], 0, width=3).tolist() == [[0, 0, 1], [0, 0, 0]]
