"""The GRPO loop: sample P prompts x G responses, score them, turn rewards into advantages and run
mu inner epochs of the loss (`rlvr.grpo`) on them; evaluate the policy every `eval_every` steps.

The maths (advantages, KL estimators, the clipped objective, aggregation, the overlong penalty) is
in `rlvr.grpo`, testable without a model; this module is the machinery that runs it on TinyLM:
rollouts, dynamic sampling, the forward passes, the optimiser step and the evaluation.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tqdm import tqdm

from rlvr.configs import GRPOConfig
from rlvr.controlled import StopAtTarget
from rlvr.grpo import (
    exact_kl_and_entropy,
    grpo_loss,
    kl_estimate,
    overlong_penalty,
    step_advantages,
    token_entropy,
)
from rlvr.grpo_stats import Groups, mixed_groups, step_metrics
from rlvr.model import TinyLM, grouped_response_logits
from rlvr.optim import AdamW, check_step, check_weights, diverged_at
from rlvr.rollout import Sampling, sample_scored, solve_probability
from rlvr.tasks import Problem
from rlvr.tokenizer import Tokenizer

EVAL_SEED_OFFSET = 1_000_003  # evaluation draws: generator seeded at the training seed + this

RewardFn = Callable[[torch.Tensor, list[str], int], torch.Tensor]  # (response (P*G, T), answers, G) -> (P*G,)


def rollout_groups(
    policy: TinyLM,
    problems: list[Problem],
    cfg: GRPOConfig,
    max_new_tokens: int,
    tok: Tokenizer,
    gen: torch.Generator,
    reward_fn: RewardFn | None = None,
) -> Groups:
    """Sample G responses for each problem and score them (reward and true accuracy)."""
    how = Sampling(tok, max_new_tokens, cfg.temperature)
    roll, correct = sample_scored(policy, problems, cfg.group_size, how, gen)  # correct: (P*G,)
    answers = [p.answer for p in problems]
    rewards = correct if reward_fn is None else reward_fn(roll.response, answers, cfg.group_size)  # (P*G,)
    mask = roll.mask[:, roll.prompt_len :]  # (P*G, T)
    if cfg.overlong_buffer > 0:
        rewards = rewards + overlong_penalty(
            mask.sum(dim=1), max_new_tokens, cfg.overlong_buffer, cfg.overlong_penalty
        )
    P, G = len(problems), cfg.group_size
    return Groups(
        tokens=roll.tokens,
        mask=mask,
        prompt_len=roll.prompt_len,
        rewards=rewards.view(P, G),
        correct=correct.view(P, G),
        generated_tokens=int(mask.sum()),
        samples=P * G,
        answers=answers,
    )


def dynamic_groups(draw_batch: Callable[[], Groups], P: int, max_rounds: int) -> Groups:
    """DAPO dynamic sampling: keep drawing batches, keep only mixed-reward groups, until P are kept
    or `max_rounds` batches were drawn. Every generated sample is counted, kept or not."""
    kept: list[Groups] = []
    have, samples, gen_tokens = 0, 0, 0
    for _ in range(max_rounds):
        b = draw_batch()
        samples, gen_tokens = samples + b.samples, gen_tokens + b.generated_tokens
        keep = mixed_groups(b.rewards).nonzero().squeeze(1)[: P - have]  # (k,)
        if len(keep):
            G = b.rewards.shape[1]
            rows = (keep[:, None] * G + torch.arange(G, device=keep.device)).reshape(-1)  # (k*G,)
            kept.append(kept_rows(b, keep, rows))
            have += len(keep)
        if have >= P:
            break
    if not kept:  # nothing mixed in any round: an empty batch, no update this step
        kept.append(kept_rows(b, keep[:0], keep[:0]))
    width = max(k.mask.shape[1] for k in kept)  # batches may have stopped at different lengths
    tokens = torch.cat([F.pad(k.tokens, (0, width - k.mask.shape[1]), value=0) for k in kept])  # pad id 0
    mask = torch.cat([F.pad(k.mask, (0, width - k.mask.shape[1]), value=0.0) for k in kept])
    return Groups(
        tokens=tokens,
        mask=mask,
        prompt_len=kept[0].prompt_len,
        rewards=torch.cat([k.rewards for k in kept]),
        correct=torch.cat([k.correct for k in kept]),
        generated_tokens=gen_tokens,
        samples=samples,
        answers=[a for k in kept for a in k.answers],
    )


def kept_rows(b: Groups, keep: torch.Tensor, rows: torch.Tensor) -> Groups:
    """The groups `keep` (k,) of a batch, whose rows are `rows` (k*G,); their samples are counted
    by the caller, once per drawn batch."""
    return Groups(
        tokens=b.tokens[rows],
        mask=b.mask[rows],
        prompt_len=b.prompt_len,
        rewards=b.rewards[keep],
        correct=b.correct[keep],
        generated_tokens=0,
        samples=0,
        answers=[b.answers[i] for i in keep.tolist()],
    )


def response_logits(
    model: TinyLM,
    tokens: torch.Tensor,
    prompt_len: int,
    group_size: int,
    temperature: float = 1.0,
    shared_prefix: bool = False,
) -> torch.Tensor:
    """Next-token logits at the response positions: tokens (B, Tp+T), G rows per prompt -> (B, T, V).

    Divided by the sampling temperature, so the log-probs in the loss are those of the policy that
    actually sampled the rollouts (as TRL and verl do); at T = 1 the division is exact, a no-op.

    The reference path is one forward over every row. `shared_prefix=True` is the fast path the
    pipeline takes: the G rows of a group share their prompt, and every prompt shares the chat
    template's system part, so those activations are computed once (`grouped_response_logits`).
    The two agree to float rounding (tested).
    """
    if shared_prefix:
        prompts = tokens[::group_size, :prompt_len]  # (P, Tp) every group shares its prompt
        return grouped_response_logits(model, prompts, tokens[:, prompt_len:]) / temperature  # (B, T, V)
    logits = model(tokens[:, :-1])  # (B, Tp+T-1, V): position i predicts token i+1
    return logits[:, prompt_len - 1 :] / temperature  # (B, T, V) predicts tokens[:, prompt_len:]


def gather_logp(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(B, T, V) logits, (B, T) token ids -> (B, T) log-probs of those ids."""
    return F.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def grpo_update(
    policy: TinyLM,
    ref: TinyLM | None,
    opt: AdamW,
    batch: Groups,
    cfg: GRPOConfig,
    max_len: int,
    shared_prefix: bool = False,
) -> dict:
    """mu inner epochs of the GRPO loss on one batch of groups; returns the step's diagnostics: the
    loss, ratio and clip statistics and the gradient norm before clipping (means over the mu
    updates), and entropy and KL of the policy that sampled the batch.

    pi_old is the policy that sampled the batch, i.e. the policy before the first inner step, so
    its log-probs are the first epoch's own (detached): with mu = 1 the ratio is exactly 1.
    `shared_prefix` picks `response_logits`' fast path. A NaN or infinite loss or gradient raises
    `Diverged` before the optimiser steps on it (`train_grpo` adds the step).
    """
    targets = batch.tokens[:, batch.prompt_len :]  # (B, T)
    mask = batch.mask  # (B, T)
    P, G = batch.rewards.shape

    def forward(model: TinyLM) -> torch.Tensor:  # (B, T, V) tempered logits at the response positions
        return response_logits(model, batch.tokens, batch.prompt_len, G, cfg.temperature, shared_prefix)

    ref_logits = None
    if ref is not None and cfg.penalises_kl:
        with torch.no_grad():
            ref_logits = forward(ref)  # (B, T, V)
    logp_ref = None if ref_logits is None else gather_logp(ref_logits, targets)  # (B, T)
    stats_sum: dict[str, float] = {}
    logp_old = None
    for epoch in range(cfg.inner_epochs):
        logits = forward(policy)  # (B, T, V)
        logp = gather_logp(logits, targets)  # (B, T)
        if epoch == 0:
            logp_old = logp.detach()
            first_logits = logits.detach()
            adv = batch_advantages(batch.rewards, mask, cfg, logp_old, logp_ref)  # (B,) or (B, T)
        loss, stats = grpo_loss(
            logp,
            logp_old,
            logp_ref,
            adv,
            mask,
            ratio=cfg.ratio,
            clip_eps_low=cfg.clip_eps_low,
            clip_eps_high=cfg.clip_eps_high,
            beta=0.0 if cfg.kl_in_reward else cfg.beta,  # in the reward instead
            kl_estimator=cfg.kl_estimator,
            aggregation=cfg.aggregation,
            max_len=max_len,
            entropy=token_entropy(logits) if cfg.entropy_coeff > 0 else None,
            entropy_coeff=cfg.entropy_coeff,
        )
        opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.grad_clip)  # the norm before clipping
        value = loss.item()
        check_step(value, norm, None, diverge_settings(cfg))  # before the step: never trained on
        opt.step()
        for k, v in {"loss": value, "grad_norm": float(norm), **stats}.items():
            stats_sum[k] = stats_sum.get(k, 0.0) + v / cfg.inner_epochs
    out = {k: v for k, v in stats_sum.items() if k != "kl_nats"}
    live = mask > 0
    n_tok = live.sum().clamp(min=1)
    _, entropy = exact_kl_and_entropy(first_logits, first_logits)  # (B, T)
    out["entropy_nats"] = float(torch.where(live, entropy, 0.0).sum() / n_tok)
    if ref_logits is not None:
        kl_exact, _ = exact_kl_and_entropy(first_logits, ref_logits)  # (B, T)
        k3 = kl_estimate(torch.where(live, logp_old, 0.0), torch.where(live, logp_ref, 0.0), "k3")  # (B, T)
        out["kl_k3_nats"] = float(torch.where(live, k3, 0.0).sum(dim=1).mean())  # per response
        out["kl_k3_token_nats"] = float(torch.where(live, k3, 0.0).sum() / n_tok)  # per token (TRL's kl)
        out["kl_exact_nats"] = float(torch.where(live, kl_exact, 0.0).sum(dim=1).mean())
    per_token = adv.dim() == 2  # reinforce_pp: one advantage per token
    out["adv_abs_mean"] = (
        float(adv[live].abs().mean()) if per_token else float(adv.abs().mean()) if adv.numel() else 0.0
    )
    out["grad_tokens"] = int((live & ((adv if per_token else adv[:, None]) != 0)).sum())
    return out


