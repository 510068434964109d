import math

import pytest
import torch

from rlvr.configs import AGGREGATIONS
from rlvr.grpo import (
    aggregate,
    best_only_advantages,
    exact_kl_and_entropy,
    group_advantages,
    grpo_loss,
    kl_estimate,
    mixed_groups,
    overlong_penalty,
    policy_objective,
    reinforce_pp_advantages,
    step_advantages,
    token_entropy,
    token_rewards,
)


def binary_group(correct: int, size: int = 8) -> torch.Tensor:
    return torch.tensor([[1.0] * correct + [0.0] * (size - correct)])  # (1, G)


def leaf(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, requires_grad=True)


# ---------------------------------------------------------------- advantages


def test_mixed_groups_have_mean_zero_and_population_std_one():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.3, 0.9, 0.1, 0.5], [2.0, -1.0, 0.0, 0.0]])
    adv = group_advantages(rewards)
    assert torch.allclose(adv.mean(dim=1), torch.zeros(3), atol=1e-6)
    assert torch.allclose(adv.std(dim=1, unbiased=False), torch.ones(3), atol=1e-4)


@pytest.mark.parametrize("kind", ["group", "mean_only", "rloo", "batch_std"])
def test_equal_reward_group_has_exactly_zero_advantage(kind):
    # float32 mean of eight 0.1s is off by 7e-9, which (r - mean) / (std + eps) turns into 0.007
    rewards = torch.tensor([[0.0] * 8, [1.0] * 8, [0.1] * 8, [1.0] + [0.0] * 7])
    adv = group_advantages(rewards, kind)
    assert torch.equal(adv[:3], torch.zeros(3, 8))  # exactly zero, not eps-scaled rounding noise
    assert adv[3].abs().sum() > 0


@pytest.mark.parametrize("correct, up, down", [(4, 1.0, -1.0), (3, 1.29, -0.77), (1, 2.65, -0.38)])
def test_chapter_a_group_of_eight_numbers(correct, up, down):
    adv = group_advantages(binary_group(correct))[0]
    assert round(float(adv[0]), 2) == up and round(float(adv[-1]), 2) == down
    assert torch.equal(adv[:correct], adv[:1].expand(correct))


def test_chapter_b_group_of_four_numbers():
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]))[0]
    assert torch.allclose(adv, torch.tensor([1.0, -1.0, -1.0, 1.0]), atol=1e-5)
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))[0]
    assert float(adv[0]) == pytest.approx(math.sqrt(3), abs=1e-3)
    assert torch.allclose(adv[1:], torch.full((3,), -1 / math.sqrt(3)), atol=1e-3)
    assert float(adv.sum()) == pytest.approx(0.0, abs=1e-6)


def test_mean_only_is_reward_minus_group_mean():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.2, 0.4, 0.9, 0.5]])
    want = rewards - rewards.mean(dim=1, keepdim=True)
    assert torch.allclose(group_advantages(rewards, "mean_only"), want)


def test_rloo_matches_brute_force_leave_one_out():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0, 1.0], [0.2, 0.4, 0.9, 0.5, 0.0]])
    want = torch.zeros_like(rewards)
    for p in range(2):
        for i in range(5):
            others = [float(rewards[p, j]) for j in range(5) if j != i]
            want[p, i] = rewards[p, i] - sum(others) / len(others)
    assert torch.allclose(group_advantages(rewards, "rloo"), want, atol=1e-6)


def test_batch_std_matches_brute_force():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.2, 0.4, 0.9, 0.5], [1.0, 1.0, 1.0, 1.0]])
    flat = rewards.flatten().tolist()
    mu = sum(flat) / len(flat)
    std = math.sqrt(sum((x - mu) ** 2 for x in flat) / len(flat))
    want = torch.zeros_like(rewards)
    for p in range(2):  # the all-equal third group stays 0
        row = rewards[p].tolist()
        want[p] = torch.tensor([(x - sum(row) / len(row)) / (std + 1e-6) for x in row])
    assert torch.allclose(group_advantages(rewards, "batch_std"), want, atol=1e-6)


