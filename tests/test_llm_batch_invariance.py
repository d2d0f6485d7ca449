"""The real embedded model (SmolLM2-135M on CPU): a request's answer is a function of (model, prompt, space, seed)
alone, whatever else shares its engine call."""

import pytest

from agents.llm.local.llm import LocalLLM
from agents.llm.prompts import render_messages
from sim.core.contracts import DecisionRequest
from sim.core.spaces import Choice, Number, Text

pytestmark = pytest.mark.slow

SITUATIONS = ["You post on a small social network about city life.",
              "You fish in a lake with others. The lake holds 80 tons."]


@pytest.fixture(scope="module")
def lm():
    from agents.llm.local.model import shared_lm

    return shared_lm()


def _req(agent: int, kind: str, situation: int, filler: int) -> DecisionRequest:
    """A request whose prompt length grows with `filler` and with the agent (its own text)."""
    if kind == "number":
        space, default = Number(0, 80 + agent % 5, 1), 0.0
    elif kind == "choice":
        space, default = Choice(["none", f"fisher {agent % 4}", "fisher 9"]), "none"
    else:
        space, default = Text(24), "ok"
    return DecisionRequest(agent_id=agent, tick=1, phase="p", space=space, default=default, backend="llm",
                           context=SITUATIONS[situation] + " It rained." * filler,
                           own_context=f"You are member {agent}. " + "You like bikes. " * (agent % 4),
                           question="What now?", memory="month 1: caught 3" if agent % 3 == 0 else "",
                           seed=1000 + agent)


KINDS = ["text", "number", "choice"]
PROBES = [_req(i, KINDS[i % 3], 0, i % 5) for i in range(12)]
#: unrelated requests: another situation (another prefix group), other lengths, other kinds
EXTRA = [_req(100 + i, KINDS[(i + 1) % 3], 1, (i * 3) % 7) for i in range(10)]


def test_answers_do_not_depend_on_the_other_requests_of_the_call(lm):
    """Text (sampled), Number and Choice answers are identical in one call, in two, beside unrelated requests, alone."""
    import torch

    if lm.device != "cpu" or lm.dtype != torch.bfloat16:
        # contract 9 covers the CPU in bf16 (AVX512-BF16/AMX machines); float32's fused attention still rounds a
        # query by its key count (tests/test_llm_vectorised.py marks that case xfail), docs/architecture.md says so
        pytest.skip(f"batch invariance is promised on a bf16 CPU; this model runs {lm.dtype} on {lm.device}")
    eng = LocalLLM(lm=lm, temperature=0.7)

    def answer(reqs):
        return [(a.value, a.tokens_out, a.completion_ids) for a in eng.answer(reqs, [render_messages(r) for r in reqs])]

    together = answer(PROBES)
    halves = answer(PROBES[:5]) + answer(PROBES[5:])
    mixed = answer(EXTRA[:4] + PROBES[::-1] + EXTRA[4:])[4:4 + len(PROBES)][::-1]
    alone = [answer([r])[0] for r in PROBES[:3]]
    assert halves == together
    assert mixed == together
    assert alone == together[:3]
    assert len({v for v, _, _ in together[0::3]}) == 4  # the texts are sampled, each its own
