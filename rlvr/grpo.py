"""GRPO: the math of group-relative policy optimisation with verifiable rewards.

Each prompt is sampled G times; every response is scored by a verifier, and the response's reward
relative to its siblings (no learned critic) becomes the advantage of all its tokens. The policy is
pushed along a PPO-style clipped importance ratio, optionally leashed to a frozen reference model by a
per-token KL estimate, and the per-token terms are reduced to one scalar by a chosen aggregation.
Variants (Dr. GRPO, DAPO, RLOO, GSPO, CISPO) are arguments here and params entries upstream.

Where this departs from the chapters' formulas:
1. A group whose rewards are all equal gets advantage exactly 0.0 under every `kind`: it is masked
   out, not left to (r - mean) / (0 + eps), which for non-binary rewards is float noise / 1e-6.
2. The clip bounds are always separate (`clip_eps_low`, `clip_eps_high`); equal values give the chapters'
   symmetric clip, a larger `clip_eps_high` gives DAPO's clip-higher.
3. With `beta == 0` the KL term is not computed at all (not multiplied by zero), so no reference
   model is needed and `logp_ref` may be None. This is TRL's default.
4. Padding is zeroed in log space *before* any exp: log-probs past <eos> are arbitrary, and an inf
   there would turn into NaN through `inf * 0` in a mask product, forward or backward.
5. The functions return what is maximised per token; `grpo_loss` negates it once. Clip fractions
   count only the tokens where the clip actually cut the gradient (ratio above 1 + clip_eps_high with
   A > 0, or below 1 - clip_eps_low with A < 0), not every ratio outside the band.
6. Beyond the chapters: `rloo` and `batch_std` advantages, GSPO's sequence ratio (the geometric mean
   of the token ratios, clipped once per response) and CISPO (a clipped, gradient-free IS weight on
   the REINFORCE term, so no token ever loses its gradient).
7. Beyond the chapters, the knobs of verl and OpenRLHF: the KL as a per-token reward penalty
   (`kl_in_reward`: the loss then has no KL term), an entropy bonus in the loss (`entropy_coeff`),
   REINFORCE++ (`reinforce_pp`: no group baseline, per-token returns whitened over the batch, so
   point 1 does not hold for it) and a pass@k-trained advantage (`passk`: only a group's best sample
   is credited). docs/variants.md names each knob in TRL and verl.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tqdm import tqdm

from rlvr.configs import ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS, RATIOS, GRPOConfig
from rlvr.model import TinyLM, grouped_response_logits
from rlvr.optim import AdamW, check_step, check_weights, diverged_at
from rlvr.rollout import sample_scored, solve_probability
from rlvr.tasks import Problem
from rlvr.tokenizer import Tokenizer

EVAL_SEED_OFFSET = 1_000_003  # evaluation draws: generator seeded at the training seed + this


def _one_of(value: str, allowed: tuple[str, ...], name: str) -> None:
    if value not in allowed:
        raise ValueError(f"{name} = {value!r}: must be one of {', '.join(allowed)}")


def mixed_groups(rewards: torch.Tensor) -> torch.Tensor:
    """True where a group's rewards are not all equal: rewards (P, G) -> (P,) bool.

    Only these groups carry gradient; DAPO's dynamic sampling keeps them and resamples the rest.
    """
    return (rewards != rewards[:, :1]).any(dim=1)  # (P,)


def group_advantages(rewards: torch.Tensor, kind: str = "group", eps: float = 1e-6) -> torch.Tensor:
    """Per-response advantage from the rewards of its group: (P, G) -> (P, G).

    group:     (r - mean) / (std + eps), population std (the group is the whole population).
    mean_only: r - mean (Dr. GRPO: no std divisor, which up-weights near-solved/near-hopeless prompts).
    rloo:      r minus the mean of the other G-1 rewards, i.e. G/(G-1) * (r - mean): a baseline that
               does not contain the sample's own reward, so it is unbiased.
    batch_std: (r - group mean) / (std over the whole batch + eps): centred per group, scaled per batch.
    passk:     `best_only_advantages` (verl's grpo_passk): r_max - r_second for the group's best, 0 else.
    A group whose rewards are all equal gets exactly 0 under every kind. `reinforce_pp` has no group
    baseline and gives each token its own advantage: `reinforce_pp_advantages`.
    """
    _one_of(kind, ADVANTAGES, "advantage kind")
    if kind == "reinforce_pp":
        raise ValueError("advantage kind reinforce_pp is per token, not per group: reinforce_pp_advantages")
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (P, G), got shape {tuple(rewards.shape)}")
    r = rewards if rewards.is_floating_point() else rewards.float()  # (P, G)
    G = r.shape[1]
    centred = r - r.mean(dim=1, keepdim=True)  # (P, G)
    if kind == "group":
        adv = centred / (r.std(dim=1, keepdim=True, unbiased=False) + eps)  # (P, G)
    elif kind == "mean_only":
        adv = centred
    elif kind == "rloo":
        if G < 2:
            raise ValueError(f"rloo needs a group of at least 2 samples, got G = {G}")
        adv = centred * (G / (G - 1))  # (P, G)
    elif kind == "passk":
        adv = best_only_advantages(r)  # (P, G)
    else:
        adv = centred / (r.std(unbiased=False) + eps)  # (P, G) one scale for the batch
    return torch.where(mixed_groups(r)[:, None], adv, 0.0)  # (P, G)


def best_only_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """A pass@k-trained advantage (Chen et al., arXiv 2503.19595; verl's `grpo_passk`): (P, G) -> (P, G).

    A group of G samples is credited as pass@G credits it: by its best sample. Only that sample gets an
    advantage, r_max - r_second (how far it stands above the next best), every other sample 0; ties
    for the best give 0 to all (r_max = r_second). Worked example: rewards [0, 1, 0, 0] -> [0, 1, 0, 0];
    [1, 1, 0, 0] -> all 0 (a second sample would have solved it anyway); [0.2, 0.9, 0.5] -> [0, 0.4, 0].
    With 0/1 rewards only a group with exactly one right answer carries a gradient. verl divides by
    the group's std by default (`norm_adv_by_std_in_grpo`); here the difference is left as it is.
    """
    if rewards.shape[1] < 2:
        raise ValueError(f"passk needs a group of at least 2 samples, got G = {rewards.shape[1]}")
    top = rewards.topk(2, dim=1)  # values, indices: (P, 2) each
    gap = top.values[:, 0] - top.values[:, 1]  # (P,)
    best = F.one_hot(top.indices[:, 0], rewards.shape[1]).bool()  # (P, G) the first best sample
    return torch.where(best, gap[:, None], 0.0)  # (P, G)


def token_rewards(
    rewards: torch.Tensor, mask: torch.Tensor, kl: torch.Tensor | None = None, beta: float = 0.0
) -> torch.Tensor:
    """Per-token rewards of a batch: rewards (B,), mask (B, T), kl (B, T) or None -> (B, T).

    The verifier's reward sits on each response's last token; with a KL estimate (`kl_in_reward`),
    beta * kl_t is subtracted at every token t, so a response's summed reward is R - beta * sum_t kl_t.
    0 on padding. Worked example: R = 1 on a 3-token response with kl = [0.1, 0.0, 0.2], beta = 0.5:
    [-0.05, 0.0, 0.9] (sum 0.85 = 1 - 0.5 * 0.3).
    """
    live = mask > 0  # (B, T)
    last = live & (live.cumsum(dim=1) == live.sum(dim=1, keepdim=True))  # (B, T) each row's last token
    out = torch.where(last, rewards.to(torch.float32)[:, None], 0.0)  # (B, T)
    if kl is not None:
        out = out - beta * torch.where(live, kl, 0.0)
    return out


def reinforce_pp_advantages(token_r: torch.Tensor, mask: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """REINFORCE++ (Hu, arXiv 2501.03262; verl's `reinforce_plus_plus`): per-token rewards (B, T) -> (B, T).

    No group baseline: each token's return is its reward-to-go, G_t = sum_{t' >= t} r_t' (discount 1),
    and the returns of every live token of the batch are whitened together, (G_t - mean) / (std + eps),
    population std. A batch whose returns are all equal gets exactly 0. Unlike every group kind, a
    group whose verifier rewards are equal is not masked out: the batch is its baseline (all-right
    groups go up where the batch is mostly wrong). Worked example, two 1-token responses with rewards
    1 and 0: returns [1, 0], mean 0.5, std 0.5 -> advantages [1, -1] (less eps).
    """
    live = mask > 0  # (B, T)
    x = torch.where(live, token_r, 0.0)  # (B, T)
    returns = x.flip(dims=[1]).cumsum(dim=1).flip(dims=[1])  # (B, T) reward-to-go
    values = returns[live]  # (N,) every live token's return
    if values.numel() == 0 or bool((values == values[0]).all()):
        return torch.zeros_like(returns)
    whitened = (returns - values.mean()) / (values.std(unbiased=False) + eps)  # (B, T)
    return torch.where(live, whitened, 0.0)


def step_advantages(
    rewards: torch.Tensor,
    mask: torch.Tensor,
    kind: str,
    kl: torch.Tensor | None = None,
    beta: float = 0.0,
) -> torch.Tensor:
    """One batch's advantages: rewards (P, G), mask (B, T) -> (B,) one per response, or (B, T) one per
    token for `reinforce_pp`. kl (B, T): the per-token KL estimate put in the reward (`kl_in_reward`),
    None for none. A group kind then sees each response's summed reward R - beta * sum_t kl_t (verl's
    way), so a group with equal verifier rewards is no longer masked out: its KL differences alone
    make its advantages (under `group`, scaled to unit spread)."""
    if kind != "reinforce_pp" and kl is None:
        return group_advantages(rewards, kind).reshape(-1)  # (B,)
    per_token = token_rewards(rewards.reshape(-1), mask, kl, beta)  # (B, T)
    if kind == "reinforce_pp":
        return reinforce_pp_advantages(per_token, mask)  # (B, T)
    return group_advantages(per_token.sum(dim=1).view(rewards.shape), kind).reshape(-1)  # (B,)


def kl_estimate(logp: torch.Tensor, logp_ref: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) at tokens sampled from pi: (B, T) x2 -> (B, T).

    With l = log pi_ref - log pi: k1 = -l (unbiased, can be negative), k2 = l^2 / 2 (>= 0, biased),
    k3 = e^l - l - 1 (>= 0 and unbiased, since E_pi[e^l] = 1). Schulman (2020).
    """
    _one_of(kind, KL_ESTIMATORS, "kl_estimator")
    l = logp_ref - logp  # (B, T)
    if kind == "k1":
        return -l
    if kind == "k2":
        return 0.5 * l.square()
    return l.exp() - l - 1.0


def exact_kl_and_entropy(logits: torch.Tensor, ref_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact per-position KL(pi || pi_ref) and entropy of pi from full logits: (B, T, V) x2 -> (B, T) x2.

    Affordable because the vocabulary is tiny; used to check the sampled estimators and to log entropy.
    Terms with pi(v) = 0 contribute 0 (0 log 0 = 0), so -inf logits are allowed.
    """
    logp = F.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    logq = F.log_softmax(ref_logits.float(), dim=-1)  # (B, T, V)
    p = logp.exp()  # (B, T, V)
    live = p > 0  # (B, T, V)
    kl = torch.where(live, p * (logp - logq), 0.0).sum(dim=-1)  # (B, T)
    entropy = -torch.where(live, p * logp, 0.0).sum(dim=-1)  # (B, T)
    return kl, entropy


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the next-token distribution at each position, with its gradient: (B, T, V) -> (B, T).

    What the entropy bonus (`entropy_coeff`) pushes up. Terms with pi(v) = 0 contribute 0 and no NaN
    gradient (the log is replaced before the product, not after)."""
    logp = F.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    p = logp.exp()  # (B, T, V)
    return -(p * torch.where(p > 0, logp, 0.0)).sum(dim=-1)  # (B, T)


def _clipped(ratio: torch.Tensor, adv: torch.Tensor, clip_eps_low: float, clip_eps_high: float):
    """PPO's pessimistic surrogate min(rA, clip(r)A), and where the clip removed the gradient."""
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1.0 - clip_eps_low, 1.0 + clip_eps_high) * adv)
    cut_low = (ratio < 1.0 - clip_eps_low) & (adv < 0)
    cut_high = (ratio > 1.0 + clip_eps_high) & (adv > 0)
    return surrogate, cut_low, cut_high


