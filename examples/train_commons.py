"""Train an LLM fisher against the reward layer: group-relative policy gradient with LoRA, on a CPU.

The focal fisher is the embedded SmolLM2-135M; four scripted co-players fish the sustainable share
(`sustainable`). Every training episode is a run of the platform's fishery through its PettingZoo
environment (`sim.env`): the env renders the very prompt an LLM fisher is sent, the reward is the
reward layer's in the study's reward mode, and every episode is stored (`out/train.db`).

Reward modes (`--reward-modes`, default all three): the study is run once per mode, the same training seeds,
episode seeds and held-out worlds in each, so modes pair. `private`: the fisher's reward is its own catch;
`integrated`: its catch plus `--lam` (0.5) times the others' mean catch; `cooperative`: the group's mean catch.
The mode is what the fisher is trained on and what it is told after each month (its feedback); the catches
(payoffs) are material and compare across modes.

Method (a plain torch loop, not TRL's GRPOTrainer: the action is a number decoded under the
platform's constraint, and the episode is driven by the env, neither of which TRL's rollout
function fits without a wrapper as long as this loop):
- each iteration runs G episodes from the same seed in lockstep (a group); at each month the
  policy samples the focal catch exactly as the platform's engine does (digits that keep the value
  in range, stopping once it is; temperature 0.7; `agents.llm.local.numbers`);
- the group-relative advantage of an episode is (R - mean R) / (std R + eps) over its group (GRPO);
  every decision of the episode takes it (outcome supervision);
- the loss is -A x log pi(decision), pi the constrained sampling distribution itself (exact on-policy
  gradient); LoRA adapters (rank 8, q/k/v/o) are the only weights trained; the prompt but its last
  token is forwarded once without gradients (its keys and values cached), so gradients flow only
  through the answer tokens.
- training seeds (`--train-seeds K`, from `--seed`): each trains its own adapters from the embedded model (its own
  episode seeds and sampling noise) and is evaluated on its own, so a result is read across training seeds.
- Before and after, the fisher is evaluated *through the platform* (`societas.api.run` with the merged model
  directory as `--model`) on held-out seeds (100,000 on; training episodes' seeds are below) in worlds training
  never saw (`HELD_OUT_WORLDS`: each changes the lake's stock, capacity or regrowth and the co-players' strategy
  and count) and in the training world (new seeds only); the same worlds and seeds before and after, so each
  (world, seed) pairs: the after-minus-before difference of return (the mode's reward), catch and welfare (the
  fishers' mean summed catch) with a 95% percentile-bootstrap interval, of survival with Newcombe's paired interval
  (`sim.reward.intervals`), per training seed and pooled (each (world, seed) once, its after the mean over
  training seeds). Between modes, per (world, seed): the change under a mode minus the change under the first mode
  (`between_modes`), with its interval. The fishery's validity probe (does the catch follow the stock?) runs before
  and after each training seed with its negative control (a stock-blind fisher: must read "does not respond") and
  positive control (a fisher taking a tenth of the stock: "responds"); `controls_behaved` says whether both did,
  and the probe's verdict stands only then.

    python examples/train_commons.py            # the default study (3 modes x 3 training seeds; hours on 2 busy cores)
    python examples/train_commons.py --small    # 3 modes x 2 training seeds of 1 iteration (the tests)
    python examples/train_commons.py --reward-modes private,cooperative   # some modes only (the first: the reference)

Output in --out (default examples/out/train_commons/): `adapters/MODE/seed-S/` (the LoRA adapters of training seed
S, a few MB; a merged model is about 540 MB, kept in `models/MODE/` only with `--keep-models`), `history.csv` (per
mode, training seed and iteration: mean return, loss, catches), `evaluation.csv` (one row per mode, model, world and
held-out seed) and `summary.json` (the worlds, per mode the paired before/after figures per training seed and
pooled, the modes against the first, the probes with their controls), written again after each mode.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if (HERE.parent / "societas" / "api.py").is_file():  # run from a checkout: use its code, installed or not
    sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import sim  # noqa: E402
from agents.llm.local.device import pick_threads  # noqa: E402
from agents.llm.local.ids import resolve_model  # noqa: E402
from agents.llm.local.model import release_lm  # noqa: E402
from agents.llm.local.numbers import NumberState  # noqa: E402
from sim.env import parallel_env  # noqa: E402
from sim.store.store import Store  # noqa: E402
from sim.reward.intervals import mean_interval, paired_rate_difference  # noqa: E402

TEMPERATURE = 0.7
FOCAL = "agent_1"


#: the world training plays: a full lake of 100 tons that doubles, four co-players at the sustainable share
TRAINING_WORLD = {"capacity": 100.0, "start_fraction": 1.0, "regrowth": 2.0, "co_players": (("sustainable", 4),)}
#: worlds training never sees: each changes the lake (its stock, capacity or regrowth) and the co-players (their
#: strategy and count). The focal fisher is agent 1 in every one.
HELD_OUT_WORLDS = {
    "scarce_greedy": {"capacity": 100.0, "start_fraction": 0.5, "regrowth": 2.0, "co_players": (("greedy", 4),)},
    "large_random": {"capacity": 200.0, "start_fraction": 1.0, "regrowth": 2.0, "co_players": (("random", 2),)},
    "slow_mixed": {"capacity": 100.0, "start_fraction": 1.0, "regrowth": 1.5,
                   "co_players": (("sustainable", 3), ("greedy", 3))},
}
#: the evaluation's worlds: the training world on held-out seeds (new sampling only), then the held-out worlds
EVAL_WORLDS = {"training": TRAINING_WORLD, **HELD_OUT_WORLDS}
HELD_OUT_SEED0 = 100_000  # evaluation seeds; training episode seeds are below it


def population(months: int, world: dict = TRAINING_WORLD, mode: str = "private", lam: float = 0.5) -> dict:
    """The fishery's fields for `world` under reward `mode`: the focal LLM fisher first (agent 1), then the scripted
    co-players. The mode decides the reward the fisher is trained on and told (its feedback); payoffs are the same."""
    groups = [{"count": 1, "policy": "llm"}] + [{"count": n, "policy": "scripted", "strategy": strategy}
                                                 for strategy, n in world["co_players"]]
    return {"months": months, "fishers": sum(g["count"] for g in groups), "population": groups,
            "capacity": world["capacity"], "start_fraction": world["start_fraction"], "regrowth": world["regrowth"],
            "reward_mode": mode, **({"lam": lam} if mode == "integrated" else {})}


def load_policy(rank: int):
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
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    return get_peft_model(base, config), tok


def encode(tok, messages) -> list[int]:
    """The prompt's ids as the platform's engine forms them (chat template, no added special tokens)."""
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tok(text, add_special_tokens=False)["input_ids"])


class Sampler:
    """Constrained number decoding as the engine's (`LocalLM.decode_numbers`), on a model with adapters."""

    def __init__(self, model, tok) -> None:
        self.model, self.tok = model, tok
        self.digits = torch.tensor([tok.convert_tokens_to_ids(str(d)) for d in range(10)])
        self.pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id

    def _left_pad(self, rows: list[list[int]]):
        width = max(len(r) for r in rows)
        ids = torch.tensor([[self.pad] * (width - len(r)) + r for r in rows])
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
        return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)

    def _scores(self, logits: torch.Tensor, state: NumberState) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, 11] log-scores of the ten digits and stopping (masked where not allowed), and the mask."""
        lse = torch.logsumexp(logits, dim=-1, keepdim=True)
        digit_lp = logits[:, self.digits] - lse
        stop_lp = torch.log1p(-digit_lp.exp().sum(-1).clamp(max=1 - 1e-7))
        allowed = torch.cat([state.digit_mask(), state.may_stop()[:, None]], dim=1)
        return torch.cat([digit_lp, stop_lp[:, None]], dim=1).masked_fill(~allowed, float("-inf")), allowed

    @torch.no_grad()
    def sample(self, prompts: list[list[int]], bounds: list[tuple[int, int]], gen: torch.Generator):
        """Per prompt: (value, the picks 0-9 digit / 10 stop, the allowed masks at each pick)."""
        ids, mask, pos = self._left_pad(prompts)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
        cache, logits = out.past_key_values, out.logits[:, -1, :].float()
        state = NumberState(torch.tensor([b[0] for b in bounds]), torch.tensor([b[1] for b in bounds]))
        picks, masks, active = [], [], []
        next_pos = pos[:, -1] + 1
        for _ in range(state.max_digits + 1):
            scores, allowed = self._scores(logits, state)
            gumbel = -torch.log(-torch.log(torch.rand(scores.shape, generator=gen).clamp(1e-12, 1 - 1e-12)))
            pick = (scores / TEMPERATURE + gumbel).argmax(-1)
            active.append(~state.done)
            picks.append(pick)
            masks.append(allowed)
            feed = state.advance(pick, self.digits, self.pad)
            if bool(state.done.all()):
                break
            mask = torch.cat([mask, torch.ones((mask.shape[0], 1), dtype=mask.dtype)], dim=1)
            out = self.model(input_ids=feed[:, None], attention_mask=mask, position_ids=next_pos[:, None],
                             past_key_values=cache, use_cache=True)
            cache, logits = out.past_key_values, out.logits[:, -1, :].float()
            next_pos = next_pos + 1
        result = []
        for b in range(len(prompts)):
            steps = [k for k in range(len(picks)) if bool(active[k][b])]
            result.append((int(state.value[b]), [int(picks[k][b]) for k in steps], [masks[k][b] for k in steps]))
        return result

    def log_probs(self, prompts: list[list[int]], picks: list[list[int]], masks: list[list[torch.Tensor]]) -> torch.Tensor:
        """log pi(decision) per row, with gradients through the answer tokens only (the prompt but its last token
        forwarded once without gradients)."""
        ids, mask, pos = self._left_pad([p[:-1] for p in prompts])
        with torch.no_grad():
            cache = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True).past_key_values
        steps = max(len(p) for p in picks)
        feed = torch.full((len(prompts), steps), self.pad)
        for b, (p, chosen) in enumerate(zip(prompts, picks)):
            feed[b, 0] = p[-1]
            for k, c in enumerate(chosen[:-1]):
                feed[b, k + 1] = int(self.digits[c]) if c < 10 else self.pad
        full = torch.cat([mask, torch.ones((len(prompts), steps), dtype=mask.dtype)], dim=1)
        new_pos = pos[:, -1:] + 1 + torch.arange(steps)[None]
        logits = self.model(input_ids=feed, attention_mask=full, position_ids=new_pos, past_key_values=cache).logits.float()
        lse = torch.logsumexp(logits, dim=-1, keepdim=True)
        digit_lp = logits[:, :, self.digits] - lse
        stop_lp = torch.log1p(-digit_lp.exp().sum(-1).clamp(max=1 - 1e-7))
        scores = torch.cat([digit_lp, stop_lp[..., None]], dim=-1) / TEMPERATURE  # [B, steps, 11]
        total = []
        for b, (chosen, allowed) in enumerate(zip(picks, masks)):
            lp = 0.0
            for k, (c, ok) in enumerate(zip(chosen, allowed)):
                lp = lp + torch.log_softmax(scores[b, k].masked_fill(~ok, float("-inf")), -1)[c]
            total.append(lp)
        return torch.stack(total)


def episodes(sampler: Sampler, tok, seed: int, group: int, months: int, db: Store, gen: torch.Generator,
             mode: str = "private", lam: float = 0.5):
    """`group` episodes from `seed` in lockstep under reward `mode`; per episode (return, [(prompt ids, picks, masks)],
    catches)."""
    envs = [parallel_env("commons", db=db, name="train", **population(months, mode=mode, lam=lam)) for _ in range(group)]
    obs = [env.reset(seed=seed)[0] for env in envs]
    returns = [0.0] * group
    decisions: list[list[tuple]] = [[] for _ in range(group)]
    catches: list[list[int]] = [[] for _ in range(group)]
    live = [i for i in range(group) if envs[i].agents]
    while live:
        ready = [i for i in live if obs[i][FOCAL]["phase"] is not None]
        prompts = [encode(tok, obs[i][FOCAL]["messages"]) for i in ready]
        spaces = [obs[i][FOCAL]["request"]["space"] for i in ready]
        bounds = [(max(0, math.ceil(s.lo)), max(0, math.floor(s.hi))) for s in spaces]
        got = sampler.sample(prompts, bounds, gen) if ready else []
        action = {i: float(v) for i, (v, _, _) in zip(ready, got)}
        for i, p, (v, picks, masks) in zip(ready, prompts, got):
            decisions[i].append((p, picks, masks))
            catches[i].append(v)
        for i in live:
            obs[i], rew, term, trunc, _ = envs[i].step({FOCAL: action.get(i)} if envs[i].agents else {})
            returns[i] += rew.get(FOCAL, 0.0)
        live = [i for i in live if envs[i].agents]
    for env in envs:
        env.close()
    return list(zip(returns, decisions, catches))


def evaluate(model_dir: str | None, seeds: list[int], months: int, db: Store, mode: str = "private",
             lam: float = 0.5) -> list[dict]:
    """The focal fisher played by the platform's engine with `model_dir` (None: the embedded model) under reward
    `mode`: one row per evaluation world and held-out seed (the same worlds and seeds for every model, so rows pair).
    `return` is the fisher's reward in that mode; `focal_catch` (its mean catch a month), `welfare` (the fishers'
    summed catches over the run, per fisher) and `survived` are material and compare across modes."""
    llm = {"temperature": TEMPERATURE, "dtype": "fp32"} | ({"model": model_dir} if model_dir else {})
    rows = []
    for name, world in EVAL_WORLDS.items():
        for s in seeds:
            r = sim.run("commons", db=db, seed=s, llm=llm, **population(months, world, mode, lam))
            mine = r.steps[r.steps.agent_id == 1]
            rows.append({"world": name, "seed": s, "return": float(mine.reward.sum()),
                         "survived": r.status == "finished", "months": r.ticks, "focal_catch": float(mine.payoff.mean()),
                         "welfare": float(r.steps.groupby("tick").payoff.mean().sum())})
    return rows


def probe(model_dir: str | None, seeds: int, db: Store) -> dict:
    """The fishery's validity probe (does the catch follow the stock?) with its negative and positive controls."""
    llm = {"temperature": TEMPERATURE, "dtype": "fp32"} | ({"model": model_dir} if model_dir else {})
    got = sim.probe("commons", db=db, probes=["catch_by_stock"], seeds=seeds, llm=llm).to_json()["probes"][0]
    keep = ("levels", "means", "effect", "lo", "hi", "method", "responds", "fallbacks")
    return {**{k: got[k] for k in keep}, "verdict": got["verdict"],
            "controls": {name: {k: c[k] for k in ("does", "means", "effect", "lo", "hi", "responds", "ok")}
                         for name, c in got["controls"].items()},
            # the probe's reading stands only where the stock-blind control read "does not respond" and the
            # stock-following one "responds"
            "controls_behaved": bool(got["valid"])}


