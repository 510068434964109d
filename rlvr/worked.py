"""The chapters' worked examples, recomputed: every hand-worked number in the two GRPO chapters.

Both chapters teach by small numeric examples (a group of eight rewards, a token pushed past the clip,
the memory bill of a 7B model, a 24-prompt training demo). Each example here is one function that
derives its numbers from the project's own GRPO code (`rlvr.grpo`, `rlvr.passk`), never from typed-in
constants, so a change in that code that breaks a chapter's arithmetic shows up as a changed number.
Ids follow the chapters: `A1`..`A8` for chapter A (reasoning RL and GRPO), `B1`..`B14` for chapter B
(RLVR and GRPO). Every gradient is taken by torch autograd through the library functions; the closed
form is reported beside it where there is one. `worked_metrics` collects them all, keyed by id; the
`worked` stage writes them as one JSON and `rlvr.report.plots` draws their figures.

Where this departs from the chapters, or fills in what they leave open:
1. Every advantage comes from `group_advantages`, whose std has eps = 1e-6 added, so the chapters'
   +1 is 0.999998 and values sit up to ~1e-5 from the closed form sqrt((1-p)/p) (A3 reports it; B4's
   sums of squares fall short of G by ~5e-5). A3 also runs the check at eps = 0 in float64, where the
   two agree to rounding.
2. A4: the chapter names no distribution. pi and pi_ref are softmaxes of seeded Gaussian logits over
   `kl_vocab` tokens, pi_ref's logits perturbed by N(0, 1) noise, so the KL is a few tenths of a nat.
3. A7: the chapter argues k2's bias to leading order for pi_ref = pi (1 + delta). Here the relative
   perturbation is delta * z for one fixed seeded direction z (centred under pi, so no renormalisation
   is needed, and |z| <= 0.9, so pi_ref > 0 up to delta = 1), and every expectation is an exact sum
   over the vocabulary, not a sample mean. The leading bias is then -delta^3 E_pi[z^3] / 6.
4. A8: bytes per parameter are the usual mixed-precision Adam bill: bf16 weights and gradients (2 + 2)
   plus fp32 master weights and two Adam moments (4 + 4 + 4) = 16 for a trained model, 2 (bf16) for a
   frozen one. PPO-RLHF trains policy and critic and freezes reference and reward model. Activations,
   KV cache and generation buffers are left out. GB means 1e9 bytes.
5. B5: "signal" is the complement of the chapter's no-signal probability, 1 - p^G - (1-p)^G; one cell
   is re-estimated by seeded Monte Carlo.
6. B6: <eos> is a token like any other, so lengths count it (3, 3, 4, 3), as the chapter's 1/12 and
   1/16 imply. The chapter's -0.063 is -1/16 = -0.0625 rounded half up.
7. B10: the toy's crossover k uses `rlvr.passk`'s convention (first k with base >= RL). The chapter
   gives no crossover for the toy; its "between 8 and 16" is the lab run's, not the toy's.
8. B14: the chapter gives the demo's model, p_j = sigmoid(w + u_j - d_j), but no constants; difficulty
   range, G, step size and iterations are `WorkedConfig` fields. Accuracy is the exact mean of p_j, not
   a sample mean; "first" and "last" are averages over the first and last tenth of the iterations; the
   hard prompts "waiting" is read as the iteration at which each third's mean p_j first exceeds 0.5.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from rlvr.configs import WorkedConfig
from rlvr.grpo import exact_kl_and_entropy, group_advantages, grpo_loss, kl_estimate, policy_objective
from rlvr.passk import two_problem_toy


def _group(correct: int, size: int, dtype=torch.float32) -> torch.Tensor:
    """One group of binary rewards, correct responses first: (1, G)."""
    return torch.tensor([[1.0] * correct + [0.0] * (size - correct)], dtype=dtype)


def _floats(x) -> list:
    """Tensor or array -> nested list of python floats (JSON-able)."""
    return np.asarray(x.detach() if isinstance(x, torch.Tensor) else x, dtype=float).tolist()


# ------------------------------------------------------------------------------------------ chapter A


def _one_group(rewards: torch.Tensor) -> tuple[dict, torch.Tensor]:
    """One group's rewards (1, G): its rewards, mean, population SD and advantages as the examples
    record them, and the advantages (G,)."""
    adv = group_advantages(rewards)[0]  # (G,)
    facts = {
        "rewards": _floats(rewards[0]),
        "group_mean": float(rewards.mean()),
        "group_std_population": float(rewards.std(unbiased=False)),
        "advantages": _floats(adv),
    }
    return facts, adv


def a1_group_of_eight() -> dict:
    """A1: the '2 + 3 =' group, 4 of 8 responses correct."""
    answers = [5, 8, 5, 6, 5, 2, 5, 7]
    rewards = torch.tensor([[1.0 if a == 5 else 0.0 for a in answers]])  # (1, 8)
    facts, adv = _one_group(rewards)
    return {
        **facts,
        "advantage_correct": float(adv[rewards[0] > 0].mean()),
        "advantage_wrong": float(adv[rewards[0] == 0].mean()),
    }


def a2_three_groups() -> dict:
    """A2: a mixed group (3/8), a rare success (1/8) and a solved prompt (8/8)."""
    out = {"correct_counts": [3, 1, 8], "group_size": 8, "rewards_by_group": [], "advantages_by_group": []}
    for k in out["correct_counts"]:
        rewards = _group(k, 8)  # (1, 8)
        adv = group_advantages(rewards)[0]  # (8,)
        out["rewards_by_group"].append(_floats(rewards[0]))
        out["advantages_by_group"].append(_floats(adv))
        out[f"advantage_correct_{k}_of_8"] = float(adv[0])
        if k < 8:
            out[f"advantage_wrong_{k}_of_8"] = float(adv[-1])
    out["all_correct_group_all_zero"] = all(a == 0.0 for a in out["advantages_by_group"][2])
    return out


def a3_advantage_table(group_size: int = 8) -> dict:
    """A3: correct/wrong advantage for k = 0..G correct, from `group_advantages` and in closed form."""
    G = group_size
    ks = list(range(G + 1))

    def table(dtype, eps):
        rewards = torch.cat([_group(k, G, dtype) for k in ks])  # (G+1, G) row k has k correct first
        adv = group_advantages(rewards, eps=eps)  # (G+1, G)
        # k = 0 has no correct member and k = G no wrong one: report the group's (zero) value instead
        return adv[:, 0], adv[:, -1]  # (G+1,) x2

    correct, wrong = table(torch.float32, 1e-6)
    correct64, wrong64 = table(torch.float64, 0.0)
    p = np.array(ks) / G  # (G+1,)
    mixed = (p > 0) & (p < 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        closed_correct = np.where(mixed, np.sqrt((1 - p) / p), 0.0)  # (G+1,)
        closed_wrong = np.where(mixed, -np.sqrt(p / (1 - p)), 0.0)  # (G+1,)

    def max_diff(c, w):
        return float(max(np.abs(c.numpy() - closed_correct).max(), np.abs(w.numpy() - closed_wrong).max()))

    return {
        "group_size": G,
        "correct_counts": ks,
        "advantage_correct": _floats(correct),
        "advantage_wrong": _floats(wrong),
        "closed_form_correct": _floats(closed_correct),
        "closed_form_wrong": _floats(closed_wrong),
        "max_abs_diff_closed_form_eps0_float64": max_diff(correct64, wrong64),
        "max_abs_diff_closed_form_default_eps": max_diff(correct.double(), wrong.double()),
    }


def _toy_logits(vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded logits of pi and of a nearby pi_ref: (V,) x2, float64."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(vocab, generator=gen, dtype=torch.float64)  # (V,)
    ref_logits = logits + torch.randn(vocab, generator=gen, dtype=torch.float64)  # (V,)
    return logits, ref_logits


def a4_k3_sampled(cfg: WorkedConfig) -> dict:
    """A4: k3 at `kl_samples` tokens drawn from pi: never negative, mean close to the exact KL."""
    logits, ref_logits = _toy_logits(cfg.kl_vocab, cfg.seed)
    logp, logp_ref = F.log_softmax(logits, -1), F.log_softmax(ref_logits, -1)  # (V,) x2
    gen = torch.Generator().manual_seed(cfg.seed)
    tokens = torch.multinomial(logp.exp(), cfg.kl_samples, replacement=True, generator=gen)  # (N,)
    k3 = kl_estimate(logp[tokens][None], logp_ref[tokens][None], "k3")[0]  # (N,)
    kl, _ = exact_kl_and_entropy(logits[None, None], ref_logits[None, None])  # (1, 1)
    kl = float(kl)
    return {
        "samples": cfg.kl_samples,
        "vocab": cfg.kl_vocab,
        "k3_all_non_negative": bool((k3 >= 0).all()),
        "k3_min_nats": float(k3.min()),
        "k3_mean_nats": float(k3.mean()),
        "k3_std_error_nats": float(k3.std() / math.sqrt(cfg.kl_samples)),
        "kl_exact_nats": kl,
        "abs_diff_nats": abs(float(k3.mean()) - kl),
    }


def a5_aggregation_sign() -> dict:
    """A5: a 4-token response at A = +1 and a 1-token one at A = -1, loss at ratio 1 and beta = 0."""
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])  # (2, 4)
    logp = torch.full((2, 4), math.log(0.5))  # (2, 4) any value: only the ratio (1) enters
    adv = torch.tensor([1.0, -1.0])  # (2,)
    losses = {
        mode: float(grpo_loss(logp, logp, None, adv, mask, beta=0.0, aggregation=mode)[0])
        for mode in ("seq_mean", "token_mean")
    }
    return {
        "lengths": [4, 1],
        "advantages": _floats(adv),
        "loss_seq_mean": losses["seq_mean"],
        "loss_token_mean": losses["token_mean"],
    }


def a6_length_dilution() -> dict:
    """A6: two wrong answers (A = -1) of 1 and 20 tokens; per-token gradient under seq_mean."""
    lengths = [1, 20]
    mask = (torch.arange(20)[None, :] < torch.tensor(lengths)[:, None]).float()  # (2, 20)
    logp = torch.full((2, 20), math.log(0.3), requires_grad=True)  # (2, 20)
    adv = torch.tensor([-1.0, -1.0])  # (2,)
    loss, _ = grpo_loss(logp, logp.detach(), None, adv, mask, beta=0.0, aggregation="seq_mean")
    (grad,) = torch.autograd.grad(loss, logp)  # (2, 20)
    short, long = abs(float(grad[0, 0])), abs(float(grad[1, 0]))
    return {
        "lengths": lengths,
        "advantages": _floats(adv),
        "grad_per_token_short": short,
        "grad_per_token_long": long,
        "ratio_long_to_short": long / short,
        "ratio_formula": lengths[0] / lengths[1],
        "grad_per_token_formula": [1.0 / (len(lengths) * n) for n in lengths],
    }


def a7_kl_estimator_bias(cfg: WorkedConfig, deltas=None) -> dict:
    """A7: exact bias and variance of k1, k2, k3 under pi as pi_ref moves away by delta."""
    deltas = np.logspace(-2, 0, 21) if deltas is None else np.asarray(deltas, dtype=float)
    logits, _ = _toy_logits(cfg.kl_vocab, cfg.seed)
    pi = torch.softmax(logits, -1)  # (V,)
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    z = torch.randn(cfg.kl_vocab, generator=gen, dtype=torch.float64)  # (V,)
    z = z - (pi * z).sum()  # centred under pi: pi (1 + delta z) already sums to 1
    z = 0.9 * z / z.abs().max()  # pi_ref stays > 0 up to delta = 1
    out = {"deltas": _floats(deltas), "kl_exact_nats": []}
    for k in ("k1", "k2", "k3"):
        out[f"bias_{k}_nats"], out[f"var_{k}"] = [], []
    k2_min = math.inf
    for delta in deltas:
        ref = pi * (1 + delta * z)
        logp, logp_ref = pi.log(), (ref / ref.sum()).log()  # (V,) x2
        kl = float((pi * (logp - logp_ref)).sum())
        out["kl_exact_nats"].append(kl)
        for k in ("k1", "k2", "k3"):
            values = kl_estimate(logp[None], logp_ref[None], k)[0]  # (V,) the estimator at each token
            mean = float((pi * values).sum())
            out[f"bias_{k}_nats"].append(mean - kl)
            out[f"var_{k}"].append(float((pi * values.square()).sum()) - mean**2)
            if k == "k2":
                k2_min = min(k2_min, float(values.min()))
    bias2 = np.array(out["bias_k2_nats"])  # (D,)
    small = deltas <= 0.1
    slope = (
        np.polyfit(np.log(deltas[small]), np.log(np.abs(bias2[small])), 1)[0] if small.sum() >= 2 else None
    )
    out.update(
        {
            "vocab": cfg.kl_vocab,
            "k2_min_over_tokens": k2_min,
            "k2_bias_over_delta_cubed": _floats(bias2 / deltas**3),
            "k2_bias_over_delta_cubed_limit": float(-(pi * z**3).sum() / 6),  # leading term, delta -> 0
            "k2_bias_loglog_slope_small_delta": None if slope is None else float(slope),
            "small_delta_max": 0.1,
            "max_abs_bias_k1_nats": float(np.abs(out["bias_k1_nats"]).max()),
            "max_abs_bias_k3_nats": float(np.abs(out["bias_k3_nats"]).max()),
        }
    )
    return out


# bytes per parameter (departure 4): bf16 weights + grads, fp32 master + two Adam moments; frozen bf16
TRAINED_BYTES_PER_PARAM = 2 + 2 + 4 + 4 + 4
FROZEN_BYTES_PER_PARAM = 2
GB = 1e9


def a8_memory(
    sizes_billion=(0.5, 1.5, 3, 7, 14, 32, 70), prompts_per_step: int = 256, group_size: int = 8
) -> dict:
    """A8: weight + optimiser memory of GRPO (policy + reference), GRPO at beta = 0, and PPO-RLHF."""
    sizes = np.asarray(sizes_billion, dtype=float)  # (S,) billions of parameters

    def gb(billions, trained: int, frozen: int):
        return billions * 1e9 * (trained * TRAINED_BYTES_PER_PARAM + frozen * FROZEN_BYTES_PER_PARAM) / GB

    setups = {"grpo": (1, 1), "grpo_beta0": (1, 0), "ppo": (2, 2)}  # PPO adds a critic and a reward model
    out = {
        "gigabyte_bytes": GB,
        "bytes_per_param_trained": TRAINED_BYTES_PER_PARAM,
        "bytes_per_param_frozen_bf16": FROZEN_BYTES_PER_PARAM,
        "model_sizes_billion": _floats(sizes),
    }
    for name, (trained, frozen) in setups.items():
        out[f"{name}_gb"] = _floats(gb(sizes, trained, frozen))
        out[f"{name}_7b_gb"] = float(gb(7.0, trained, frozen))
    out.update(
        {
            "beta0_saving_7b_gb": out["grpo_7b_gb"] - out["grpo_beta0_7b_gb"],
            "ppo_over_grpo": out["ppo_7b_gb"] / out["grpo_7b_gb"],
            "prompts_per_step": prompts_per_step,
            "group_size": group_size,
            "responses_per_step": prompts_per_step * group_size,
        }
    )
    return out


# ------------------------------------------------------------------------------------------ chapter B


def _advantages_of(rewards: list[float]) -> list[float]:
    return _floats(group_advantages(torch.tensor([rewards]))[0])


def b1_two_of_four() -> dict:
    """B1: '37+48=' with rewards 1, 0, 0, 1."""
    rewards = [1.0, 0.0, 0.0, 1.0]
    return {"rewards": rewards, "advantages": _advantages_of(rewards)}


def b2_one_of_four() -> dict:
    """B2: a harder prompt, rewards 1, 0, 0, 0: a big push up, three small pushes down."""
    facts, adv = _one_group(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))  # (1, 4)
    return {
        **facts,
        "advantage_correct": float(adv[0]),
        "advantage_wrong": float(adv[1]),
        "advantage_sum": float(adv.sum()),
    }


def b3_equal_rewards() -> dict:
    """B3: all four right, or all four wrong: every advantage is zero."""
    right, wrong = _advantages_of([1.0] * 4), _advantages_of([0.0] * 4)
    return {
        "advantages_all_correct": right,
        "advantages_all_wrong": wrong,
        "all_zero": all(a == 0.0 for a in right + wrong),
    }


def b4_std_weighting(group_size: int = 8) -> dict:
    """B4: mean |A| of a 1-in-8 and a 4-in-8 group with and without the std divisor; sum of A^2."""
    G = group_size
    out = {"group_size": G}
    for kind, tag in (("group", "std"), ("mean_only", "mean_only")):
        for k in (1, 4):
            adv = group_advantages(_group(k, G, torch.float64), kind)  # (1, G)
            out[f"mean_abs_adv_{tag}_{k}_of_{G}"] = float(adv.abs().mean())
    sums = [float(group_advantages(_group(k, G, torch.float64)).square().sum()) for k in range(1, G)]
    out.update(
        {
            "sum_sq_adv_correct_counts": list(range(1, G)),
            "sum_sq_adv": sums,
            "max_abs_dev_sum_sq_from_G": max(abs(s - G) for s in sums),
        }
    )
    return out


def b5_signal_probability(
    cfg: WorkedConfig, mc_p: float = 0.05, mc_group_size: int = 8, mc_groups: int = 100_000
) -> dict:
    """B5: chance a group has mixed rewards (so any gradient), 1 - p^G - (1-p)^G, over p and G."""
    ps = [0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99]
    sizes = [4, 8, 16, 32, 64]

    def signal(p, G):
        return 1.0 - p**G - (1.0 - p) ** G

    table = [[signal(p, G) for p in ps] for G in sizes]  # (len(sizes), len(ps))
    rng = np.random.default_rng(cfg.seed)
    wins = rng.random((mc_groups, mc_group_size)) < mc_p  # (N, G) sampled binary rewards
    mixed = wins.any(axis=1) & ~wins.all(axis=1)  # (N,)
    mc = float(mixed.mean())
    return {
        "ps": ps,
        "group_sizes": sizes,
        "signal_probability": table,
        "signal_p005_g8": signal(0.05, 8),
        "signal_p005_g64": signal(0.05, 64),
        "mc_p": mc_p,
        "mc_group_size": mc_group_size,
        "mc_groups": mc_groups,
        "mc_signal_probability": mc,
        "mc_std_error": math.sqrt(mc * (1 - mc) / mc_groups),
        "mc_exact": signal(mc_p, mc_group_size),
    }


def b6_token_weights() -> dict:
    """B6: each token's gradient weight in the '37+48=' group, read off -d loss / d log-prob."""
    answer = "85"
    responses = [["8", "5", "<eos>"], ["7", "5", "<eos>"], ["8", "1", "5", "<eos>"], ["8", "5", "<eos>"]]
    rewards = torch.tensor([[1.0 if "".join(r[:-1]) == answer else 0.0 for r in responses]])  # (1, G)
    adv = group_advantages(rewards)[0]  # (G,)
    G, T = len(responses), max(len(r) for r in responses)
    lengths = torch.tensor([len(r) for r in responses])  # (G,)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()  # (G, T)
    logp = torch.full((G, T), math.log(0.4), requires_grad=True)  # (G, T) values do not matter at ratio 1
    loss, _ = grpo_loss(logp, logp.detach(), None, adv, mask, beta=0.0, aggregation="seq_mean")
    (grad,) = torch.autograd.grad(loss, logp)  # (G, T)
    # the same loss written as REINFORCE: -(1/G) sum_i (1/|y_i|) sum_t A_i log p_it
    reinforce = -((adv[:, None] * logp * mask).sum(dim=1) / lengths).sum() / G
    (grad_reinforce,) = torch.autograd.grad(reinforce, logp)  # (G, T)
    weights = -grad  # (G, T)
    per_response = [_floats(weights[i, : len(r)]) for i, r in enumerate(responses)]
    formula = [[float(adv[i]) / (G * len(r))] * len(r) for i, r in enumerate(responses)]
    first: dict[str, float] = {}
    for i, r in enumerate(responses):
        first[r[0]] = first.get(r[0], 0.0) + per_response[i][0]
    return {
        "responses": [" ".join(r) for r in responses],
        "rewards": _floats(rewards[0]),
        "advantages": _floats(adv),
        "lengths": lengths.tolist(),
        "token_weights": per_response,
        "token_weights_formula": formula,
        "max_abs_diff_formula": max(abs(a - b) for w, f in zip(per_response, formula) for a, b in zip(w, f)),
        "max_abs_diff_reinforce_form": float((grad - grad_reinforce).abs().max()),
        "first_token_weight_by_token": first,
        "weight_per_token_short_wrong": per_response[1][0],
        "weight_per_token_long_wrong": per_response[2][0],
    }


