"""A tiny randomly initialised Llama and a character-level chat tokenizer, built in memory (fast tests)."""

from __future__ import annotations

import string

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def char_tokenizer():
    """Every printable ASCII character one token (digits included), plus the chat specials."""
    from tokenizers import Tokenizer, decoders
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab = {t: i for i, t in enumerate(specials + sorted(set(string.printable)))}
    tok = Tokenizer(BPE(vocab=vocab, merges=[], unk_token="<|endoftext|>"))
    tok.add_special_tokens(specials)
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_lm(seed: int = 0, layers: int = 2, dtype: str = "float64", device: str = "cpu", **kw):
    """A LocalLM over a random 2-layer Llama (GQA, like SmolLM2) in float64: batch noise far below any tie.

    The same seed gives the same weights on every device (built on the CPU, then moved)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from agents.llm.local.model import LocalLM

    tok = char_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(getattr(torch, dtype))
    with torch.no_grad():  # sharper logits than the default init, so sampling is not near-uniform
        model.lm_head.weight.mul_(8.0)
    return LocalLM(hf_model=model, tokenizer=tok, device=device, **kw)
