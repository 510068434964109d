"""What a GRPO step logs and what a seed's curve sums up to: statistics only, nothing here trains.

`Groups` is the batch a step scores (the loop, `rlvr.grpo`, samples and trains on it);
`step_metrics` turns it and `grpo_update`'s diagnostics into the step's curve row;
`seed_summary` reads a seed's summary numbers off its rows. The per-step names are ours; TRL's
GRPOTrainer logs the same quantities under its own names (`rlvr.pipeline.tracking.TRL_NAMES`, the
table in docs/tracking.md), and where TRL defines a quantity we follow its definition:
`reward_std` is the mean over groups of each group's sample standard deviation (n - 1), a
truncated response is one that reached the token cap without <eos>, and `num_tokens` counts every
prompt and response token sampled so far.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch


@dataclass
class Groups:
    """One step's scored rollouts: P groups of G consecutive rows."""

    tokens: torch.Tensor  # (P*G, Tp+T)
    mask: torch.Tensor  # (P*G, T) response tokens up to and including <eos>
    prompt_len: int
    rewards: torch.Tensor  # (P, G) training reward
    correct: torch.Tensor  # (P, G) true exact-match accuracy, whatever the reward
    generated_tokens: int  # every response token sampled this step, kept or not
    samples: int  # every response sampled this step, kept or not
    answers: list[str]  # (P,) each group's expected answer


def mixed_groups(rewards: torch.Tensor) -> torch.Tensor:
    """True where a group's rewards are not all equal: rewards (P, G) -> (P,) bool.

    Only these groups carry gradient; DAPO's dynamic sampling keeps them and resamples the rest.
    """
    return (rewards != rewards[:, :1]).any(dim=1)  # (P,)


def reward_std(rewards: torch.Tensor) -> float:
    """Mean over groups of each group's sample standard deviation (n - 1, as TRL logs it): (P, G) ->
    a float; NaN for an empty batch or groups of one."""
    if rewards.numel() == 0 or rewards.shape[1] < 2:
        return float("nan")
    return float(rewards.float().std(dim=1).mean())


def truncated_frac(batch: Groups, eos_id: int) -> float:
    """Share of the batch's responses that hit the token cap without <eos> (TRL's
    `completions/clipped_ratio`): a response's mask covers its tokens up to and including <eos>, so
    one with no <eos> under its mask was cut. NaN for an empty batch."""
    if batch.mask.shape[0] == 0:
        return float("nan")
    response = batch.tokens[:, batch.prompt_len :]  # (B, T), as wide as the mask
    ended = ((response == eos_id) & (batch.mask > 0)).any(dim=1)  # (B,)
    return float((~ended).float().mean())


def response_lengths(lengths: torch.Tensor) -> dict[str, float]:
    """(N,) response lengths -> their mean, shortest and longest (0 for an empty batch)."""
    if lengths.numel() == 0:
        return {"response_len_mean": 0.0, "response_len_min": 0.0, "response_len_max": 0.0}
    lengths = lengths.float()
    return {
        "response_len_mean": float(lengths.mean()),
        "response_len_min": float(lengths.min()),
        "response_len_max": float(lengths.max()),
    }


def step_tokens(batch: Groups) -> int:
    """Prompt and response tokens of every response sampled this step, kept or not (the prompts of
    a batch share one length; a response counts up to and including its <eos>)."""
    return batch.generated_tokens + batch.samples * batch.prompt_len


def step_metrics(batch: Groups, stats: dict, eos_id: int, tokens_before: int = 0) -> dict:
    """One step's curve columns: the batch's reward (mean and spread) and accuracy, how much of it
    carried gradient, its responses' length and truncation, the tokens sampled so far
    (`tokens_before` plus this step's), and `grpo_update`'s diagnostics (`stats`; an empty batch
    has only grad_tokens = 0). `stats` is left as it was."""
    has_groups = batch.rewards.numel() > 0
    grad_tokens = stats["grad_tokens"]
    diagnostics = {k: v for k, v in stats.items() if k != "grad_tokens"}  # a count, not a curve column
    return {
        "reward_mean": float(batch.rewards.mean()) if has_groups else float("nan"),
        "reward_std": reward_std(batch.rewards),
        "accuracy": float(batch.correct.mean()) if has_groups else float("nan"),
        "frac_reward_zero_std": float((~mixed_groups(batch.rewards)).float().mean()) if has_groups else 1.0,
        **response_lengths(batch.mask.sum(dim=1) if has_groups else torch.zeros(0)),
        "truncated_frac": truncated_frac(batch, eos_id),
        "frac_tokens_with_grad": grad_tokens / max(batch.generated_tokens, 1),  # of all generated
        "frac_batch_tokens_with_grad": grad_tokens / max(int(batch.mask.sum()), 1),  # of the update batch
        "samples_generated": batch.samples,
        "num_tokens": tokens_before + step_tokens(batch),
        **diagnostics,
    }


def seed_summary(curve: list[dict]) -> dict:
    """A seed's summary numbers from its per-step curve."""
    evals = [r for r in curve if "eval_acc" in r]
    start = curve[0]  # the step-0 row: evaluation of the starting policy only
    col = lambda k: [r[k] for r in curve if k in r and r[k] == r[k]]  # noqa: E731 (drops NaN)
    out = {
        "eval_acc_start": start["eval_acc"],
        "eval_acc_final": evals[-1]["eval_acc"],
        "eval_kl_exact_nats_final": evals[-1]["eval_kl_exact_nats"],
        "train_acc_final": statistics.fmean(col("accuracy")[-3:]),
        "reward_final": statistics.fmean(col("reward_mean")[-3:]),
        "entropy_nats_start": col("entropy_nats")[0] if col("entropy_nats") else float("nan"),
        "entropy_nats_final": statistics.fmean(col("entropy_nats")[-3:])
        if col("entropy_nats")
        else float("nan"),
        "clip_frac_max": max(l + h for l, h in zip(col("clip_frac_low"), col("clip_frac_high")))
        if col("clip_frac_low")
        else 0.0,
        "frac_reward_zero_std_mean": statistics.fmean(col("frac_reward_zero_std")),
        "frac_tokens_with_grad_mean": statistics.fmean(col("frac_tokens_with_grad")),
        "frac_batch_tokens_with_grad_mean": statistics.fmean(col("frac_batch_tokens_with_grad")),
        "samples_generated_total": sum(col("samples_generated")),
        "response_len_final": statistics.fmean(col("response_len_mean")[-3:]),
        "step_seconds_median": statistics.median(col("step_seconds")),
    }
    out["eval_acc_gain"] = out["eval_acc_final"] - out["eval_acc_start"]
    if col("kl_k3_nats"):
        out["kl_k3_nats_max"] = max(col("kl_k3_nats"))
        out["kl_k3_nats_mean"] = statistics.fmean(col("kl_k3_nats"))
        out["kl_k3_nats_final"] = col("kl_k3_nats")[-1]
        out["kl_exact_nats_final"] = col("kl_exact_nats")[-1]
    return out