def brute_best_only(row: list[float]) -> list[float]:
    """The pass@k advantage of one group by hand: the first best sample gets max - second max."""
    ranked = sorted(row, reverse=True)
    best = row.index(ranked[0])
    return [ranked[0] - ranked[1] if i == best else 0.0 for i in range(len(row))]


def test_passk_advantage_credits_only_the_best_sample_by_its_lead_over_the_next():
    rewards = torch.tensor(
        [[0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.2, 0.9, 0.5, 0.1], [0.0] * 4, [0.3, 0.7, 0.7, -1.0]]
    )
    want = torch.tensor([brute_best_only(row) for row in rewards.tolist()])
    assert torch.allclose(best_only_advantages(rewards), want, atol=1e-7)
    assert torch.equal(group_advantages(rewards, "passk"), best_only_advantages(rewards))
    assert group_advantages(rewards, "passk")[0].tolist() == [0.0, 1.0, 0.0, 0.0]  # the docstring's example


def test_passk_advantage_of_random_groups_matches_brute_force():
    rewards = torch.randint(0, 3, (50, 6), generator=torch.Generator().manual_seed(4)).float() / 2
    want = torch.tensor([brute_best_only(row) for row in rewards.tolist()])
    assert torch.equal(group_advantages(rewards, "passk"), want)


def test_passk_advantage_needs_two_samples():
    with pytest.raises(ValueError, match="passk needs a group of at least 2 samples, got G = 1"):
        best_only_advantages(torch.tensor([[1.0]]))


def brute_token_rewards(rewards, mask, kl, beta) -> list[list[float]]:
    """Per-token rewards by hand: -beta * kl_t on each live token, the reward added on the last."""
    out = []
    for r, m, k in zip(rewards, mask, kl):
        n = int(sum(m))
        out.append([(-beta * k[t] + (r if t == n - 1 else 0.0)) if t < n else 0.0 for t in range(len(m))])
    return out


RAGGED = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # (4, 3)


def test_token_rewards_put_the_reward_on_the_last_token_and_the_kl_on_every_token():
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.5])
    kl = torch.tensor([[0.1, 0.0, 0.2], [0.3, 9.0, 9.0], [-0.1, 0.4, 9.0], [0.0, 0.0, 0.0]])  # 9: padding
    got = token_rewards(rewards, RAGGED, kl, beta=0.5)
    want = brute_token_rewards(rewards.tolist(), RAGGED.tolist(), kl.tolist(), 0.5)
    assert torch.allclose(got, torch.tensor(want), atol=1e-7)
    assert torch.allclose(got[0], torch.tensor([-0.05, 0.0, 0.9]))  # the docstring's example
    assert torch.equal(
        token_rewards(rewards, RAGGED),
        torch.tensor(brute_token_rewards(rewards.tolist(), RAGGED.tolist(), torch.zeros(4, 3).tolist(), 0.0)),
    )


def brute_reinforce_pp(token_r, mask, eps=1e-6) -> list[list[float]]:
    """REINFORCE++ by hand: each live token's reward-to-go, whitened over every live token."""
    returns = [
        [sum(row[u] for u in range(t, len(row)) if m[u]) if m[t] else None for t in range(len(row))]
        for row, m in zip(token_r, mask)
    ]
    live = [g for row in returns for g in row if g is not None]
    mu = sum(live) / len(live)
    sd = math.sqrt(sum((g - mu) ** 2 for g in live) / len(live))
    return [[0.0 if g is None else (g - mu) / (sd + eps) for g in row] for row in returns]


