"""The obvious baseline for constrained number decisions: transformers' own `generate` on one left-padded
batch, the same digit constraint applied by a logits processor.

Same model object, prompts (token ids), bounds and greedy decoding as `LocalLM.decode_numbers` at
temperature 0; what differs is what the engine adds: the shared prefix forwarded once, buckets cut by
length, the constraint and the pick on the device without a per-row loop, and no sampler over the whole
vocabulary. The processor gives the end token the mass of every non-digit token, as the engine's stop
has, so both decode the same numbers (up to the rounding of different kernels).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from agents.llm.local.numbers import NumberState


class DigitConstraint(LogitsProcessor):
    """Keeps only the digits that leave the number completable into [lo, hi], and the end token once it is
    complete (agents.llm.local.numbers.NumberState, the engine's own rule)."""

    def __init__(self, lo: torch.Tensor, hi: torch.Tensor, digit_ids: Sequence[int], eos_id: int, prompt_width: int) -> None:
        self.state = NumberState(lo, hi)
        self.digits = torch.tensor(list(digit_ids), device=lo.device)
        self.eos_id = eos_id
        self.prompt_width = prompt_width
        self.lookup = torch.full((int(max(digit_ids)) + 1,), 10, dtype=torch.long, device=lo.device)
        self.lookup[self.digits] = torch.arange(10, device=lo.device)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[1] > self.prompt_width:  # the previous pick: a digit, or anything else (a stop)
            last = input_ids[:, -1]
            pick = torch.where(last <= self.lookup.shape[0] - 1, self.lookup[last.clamp(max=self.lookup.shape[0] - 1)], 10)
            self.state.advance(pick, self.digits, self.eos_id)
        stop = scores.index_fill(1, self.digits, float("-inf")).logsumexp(-1)  # every non-digit token's mass, as the engine
        out = torch.full_like(scores, float("-inf"))
        out[:, self.digits] = scores[:, self.digits].masked_fill(~self.state.digit_mask(), float("-inf"))
        out[:, self.eos_id] = stop.masked_fill(~(self.state.may_stop() | self.state.done), float("-inf"))
        out[self.state.done, self.eos_id] = 0.0
        return out


@torch.inference_mode()
def generate_numbers(lm: Any, ids: Sequence[list[int]], bounds: Sequence[tuple[int, int]]) -> list[int]:
    """Greedy constrained numbers for `ids` through `model.generate` on one padded batch (stock SDPA attention)."""
    model, device = lm.model, lm.device
    width = max(len(r) for r in ids)
    input_ids = torch.tensor([[lm.pad_id] * (width - len(r)) + r for r in ids], device=device)
    attention = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in ids], device=device)
    lo = torch.tensor([b[0] for b in bounds], device=device)
    hi = torch.tensor([b[1] for b in bounds], device=device)
    eos = int(lm.tokenizer.eos_token_id)
    constraint = DigitConstraint(lo, hi, lm.digit_ids, eos, width)
    attn = model.config._attn_implementation
    model.config._attn_implementation = "sdpa"  # transformers' own attention, as a user of generate gets it
    try:
        out = model.generate(input_ids=input_ids, attention_mask=attention, logits_processor=LogitsProcessorList([constraint]),
                             do_sample=False, max_new_tokens=constraint.state.max_digits + 1, pad_token_id=lm.pad_id,
                             eos_token_id=eos, num_beams=1, top_k=None, top_p=None, temperature=None)
    finally:
        model.config._attn_implementation = attn
    digits = {t: str(d) for d, t in enumerate(lm.digit_ids)}
    values = []
    for row in out[:, width:].tolist():
        text = "".join(digits.get(t, " ") for t in row).split()
        values.append(int(text[0]) if text else -1)
    return values
