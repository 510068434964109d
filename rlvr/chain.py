"""One chain, as functions: a controlled SFT start, GRPO from it, pass@k of both.

A chain is the unit of replication: SFT seed s, stopped where its validation accuracy reaches its
run's target (drawn again from a fresh start while the step cap comes first), then GRPO from it
(to a controlled end, or a fixed budget), then its pass@k counts. Its phases, each seeded from the
chain's own seed: `start` (= `fresh_start`, the warm-up, then `controlled_start`), `grpo_run`,
`correct_out_of`. The stages (`warmup@`, `sft@`, `grpo@`, `passk`) call them one phase per
process, with DVC caching each and MLflow logging it; `experiments/chain.py`, `rlvr starts` and
`rlvr calibrate` call them in one process, with neither. None of them wires the training loops
itself (tests/test_chain_owners.py), so they cannot drift (tests/pipeline/test_chain.py runs the
one-file chain and the stages on tiny params and compares them). Nothing here reads a file or a
params section: it takes configs and problems.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.configs import GRPOConfig, ModelConfig, SFTConfig
from rlvr.controlled import StopAtTarget, accuracy_stop
from rlvr.grpo_loop import GRPOData, train_grpo
from rlvr.model import TinyLM
from rlvr.optim import AdamW, diverged_at
from rlvr.rollout import Sampling, accuracy, binomial_counts, solve_probability
from rlvr.seeding import draw_seed, stream_seed
from rlvr.sft import fit_noisy, warm_up
from rlvr.tasks import Problem
from rlvr.tokenizer import Tokenizer

PATH_K = 64  # a controlled end's path: exact pass@1 and pass@64 at every check


def perturb_(model: TinyLM, eps: float, seed: int) -> None:
    """Multiply every weight by (1 + eps * z), z ~ N(0, 1) from its own generator: at eps ~ 1e-6 a
    change the size of float32 rounding, which a chaotic chain amplifies as another CPU's would."""
    gen = torch.Generator().manual_seed(10_007 + seed)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + eps * torch.randn(p.shape, generator=gen))


def fresh_start(
    init_seed: int, cfg: SFTConfig, model_cfg: ModelConfig, clean: tuple, eps: float, device: str
) -> tuple[TinyLM, AdamW, torch.Generator, list[dict]]:
    """A chain's start before its noisy epochs: a fresh model initialised under `init_seed` (on the
    CPU, so every device starts from the same weights; perturbed by `eps` when asked), then the run's
    clean epochs on `device` (tokens, mask of the true answers: `clean`), in a data order drawn from
    a generator seeded with `init_seed`. Returns the model, optimiser, generator (which the noisy
    epochs continue) and the clean epochs' curve."""
    torch.manual_seed(init_seed)
    gen = torch.Generator(device=device).manual_seed(init_seed)
    model = TinyLM(model_cfg, len(Tokenizer()))
    if eps:
        perturb_(model, eps, init_seed)
    model.to(device)
    opt, curve = warm_up(model, clean, cfg, gen, progress=False, shared_prefix=True)
    return model, opt, gen, curve


@dataclass
class Start:
    """A chain's SFT start: the model at its controlled stop (or its budget's end), the generator its
    data order drew from (sampling continues it), the curve behind it (warm-up and noisy epochs, and
    the noisy epochs' length), the stop (None for a run fitted to its budget) and its redraws."""

    model: TinyLM
    gen: torch.Generator
    curve: list[dict]
    noisy_steps: int
    stop: StopAtTarget | None
    draws: int


def controlled_start(
    seed: int,
    cfg: SFTConfig,
    model_cfg: ModelConfig,
    data: tuple,
    val: list[Problem],
    first: tuple[TinyLM, AdamW, torch.Generator, list[dict]],
    eps: float,
    device: str,
) -> Start:
    """Chain `seed`'s start: from `first` (its warm-up's model, optimiser, generator and curve), the
    run's noisy epochs on `data` (tokens, mask, clean tokens and mask), stopped where its exact
    validation accuracy on `val` reaches `cfg.target`; while the step cap comes first, drawn again
    from a fresh start under `draw_seed(seed, draw)`, up to `cfg.redraws` times (the last draw is
    its start, reached or not). The generator continues the warm-up's data order and then samples."""
    tokens, mask, clean = data
    tok = Tokenizer()
    model, opt, gen, warm_curve = first
    for draw in range(cfg.redraws + 1):
        if draw:
            with diverged_at(chain=seed):
                model, opt, gen, warm_curve = fresh_start(
                    draw_seed(seed, draw), cfg, model_cfg, clean, eps, device
                )
        stop = None if cfg.target is None else accuracy_stop(cfg.target, cfg.check_every, cfg.near, val, tok)
        with diverged_at(chain=seed):
            noisy = fit_noisy(
                model, opt, tokens, mask, cfg, gen, progress=False, shared_prefix=True, stop=stop
            )
        if stop is None or stop.reached:
            break
    return Start(model, gen, warm_curve + noisy, len(noisy), stop, draw)


