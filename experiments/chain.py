"""One chain of either chapter, end to end, in one process: no DVC, no MLflow, nothing written.

    python experiments/chain.py                       # chapter B, chain 100: SFT, GRPO to its end, pass@k
    python experiments/chain.py --chapter A --seed 3  # chapter A: SFT to its start, 25 GRPO steps
    python experiments/chain.py --grpo-lr 3e-4 --end-target 0.8 --samples 64

Every knob below is an argument with its default, read from params.yaml (the run and variant it
names); the functions are rlvr.chain's, the same the pipeline's stages call, so this chain's
numbers are the pipeline's for the same settings (tests/pipeline/test_chain.py compares them).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

from rlvr.chain import correct_out_of, end_summary, grpo_run, start_accuracies
from rlvr.chain import start as chain_start
from rlvr.determinism import SEED_THREADS, set_determinism
from rlvr.grpo_stats import seed_summary
from rlvr.io.params import load_params
from rlvr.noise import sft_rows
from rlvr.passk import never_solved_in, pass_at_k
from rlvr.rollout import Sampling
from rlvr.sft import encode_sft
from rlvr.tasks import problem_rows, problems_of, split
from rlvr.tokenizer import Tokenizer

CHAPTERS = {"A": ("single_digit", "a_grpo"), "B": ("two_digit", "grpo_end")}  # (SFT run, GRPO variant)


def arguments(argv: list[str] | None) -> argparse.Namespace:
    """The chain's knobs, each defaulting to what params.yaml gives the chapter's run and variant
    (`--params` and `--chapter` are read first, so `--help` shows those values)."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument(
        "--chapter",
        choices=CHAPTERS,
        default="B",
        help="A: single_digit and a_grpo; B: two_digit and grpo_end",
    )
    first.add_argument("--params", default="params.yaml", help="where every default below comes from")
    known, _ = first.parse_known_args(argv)
    params = load_params(known.params)
    run_name, variant = CHAPTERS[known.chapter]
    sft, grpo = params.sft_run(run_name), params.variant(variant)
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        parents=[first],
    )
    p.add_argument("--seed", type=int, default=100, help="the chain: SFT seed, and the GRPO stream it owns")
    p.add_argument(
        "--sft-target",
        type=float,
        default=sft.target,
        help="SFT stops where validation accuracy reaches this",
    )
    p.add_argument("--sft-lr", type=float, default=sft.lr, help="SFT learning rate")
    p.add_argument("--sft-epochs", type=int, default=sft.epochs, help="SFT step cap, in epochs")
    p.add_argument("--grpo-lr", type=float, default=grpo.lr, help="GRPO learning rate")
    p.add_argument("--prompts", type=int, default=grpo.prompts_per_step, help="GRPO prompts per step, P")
    p.add_argument("--group-size", type=int, default=grpo.group_size, help="GRPO samples per prompt, G")
    p.add_argument("--steps", type=int, default=grpo.steps, help="GRPO steps, or the cap of a controlled end")
    p.add_argument("--beta", type=float, default=grpo.beta, help="KL coefficient")
    p.add_argument(
        "--end-target",
        type=float,
        default=grpo.target,
        help="GRPO stops where validation pass@1 reaches this (None: a fixed budget of steps)",
    )
    p.add_argument(
        "--samples", type=int, default=params.passk.n, help="samples per held-out problem for pass@k"
    )
    return p.parse_args(argv)


def overrides(config, **values):
    """The config with every given (non-None) value replaced."""
    return dataclasses.replace(config, **{k: v for k, v in values.items() if v is not None})


def run_chain(args: argparse.Namespace) -> dict:
    """SFT to the start, GRPO from it, pass@k of both, for chain `args.seed`: the numbers a report
    line would hold, as one dict."""
    params = load_params(args.params)
    run_name, variant = CHAPTERS[args.chapter]
    sft = overrides(params.sft_run(run_name), target=args.sft_target, lr=args.sft_lr, epochs=args.sft_epochs)
    grpo = overrides(
        params.variant(variant),
        lr=args.grpo_lr,
        prompts_per_step=args.prompts,
        group_size=args.group_size,
        steps=args.steps,
        beta=args.beta,
        target=args.end_target,
    )
    task = params.task(sft.task)
    train_split, held_split, val_split = split(sft.task, task.heldout, params.seed, task.validation)
    rows = sft_rows(train_split, sft.noise, sft.repeats, params.seed)
    tok = Tokenizer()
    tokens, mask = encode_sft(rows, tok)
    clean = encode_sft(rows, tok, field="answer")
    train = problems_of(rows, sft.task)
    held = problems_of(problem_rows(held_split), sft.task)
    val = problems_of(problem_rows(val_split), sft.task) or train  # chapter A: its 55 prompts
    model_cfg = sft.model or params.model
    t0 = time.perf_counter()

    set_determinism(args.seed, SEED_THREADS)  # as a seed worker of the warm-up and SFT stages sets it
    start = chain_start(args.seed, sft, model_cfg, (tokens, mask, clean), val, 0.0, "cpu")
    stride = max(1, len(train) // sft.eval_max_prompts)
    accuracies = start_accuracies(
        start.model, task.max_new_tokens, train[::stride][: sft.eval_max_prompts], held, start.gen
    )
    out = {
        "chain": args.seed,
        "sft": {
            "reached": None if start.stop is None else start.stop.reached,
            "start_val": None if start.stop is None else start.stop.chosen["value"],
            "start_steps": start.noisy_steps,
            "redraws": start.draws,
            **accuracies,
        },
    }
    sft_model = start.model
    policy = type(sft_model)(model_cfg, len(tok))
    policy.load_state_dict(sft_model.state_dict())
    policy.eval()
    set_determinism(args.seed, SEED_THREADS)  # ... and of the GRPO stage
    curve, stop = grpo_run(
        policy, grpo, (train, held or train, val), task.max_new_tokens, args.seed, 0, "cpu"
    )
    summary = seed_summary(curve)
    out["grpo"] = {
        k: summary[k] for k in ("eval_acc_start", "eval_acc_final", "kl_k3_nats_max", "entropy_nats_final")
    }
    if stop is not None:
        out["grpo"].update(end_summary(stop))
    if held:  # chapter B: pass@k of the start and of GRPO on the held-out problems
        n = args.samples
        how = Sampling(tok, task.max_new_tokens, params.passk.temperatures[0])
        counts = {
            name: correct_out_of(m, held, n, how, params.seed)
            for name, m in (("sft", sft_model), ("grpo", policy))
        }
        ks = [k for k in params.passk.ks if k <= n]
        out["passk"] = {
            name: {
                **{f"pass_at_{k}": float(pass_at_k(c, n, k).mean()) for k in ks},
                f"never_solved_in_{ks[-1]}": never_solved_in(c, n, ks[-1]),
            }
            for name, c in counts.items()
        }
        out["counts"] = counts
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    out = run_chain(arguments(argv))
    shown = {k: v for k, v in out.items() if k != "counts"}
    print(json.dumps(shown, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