def batch_advantages(
    rewards: torch.Tensor,
    mask: torch.Tensor,
    cfg: GRPOConfig,
    logp_old: torch.Tensor,
    logp_ref: torch.Tensor | None,
) -> torch.Tensor:
    """`step_advantages` of one batch under `cfg`, (B,) or (B, T): with `kl_in_reward`, the per-token
    KL estimate (cfg.kl_estimator, at the sampled tokens, pi_old against pi_ref) goes into the reward."""
    kl = None
    if cfg.kl_in_reward:
        if logp_ref is None:
            raise ValueError("kl_in_reward needs the reference model's log-probs (beta > 0)")
        live = mask > 0  # (B, T)
        kl = kl_estimate(
            torch.where(live, logp_old, 0.0), torch.where(live, logp_ref, 0.0), cfg.kl_estimator
        )  # (B, T)
    return step_advantages(rewards, mask, cfg.advantage, kl, cfg.beta)


def exact_drift(
    policy: TinyLM,
    ref: TinyLM,
    tokens: torch.Tensor,
    mask: torch.Tensor,
    prompt_len: int,
    shared_prefix: bool = False,
) -> float:
    """Exact KL(pi || pi_ref) per response (summed over its tokens), averaged over rows."""
    with torch.no_grad():
        kl, _ = exact_kl_and_entropy(
            response_logits(policy, tokens, prompt_len, 1, shared_prefix=shared_prefix),
            response_logits(ref, tokens, prompt_len, 1, shared_prefix=shared_prefix),
        )  # (B, T)
    return float((kl * mask).sum(dim=1).mean())