def start(
    seed: int,
    cfg: SFTConfig,
    model_cfg: ModelConfig,
    data: tuple,
    val: list[Problem],
    eps: float,
    device: str,
) -> Start:
    """Chain `seed`'s start in one process: its warm-up (`fresh_start` under the seed), then its
    noisy epochs to the controlled stop on `val` (`controlled_start`), as the warm-up and SFT stages
    make it in two. data: tokens, mask, and the clean (true-answer) tokens and mask."""
    with diverged_at(chain=seed):
        first = fresh_start(seed, cfg, model_cfg, data[2], eps, device)
    return controlled_start(seed, cfg, model_cfg, data, val, first, eps, device)


def start_accuracies(
    model: TinyLM, max_new_tokens: int, train: list[Problem], held: list[Problem], gen: torch.Generator
) -> dict:
    """Greedy and sampled (T = 1) accuracy on the train problems, and on the held-out ones if any.
    The sampled one is its expectation, computed exactly from the answer probabilities
    (`solve_probability`: no sampling noise); the greedy one is a decode per problem."""
    tok = Tokenizer()
    greedy = Sampling(tok, max_new_tokens, 0.0)

    def sampled(probs: list[Problem], key: str) -> dict:
        p = solve_probability(model, probs, Sampling(tok, max_new_tokens, 1.0))  # (P,)
        return {key: float(p.double().mean())}

    out = {"greedy_acc_train": accuracy(model, train, 1, greedy, gen), **sampled(train, "sampled_acc_train")}
    if held:
        out.update(
            greedy_acc_heldout=accuracy(model, held, 1, greedy, gen), **sampled(held, "sampled_acc_heldout")
        )
    return out


def end_stop(cfg: GRPOConfig, val: list[Problem], test: list[Problem], tok: Tokenizer) -> StopAtTarget | None:
    """A variant's controlled end (None without a target): validation pass@1 against `cfg.target`,
    reached from below, each check also drawing the run's path (exact pass@1 and pass@64 on
    validation and test; on validation alone where `test` is `val` itself: a calibration run,
    which must see no test problem)."""
    if cfg.target is None:
        return None
    if not val:
        raise ValueError(f"a controlled end needs validation problems (task {cfg.task} has none)")
    splits = {"val": val} if test is val else {"val": val, "test": test}
    return accuracy_stop(cfg.target, cfg.check_every, cfg.near, val, tok, splits, PATH_K, from_below=True)


def end_summary(stop: StopAtTarget) -> dict:
    """A controlled end's numbers: whether it was reached (1.0) or the cap came first (0.0), the
    steps to it (NaN where not reached: that run has no such number) and the validation value kept."""
    reached = stop.reached
    return {
        "end_reached": float(reached),
        "end_steps": float(stop.chosen["step"]) if reached else float("nan"),
        "end_val": stop.chosen["value"],
    }


def grpo_run(
    policy: TinyLM,
    cfg: GRPOConfig,
    problems: tuple[list[Problem], list[Problem], list[Problem]],
    max_new_tokens: int,
    seed: int,
    rep: int,
    device: str,
) -> tuple[list[dict], StopAtTarget | None]:
    """GRPO seed `rep` of chain `seed` from `policy` (trained in place, on `device`), on problems
    (train, held-out, validation), sampling from the chain's GRPO stream (the same in every variant,
    so variants are paired by chain and seed); to its controlled end where `cfg` has a target.
    Calibration passes its validation problems as the held-out ones: then no test problem is seen."""
    train, evals, val = problems
    tok = Tokenizer()
    gen = torch.Generator(device=device).manual_seed(stream_seed(seed, "grpo", rep))
    stop = end_stop(cfg, val, evals, tok)
    with diverged_at(chain=seed):
        data = GRPOData(train, evals, tok, max_new_tokens)
        curve = train_grpo(policy, cfg, data, gen, shared_prefix=True, stop=stop)
    return curve, stop


def correct_out_of(model: TinyLM, problems: list[Problem], n: int, how: Sampling, seed: int) -> list[int]:
    """Correct samples out of n per problem, drawn from their exact law from a generator at `seed`
    (the passk stage's draw for one model at one temperature)."""
    gen = torch.Generator(device=model.device).manual_seed(seed)
    return binomial_counts(model, problems, n, how, gen).tolist()
