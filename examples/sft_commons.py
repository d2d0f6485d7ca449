"""Supervised fine-tuning on expert play: the embedded model learns the sustainable fisher's catches from its prompts.

The expert is the fishery's scripted `sustainable` strategy (it catches its share of what regrows: a tenth of
the stock among 5 fishers). Its decisions are exported as trajectories (`export --format trajectories`, here
`analysis.trajectories.export_trajectories`): each row holds the prompt an LLM fisher in that seat would have
been sent, rendered by the platform, and the action as the answer an LLM would write. Runs start from several
stocks (`start_fraction`), so that the rows teach how the catch follows the stock.

- data: scripted runs, all fishers sustainable, at each start fraction and seed; their rows loaded with
  `datasets` (`Dataset.from_json`), the harvest decisions kept;
- training: LoRA adapters (rank 8, q/k/v/o) on the embedded SmolLM2-135M in fp32, the loss the answer's
  tokens' negative log-likelihood (the answer's digits and the end of turn; the prompt is not trained on),
  AdamW, a few epochs;
- the result: the merged weights saved in `out/model` (`--model out/model`), then the fishery's validity
  probe on it (`sim.probe`, `catch_by_stock`, with its blind and stock-following controls): does the
  trained fisher's catch follow the stock? The embedded model is probed the same way before, for comparison.

    python examples/sft_commons.py            # the default: 240 rows, 3 epochs (long on a CPU: over 20 minutes
                                              # on 2 shared cores; --epochs 1 or a GPU for less)
    python examples/sft_commons.py --small    # 20 rows, one epoch (the tests; ~6 minutes on 2 shared cores)

Output in --out (default examples/out/sft_commons/): `model/`, `trajectories/` (the exported rows),
`summary.json` (rows, loss, the probe's verdicts and means per stock, before and after).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if (HERE.parent / "societas" / "api.py").is_file():  # run from a checkout: use its code, installed or not
    sys.path.insert(0, str(HERE.parent))

import datasets  # noqa: E402
import torch  # noqa: E402

import sim  # noqa: E402
from agents.llm.local.device import pick_threads  # noqa: E402
from agents.llm.local.ids import resolve_model  # noqa: E402
from analysis.trajectories import export_trajectories  # noqa: E402
from sim.store.store import Store  # noqa: E402

EXPERT = "sustainable"


def expert_rows(db: Store, out: Path, fractions: list[float], seeds: list[int], months: int) -> datasets.Dataset:
    """The sustainable fishers' harvest decisions of scripted runs at each start fraction and seed, as a Dataset."""
    files = []
    for f in fractions:
        for s in seeds:
            run = sim.run("commons", db=db, seed=s, months=months, strategy=EXPERT, start_fraction=f)
            folder = out / "trajectories" / run.run_id
            export_trajectories(db, run.run_id, folder)
            files.append(str(folder / "trajectories.jsonl"))
    data = datasets.Dataset.from_json(files)
    return data.filter(lambda r: r["strategy"] == EXPERT and r["phase"] == "harvest")