def test_reinforce_pp_whitens_rewards_to_go_over_the_batch():
    token_r = torch.tensor([[-0.05, 0.0, 0.9], [0.2, 5.0, 5.0], [0.1, -0.3, 5.0], [0.0, 0.0, 1.0]])
    got = reinforce_pp_advantages(token_r, RAGGED)
    assert torch.allclose(got, torch.tensor(brute_reinforce_pp(token_r.tolist(), RAGGED.tolist())), atol=1e-5)
    live = RAGGED > 0
    assert float(got[live].mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(got[live].std(unbiased=False)) == pytest.approx(1.0, abs=1e-4)


def test_reinforce_pp_has_no_group_baseline_and_an_all_equal_batch_gets_zero():
    one = torch.ones(4, 1)
    adv = reinforce_pp_advantages(torch.tensor([[1.0], [0.0], [1.0], [1.0]]), one)
    assert torch.allclose(adv[:, 0], torch.tensor([1.0, -3.0, 1.0, 1.0]) / math.sqrt(3), atol=1e-5)
    # one group all right, one all wrong: every group kind masks both out; REINFORCE++ does not
    rewards = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    assert torch.equal(group_advantages(rewards, "group"), torch.zeros(2, 2))
    assert torch.allclose(
        step_advantages(rewards, one, "reinforce_pp"), torch.tensor([[1.0], [1.0], [-1.0], [-1.0]])
    )
    assert torch.equal(reinforce_pp_advantages(torch.full((3, 1), 0.1), torch.ones(3, 1)), torch.zeros(3, 1))


def test_reinforce_pp_is_not_a_group_kind():
    with pytest.raises(ValueError, match="reinforce_pp is per token"):
        group_advantages(binary_group(2), "reinforce_pp")


def test_without_kl_in_the_reward_the_step_advantages_are_the_group_ones_exactly():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    mask = torch.ones(8, 3)
    for kind in ("group", "mean_only", "rloo", "batch_std", "passk"):
        assert torch.equal(step_advantages(rewards, mask, kind), group_advantages(rewards, kind).reshape(-1))


def test_kl_in_the_reward_gives_a_group_kind_the_summed_penalised_reward():
    rewards = torch.tensor([[1.0, 1.0], [1.0, 0.0]])  # group 0 all right: masked without the KL
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    kl = torch.tensor([[0.1, 0.0, 0.2], [0.5, 9.0, 9.0], [-0.1, 0.4, 9.0], [0.0, 0.1, 0.0]])
    beta = 0.5
    total = [
        r - beta * sum(k[: int(sum(m))]) for r, m, k in zip([1.0, 1.0, 1.0, 0.0], mask.tolist(), kl.tolist())
    ]
    want = []
    for g in (total[:2], total[2:]):
        mu = sum(g) / 2
        sd = math.sqrt(sum((x - mu) ** 2 for x in g) / 2)
        want += [(x - mu) / (sd + 1e-6) for x in g]
    got = step_advantages(rewards, mask, "group", kl, beta)
    assert torch.allclose(got, torch.tensor(want), atol=1e-4)
    assert got[1] < 0 < got[0]  # the all-right group: the response further from the reference loses


def test_entropy_of_each_position_matches_hand_computation_and_has_finite_gradients():
    p = [0.5, 0.3, 0.2, 0.0]
    logits = torch.tensor(p).log().view(1, 1, 4).requires_grad_(True)  # a -inf logit
    h = token_entropy(logits)
    assert float(h.detach()) == pytest.approx(-sum(a * math.log(a) for a in p if a > 0), abs=1e-6)
    h.sum().backward()
    assert bool(torch.isfinite(logits.grad[..., :3]).all())
    x = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(5))
    assert torch.allclose(token_entropy(x), exact_kl_and_entropy(x, x)[1], atol=1e-6)