def evaluate(
    policy: TinyLM,
    ref: TinyLM,
    problems: list[Problem],
    max_new_tokens: int,
    tok: Tokenizer,
    gen: torch.Generator,
    shared_prefix: bool = False,
) -> dict:
    """The expected sampled (T = 1) accuracy on the evaluation problems, computed exactly from the
    policy's answer probabilities (`answer_probability`: no sampling noise, one forward pass), and
    the policy's exact KL to the reference on one sampled response per problem."""
    how = Sampling(tok, max_new_tokens, 1.0)
    acc = float(solve_probability(policy, problems, how).mean())
    roll, _ = sample_scored(policy, problems, 1, how, gen)  # P rows
    response_mask = roll.mask[:, roll.prompt_len :]  # (P, T)
    kl = exact_drift(policy, ref, roll.tokens, response_mask, roll.prompt_len, shared_prefix)
    return {"eval_acc": acc, "eval_kl_exact_nats": kl}


@dataclass(frozen=True)
class GRPOData:
    """What GRPO trains and evaluates on: problems, the tokenizer, the response cap."""

    train: list[Problem]  # prompts sampled for rollouts
    evals: list[Problem]  # held-out problems scored every `eval_every` steps
    tok: Tokenizer
    max_new_tokens: int  # response cap when sampling


@dataclass(frozen=True)
class Hooks:
    """What a caller may change in `train_grpo` without touching the loop.

    reward:        replaces exact match as the training reward (true accuracy is logged either way);
    batch_metrics: (batch, step) -> extra columns computed on each step's rollouts;
    on_step:       called with every finished curve row (logging, progress).
    """

    reward: RewardFn | None = None
    batch_metrics: Callable[[Groups, int], dict] | None = None
    on_step: Callable[[dict], None] | None = None