def _ratio_stats(low: torch.Tensor, high: torch.Tensor, ratio: torch.Tensor, live: torch.Tensor) -> dict:
    """Fractions of the live entries (tokens or sequences) clipped low/high, and their mean ratio."""
    n = live.sum().clamp(min=1)
    return {
        "clip_frac_low": float((low & live).sum() / n),
        "clip_frac_high": float((high & live).sum() / n),
        "ratio_mean": float(torch.where(live, ratio.detach(), 0.0).sum() / n),
    }


def policy_objective(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    kind: str = "token",
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.2,
) -> tuple[torch.Tensor, dict]:
    """Per-token objective to MAXIMISE (B, T), 0 on padding, and ratio statistics (python floats).

    logp, logp_old, mask: (B, T); adv: (B,) one advantage per response, shared by its tokens, or
    (B, T) one per token (`reinforce_pp`; not with the sequence ratio, which clips per response).
    token:    PPO/GRPO/DAPO clip on each token's ratio pi/pi_old.
    sequence: GSPO: one ratio per response, exp(mean of the token log-ratios), clipped once and
              broadcast to the response's tokens (seq_mean then yields the clipped sequence term).
    cispo:    clip(ratio).detach() * A * logp: the weight is bounded but carries no gradient, so the
              gradient reaches every token; stats count tokens whose weight was clamped.
    """
    _one_of(kind, RATIOS, "ratio")
    live = mask > 0  # (B, T)
    log_ratio = torch.where(live, logp - logp_old, 0.0)  # (B, T) padding: exp(0) = 1, never inf
    a = adv.to(logp.dtype)
    a = a[:, None] if a.dim() == 1 else a  # (B, 1) per response, or (B, T) per token
    if kind == "sequence":
        if a.shape[1] != 1:
            raise ValueError("ratio sequence clips once per response: it needs one advantage per response")
        n_tokens = live.sum(dim=1, keepdim=True).clamp(min=1)  # (B, 1)
        ratio = (log_ratio.sum(dim=1, keepdim=True) / n_tokens).exp()  # (B, 1) geometric mean
        obj, low, high = _clipped(ratio, a, clip_eps_low, clip_eps_high)  # (B, 1) x3
        stats = _ratio_stats(low, high, ratio, live.any(dim=1, keepdim=True))
        return torch.where(live, obj, 0.0), stats  # (B, T)
    ratio = log_ratio.exp()  # (B, T)
    if kind == "token":
        obj, low, high = _clipped(ratio, a, clip_eps_low, clip_eps_high)  # (B, T) x3
    else:
        weight = ratio.clamp(1.0 - clip_eps_low, 1.0 + clip_eps_high).detach()  # (B, T)
        obj = weight * a * torch.where(live, logp, 0.0)  # (B, T)
        low, high = ratio < 1.0 - clip_eps_low, ratio > 1.0 + clip_eps_high
    return torch.where(live, obj, 0.0), _ratio_stats(low, high, ratio, live)


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, mode: str, max_len: int | None = None
) -> torch.Tensor:
    """Reduce per-token terms (B, T) over the masked tokens to a scalar.

    seq_mean:      mean over each response's own tokens, then over responses (original GRPO). A long
                   response's tokens each weigh 1/|y|, which dilutes the penalty on long wrong answers.
    token_mean:    sum over all masked tokens / their count in the batch (DAPO; TRL's default).
    seq_sum_const: sum over masked tokens / (B * max_len), max_len a constant (Dr. GRPO): no length bias.
    """
    _one_of(mode, AGGREGATIONS, "aggregation")
    live = mask > 0  # (B, T)
    x = torch.where(live, per_token, 0.0)  # (B, T)
    if mode == "seq_mean":
        per_seq = x.sum(dim=1) / live.sum(dim=1).clamp(min=1)  # (B,)
        return per_seq.sum() / max(per_seq.shape[0], 1)
    if mode == "token_mean":
        return x.sum() / live.sum().clamp(min=1)
    if max_len is None or max_len < 1:
        raise ValueError(f"aggregation seq_sum_const needs a constant max_len >= 1, got {max_len!r}")
    return x.sum() / (max(x.shape[0], 1) * max_len)