def test_entropy_bonus_subtracts_coeff_times_the_aggregated_entropy():
    logits = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(6), requires_grad=True)
    targets = torch.tensor([[0, 1, 2], [3, 4, 0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    logp = torch.log_softmax(logits, -1).gather(-1, targets[..., None]).squeeze(-1)  # (2, 3)
    adv = torch.tensor([1.0, -1.0])
    h = token_entropy(logits)
    for mode in AGGREGATIONS:
        plain, _ = grpo_loss(logp, logp.detach(), None, adv, mask, beta=0.0, aggregation=mode, max_len=3)
        bonus, _ = grpo_loss(
            logp,
            logp.detach(),
            None,
            adv,
            mask,
            beta=0.0,
            aggregation=mode,
            max_len=3,
            entropy=h,
            entropy_coeff=0.1,
        )
        by_hand = [sum(h[i, t].item() for t in range(3) if mask[i, t]) for i in range(2)]
        mean_h = {
            "seq_mean": (by_hand[0] / 3 + by_hand[1] / 2) / 2,
            "token_mean": sum(by_hand) / 5,
            "seq_sum_const": sum(by_hand) / 6,
        }[mode]
        assert float((bonus - plain).detach()) == pytest.approx(-0.1 * mean_h, abs=1e-6)
    with pytest.raises(ValueError, match="entropy_coeff = 0.1: an entropy bonus needs the token entropies"):
        grpo_loss(logp, logp.detach(), None, adv, mask, beta=0.0, entropy_coeff=0.1)


def test_the_entropy_bonus_gradient_raises_the_entropy():
    logits = torch.tensor([[[3.0, 0.0, -1.0]]], requires_grad=True)
    logp = torch.log_softmax(logits, -1)[..., 0]  # (1, 1)
    loss, _ = grpo_loss(
        logp,
        logp.detach(),
        None,
        torch.zeros(1),
        torch.ones(1, 1),
        beta=0.0,
        entropy=token_entropy(logits),
        entropy_coeff=1.0,
    )
    loss.backward()
    with torch.no_grad():
        after, before = token_entropy(logits - 0.1 * logits.grad), token_entropy(logits)
    assert float(after) > float(before)


def test_per_token_advantages_reach_each_token_and_the_sequence_ratio_refuses_them():
    logp = leaf([[-1.0, -2.0], [-0.5, -0.7]])
    adv = torch.tensor([[1.0, -2.0], [0.5, 0.0]])
    obj, _ = policy_objective(logp, logp.detach(), adv, torch.ones(2, 2))
    obj.sum().backward()
    assert torch.equal(logp.grad, adv)  # d(ratio * A_t) / d logp_t = A_t at ratio 1
    with pytest.raises(ValueError, match="one advantage per response"):
        policy_objective(logp, logp.detach(), adv, torch.ones(2, 2), "sequence")


def test_unknown_advantage_kind_raises_naming_allowed_kinds():
    with pytest.raises(ValueError, match="group, mean_only, rloo, batch_std"):
        group_advantages(binary_group(2), "whiten")


def test_mixed_groups_flags_groups_with_any_reward_spread():
    rewards = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [0.5, 0.5, 0.6]])
    assert mixed_groups(rewards).tolist() == [False, False, True, True]


# ---------------------------------------------------------------- KL estimators


def sampled_log_probs(n: int = 4000):
    """Tokens drawn from pi (fixed seed); their log-probs under pi and pi_ref, and the exact KL."""
    pi = torch.tensor([0.5, 0.2, 0.2, 0.1])
    ref = torch.tensor([0.3, 0.3, 0.2, 0.2])
    tokens = torch.multinomial(pi, n, replacement=True, generator=torch.Generator().manual_seed(0))
    exact = float((pi * (pi.log() - ref.log())).sum())
    return pi.log()[tokens][None], ref.log()[tokens][None], exact  # (1, n) x2


def test_k3_is_non_negative_and_unbiased():
    logp, logp_ref, exact = sampled_log_probs()
    k3 = kl_estimate(logp, logp_ref, "k3")
    assert k3.shape == logp.shape and bool((k3 >= 0).all())
    assert abs(float(k3.mean()) - exact) < 0.02


def test_k1_is_unbiased_and_k2_non_negative():
    logp, logp_ref, exact = sampled_log_probs()
    assert abs(float(kl_estimate(logp, logp_ref, "k1").mean()) - exact) < 0.05
    assert bool((kl_estimate(logp, logp_ref, "k2") >= 0).all())


@pytest.mark.parametrize("kind", ["k1", "k2", "k3"])
def test_kl_of_a_policy_with_itself_is_exactly_zero(kind):
    logp = torch.randn(3, 5, generator=torch.Generator().manual_seed(1)) - 2
    assert torch.equal(kl_estimate(logp, logp.clone(), kind), torch.zeros(3, 5))


def test_exact_kl_of_a_distribution_with_itself_is_zero_and_uniform_entropy_is_log_v():
    logits = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(2))
    kl, _ = exact_kl_and_entropy(logits, logits)
    assert torch.allclose(kl, torch.zeros(2, 3), atol=1e-6)
    _, entropy = exact_kl_and_entropy(torch.zeros(2, 3, 7), logits)
    assert torch.allclose(entropy, torch.full((2, 3), math.log(7)), atol=1e-6)