def b7_clip_zero_gradient(clip_eps: float = 0.2) -> dict:
    """B7: token '5' grew from 0.40 to 0.50 (ratio 1.25 > 1.2) with A > 0: its gradient is exactly 0."""
    prob_old = 0.40
    mask, adv = torch.ones(1, 1), torch.tensor([1.0])  # (1, 1), (1,)
    out = {"prob_old": prob_old, "clip_eps": clip_eps, "advantage": float(adv[0])}
    for tag, prob_new in (("clipped", 0.50), ("unclipped", 0.44)):
        logp = torch.tensor([[math.log(prob_new)]], dtype=torch.float64, requires_grad=True)  # (1, 1)
        logp_old = torch.tensor([[math.log(prob_old)]], dtype=torch.float64)  # (1, 1)
        obj, stats = policy_objective(logp, logp_old, adv, mask, "token", clip_eps, clip_eps)
        (grad,) = torch.autograd.grad(obj.sum(), logp)  # (1, 1)
        out.update(
            {
                f"prob_new_{tag}": prob_new,
                f"ratio_{tag}": stats["ratio_mean"],
                f"grad_logp_{tag}": float(grad),
                f"clip_frac_high_{tag}": stats["clip_frac_high"],
            }
        )
    out["grad_logp_unclipped_formula"] = out["ratio_unclipped"] * out["advantage"]  # d(rho A)/d log pi
    return out