def load_model(rank: int):
    """The embedded model in fp32 with LoRA adapters on its attention projections; (model, tokenizer)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    # as the platform's engine: half the cores on a busy machine, where threads spinning on shared cores cost more
    torch.set_num_threads(pick_threads("cpu"))
    directory, gguf, _ = resolve_model(None)
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=gguf)
    base = AutoModelForCausalLM.from_pretrained(directory, gguf_file=gguf, dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    return get_peft_model(base, config), tok


def encode(tok, row: dict) -> tuple[list[int], list[int]]:
    """(prompt ids as the engine forms them: the chat template with the assistant's turn opened; answer ids: the
    completion's tokens and the end of turn)."""
    text = tok.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    prompt = list(tok(text, add_special_tokens=False)["input_ids"])
    answer = list(tok(row["completion"], add_special_tokens=False)["input_ids"]) + [tok.eos_token_id]
    return prompt, answer


def batch_loss(model, pad: int, pairs: list[tuple[list[int], list[int]]]) -> torch.Tensor:
    """Mean negative log-likelihood of the answers' tokens given their prompts (right-padded batch)."""
    width = max(len(p) + len(a) for p, a in pairs)
    ids = torch.full((len(pairs), width), pad)
    labels = torch.full((len(pairs), width), -100)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for i, (p, a) in enumerate(pairs):
        n = len(p) + len(a)
        ids[i, :n] = torch.tensor(p + a)
        labels[i, len(p):n] = torch.tensor(a)
        mask[i, :n] = 1
    return model(input_ids=ids, attention_mask=mask, labels=labels).loss


def save_merged(model, tok, directory: Path) -> None:
    """The adapters merged into the weights, saved as a plain fp32 model directory (`--model DIR`)."""
    merged = model.merge_and_unload()
    # loaded from the GGUF file (de-quantised to fp32), the model still says it is quantised, and transformers
    # refuses to save it: it is a plain fp32 model now, and is saved as one
    merged.hf_quantizer = None
    if hasattr(merged.config, "quantization_config"):
        del merged.config.quantization_config
    merged.save_pretrained(directory, safe_serialization=True)
    tok.save_pretrained(directory)


def stock_probe(db: Store, model_dir: str | None, seeds: int) -> dict:
    """The fishery's `catch_by_stock` probe (with its controls) on the embedded model or `model_dir`."""
    llm = {"dtype": "fp32"} | ({"model": model_dir} if model_dir else {})
    got = sim.probe("commons", db=db, probes=["catch_by_stock"], seeds=seeds, llm=llm).to_json()["probes"][0]
    return {k: got[k] for k in ("verdict", "responds", "valid", "levels", "means", "effect", "lo", "hi", "controls")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--small", action="store_true", help="2 runs of 2 months, one epoch (the tests)")
    p.add_argument("--epochs", type=int, default=None, help="passes over the rows (default 3; --small 1)")
    p.add_argument("--probe-seeds", type=int, default=None, help="seeds of the stock probe (default 10, its least)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate of the adapters")
    p.add_argument("--rank", type=int, default=8, help="LoRA rank")
    p.add_argument("--seed", type=int, default=0, help="seed of the data's runs and the training's order")
    p.add_argument("--out", type=Path, default=HERE / "out" / "sft_commons", help="output folder")
    a = p.parse_args()
    epochs, probe_seeds = a.epochs or (1 if a.small else 3), a.probe_seeds or 10
    if epochs < 1 or probe_seeds < 10:
        p.error("--epochs must be at least 1 and --probe-seeds at least 10")
    fractions = [0.3, 1.0] if a.small else [0.1, 0.2, 0.3, 0.5, 0.7, 1.0]
    seeds, months = ([a.seed], 2) if a.small else ([a.seed, a.seed + 1], 4)
    a.out.mkdir(parents=True, exist_ok=True)
    db = Store(f"sqlite:///{(a.out / 'runs.db').resolve()}")
    started = time.time()

    data = expert_rows(db, a.out, fractions, seeds, months)
    print(f"{len(data)} rows of the {EXPERT} fisher (prompt -> catch) from {len(fractions) * len(seeds)} runs", file=sys.stderr)
    before = stock_probe(db, None, probe_seeds)

    torch.manual_seed(a.seed)
    model, tok = load_model(a.rank)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    pairs = [encode(tok, row) for row in data]
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr)
    order = random.Random(a.seed)
    losses: list[float] = []
    model.train()
    for epoch in range(epochs):
        order.shuffle(pairs)
        for i in range(0, len(pairs), 8):
            opt.zero_grad()
            loss = batch_loss(model, pad, pairs[i:i + 8])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            losses.append(float(loss.detach()))
        print(f"epoch {epoch + 1}/{epochs}: loss {losses[-1]:.3f}", file=sys.stderr)
    model.eval()
    model_dir = a.out / "model"
    save_merged(model, tok, model_dir)
    after = stock_probe(db, str(model_dir), probe_seeds)

    summary = {"rows": len(data), "epochs": epochs, "start_fractions": fractions, "seeds": seeds, "months": months,
               "model": str(model_dir.resolve()), "minutes": (time.time() - started) / 60,
               "loss": {"first": losses[0], "last": losses[-1], "steps": len(losses)},
               "probe_before": before, "probe_after": after, "follows_stock": bool(after["responds"] and after["valid"])}
    (a.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    for name, got in (("embedded model", before), ("fine-tuned", after)):
        means = ", ".join(f"{lv:g}: {m:.1f}" if m is not None else f"{lv:g}: -" for lv, m in zip(got["levels"], got["means"]))
        print(f"{name}: catch at stock {means}; responds: {got['verdict']} (controls valid: {got['valid']})")
    print(f"the fine-tuned fisher follows the stock: {'yes' if summary['follows_stock'] else 'no'}")


if __name__ == "__main__":
    main()