def test_exact_kl_and_entropy_match_hand_computation():
    p, q = [0.5, 0.3, 0.2], [0.2, 0.2, 0.6]
    kl, entropy = exact_kl_and_entropy(
        torch.tensor(p).log().view(1, 1, 3), torch.tensor(q).log().view(1, 1, 3)
    )
    assert float(kl) == pytest.approx(sum(a * math.log(a / b) for a, b in zip(p, q)), abs=1e-6)
    assert float(entropy) == pytest.approx(-sum(a * math.log(a) for a in p), abs=1e-6)


# ---------------------------------------------------------------- policy term and loss


def test_loss_is_scalar_and_gradient_raises_positive_and_lowers_negative_tokens():
    logp = leaf([[-1.0, -2.0, -0.5], [-1.5, -0.3, -0.7]])
    adv = torch.tensor([1.0, -1.0])
    loss, stats = grpo_loss(logp, logp.detach(), logp.detach() - 0.1, adv, torch.ones(2, 3))
    assert loss.dim() == 0
    loss.backward()
    assert bool((logp.grad[0] < 0).all()) and bool((logp.grad[1] > 0).all())  # descent raises row 0
    assert stats["kl_nats"] > 0


def test_first_inner_step_never_clips():
    logp = torch.randn(4, 6, generator=torch.Generator().manual_seed(3)) - 1
    mask = torch.ones(4, 6)
    mask[1, 3:] = 0
    for kind in ("token", "sequence", "cispo"):
        _, stats = policy_objective(logp, logp.clone(), torch.tensor([1.0, -1.0, 2.0, -0.5]), mask, kind)
        assert stats["clip_frac_low"] == 0.0 and stats["clip_frac_high"] == 0.0
        assert stats["ratio_mean"] == 1.0


def one_token_loss(ratio: float, adv: float, clip_eps_high: float):
    """Loss and d loss / d logp for one token whose probability moved by `ratio` since sampling."""
    logp = leaf([[math.log(ratio * 0.4)]])
    logp_old = torch.tensor([[math.log(0.4)]])
    loss, stats = grpo_loss(
        logp, logp_old, None, torch.tensor([adv]), torch.ones(1, 1), clip_eps_high=clip_eps_high, beta=0.0
    )
    loss.backward()
    return float(loss.detach()), float(logp.grad), stats


def test_clip_higher_changes_the_loss_only_between_the_two_upper_bounds():
    assert one_token_loss(1.25, 1.0, 0.2)[0] != pytest.approx(one_token_loss(1.25, 1.0, 0.28)[0])
    assert one_token_loss(1.1, 1.0, 0.2)[0] == pytest.approx(one_token_loss(1.1, 1.0, 0.28)[0])