def interval(values: list[float], rate: bool = False) -> dict:
    """{"n", "mean", "ci95"}: the platform's 95% interval of a mean (Wilson for a 0/1 rate, percentile bootstrap else)."""
    ci = mean_interval(values, rate=rate)
    return {"n": ci["n"], "mean": ci["mean"], "ci95": [ci["lo"], ci["hi"]]}


#: the figures compared: the reward (per mode) and the material ones (the same in every mode)
FIGURES = ("return", "focal_catch", "welfare")


def paired(before: list[dict], after: list[dict], worlds: list[str]) -> dict:
    """After minus before on the rows of `worlds`, paired by (world, seed): the mean difference with its 95% interval
    (percentile bootstrap of the mean of the pairs' differences; Newcombe's paired interval for survival)."""
    b = {(r["world"], r["seed"]): r for r in before if r["world"] in worlds}
    a = {(r["world"], r["seed"]): r for r in after if r["world"] in worlds}
    keys = sorted(b.keys() & a.keys())
    out: dict = {"pairs": len(keys)}
    for key in FIGURES:
        out[key] = {"before": interval([b[k][key] for k in keys]), "after": interval([a[k][key] for k in keys]),
                    "difference": interval([a[k][key] - b[k][key] for k in keys])}
    surv = paired_rate_difference([float(b[k]["survived"]) for k in keys], [float(a[k]["survived"]) for k in keys])
    out["survival"] = {"before": interval([float(b[k]["survived"]) for k in keys], rate=True),
                       "after": interval([float(a[k]["survived"]) for k in keys], rate=True),
                       "difference": {"n": surv["n"], "mean": surv["mean"], "ci95": [surv["lo"], surv["hi"]]}}
    return out


