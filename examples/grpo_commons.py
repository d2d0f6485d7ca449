"""Train an LLM fisher with TRL's GRPOTrainer, the fishery owning the reward (`societas.adapters.trl`).

The focal fisher is the embedded SmolLM2-135M (LoRA adapters, on the CPU); four scripted co-players fish
the sustainable share. No glue: the trainer gets `environment_factory(...)` (each rollout an episode of
the platform's fishery, stored in `--out`/grpo.db), the prompts of `dataset(...)` (one row per episode
seed, so the G completions of a prompt play the same world) and no reward function: the environment's
`get_reward` is the fisher's return (the reward layer's, private mode). The model answers each month by
calling the tool `act` with its catch; TRL runs the calls, the world answers with the month's earnings and
the next question.

    python examples/grpo_commons.py            # 3-month episodes, 40 steps (tens of minutes on 2 cores)
    python examples/grpo_commons.py --small    # 1-month episodes, 2 steps of 2 completions (the tests)

Output in --out (default examples/out/grpo_commons/): `grpo.db` (every episode as a stored run: `societas
runs --db ...`), `log.json` (TRL's log history: reward, the environment's reward column, loss per step) and
`adapter/` (the LoRA adapters).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if (HERE.parent / "societas" / "api.py").is_file():  # run from a checkout: use its code, installed or not
    sys.path.insert(0, str(HERE.parent))

from agents.llm.local.device import pick_threads  # noqa: E402
from agents.llm.local.ids import resolve_model  # noqa: E402
from societas.adapters.trl import dataset, environment_factory, plain_answers_as_calls, tool_chat_template  # noqa: E402

#: the fishery the fisher trains in: itself (agent 1), then four co-players fishing the sustainable share
WORLD = {"fishers": 5, "population": [{"count": 1, "policy": "llm"},
                                      {"count": 4, "policy": "scripted", "strategy": "sustainable"}]}


def load(rank: int):
    """The embedded model in fp32 and its tokenizer with a tool-calling chat template; (model, tokenizer, LoRA)."""
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    # as the platform's engine: half the cores on a busy machine (there, 2 threads spinning on 2 shared cores made
    # generation 12x slower in CPU time than 1)
    torch.set_num_threads(pick_threads("cpu"))
    directory, gguf, _ = resolve_model(None)
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=gguf)
    tok.chat_template = tool_chat_template()
    plain_answers_as_calls(tok)  # "12" for act(answer="12"): a 135M model often writes the answer, not the call
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=gguf, dtype=torch.float32)
    # the GGUF weights are de-quantized to fp32 on load: nothing is quantized any more, but the model still says so,
    # and the Trainer refuses to train a "GGUF-quantized" model
    model.hf_quantizer, model.is_quantized = None, False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    lora = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                      task_type="CAUSAL_LM")
    return model, tok, lora


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--small", action="store_true", help="1-month episodes, 2 steps of 2 completions (the tests)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default 40; --small 2)")
    p.add_argument("--months", type=int, default=None, help="months an episode lasts (default 3; --small 1)")
    p.add_argument("--generations", type=int, default=None, help="completions per prompt, G (default 4; --small 2)")
    p.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate of the adapters")
    p.add_argument("--rank", type=int, default=8, help="LoRA rank")
    p.add_argument("--seed", type=int, default=0, help="seed of the episodes (seed, seed+1, ...) and the training")
    p.add_argument("--out", type=Path, default=HERE / "out" / "grpo_commons", help="output folder")
    args = p.parse_args(argv)
    steps = args.steps or (2 if args.small else 40)
    months = args.months or (1 if args.small else 3)
    group = args.generations or (2 if args.small else 4)
    for flag, value in (("--steps", steps), ("--months", months), ("--rank", args.rank)):
        if value < 1:
            print(f"error: {flag} must be at least 1 (got {value})", file=sys.stderr)
            return 2
    if group < 2:
        print(f"error: --generations must be at least 2: GRPO compares the completions of a prompt (got {group})",
              file=sys.stderr)
        return 2
    if args.seed < 0:
        print(f"error: --seed must be 0 or more (got {args.seed})", file=sys.stderr)
        return 2

    from trl import GRPOConfig, GRPOTrainer

    args.out.mkdir(parents=True, exist_ok=True)
    db = f"sqlite:///{args.out / 'grpo.db'}"
    fields = {**WORLD, "months": months}
    factory = environment_factory("commons", db=db, name="grpo", **fields)
    prompts = dataset("commons", range(args.seed, args.seed + steps), db=db, name="grpo", **fields)
    model, tok, lora = load(args.rank)
    config = GRPOConfig(
        output_dir=str(args.out / "trainer"), max_steps=steps, learning_rate=args.lr, seed=args.seed,
        per_device_train_batch_size=group, num_generations=group, max_completion_length=(64 if args.small else 192) * months,
        max_tool_calling_iterations=months, temperature=0.9, beta=0.0, use_cpu=True, bf16=False, gradient_checkpointing=False,
        logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True, shuffle_dataset=False,
    )
    trainer = GRPOTrainer(model=model, args=config, train_dataset=prompts, processing_class=tok, peft_config=lora,
                          environment_factory=factory)
    t0 = time.time()
    trainer.train()
    trainer.model.save_pretrained(str(args.out / "adapter"))
    log = trainer.state.log_history
    (args.out / "log.json").write_text(json.dumps(log, indent=1))
    rewards = [round(e["reward"], 3) for e in log if "reward" in e]
    print(f"{steps} GRPO steps of {group} completions in {time.time() - t0:.0f} s; mean reward per step: {rewards}")
    print(f"episodes stored in {db}; adapters in {args.out / 'adapter'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