def test_token_clipped_above_one_plus_eps_has_exactly_zero_gradient():
    """Chapter B: the probability of a positive-advantage token rose 0.40 -> 0.50 (ratio 1.25 > 1.2)."""
    _, grad, stats = one_token_loss(1.25, 1.0, 0.2)
    assert grad == 0.0 and stats["clip_frac_high"] == 1.0
    _, grad, stats = one_token_loss(1.25, 1.0, 0.28)  # clip-higher keeps it
    assert grad < 0 and stats["clip_frac_high"] == 0.0
    _, grad, stats = one_token_loss(1.25, -1.0, 0.2)  # negative advantage: the clip does not cut it
    assert grad > 0 and stats["clip_frac_high"] == 0.0


def test_clip_fraction_low_counts_only_negative_advantage_tokens():
    logp = torch.log(torch.tensor([[0.7, 0.7]]) * 0.5)  # ratio 0.7 < 0.8 on both tokens
    logp_old = torch.log(torch.tensor([[0.5, 0.5]]))
    _, stats = policy_objective(
        logp.expand(2, 2), logp_old.expand(2, 2), torch.tensor([-1.0, 1.0]), torch.ones(2, 2)
    )
    assert stats["clip_frac_low"] == 0.5 and stats["clip_frac_high"] == 0.0