def comparison(before: list[dict], after: list[dict]) -> dict:
    """The paired before/after figures on the training world (new seeds), on all held-out worlds, and per world."""
    held = list(HELD_OUT_WORLDS)
    return {"training_world": paired(before, after, ["training"]), "held_out_worlds": paired(before, after, held),
            "per_world": {w: paired(before, after, [w]) for w in EVAL_WORLDS}}


def pooled_after(before: list[dict], afters: list[list[dict]]) -> list[dict]:
    """Each (world, seed) of `before` once, its after the mean over the training seeds' rows (survived: under every
    one): the units are the world-seeds, so pairs are not multiplied by the training seeds."""
    out = []
    for r in before:
        mine = [e for rows in afters for e in rows if (e["world"], e["seed"]) == (r["world"], r["seed"])]
        out.append({**r, **{k: float(np.mean([e[k] for e in mine])) for k in FIGURES},
                    "survived": all(e["survived"] for e in mine)})
    return out


def between_modes(runs: dict[str, dict], reference: str) -> dict:
    """What each mode's training changed beyond what `reference`'s did: per (world, seed), (after - before) under the
    mode minus (after - before) under the reference (its after pooled over training seeds), with the 95% interval of
    the mean of those differences, for the material figures (the reward itself differs between modes). Both modes'
    before is the same embedded model, told its reward in its own mode, so the difference in differences removes
    what the mode's feedback alone does to the untrained fisher."""
    ref = runs[reference]
    out: dict = {}
    for mode, got in runs.items():
        if mode == reference:
            continue
        per_scope = {}
        for scope, worlds in (("training_world", ["training"]), ("held_out_worlds", list(HELD_OUT_WORLDS))):
            change = {}
            for name, rows in (("mode", got), ("reference", ref)):
                b = {(r["world"], r["seed"]): r for r in rows["before"] if r["world"] in worlds}
                a = {(r["world"], r["seed"]): r for r in rows["after"] if r["world"] in worlds}
                change[name] = {k: (a[k], b[k]) for k in b.keys() & a.keys()}
            keys = sorted(change["mode"].keys() & change["reference"].keys())
            scope_out: dict = {"pairs": len(keys)}
            for key in ("focal_catch", "welfare", "survived"):
                diff = [(float(change["mode"][k][0][key]) - float(change["mode"][k][1][key]))
                        - (float(change["reference"][k][0][key]) - float(change["reference"][k][1][key])) for k in keys]
                scope_out["survival" if key == "survived" else key] = interval(diff)
            per_scope[scope] = scope_out
        out[mode] = per_scope
    return out


