"""Models of public shapes with random weights, for pricing a study on a device the weights cannot reach.

A forward's cost depends on the shapes of the weights, never on their values, so a model built from a
public config with random weights costs what the real one costs. The tokenizer is the embedded model's
(SmolLM2's; `export_tokenizer` writes it to a folder small enough to travel): every shape reads the same
token ids, and a larger vocabulary only widens the output layer, which is part of the shape.

    python benchmarks/shapes.py --export DIR    # the embedded tokenizer, saved for a machine without the GGUF
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Optional

#: (architecture, config) of each public shape, from the models' published config.json files
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "smollm2-135m": ("llama", dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                                   num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True, rope_theta=100000.0)),
    "smollm2-360m": ("llama", dict(hidden_size=960, intermediate_size=2560, num_hidden_layers=32, num_attention_heads=15,
                                   num_key_value_heads=5, vocab_size=49152, tie_word_embeddings=True, rope_theta=100000.0)),
    "smollm2-1.7b": ("llama", dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32,
                                   num_key_value_heads=32, vocab_size=49152, tie_word_embeddings=True, rope_theta=130000.0)),
    "qwen2.5-0.5b": ("qwen2", dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                                   num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, rope_theta=1e6)),
    "qwen2.5-1.5b": ("qwen2", dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                                   num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, rope_theta=1e6)),
    "qwen2.5-7b": ("qwen2", dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                                 num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False, rope_theta=1e6)),
    # a few-layer model for checking the benchmark itself on a CPU
    "tiny": ("llama", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=49152, tie_word_embeddings=True, rope_theta=10000.0)),
}


def load_tokenizer(directory: Optional[str] = None) -> Any:
    """The tokenizer saved in `directory`, or the embedded model's (read from its GGUF)."""
    from transformers import AutoTokenizer

    if directory:
        try:
            return AutoTokenizer.from_pretrained(directory)
        except (ValueError, OSError, KeyError, AttributeError) as exc:  # e.g. a tokenizer class this transformers lacks
            if not (Path(directory) / "tokenizer.json").is_file():
                raise SystemExit(f"no saved tokenizer in {directory} (benchmarks/shapes.py --export {directory})") from None
            return _plain_tokenizer(Path(directory), exc)
    from agents.llm.local.ids import embedded_model_path

    path = embedded_model_path()
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def _plain_tokenizer(folder: Path, why: Exception) -> Any:
    """The saved tokenizer read without its class (tokenizer.json, the special tokens, the chat template), for a
    transformers release that cannot name the class the saving one wrote."""
    import json
    import sys

    from transformers import PreTrainedTokenizerFast

    print(f"shapes: AutoTokenizer could not read {folder} ({type(why).__name__}: {why}); reading tokenizer.json", file=sys.stderr)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    specials = {k: config[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token") if isinstance(config.get(k), str)}
    tok = PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), **specials)
    template = folder / "chat_template.jinja"
    tok.chat_template = template.read_text() if template.is_file() else config.get("chat_template")
    return tok


def export_tokenizer(directory: str) -> Path:
    """Save the embedded tokenizer (about 3.5 MB) where a machine without the 94 MB GGUF can read it."""
    out = Path(directory)
    load_tokenizer().save_pretrained(out)
    return out


def random_model(shape: str, tokenizer: Any, device: str, dtype: Any, seed: int = 0) -> Any:
    """A causal LM of `shape` with random weights, built directly on `device` in `dtype`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    arch, kwargs = SHAPES[shape]
    config_cls, model_cls = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}[arch]
    kwargs = dict(kwargs)
    theta = kwargs.pop("rope_theta")
    common = dict(max_position_embeddings=8192, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                  bos_token_id=tokenizer.bos_token_id)
    try:  # transformers 5 names the rotary settings rope_parameters; 4.x took rope_theta
        config = config_cls(**kwargs, **common, rope_parameters={"rope_type": "default", "rope_theta": theta})
    except TypeError:
        config = config_cls(**kwargs, **common, rope_theta=theta)
    torch.manual_seed(seed)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # weights created in dtype: a 7B model never exists in fp32
    try:
        with torch.device(device):
            model = model_cls(config)
    finally:
        torch.set_default_dtype(default)
    return model.eval()


def random_lm(shape: str, tokenizer: Any = None, device: Optional[str] = None, dtype: Optional[str] = None, seed: int = 0,
              **kw: Any) -> Any:
    """A `LocalLM` over `random_model(shape)`: the engine exactly as a run uses it, with random weights."""
    from agents.llm.local.device import pick_device, pick_dtype
    from agents.llm.local.model import LocalLM

    tokenizer = tokenizer if tokenizer is not None else load_tokenizer()
    device = pick_device(device)
    model = random_model(shape, tokenizer, device, pick_dtype(device, dtype), seed)
    model.config.name_or_path = f"random:{shape}"
    return LocalLM(hf_model=model, tokenizer=tokenizer, device=device, **kw)


def parameters(model: Any) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--export", metavar="DIR", required=True, help="write the embedded tokenizer to DIR")
    args = ap.parse_args()
    print(f"wrote {export_tokenizer(args.export)}")


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