def test_seq_mean_cancels_opposite_responses_of_different_length_and_token_mean_does_not():
    logp = leaf([[-1.0, -1.0, -1.0, -1.0], [-1.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    adv = torch.tensor([1.0, -1.0])
    seq, _ = grpo_loss(logp, logp.detach(), None, adv, mask, beta=0.0, aggregation="seq_mean")
    tok, _ = grpo_loss(logp, logp.detach(), None, adv, mask, beta=0.0, aggregation="token_mean")
    assert float(seq.detach()) == 0.0
    assert float(tok.detach()) == pytest.approx(-3 / 5)


def test_seq_mean_dilutes_each_token_of_a_long_wrong_answer_by_its_length():
    logp = leaf([[-1.0] * 20, [-1.0] * 20])
    mask = torch.zeros(2, 20)
    mask[0, 0], mask[1] = 1.0, 1.0
    loss, _ = grpo_loss(logp, logp.detach(), None, torch.tensor([-1.0, -1.0]), mask, beta=0.0)
    loss.backward()
    assert float(logp.grad[0, 0]) == pytest.approx(0.5, rel=1e-6)
    assert torch.allclose(logp.grad[1] * 20, logp.grad[0, :1].expand(20), rtol=1e-6, atol=0)
    assert bool((logp.grad[0, 1:] == 0).all())  # padding gets no gradient


def test_token_mean_and_seq_sum_const_weigh_every_token_equally():
    logp = leaf([[-1.0] * 20, [-1.0] * 20])
    mask = torch.zeros(2, 20)
    mask[0, 0], mask[1] = 1.0, 1.0
    for mode, per_token in (("token_mean", 1 / 21), ("seq_sum_const", 1 / 40)):
        logp.grad = None
        loss, _ = grpo_loss(
            logp,
            logp.detach(),
            None,
            torch.tensor([-1.0, -1.0]),
            mask,
            beta=0.0,
            aggregation=mode,
            max_len=20,
        )
        loss.backward()
        assert torch.allclose(logp.grad[mask > 0], torch.full((21,), per_token))


def test_aggregate_guards_empty_masks_and_needs_max_len_for_seq_sum_const():
    x, empty = torch.ones(2, 3), torch.zeros(2, 3)
    for mode in ("seq_mean", "token_mean"):
        assert float(aggregate(x, empty, mode)) == 0.0
    assert float(aggregate(x, torch.ones(2, 3), "seq_sum_const", max_len=6)) == 0.5
    with pytest.raises(ValueError, match="max_len"):
        aggregate(x, empty, "seq_sum_const")
    with pytest.raises(ValueError, match="seq_mean, token_mean, seq_sum_const"):
        aggregate(x, empty, "sum")


def test_gspo_sequence_ratio_is_the_geometric_mean_of_token_ratios():
    token_ratios = torch.tensor([1.5, 0.8, 1.1])
    logp_old = torch.tensor([[-1.0, -2.0, -0.5, -3.0]])
    logp = logp_old.clone()
    logp[0, :3] += token_ratios.log()
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # last column is padding and must not count
    obj, stats = policy_objective(logp, logp_old, torch.tensor([1.0]), mask, "sequence", 0.5, 0.5)
    geo = float(token_ratios.prod() ** (1 / 3))
    assert stats["ratio_mean"] == pytest.approx(geo, rel=1e-6)
    assert torch.allclose(obj[0, :3], torch.full((3,), geo)) and float(obj[0, 3]) == 0.0
    assert float(aggregate(obj, mask, "seq_mean")) == pytest.approx(geo, rel=1e-6)


def test_gspo_clips_whole_sequences():
    logp_old = torch.zeros(2, 2) - 1
    logp = logp_old + math.log(1.5)  # every token ratio 1.5: sequence ratio 1.5 > 1.2
    obj, stats = policy_objective(logp, logp_old, torch.tensor([1.0, -1.0]), torch.ones(2, 2), "sequence")
    assert stats["clip_frac_high"] == 0.5 and stats["clip_frac_low"] == 0.0
    assert torch.allclose(obj, torch.tensor([[1.2, 1.2], [-1.5, -1.5]]))


def test_cispo_weight_carries_no_gradient():
    logp = leaf([[-1.0, -2.0, -0.5, -1.5]])
    adv = torch.tensor([-2.0])
    fracs = []
    for ratios in ([0.5, 1.0, 1.1, 2.0], [0.65, 1.3, 1.43, 2.6]):  # same logp, a different logp_old
        ratios = torch.tensor([ratios])
        logp.grad = None
        obj, stats = policy_objective(logp, logp.detach() - ratios.log(), adv, torch.ones(1, 4), "cispo")
        obj.sum().backward()
        weight = ratios.clamp(0.8, 1.2)
        assert torch.allclose(logp.grad, weight * adv, rtol=1e-6, atol=0)  # d obj / d logp = clip(r) * A
        assert torch.allclose(obj, (weight * adv * logp).detach())  # logp_old moves the weight only
        fracs.append((stats["clip_frac_low"], stats["clip_frac_high"]))
    assert fracs == [(0.25, 0.25), (0.25, 0.75)]  # weight clamped, whatever the advantage's sign


def test_cispo_keeps_gradient_where_ppo_clip_removes_it():
    logp = leaf([[math.log(0.5)]])
    logp_old = torch.tensor([[math.log(0.4)]])
    for kind, alive in (("token", False), ("cispo", True)):
        logp.grad = None
        loss, _ = grpo_loss(logp, logp_old, None, torch.tensor([1.0]), torch.ones(1, 1), ratio=kind, beta=0.0)
        loss.backward()
        assert (float(logp.grad) != 0.0) == alive


def test_beta_zero_needs_no_reference_and_reports_no_kl():
    logp = leaf([[-1.0, -2.0]])
    loss, stats = grpo_loss(logp, logp.detach(), None, torch.tensor([1.0]), torch.ones(1, 2), beta=0.0)
    loss.backward()
    assert "kl_nats" not in stats and torch.allclose(logp.grad, torch.full((1, 2), -0.5))
    with pytest.raises(ValueError, match="logp_ref"):
        grpo_loss(logp, logp.detach(), None, torch.tensor([1.0]), torch.ones(1, 2), beta=0.04)


def test_kl_term_adds_beta_times_masked_mean_estimate():
    logp = leaf([[-1.0, -2.0, 0.0]])
    logp_ref = torch.tensor([[-1.5, -1.0, 200.0]])  # padding column would overflow exp if not masked
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, stats = grpo_loss(logp, logp.detach(), logp_ref, torch.tensor([0.0]), mask, beta=0.5)
    want = float(kl_estimate(logp.detach()[:, :2], logp_ref[:, :2]).mean())
    assert stats["kl_nats"] == pytest.approx(want) and float(loss.detach()) == pytest.approx(0.5 * want)
    loss.backward()
    assert bool(torch.isfinite(logp.grad).all()) and float(logp.grad[0, 2]) == 0.0


def test_garbage_log_probs_on_padding_cannot_make_nan():
    logp = leaf([[-1.0, 200.0]])
    logp_old = torch.tensor([[-1.0, -200.0]])  # exp(400) = inf on the padding column
    for kind in ("token", "sequence", "cispo"):
        logp.grad = None
        loss, _ = grpo_loss(
            logp, logp_old, None, torch.tensor([1.0]), torch.tensor([[1.0, 0.0]]), ratio=kind, beta=0.0
        )
        loss.backward()
        assert math.isfinite(float(loss.detach())) and bool(torch.isfinite(logp.grad).all())


def test_unknown_ratio_and_kl_kinds_raise():
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="token, sequence, cispo"):
        policy_objective(x, x, torch.zeros(1), torch.ones(1, 2), "pointwise")
    with pytest.raises(ValueError, match="k1, k2, k3"):
        kl_estimate(x, x, "k4")


# ---------------------------------------------------------------- DAPO reward shaping


def test_overlong_penalty_ramps_over_the_buffer():
    lengths = torch.tensor([0, 12, 13, 14, 15, 16, 17])
    out = overlong_penalty(lengths, max_len=16, buffer=4, penalty=1.0)
    assert torch.allclose(out, torch.tensor([0.0, 0.0, -0.25, -0.5, -0.75, -1.0, -1.0]))
    assert torch.allclose(overlong_penalty(lengths, 16, 4, penalty=0.5), out * 0.5)


def test_overlong_penalty_with_zero_buffer_is_off():
    out = overlong_penalty(torch.tensor([1, 16, 40]), max_len=16, buffer=0)
    assert out.dtype == torch.float32 and torch.equal(out, torch.zeros(3))


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_at_one_update_per_batch_the_sequence_ratio_has_the_token_ratios_gradient(aggregation):
    """With mu = 1 the policy updated is the one that sampled (logp == logp_old), so every ratio is
    1: GSPO's sequence ratio and the token ratio then give one gradient, whatever the aggregation
    (each weighs the tokens of one response alike) and with the KL term on. The report's note that
    `grpo` and `gspo` train alike rests on this."""
    torch.manual_seed(0)
    B, T = 6, 5
    mask = torch.tensor([[1.0] * n + [0.0] * (T - n) for n in (1, 2, 3, 5, 4, 2)])  # (B, T) ragged
    logits = torch.randn(B, T)
    ref = torch.randn(B, T).clamp(max=-0.1)
    adv = torch.randn(B)
    grads = {}
    for ratio in ("token", "sequence"):
        logp = torch.nn.functional.logsigmoid(logits.clone().requires_grad_(True))  # (B, T) log-probs
        loss, _ = grpo_loss(
            logp, logp.detach(), ref, adv, mask, ratio=ratio, aggregation=aggregation, max_len=T
        )
        (grads[ratio],) = torch.autograd.grad(loss, logp)
    assert torch.allclose(grads["token"], grads["sequence"], atol=1e-7)
    assert grads["token"].abs().sum() > 0  # a gradient there is


def test_the_ratio_only_matters_with_more_than_one_update_per_batch():
    """The converse: once the policy has moved (logp != logp_old, as in a second epoch), the two
    ratios give different gradients."""
    torch.manual_seed(1)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    old = torch.nn.functional.logsigmoid(torch.randn(2, 3))
    grads = {}
    for ratio in ("token", "sequence"):
        logp = (old + 0.1 * torch.randn(2, 3, generator=torch.Generator().manual_seed(2))).requires_grad_(
            True
        )
        loss, _ = grpo_loss(logp, old, None, torch.tensor([1.0, -1.0]), mask, ratio=ratio, beta=0.0)
        (grads[ratio],) = torch.autograd.grad(loss, logp)
    assert not torch.allclose(grads["token"], grads["sequence"])