def train(seed: int, a: argparse.Namespace, iterations: int, group: int, months: int, db: Store,
          mode: str = "private") -> tuple[Path, list]:
    """LoRA adapters trained from the embedded model with training seed `seed` on the reward of `mode`; (the
    adapters' folder, history). The adapters are a few MB; `merge` makes the full model the platform loads."""
    torch.manual_seed(seed)
    model, tok = load_policy(a.rank)
    sampler = Sampler(model, tok)
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr)
    gen = torch.Generator().manual_seed(seed)
    history = []
    for it in range(iterations):
        t0 = time.time()
        model.eval()
        got = episodes(sampler, tok, seed=seed * 10_000 + it, group=group, months=months, db=db, gen=gen,
                       mode=mode, lam=a.lam)
        t_play = time.time() - t0
        returns = np.array([r for r, _, _ in got])
        adv = (returns - returns.mean()) / (returns.std() + 1e-8)
        rows = [(p_, picks, masks, float(adv[e])) for e, (_, decisions, _) in enumerate(got)
                for p_, picks, masks in decisions]
        loss_value = 0.0
        if returns.std() > 0 and rows:
            model.train()
            opt.zero_grad()
            lp = sampler.log_probs([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
            loss = -(torch.tensor([r[3] for r in rows]) * lp).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            loss_value = float(loss.detach())
        catches = [c for _, _, cs in got for c in cs]
        history.append({"reward_mode": mode, "train_seed": seed, "iteration": it, "mean_return": float(returns.mean()),
                        "std_return": float(returns.std()), "mean_catch": float(np.mean(catches)) if catches else 0.0,
                        "loss": loss_value, "seconds": time.time() - t0, "play_seconds": t_play})
        print(f"{mode} seed {seed} iteration {it + 1}/{iterations}: return {returns.mean():.2f} +- {returns.std():.2f}, "
              f"catch {history[-1]['mean_catch']:.1f}, loss {loss_value:.3f}, {time.time() - t0:.1f}s ({t_play:.1f}s playing)",
              file=sys.stderr)
    adapters = a.out / "adapters" / mode / f"seed-{seed}"
    model.save_pretrained(adapters)
    return adapters, history


def merge(adapters: Path, model_dir: Path) -> Path:
    """The embedded model with `adapters` merged into its weights, saved in `model_dir` (fp32 safetensors, about
    540 MB): a model folder the platform runs with `--model`."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory, gguf, _ = resolve_model(None)
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=gguf)
    base = AutoModelForCausalLM.from_pretrained(directory, gguf_file=gguf, dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, str(adapters)).merge_and_unload()
    # loaded from the GGUF file (de-quantised to fp32), the model still says it is quantised, and transformers
    # refuses to save it: it is a plain fp32 model now, and is saved as one
    merged.hf_quantizer = None
    if hasattr(merged.config, "quantization_config"):
        del merged.config.quantization_config
    merged.save_pretrained(model_dir, safe_serialization=True)
    tok.save_pretrained(model_dir)
    return model_dir


MODES = ("private", "integrated", "cooperative")


def modes_arg(text: str) -> list[str]:
    """--reward-modes: a comma-separated list of distinct reward modes."""
    got = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in got if m not in MODES]
    if not got or bad or len(set(got)) != len(got):
        raise argparse.ArgumentTypeError(f"{text!r}: give distinct modes, comma-separated, of {', '.join(MODES)}")
    return got


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--small", action="store_true",
                   help="2 training seeds of 1 iteration of 2 episodes of 2 months, 1 held-out seed per world (the tests)")
    p.add_argument("--reward-modes", type=modes_arg, default=list(MODES),
                   help="the reward modes to train and evaluate, comma-separated (default: private,integrated,cooperative)")
    p.add_argument("--lam", type=float, default=0.5, help="integrated mode's weight of the others' mean payoff")
    p.add_argument("--iterations", type=int, default=None, help="policy-gradient steps per training seed (default 24; --small 1)")
    p.add_argument("--group", type=int, default=None, help="episodes per group (default 8; --small 2)")
    p.add_argument("--months", type=int, default=None, help="months per episode (default 4; --small 2)")
    p.add_argument("--eval-seeds", type=int, default=None, help="held-out seeds per evaluation world (default 10; --small 1)")
    p.add_argument("--train-seeds", type=int, default=None,
                   help="training seeds, each its own adapters and evaluation (default 3; --small 2)")
    p.add_argument("--probe-seeds", type=int, default=10, help="seeds of the validity probe (10 to 10,000)")
    p.add_argument("--lr", type=float, default=5e-4, help="AdamW learning rate of the adapters")
    p.add_argument("--rank", type=int, default=8, help="LoRA rank")
    p.add_argument("--seed", type=int, default=0, help="the first training seed (episode seeds, sampling noise)")
    p.add_argument("--keep-models", action="store_true",
                   help="keep each merged model (about 540 MB each) in models/MODE/seed-S; by default only the adapters "
                        "are kept and a merged model is removed once evaluated and probed")
    p.add_argument("--out", type=Path, default=HERE / "out" / "train_commons", help="output folder")
    p.add_argument("--combine", type=Path, nargs="+", metavar="DIR",
                   help="make no study: merge the --out folders of studies of other reward modes (run apart, e.g. in "
                        "parallel) with the same settings into --out, the first folder's first mode the reference")
    a = p.parse_args()
    if a.combine:
        try:
            summary = combine(a.combine, a.out)
        except ValueError as exc:
            p.error(str(exc))
        report(summary)
        return
    def pick(value, small, default):  # (0 is a value, refused below, not a request for the default)
        return value if value is not None else (small if a.small else default)

    iterations, group, months = pick(a.iterations, 1, 24), pick(a.group, 2, 8), pick(a.months, 2, 4)
    n_eval, n_train = pick(a.eval_seeds, 1, 10), pick(a.train_seeds, 2, 3)
    for name, v in (("iterations", iterations), ("group", group), ("months", months), ("eval-seeds", n_eval),
                    ("train-seeds", n_train)):
        if v < 1 or (name == "group" and v < 2):
            p.error(f"--{name} must be at least {2 if name == 'group' else 1}")
    if not 10 <= a.probe_seeds <= 10_000:
        p.error("--probe-seeds must be from 10 to 10,000")
    if iterations > 10_000:
        p.error("--iterations must be at most 10,000")
    if not (math.isfinite(a.lam) and 0 <= a.lam <= 10):
        p.error("--lam must be from 0 to 10")
    if a.seed < 0 or (a.seed + n_train) * 10_000 > HELD_OUT_SEED0:  # episode seeds: training seed x 10,000 + iteration
        p.error(f"--seed must be from 0 to {HELD_OUT_SEED0 // 10_000 - n_train} with {n_train} training seeds "
                "(the training episodes' seeds stay below the held-out ones)")
    if a.out.exists() and not a.out.is_dir():
        p.error(f"--out {a.out} is a file, not a folder")
    a.out.mkdir(parents=True, exist_ok=True)
    train_db = Store(f"sqlite:///{(a.out / 'train.db').resolve()}")  # one store each, opened once
    eval_db = Store(f"sqlite:///{(a.out / 'eval.db').resolve()}")
    held_out = list(range(HELD_OUT_SEED0, HELD_OUT_SEED0 + n_eval))
    train_seeds = list(range(a.seed, a.seed + n_train))
    started = time.time()
    summary = {
        "reward_modes": a.reward_modes, "lam": a.lam, "iterations": iterations, "group": group, "months": months,
        "train_seeds": train_seeds, "held_out_seeds": held_out, "probe_seeds": a.probe_seeds, "lr": a.lr,
        "rank": a.rank, "training_world": TRAINING_WORLD, "worlds": EVAL_WORLDS, "held_out_worlds": list(HELD_OUT_WORLDS),
    }
    print("probing the embedded model ...", file=sys.stderr)
    summary["probe_before"] = probe(None, a.probe_seeds, eval_db)
    summary["modes"] = {}
    history, evaluations, rows = [], [], {}
    for mode in a.reward_modes:
        print(f"{mode}: evaluating the embedded model on {len(EVAL_WORLDS)} worlds x {n_eval} held-out seeds ...",
              file=sys.stderr)
        before = evaluate(None, held_out, months, eval_db, mode, a.lam)
        evaluations += [{"reward_mode": mode, "model": "before", "train_seed": None, **r} for r in before]
        per_seed, afters = {}, []
        for s in train_seeds:
            adapters, h = train(s, a, iterations, group, months, train_db, mode)
            history += h
            # the folder's name carries the adapters' digest: the cache keys a local model's calls by its path, so a
            # model trained again (in the same --out) must not be answered from the calls of the one before
            digest = hashlib.sha256((adapters / "adapter_model.safetensors").read_bytes()).hexdigest()[:12]
            model_dir = merge(adapters, a.out / "models" / mode / f"seed-{s}-{digest}")
            after = evaluate(str(model_dir), held_out, months, eval_db, mode, a.lam)
            afters.append(after)
            evaluations += [{"reward_mode": mode, "model": "after", "train_seed": s, **r} for r in after]
            per_seed[str(s)] = {"adapters": str(adapters), "model": str(model_dir) if a.keep_models else None,
                                "comparison": comparison(before, after),
                                "probe": probe(str(model_dir), a.probe_seeds, eval_db),
                                "training_steps_per_minute": iterations / max(1e-9, sum(x["seconds"] for x in h) / 60)}
            release_lm(str(model_dir))  # its weights (about 540 MB in memory) are not asked again
            if not a.keep_models:
                shutil.rmtree(model_dir)
        mean_after = pooled_after(before, afters)
        rows[mode] = {"before": before, "after": mean_after}
        summary["modes"][mode] = {
            "per_training_seed": per_seed,
            "pooled": {**comparison(before, mean_after),
                       "note": "after = the mean over the training seeds per (world, seed); survived = survived under every one"},
        }
        reference = a.reward_modes[0]
        summary["between_modes"] = {"reference": reference, "modes": between_modes(rows, reference),
                                    "note": "per (world, seed): (after - before) in the mode minus (after - before) in "
                                            "the reference mode, after pooled over training seeds"}
        summary["minutes"] = (time.time() - started) / 60
        write(a.out, summary, history, evaluations)  # after every mode: a study cut short keeps the modes it finished
    if not a.keep_models and (a.out / "models").is_dir() and not any((a.out / "models").rglob("*.safetensors")):
        shutil.rmtree(a.out / "models")
    report(summary)


#: the settings studies must share to be combined (their pairs are the same worlds, seeds and training)
SHARED = ("lam", "iterations", "group", "months", "train_seeds", "held_out_seeds", "probe_seeds", "lr", "rank",
          "training_world", "worlds", "held_out_worlds")


def combine(parts: list[Path], out: Path) -> dict:
    """One study's outputs from the --out folders of studies of different reward modes with the same settings: the
    modes side by side and `between_modes` computed over all of them (ValueError: a folder without a study, a
    setting that differs, a mode twice)."""
    import pandas as pd

    summaries, histories, evaluations = [], [], []
    for part in parts:
        if not (part / "summary.json").is_file() or not (part / "evaluation.csv").is_file():
            raise ValueError(f"--combine {part}: no study there (summary.json and evaluation.csv)")
        summaries.append(json.loads((part / "summary.json").read_text()))
        histories += pd.read_csv(part / "history.csv").to_dict("records")
        table = pd.read_csv(part / "evaluation.csv")
        table["train_seed"] = table["train_seed"].astype("Int64")
        evaluations += [{k: (None if pd.isna(v) else v) for k, v in r.items()} for r in table.to_dict("records")]
    if out.resolve() in {part.resolve() for part in parts}:
        raise ValueError(f"--out {out} is one of the folders combined: give another")
    first = summaries[0]
    for part, other in zip(parts[1:], summaries[1:]):
        differ = [k for k in SHARED if json.dumps(other.get(k)) != json.dumps(first.get(k))]
        if differ:
            raise ValueError(f"--combine {part}: its {', '.join(differ)} differ from {parts[0]}'s")
    modes = [m for got in summaries for m in got["modes"]]
    if len(set(modes)) != len(modes):
        raise ValueError(f"--combine: a reward mode is in two folders ({', '.join(modes)})")
    rows = {}
    for mode in modes:
        mine = [r for r in evaluations if r["reward_mode"] == mode]
        strip = lambda r: {k: v for k, v in r.items() if k not in ("reward_mode", "model", "train_seed")}  # noqa: E731
        before = [strip(r) for r in mine if r["model"] == "before"]
        afters = [[strip(r) for r in mine if r["model"] == "after" and r["train_seed"] == s] for s in first["train_seeds"]]
        rows[mode] = {"before": before, "after": pooled_after(before, afters)}
    summary = {**{k: v for k, v in first.items() if k not in ("modes", "between_modes", "minutes")},
               "reward_modes": modes, "combined_from": [str(p) for p in parts],
               "minutes": max(got["minutes"] for got in summaries),
               # the embedded model's probe, run by each part on the same seeds: the same figures, or said otherwise
               "probe_before_agrees": all(got["probe_before"] == first["probe_before"] for got in summaries),
               "modes": {m: got["modes"][m] for got in summaries for m in got["modes"]},
               "between_modes": {"reference": modes[0], "modes": between_modes(rows, modes[0]),
                                 "note": first["between_modes"]["note"]}}
    out.mkdir(parents=True, exist_ok=True)
    write(out, summary, histories, evaluations)
    return summary


def write(out: Path, summary: dict, history: list[dict], evaluations: list[dict]) -> None:
    """summary.json, history.csv and evaluation.csv in `out`."""
    import pandas as pd

    pd.DataFrame(history).to_csv(out / "history.csv", index=False)
    table = pd.DataFrame(evaluations)
    table["train_seed"] = table["train_seed"].astype("Int64")  # (before: empty, not a float column of NaN and 0.0)
    table.to_csv(out / "evaluation.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))


def report(summary: dict) -> None:
    """The paired figures on stdout: per reward mode, per training seed and pooled, on the training world and the
    held-out ones; then each mode against the first."""
    def line(label: str, c: dict) -> None:
        for key in (*FIGURES, "survival"):
            b, f, d = c[key]["before"], c[key]["after"], c[key]["difference"]
            print(f"  {label:<28} {key:<12} before {b['mean']:7.2f}  after {f['mean']:7.2f}  "
                  f"after-before {d['mean']:+7.2f} {fmt(d['ci95'])}  ({c['pairs']} pairs)")

    for mode, got in summary["modes"].items():
        print(f"== reward mode {mode}")
        for s, one in got["per_training_seed"].items():
            print(f"training seed {s}:")
            line("training world (new seeds)", one["comparison"]["training_world"])
            line("held-out worlds", one["comparison"]["held_out_worlds"])
            pr = one["probe"]
            print(f"  probe catch_by_stock: effect {pr['effect']:.2f} {fmt([pr['lo'], pr['hi']])} {pr['verdict']}; "
                  f"controls behaved: {pr['controls_behaved']}")
        print("pooled over training seeds:")
        line("training world (new seeds)", got["pooled"]["training_world"])
        line("held-out worlds", got["pooled"]["held_out_worlds"])
    between = summary["between_modes"]
    for mode, scopes in between["modes"].items():
        print(f"== {mode} minus {between['reference']}, change in change:")
        for scope, c in scopes.items():
            print(f"  {scope:<18} " + "  ".join(f"{k} {c[k]['mean']:+.2f} {fmt(c[k]['ci95'])}"
                                                  for k in ("focal_catch", "welfare", "survival")) + f"  ({c['pairs']} pairs)")
    pr = summary["probe_before"]
    print(f"probe before: effect {pr['effect']:.2f} {fmt([pr['lo'], pr['hi']])} {pr['verdict']}; "
          f"controls behaved: {pr['controls_behaved']}")


def fmt(ci: list) -> str:
    """An interval as [lo, hi], or [-] where there is none (one pair)."""
    return "[-]" if ci[0] is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


if __name__ == "__main__":
    main()