def train_grpo(
    policy: TinyLM,
    cfg: GRPOConfig,
    data: GRPOData,
    gen: torch.Generator,
    hooks: Hooks = Hooks(),
    *,
    ref: TinyLM | None = None,
    shared_prefix: bool = False,
    progress: bool = False,
    desc: str = "grpo",
    stop: StopAtTarget | None = None,
) -> list[dict]:
    """Train `policy` in place with GRPO; returns one metrics row per step (plus eval columns).

    Each step: draw P prompts (`gen`), sample G responses each, score them, and run `grpo_update`
    (mu inner epochs of `grpo_loss` on the group advantages). The reference defaults to a frozen copy
    of the starting policy; with beta = 0 it is never run during training (only at evaluation, to
    report drift). Evaluation samples from its own generator (seeded from `gen`'s seed), so how often
    we evaluate never changes the training trajectory. `shared_prefix` takes the fast forward
    (`response_logits`), as the pipeline does.

    A NaN or infinite loss, gradient or weight stops training at its step with `Diverged` (a
    UserError naming the variant's lr, grad_clip and temperature): nothing is sampled from it.

    `stop` is a controlled end (`rlvr.controlled.accuracy_stop` on the validation problems): asked
    before the first step and after every step, it ends training at the first check that reaches
    its target, `cfg.steps` being the cap; the policy is left at the check it keeps (that one or the
    one before, whichever is nearer the target), the curve ends at that step and its last row holds
    an evaluation of that policy. Its checks draw nothing from `gen`, so where it stops never
    changes the trajectory before.

    `gen` lives on the policy's device (a CUDA generator on a GPU) and drives the whole step there:
    the prompt draws are made on it too, then read back as indices into `data.train`, so one
    generator and one seed still decide a run on each device.
    """
    ref = (ref if ref is not None else copy.deepcopy(policy)).eval().requires_grad_(False)
    eval_gen = torch.Generator(device=gen.device).manual_seed(gen.initial_seed() + EVAL_SEED_OFFSET)
    opt = AdamW(policy.parameters(), lr=cfg.lr)  # Adam: no weight decay
    P, train, n_new = cfg.prompts_per_step, data.train, data.max_new_tokens

    def draw() -> Groups:
        if P <= len(train):  # distinct prompts; P = len(train) is chapter A's "every prompt, every step"
            idx = torch.randperm(len(train), generator=gen, device=gen.device)[:P]  # (P,)
        else:
            idx = torch.randint(len(train), (P,), generator=gen, device=gen.device)  # (P,)
        return rollout_groups(
            policy, [train[i] for i in idx.tolist()], cfg, n_new, data.tok, gen, hooks.reward
        )

    def evaluation() -> dict:
        return evaluate(policy, ref, data.evals, n_new, data.tok, eval_gen, shared_prefix)

    curve: list[dict] = [{"step": 0, **evaluation()}]
    tokens = 0  # prompt and response tokens sampled so far
    if hooks.on_step is not None:
        hooks.on_step(curve[0])
    if stop is not None and stop(policy, 0):  # the start is already there: no step to take
        return curve
    for step in tqdm(range(1, cfg.steps + 1), desc=desc, unit="step", disable=not progress, mininterval=1.0):
        t0 = time.perf_counter()
        batch = dynamic_groups(draw, P, cfg.max_gen_rounds) if cfg.dynamic_sampling else draw()
        has_groups = batch.rewards.numel() > 0
        with diverged_at(step=step):
            stats = (
                grpo_update(policy, ref, opt, batch, cfg, n_new, shared_prefix)
                if has_groups
                else {"grad_tokens": 0}
            )
            if has_groups:  # the next rollout samples from these weights: never from NaN ones
                check_weights(policy.parameters(), None, diverge_settings(cfg))
        stats["lr"] = opt.lr  # constant: GRPO runs no schedule
        row = {"step": step, **step_metrics(batch, stats, data.tok.eos_id, tokens)}
        row["step_seconds"], tokens = time.perf_counter() - t0, row["num_tokens"]
        if hooks.batch_metrics is not None:
            row.update(hooks.batch_metrics(batch, step))
        if step % cfg.eval_every == 0 or step == cfg.steps:
            row.update(evaluation())
        curve.append(row)
        if hooks.on_step is not None:
            hooks.on_step(row)
        if stop is not None and stop(policy, step):
            break
    if stop is not None:
        curve = controlled_end(stop, policy, curve, cfg.steps, evaluation)
    return curve


def controlled_end(stop: StopAtTarget, policy: TinyLM, curve: list[dict], cap: int, evaluation) -> list[dict]:
    """The curve of a run with a controlled end, cut at the step whose policy it keeps (the cap's
    check is taken where the cap came first), its last row evaluated on that policy."""
    if not stop.stopped:
        stop.at_cap(policy, cap)
    kept = stop.chosen["step"]
    curve = [r for r in curve if r["step"] <= kept]
    if "eval_acc" not in curve[-1]:
        curve[-1].update(evaluation())
    return curve


def diverge_settings(cfg: GRPOConfig) -> dict[str, float]:
    """The settings a diverged GRPO run names: what sets the size of its steps and its logits."""
    return {"lr": cfg.lr, "grad_clip": cfg.grad_clip, "temperature": cfg.temperature}