def b8_k3_derivative() -> dict:
    """B8: k3 at pi = 0.6, pi_ref = 0.5, and its derivative in log pi by autograd."""
    pi, pi_ref = 0.6, 0.5
    logp = torch.tensor(math.log(pi), dtype=torch.float64, requires_grad=True)
    k3 = kl_estimate(logp, torch.tensor(math.log(pi_ref), dtype=torch.float64), "k3")
    (grad,) = torch.autograd.grad(k3, logp)
    u = pi_ref / pi
    return {
        "pi": pi,
        "pi_ref": pi_ref,
        "u": u,
        "k3_nats": float(k3.detach()),
        "k3_formula_nats": u - math.log(u) - 1,
        "dk3_dlogpi_autograd": float(grad),
        "dk3_dlogpi_formula": 1 - u,
    }


def b10_passk_toy() -> dict:
    """B10: the two-problem toy: RL sharpens A (0.6 -> 0.98) and loses B (0.05 -> 0.01)."""
    toy = two_problem_toy(0.6, 0.05, 0.98, 0.01)
    ks, base, rl = toy["ks"], toy["pass_at_k_base"], toy["pass_at_k_rl"]
    at = {int(k): i for i, k in enumerate(ks)}
    return {
        "p_a_base": 0.6,
        "p_b_base": 0.05,
        "p_a_rl": 0.98,
        "p_b_rl": 0.01,
        "ks": [int(k) for k in ks],
        "pass_at_k_base": _floats(base),
        "pass_at_k_rl": _floats(rl),
        "pass_at_1_base": float(base[at[1]]),
        "pass_at_1_rl": float(rl[at[1]]),
        "pass_at_64_base": float(base[at[64]]),
        "pass_at_64_rl": float(rl[at[64]]),
        "crossover_k": toy["crossover_k"],
    }