def grpo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    logp_ref: torch.Tensor | None,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    ratio: str = "token",
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.2,
    beta: float = 0.04,
    kl_estimator: str = "k3",
    aggregation: str = "seq_mean",
    max_len: int | None = None,
    entropy: torch.Tensor | None = None,
    entropy_coeff: float = 0.0,
) -> tuple[torch.Tensor, dict]:
    """Scalar GRPO loss to minimise, and its stats. For response i of a group and its token t:

        r_it = pi(y_it | x, y_i<t) / pi_old(y_it | x, y_i<t)             ratio (token; `sequence`: one
                                                                          per response, GSPO)
        A_i  = group_advantages(rewards)[i]                               shared by all of i's tokens
                                                                          (`reinforce_pp`: A_it per token)
        l_it = -min(r_it * A_i, clip(r_it, 1 - eps_low, 1 + eps_high) * A_i)
               + beta * KL_hat(pi || pi_ref)_it                           k1 / k2 / k3 estimate
               - entropy_coeff * H(pi(. | x, y_i<t))                      the entropy bonus (0: off)
        loss = aggregate(l, mask)                                         seq_mean: mean_i 1/|y_i| sum_t;
                                                                          token_mean: sum / #tokens;
                                                                          seq_sum_const: sum / (B * max_len)

    `cispo` replaces the min(...) by sg[clip(r_it)] * A_i * log pi(y_it): the clip bounds the weight
    without taking any token's gradient. With mu = 1 (one update per batch) r = 1 and the clip never
    acts; beta = 0 skips the KL term entirely (no reference model needed). With `kl_in_reward` the
    caller puts the KL in the reward (`step_advantages`) and passes beta = 0 here. The entropy bonus
    is aggregated like the rest, so under seq_mean it is the mean token entropy of each response.

    logp, logp_old, logp_ref, mask, entropy: (B, T); adv: (B,) or (B, T). stats: clip_frac_low,
    clip_frac_high, ratio_mean and, when beta > 0, kl_nats (mean of the chosen estimator over masked
    tokens).
    """
    obj, stats = policy_objective(logp, logp_old, adv, mask, ratio, clip_eps_low, clip_eps_high)  # (B, T)
    per_token = -obj  # (B, T)
    if beta > 0:
        if logp_ref is None:
            raise ValueError(f"beta = {beta}: a KL penalty needs logp_ref (pass beta = 0 to drop it)")
        live = mask > 0  # (B, T)
        kl = kl_estimate(
            torch.where(live, logp, 0.0), torch.where(live, logp_ref, 0.0), kl_estimator
        )  # (B, T)
        per_token = per_token + beta * kl
        stats["kl_nats"] = float(kl.detach().sum() / live.sum().clamp(min=1))
    if entropy_coeff > 0:
        if entropy is None:
            raise ValueError(f"entropy_coeff = {entropy_coeff}: an entropy bonus needs the token entropies")
        per_token = per_token - entropy_coeff * entropy
    return aggregate(per_token, mask, aggregation, max_len), stats


