"""GRPO: the math of group-relative policy optimisation with verifiable rewards.

Each prompt is sampled G times; every response is scored by a verifier, and the response's reward
relative to its siblings (no learned critic) becomes the advantage of all its tokens. The policy is
pushed along a PPO-style clipped importance ratio, optionally leashed to a frozen reference model by a
per-token KL estimate, and the per-token terms are reduced to one scalar by a chosen aggregation.
Variants (Dr. GRPO, DAPO, RLOO, GSPO, CISPO) are arguments here and params entries upstream. The
loop that runs these functions on TinyLM (rollouts, the update, evaluation) is `rlvr.grpo_loop`.

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

from collections.abc import Callable

import torch
import torch.nn.functional as F

from rlvr.grpo_stats import mixed_groups


def registered(table: dict[str, Callable], kind: str, name: str) -> Callable:
    """The function a kind named in params dispatches to, from its table; an unknown name is one
    line naming the known ones (never a fall-through to some default)."""
    if kind not in table:
        raise ValueError(f"{name} = {kind!r}: must be one of {', '.join(table)}")
    return table[kind]


def _std_scaled(r: torch.Tensor, centred: torch.Tensor, eps: float) -> torch.Tensor:
    return centred / (r.std(dim=1, keepdim=True, unbiased=False) + eps)  # (P, G)


def _leave_one_out(r: torch.Tensor, centred: torch.Tensor, eps: float) -> torch.Tensor:
    G = r.shape[1]
    if G < 2:
        raise ValueError(f"rloo needs a group of at least 2 samples, got G = {G}")
    return centred * (G / (G - 1))  # (P, G)


def _per_token_only(r: torch.Tensor, centred: torch.Tensor, eps: float) -> torch.Tensor:
    raise ValueError("advantage kind reinforce_pp is per token, not per group: reinforce_pp_advantages")


# Every `advantage` of GRPOConfig: (rewards (P, G), rewards - group mean, eps) -> (P, G), before the
# equal-reward groups are zeroed. A new kind is a Literal value in rlvr.configs and a row here.
GROUP_ADVANTAGES: dict[str, Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]] = {
    "group": _std_scaled,
    "mean_only": lambda r, centred, eps: centred,  # Dr. GRPO
    "rloo": _leave_one_out,
    "batch_std": lambda r, centred, eps: centred / (r.std(unbiased=False) + eps),  # one scale a batch
    "reinforce_pp": _per_token_only,  # per token: `step_advantages` routes it to reinforce_pp_advantages
    "passk": lambda r, centred, eps: best_only_advantages(r),
}


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
    advantage = registered(GROUP_ADVANTAGES, kind, "advantage kind")
    if kind != "reinforce_pp" and rewards.dim() != 2:
        raise ValueError(f"rewards must be (P, G), got shape {tuple(rewards.shape)}")
    r = rewards if rewards.is_floating_point() else rewards.float()  # (P, G)
    centred = r - r.mean(dim=1, keepdim=True)  # (P, G)
    adv = advantage(r, centred, eps)  # (P, G)
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
    return registered(KL_ESTIMATES, kind, "kl_estimator")(logp_ref - logp)  # (B, T)


# Every `kl_estimator`: l = log pi_ref - log pi (B, T) -> the per-token estimate (B, T).
KL_ESTIMATES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "k1": lambda l: -l,
    "k2": lambda l: 0.5 * l.square(),
    "k3": lambda l: l.exp() - l - 1.0,
}


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
    """Fractions of the live entries (tokens or sequences) clipped low, high and either (the two
    never overlap: TRL's region), and their mean ratio."""
    n = live.sum().clamp(min=1)
    return {
        "clip_frac_low": float((low & live).sum() / n),
        "clip_frac_high": float((high & live).sum() / n),
        "clip_frac_region": float(((low | high) & live).sum() / n),
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
    objective = registered(RATIO_OBJECTIVES, kind, "ratio")
    live = mask > 0  # (B, T)
    log_ratio = torch.where(live, logp - logp_old, 0.0)  # (B, T) padding: exp(0) = 1, never inf
    a = adv.to(logp.dtype)
    a = a[:, None] if a.dim() == 1 else a  # (B, 1) per response, or (B, T) per token
    return objective(logp, log_ratio, a, live, clip_eps_low, clip_eps_high)


def _token_ratio(logp, log_ratio, a, live, clip_eps_low, clip_eps_high) -> tuple[torch.Tensor, dict]:
    ratio = log_ratio.exp()  # (B, T)
    obj, low, high = _clipped(ratio, a, clip_eps_low, clip_eps_high)  # (B, T) x3
    return torch.where(live, obj, 0.0), _ratio_stats(low, high, ratio, live)


def _sequence_ratio(logp, log_ratio, a, live, clip_eps_low, clip_eps_high) -> tuple[torch.Tensor, dict]:
    if a.shape[1] != 1:
        raise ValueError("ratio sequence clips once per response: it needs one advantage per response")
    n_tokens = live.sum(dim=1, keepdim=True).clamp(min=1)  # (B, 1)
    ratio = (log_ratio.sum(dim=1, keepdim=True) / n_tokens).exp()  # (B, 1) geometric mean
    obj, low, high = _clipped(ratio, a, clip_eps_low, clip_eps_high)  # (B, 1) x3
    stats = _ratio_stats(low, high, ratio, live.any(dim=1, keepdim=True))
    return torch.where(live, obj, 0.0), stats  # (B, T)


def _cispo_ratio(logp, log_ratio, a, live, clip_eps_low, clip_eps_high) -> tuple[torch.Tensor, dict]:
    ratio = log_ratio.exp()  # (B, T)
    weight = ratio.clamp(1.0 - clip_eps_low, 1.0 + clip_eps_high).detach()  # (B, T)
    obj = weight * a * torch.where(live, logp, 0.0)  # (B, T)
    low, high = ratio < 1.0 - clip_eps_low, ratio > 1.0 + clip_eps_high
    return torch.where(live, obj, 0.0), _ratio_stats(low, high, ratio, live)


# Every `ratio`: (logp, log-ratio, advantages, live tokens, clip bounds) -> (objective (B, T), stats).
RATIO_OBJECTIVES: dict[str, Callable[..., tuple[torch.Tensor, dict]]] = {
    "token": _token_ratio,
    "sequence": _sequence_ratio,
    "cispo": _cispo_ratio,
}


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, mode: str, max_len: int | None = None
) -> torch.Tensor:
    """Reduce per-token terms (B, T) over the masked tokens to a scalar.

    seq_mean:      mean over each response's own tokens, then over responses (original GRPO). A long
                   response's tokens each weigh 1/|y|, which dilutes the penalty on long wrong answers.
    token_mean:    sum over all masked tokens / their count in the batch (DAPO; TRL's default).
    seq_sum_const: sum over masked tokens / (B * max_len), max_len a constant (Dr. GRPO): no length bias.
    """
    reduce = registered(AGGREGATES, mode, "aggregation")
    live = mask > 0  # (B, T)
    return reduce(torch.where(live, per_token, 0.0), live, max_len)


def _seq_mean(x: torch.Tensor, live: torch.Tensor, max_len: int | None) -> torch.Tensor:
    per_seq = x.sum(dim=1) / live.sum(dim=1).clamp(min=1)  # (B,)
    return per_seq.sum() / max(per_seq.shape[0], 1)


def _seq_sum_const(x: torch.Tensor, live: torch.Tensor, max_len: int | None) -> torch.Tensor:
    if max_len is None or max_len < 1:
        raise ValueError(f"aggregation seq_sum_const needs a constant max_len >= 1, got {max_len!r}")
    return x.sum() / (max(x.shape[0], 1) * max_len)


# Every `aggregation`: (per-token terms, 0 on padding (B, T), live tokens (B, T), max_len) -> scalar.
AGGREGATES: dict[str, Callable[[torch.Tensor, torch.Tensor, int | None], torch.Tensor]] = {
    "seq_mean": _seq_mean,
    "token_mean": lambda x, live, max_len: x.sum() / live.sum().clamp(min=1),
    "seq_sum_const": _seq_sum_const,
}


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
    clip_frac_high, clip_frac_region, ratio_mean and, when beta > 0, kl_nats (mean of the chosen
    estimator over masked tokens).
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