def _first_above(values: np.ndarray, level: float) -> int | None:
    hits = np.flatnonzero(values > level)
    return int(hits[0]) if hits.size else None


def b14_demo(cfg: WorkedConfig) -> dict:
    """B14: GRPO on 24 prompts of rising difficulty, p_j = sigmoid(w + u_j - d_j).

    Each iteration samples G rewards per prompt, standardises them per group and takes one ascent step
    on sum_j mean_i A_ij log p(r_ij) in (w, u). The shared skill w collects every prompt's gradient,
    which is how easy prompts lift hard ones before the hard ones produce any signal of their own.
    """
    P, G = cfg.demo_prompts, cfg.demo_group_size
    gen = torch.Generator().manual_seed(cfg.seed)
    difficulty = torch.linspace(cfg.demo_d_min, cfg.demo_d_max, P, dtype=torch.float64)  # (P,)
    w = torch.zeros((), dtype=torch.float64, requires_grad=True)
    u = torch.zeros(P, dtype=torch.float64, requires_grad=True)  # (P,)
    probs, sampled, all_right, all_wrong = [], [], [], []
    for _ in range(cfg.demo_iters):
        logit = w + u - difficulty  # (P,)
        p = torch.sigmoid(logit.detach())  # (P,)
        rewards = torch.bernoulli(p[:, None].expand(P, G), generator=gen)  # (P, G)
        adv = group_advantages(rewards)  # (P, G)
        # log-probability of each sampled outcome: log p if solved, log (1 - p) if not
        logp = torch.where(rewards > 0, F.logsigmoid(logit)[:, None], F.logsigmoid(-logit)[:, None])  # (P, G)
        objective = (adv * logp).mean(dim=1).sum()
        grad_w, grad_u = torch.autograd.grad(objective, (w, u))
        with torch.no_grad():
            w += cfg.demo_lr * grad_w
            u += cfg.demo_lr * grad_u
        probs.append(p.numpy())
        sampled.append(float(rewards.mean()))
        all_right.append(float((rewards.min(dim=1).values > 0).double().mean()))
        all_wrong.append(float((rewards.max(dim=1).values == 0).double().mean()))
    probs = np.stack(probs)  # (iters, P) the policy that drew iteration t's samples
    accuracy = probs.mean(axis=1)  # (iters,)
    window = max(1, cfg.demo_iters // 10)
    thirds = dict(zip(("easy", "mid", "hard"), np.array_split(np.arange(P), 3)))
    crossing = {name: _first_above(probs[:, idx].mean(axis=1), 0.5) for name, idx in thirds.items()}
    ordered = None not in crossing.values() and crossing["easy"] < crossing["mid"] < crossing["hard"]
    with torch.no_grad():
        final = torch.sigmoid(w + u - difficulty)  # (P,)
    return {
        "prompts": P,
        "group_size": G,
        "iterations": cfg.demo_iters,
        "lr": cfg.demo_lr,
        "difficulty": _floats(difficulty),
        "mean_accuracy": _floats(accuracy),
        "sampled_accuracy": sampled,
        "share_all_correct": all_right,
        "share_all_wrong": all_wrong,
        "p_per_prompt": np.round(probs, 5).tolist(),
        "window_iters": window,
        "accuracy_first": float(accuracy[:window].mean()),
        "accuracy_last": float(accuracy[-window:].mean()),
        "accuracy_after_last_step": float(final.mean()),
        "share_all_correct_first": float(np.mean(all_right[:window])),
        "share_all_correct_last": float(np.mean(all_right[-window:])),
        "share_all_wrong_first": float(np.mean(all_wrong[:window])),
        "share_all_wrong_last": float(np.mean(all_wrong[-window:])),
        "third_prompt_indices": {k: v.tolist() for k, v in thirds.items()},
        "iteration_third_mean_p_exceeds_half": crossing,
        "thirds_cross_in_order": bool(ordered),
        "shared_skill_w_final": float(w.detach()),
    }


# ------------------------------------------------------------------------------------------ all of them


def worked_metrics(cfg: WorkedConfig) -> dict:
    """Every example's numbers, keyed by the chapters' example id."""
    return {
        "A1": a1_group_of_eight(),
        "A2": a2_three_groups(),
        "A3": a3_advantage_table(),
        "A4": a4_k3_sampled(cfg),
        "A5": a5_aggregation_sign(),
        "A6": a6_length_dilution(),
        "A7": a7_kl_estimator_bias(cfg),
        "A8": a8_memory(),
        "B1": b1_two_of_four(),
        "B2": b2_one_of_four(),
        "B3": b3_equal_rewards(),
        "B4": b4_std_weighting(),
        "B5": b5_signal_probability(cfg),
        "B6": b6_token_weights(),
        "B7": b7_clip_zero_gradient(),
        "B8": b8_k3_derivative(),
        "B10": b10_passk_toy(),
        "B14": b14_demo(cfg),
    }