def overlong_penalty(lengths: torch.Tensor, max_len: int, buffer: int, penalty: float = 1.0) -> torch.Tensor:
    """DAPO's soft overlong punishment, added to the reward: lengths (B,) int -> (B,) float.

    0 up to max_len - buffer, then a linear ramp down to -penalty at max_len, -penalty beyond it.
    buffer == 0 switches it off (all zeros).
    """
    if buffer < 0:
        raise ValueError(f"overlong buffer = {buffer}: must be >= 0")
    if buffer == 0:
        return torch.zeros(lengths.shape, dtype=torch.float32, device=lengths.device)
    over = (lengths.float() - (max_len - buffer)).clamp(0, buffer)  # (B,) tokens into the buffer
    return -penalty * over / buffer  # (B,)


# ---------------------------------------------------------------------------------------------
# The loop: sample P prompts x G responses, score, advantages, mu inner epochs of the loss.


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
    roll, correct = sample_scored(
        policy, problems, cfg.group_size, max_new_tokens, cfg.temperature, tok, gen
    )  # correct: (P*G,)
    answers = [p.answer for p in problems]
    rewards = correct if reward_fn is None else reward_fn(roll.response, answers, cfg.group_size)  # (P*G,)
    mask = roll.mask[:, roll.prompt_len :]  # (P*G, T)
    if cfg.overlong_buffer > 0:
        rewards = rewards + overlong_penalty(
            mask.sum(dim=1), max_new_tokens, cfg.overlong_buffer, cfg.overlong_penalty
        )
    P, G = len(problems), cfg.group_size
    return Groups(
        roll.tokens,
        mask,
        roll.prompt_len,
        rewards.view(P, G),
        correct.view(P, G),
        int(mask.sum()),
        P * G,
        answers,
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
            kept.append(
                Groups(
                    b.tokens[rows],
                    b.mask[rows],
                    b.prompt_len,
                    b.rewards[keep],
                    b.correct[keep],
                    0,
                    0,
                    [b.answers[i] for i in keep.tolist()],
                )
            )
            have += len(keep)
        if have >= P:
            break
    if not kept:  # nothing mixed in any round: an empty batch, no update this step
        kept.append(Groups(b.tokens[:0], b.mask[:0], b.prompt_len, b.rewards[:0], b.correct[:0], 0, 0, []))
    width = max(k.mask.shape[1] for k in kept)  # batches may have stopped at different lengths
    tokens = torch.cat([F.pad(k.tokens, (0, width - k.mask.shape[1]), value=0) for k in kept])  # pad id 0
    mask = torch.cat([F.pad(k.mask, (0, width - k.mask.shape[1]), value=0.0) for k in kept])
    return Groups(
        tokens,
        mask,
        kept[0].prompt_len,
        torch.cat([k.rewards for k in kept]),
        torch.cat([k.correct for k in kept]),
        gen_tokens,
        samples,
        [a for k in kept for a in k.answers],
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
    """mu inner epochs of the GRPO loss on one batch of groups; returns the step's diagnostics.

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
    if ref is not None and (cfg.beta > 0):
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
        norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.grad_clip)
        value = loss.item()
        check_step(value, norm, None, diverge_settings(cfg))  # before the step: never trained on
        opt.step()
        for k, v in {"loss": value, **stats}.items():
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
    acc = float(solve_probability(policy, problems, max_new_tokens, 1.0, tok).mean())
    roll, _ = sample_scored(policy, problems, 1, max_new_tokens, 1.0, tok, gen)  # P rows
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
    if hooks.on_step is not None:
        hooks.on_step(curve[0])
    for step in tqdm(range(1, cfg.steps + 1), desc=desc, unit="step", disable=not progress, mininterval=1.0):
        t0 = time.perf_counter()
        batch = dynamic_groups(draw, P, cfg.max_gen_rounds) if cfg.dynamic_sampling else draw()
        has_groups = batch.rewards.numel() > 0
        with diverged_at(step=step):
            stats = (
                grpo_update(policy, ref if cfg.beta > 0 else None, opt, batch, cfg, n_new, shared_prefix)
                if has_groups
                else {"grad_tokens": 0}
            )
            if has_groups:  # the next rollout samples from these weights: never from NaN ones
                check_weights(policy.parameters(), None, diverge_settings(cfg))
        row = {"step": step, **step_metrics(batch, stats), "step_seconds": time.perf_counter() - t0}
        if hooks.batch_metrics is not None:
            row.update(hooks.batch_metrics(batch, step))
        if step % cfg.eval_every == 0 or step == cfg.steps:
            row.update(evaluation())
        curve.append(row)
        if hooks.on_step is not None:
            hooks.on_step(row)
    return curve


def diverge_settings(cfg: GRPOConfig) -> dict[str, float]:
    """The settings a diverged GRPO run names: what sets the size of its steps and its logits."""
    return {"lr": cfg.lr, "grad_clip": cfg.grad_clip, "temperature": cfg.temperature}


def step_metrics(batch: Groups, stats: dict) -> dict:
    """One step's curve columns: the batch's reward and accuracy, how much of it carried gradient,
    and `grpo_update`'s diagnostics (`stats`; an empty batch has only grad_tokens = 0)."""
    has_groups = batch.rewards.numel() > 0
    grad_tokens = stats.pop("grad_tokens")
    return {
        "reward_mean": float(batch.rewards.mean()) if has_groups else float("nan"),
        "accuracy": float(batch.correct.mean()) if has_groups else float("nan"),
        "frac_reward_zero_std": float((~mixed_groups(batch.rewards)).float().mean()) if has_groups else 1.0,
        "response_len_mean": float(batch.mask.sum(dim=1).mean()) if has_groups else 0.0,
        "frac_tokens_with_grad": grad_tokens / max(batch.generated_tokens, 1),  # of all generated
        "frac_batch_tokens_with_grad": grad_tokens / max(int(batch.mask.sum()), 1),  # of the update batch
        "samples_generated": batch.samples,
        **stats,
    }


# ---------------------------------------------------------------------------------------------
# One seed's summary numbers, read off its curve.


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
