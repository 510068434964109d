"""Behaviour of the GRPO loop on a real (tiny, quickly trained) policy."""

import copy
import dataclasses
import statistics

import pytest
import torch
from conftest import make

from rlvr.configs import GRPOConfig, ModelConfig, SFTConfig
from rlvr.grpo_loop import (
    GRPOData,
    Hooks,
    dynamic_groups,
    gather_logp,
    grpo_update,
    response_logits,
    rollout_groups,
    train_grpo,
)
from rlvr.grpo_stats import Groups
from rlvr.model import TinyLM
from rlvr.noise import noisy_rows
from rlvr.rollout import Sampling, accuracy
from rlvr.sft import encode_sft, train_sft
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer

TOK = Tokenizer()
MAX_NEW = 2  # one digit + <eos>
PROBLEMS = split("single_digit", 0, seed=0)[0]
DATA = GRPOData(PROBLEMS, PROBLEMS, TOK, MAX_NEW)


@pytest.fixture(scope="module")
def sft_policy():
    """A single_digit policy that is right part of the time, built in seconds and deterministically:
    clean SFT to convergence, then logits flattened (ln_f scaled, like a temperature above 1) until
    sampled accuracy is at most 55%. Greedy stays right, so GRPO has something to sharpen."""
    torch.manual_seed(0)
    model = TinyLM(make(ModelConfig), len(TOK))
    tokens, mask = encode_sft(noisy_rows(PROBLEMS, 0.0, repeats=8, seed=0), TOK)
    cfg = make(
        SFTConfig, noise={"kind": "uniform", "rate": 0.0}, repeats=8, epochs=25, batch_size=64, lr=0.003
    )
    gen = torch.Generator().manual_seed(0)
    train_sft(model, (tokens, mask), cfg, gen, progress=False, shared_prefix=True)
    with torch.no_grad():
        for _ in range(12):
            if accuracy(model, PROBLEMS, 32, Sampling(TOK, MAX_NEW), gen) <= 0.55:
                break
            model.ln_f.weight.mul_(0.8)
            model.ln_f.bias.mul_(0.8)
    return model


@pytest.fixture(scope="module")
def noisy_sft_policy():
    """Chapter A's starting point in miniature: SFT on labels corrupted at 40% (~20 s); it samples the
    right answer about half the time."""
    torch.manual_seed(0)
    model = TinyLM(make(ModelConfig), len(TOK))
    tokens, mask = encode_sft(noisy_rows(PROBLEMS, 0.4, repeats=16, seed=0), TOK)
    cfg = make(
        SFTConfig, noise={"kind": "uniform", "rate": 0.4}, repeats=16, epochs=40, batch_size=32, lr=0.003
    )
    train_sft(
        model, (tokens, mask), cfg, torch.Generator().manual_seed(0), progress=False, shared_prefix=True
    )
    return model


def run(policy, **overrides):
    cfg = make(
        GRPOConfig,
        **{
            "steps": 25,
            "prompts_per_step": 16,
            "group_size": 8,
            "lr": 0.001,
            "eval_every": min(25, overrides.get("steps", 25)),
            **overrides,
        },
    )
    curve = train_grpo(policy, cfg, DATA, torch.Generator().manual_seed(0), shared_prefix=True)
    return cfg, curve


def test_25_steps_raise_accuracy_by_5_points_with_bounded_kl(noisy_sft_policy):
    policy = copy.deepcopy(noisy_sft_policy)
    _, curve = run(policy)
    start, end = curve[0]["eval_acc"], curve[-1]["eval_acc"]
    assert 0.2 < start < 0.8, "fixture should start partly right"
    assert end - start > 0.05
    # bounded drift: typical steps and the final policy stay under 0.5 nats per response (single
    # batches can spike when a rare first token opens a context where policy and reference disagree)
    assert statistics.median(r["kl_k3_nats"] for r in curve[1:]) < 0.5
    assert curve[-1]["eval_kl_exact_nats"] < 0.5


def test_reference_weights_never_change(sft_policy):
    policy, ref = copy.deepcopy(sft_policy), copy.deepcopy(sft_policy)
    cfg = make(GRPOConfig, steps=5, prompts_per_step=16, group_size=8, eval_every=5)
    train_grpo(policy, cfg, DATA, torch.Generator().manual_seed(0), ref=ref)
    before = sft_policy.state_dict()
    assert all(torch.equal(before[k], v) for k, v in ref.state_dict().items())
    assert any(not torch.equal(before[k], v) for k, v in policy.state_dict().items())
    assert not any(p.requires_grad for p in ref.parameters())


def test_evaluation_cadence_does_not_change_the_training_trajectory(sft_policy):
    """Evaluation samples from its own generator: evaluating every step or only at the end leaves
    every training step (its rollouts, its update) exactly as it was."""
    train_cols = ("reward_mean", "loss", "kl_k3_nats", "entropy_nats")
    curves = [run(copy.deepcopy(sft_policy), steps=4, eval_every=every)[1] for every in (1, 4)]
    assert sum("eval_acc" in r for r in curves[0]) == 5 and sum("eval_acc" in r for r in curves[1]) == 2
    for a, b in zip(*curves):
        assert all(a.get(k) == b.get(k) for k in train_cols)


def test_loss_uses_the_log_probs_of_the_tempered_policy_that_sampled(sft_policy):
    """At temperature T the update's log-probs (hence entropy, ratio, KL) are those of softmax(z / T)."""
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    batch = rollout_groups(
        sft_policy, PROBLEMS[:8], make(GRPOConfig, group_size=8, temperature=2.0), MAX_NEW, TOK, gen
    )
    with torch.no_grad():
        plain = response_logits(sft_policy, batch.tokens, batch.prompt_len, 8)  # (B, T, V)
        assert torch.equal(response_logits(sft_policy, batch.tokens, batch.prompt_len, 8, 2.0), plain / 2.0)
    live = batch.mask > 0  # (B, T)
    entropy = {}
    for t in (1.0, 2.0):
        p = F.softmax(plain / t, dim=-1)  # (B, T, V)
        entropy[t] = float((-(p * p.clamp_min(1e-30).log()).sum(-1))[live].mean())
        policy = copy.deepcopy(sft_policy)
        cfg = make(GRPOConfig, group_size=8, temperature=t, beta=0.0)
        stats = grpo_update(policy, None, torch.optim.SGD(policy.parameters(), lr=0.0), batch, cfg, MAX_NEW)
        assert abs(stats["entropy_nats"] - entropy[t]) < 1e-4
    assert entropy[2.0] > entropy[1.0] + 0.1


def test_single_inner_epoch_never_clips_and_several_do(sft_policy):
    _, curve = run(copy.deepcopy(sft_policy), steps=4)
    assert all(r["clip_frac_low"] == 0.0 and r["clip_frac_high"] == 0.0 for r in curve[1:])
    assert all(r["ratio_mean"] == 1.0 for r in curve[1:])
    _, curve = run(copy.deepcopy(sft_policy), steps=4, inner_epochs=4, lr=0.003)
    assert max(r["clip_frac_low"] + r["clip_frac_high"] for r in curve[1:]) > 0.0


def test_dynamic_sampling_returns_only_mixed_groups_and_counts_every_sample(sft_policy):
    cfg = make(GRPOConfig, prompts_per_step=8, group_size=8, max_gen_rounds=5)
    gen = torch.Generator().manual_seed(0)
    draws = []

    def draw() -> Groups:
        idx = torch.randint(len(PROBLEMS), (8,), generator=gen)
        b = rollout_groups(sft_policy, [PROBLEMS[i] for i in idx.tolist()], cfg, MAX_NEW, TOK, gen)
        draws.append(b)
        return b

    batch = dynamic_groups(draw, 8, 5)
    r = batch.rewards
    assert r.shape == (8, 8) and bool(((r != r[:, :1]).any(dim=1)).all())
    assert batch.samples == sum(d.samples for d in draws) and batch.samples >= 64
    assert batch.tokens.shape[0] == 64


def test_dynamic_sampling_with_no_mixed_group_gives_an_empty_batch_that_counts_its_samples(sft_policy):
    cfg = make(GRPOConfig, prompts_per_step=4, group_size=4, max_gen_rounds=3)
    gen = torch.Generator().manual_seed(0)

    def draw() -> Groups:  # every group solved by all its samples: none carries gradient
        b = rollout_groups(sft_policy, PROBLEMS[:4], cfg, MAX_NEW, TOK, gen)
        return dataclasses.replace(b, rewards=torch.ones_like(b.rewards))

    batch = dynamic_groups(draw, 4, 3)
    assert batch.rewards.shape == (0, 4) and batch.tokens.shape[0] == 0 and batch.answers == []
    assert batch.samples == 3 * 16 and batch.generated_tokens > 0  # all three rounds were sampled


def test_beta_zero_skips_the_reference_forward(sft_policy):
    def boom(*_args, **_kw):
        raise AssertionError("reference model was run")

    policy = copy.deepcopy(sft_policy)
    ref = copy.deepcopy(sft_policy)
    ref.embed = boom
    cfg = make(GRPOConfig, beta=0.0, group_size=8, prompts_per_step=4)
    gen = torch.Generator().manual_seed(0)
    batch = rollout_groups(policy, PROBLEMS[:4], cfg, MAX_NEW, TOK, gen)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    assert not cfg.penalises_kl and make(GRPOConfig, beta=0.04).penalises_kl
    for reference in (None, ref):  # the loop always hands the reference over: beta decides, once
        stats = grpo_update(policy, reference, opt, batch, cfg, MAX_NEW)
        assert "kl_k3_nats" not in stats
    with pytest.raises(AssertionError, match="reference model was run"):
        grpo_update(policy, ref, opt, batch, make(GRPOConfig, beta=0.04), MAX_NEW)


def test_substring_reward_teaches_the_policy_to_list_digits(sft_policy):
    """Chapter A's hack in miniature: with room for several digits and a substring reward, the
    number of digits per response rises and the reward outruns exact accuracy."""
    from rlvr.reward_hacking import hack_metrics
    from rlvr.verifiers import substring_reward

    policy = copy.deepcopy(sft_policy)
    cfg = make(GRPOConfig, steps=30, prompts_per_step=55, group_size=8, lr=0.003, eval_every=30)
    samples = {}
    hooks = Hooks(
        reward=lambda r, a, n: substring_reward(r, a, n, TOK),
        batch_metrics=hack_metrics(TOK, samples, {1, 30}, 4),
    )
    curve = train_grpo(
        policy, cfg, GRPOData(PROBLEMS, PROBLEMS, TOK, 6), torch.Generator().manual_seed(0), hooks
    )
    start, end = curve[1], curve[-1]
    assert end["digits_per_response"] > start["digits_per_response"] + 0.3
    assert end["reward_mean"] - end["accuracy"] > start["reward_mean"] - start["accuracy"]
    assert set(samples) == {1, 30} and len(samples[30]) == 4 and "response" in samples[30][0]


def test_the_shared_prefix_forward_equals_the_reference_one(sft_policy):
    """The fast path the pipeline takes (each prompt and the system part computed once) gives the
    reference forward's logits and the same update, to float rounding."""
    gen = torch.Generator().manual_seed(0)
    batch = rollout_groups(sft_policy, PROBLEMS[:8], make(GRPOConfig, group_size=8), MAX_NEW, TOK, gen)
    with torch.no_grad():
        ref = response_logits(sft_policy, batch.tokens, batch.prompt_len, 8, 1.5)  # (B, T, V)
        fast = response_logits(sft_policy, batch.tokens, batch.prompt_len, 8, 1.5, shared_prefix=True)
    assert ref.shape == fast.shape and torch.allclose(ref, fast, atol=1e-5)
    cfg = make(GRPOConfig, group_size=8, beta=0.04)
    stats = []
    for shared in (False, True):
        policy = copy.deepcopy(sft_policy)
        stats.append(
            grpo_update(
                policy, sft_policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, cfg, MAX_NEW, shared
            )
        )
    assert stats[0].keys() == stats[1].keys()
    assert all(abs(stats[0][k] - stats[1][k]) < 1e-5 for k in stats[0])


def brute_advantages(
    rewards: list[float], lengths: list[int], k3: list[list[float]], cfg
) -> list[list[float]]:
    """Each token's advantage by hand, for the knobs beyond the chapters: the KL in the reward (a
    response's total R - beta * sum_t k3_t, standardised in its group), REINFORCE++ (rewards-to-go
    whitened over every token of the batch) and the pass@k advantage (the best of a group only)."""
    G, eps = cfg.group_size, 1e-6
    pen = [cfg.beta * sum(k[:n]) if cfg.kl_in_reward else 0.0 for k, n in zip(k3, lengths)]
    if cfg.advantage == "reinforce_pp":
        togo = [
            [(cfg.beta * -sum(k[t:n]) if cfg.kl_in_reward else 0.0) + r for t in range(n)]
            for r, k, n in zip(rewards, k3, lengths)
        ]
        flat = [g for row in togo for g in row]
        mu = sum(flat) / len(flat)
        sd = statistics.pstdev(flat)
        return [[(g - mu) / (sd + eps) for g in row] for row in togo]
    out = []
    for start in range(0, len(rewards), G):
        total = [r - p for r, p in zip(rewards[start : start + G], pen[start : start + G])]
        if cfg.advantage == "passk":
            top = sorted(total, reverse=True)
            adv = [top[0] - top[1] if i == total.index(top[0]) else 0.0 for i in range(G)]
        else:  # group
            mu, sd = sum(total) / G, statistics.pstdev(total)
            adv = [0.0 if max(total) == min(total) else (x - mu) / (sd + eps) for x in total]
        out += [[a] * n for a, n in zip(adv, lengths[start : start + G])]
    return out


@pytest.mark.parametrize(
    "knobs",
    [
        {"kl_in_reward": True},
        {"entropy_coeff": 0.05},
        {"advantage": "reinforce_pp", "kl_in_reward": True},
        {"advantage": "reinforce_pp"},
        {"advantage": "passk"},
    ],
)
def test_an_update_with_a_knob_beyond_the_chapters_is_a_step_on_the_loss_written_by_hand(sft_policy, knobs):
    """grpo_update against the loss assembled token by token (seq_mean, mu = 1 so every ratio is 1
    with the gradient of logp): -A_it * ratio_it, + beta * k3_it unless the KL is in the reward,
    - entropy_coeff * H_it; the same SGD step on both gives the same weights."""
    cfg = make(GRPOConfig, group_size=4, beta=0.1, **knobs)
    batch = rollout_groups(sft_policy, PROBLEMS[:6], cfg, MAX_NEW, TOK, torch.Generator().manual_seed(1))
    ref = copy.deepcopy(sft_policy).requires_grad_(False)
    with torch.no_grad():
        for w in ref.parameters():  # a reference the policy has drifted from: KL > 0
            w.add_(0.05 * torch.randn(w.shape, generator=torch.Generator().manual_seed(w.numel())))
    fast = copy.deepcopy(sft_policy)
    grpo_update(fast, ref, torch.optim.SGD(fast.parameters(), lr=0.5), batch, cfg, MAX_NEW)

    slow = copy.deepcopy(sft_policy)
    targets = batch.tokens[:, batch.prompt_len :]
    logits = response_logits(slow, batch.tokens, batch.prompt_len, 4)  # (B, T, V)
    logp = gather_logp(logits, targets)
    with torch.no_grad():
        logp_ref = gather_logp(response_logits(ref, batch.tokens, batch.prompt_len, 4), targets)
    lengths = [int(n) for n in batch.mask.sum(dim=1)]
    k3 = [
        [float(k3_token(logp[i, t].detach(), logp_ref[i, t])) for t in range(n)]
        for i, n in enumerate(lengths)
    ]
    adv = brute_advantages(batch.rewards.reshape(-1).tolist(), lengths, k3, cfg)
    probs = torch.softmax(logits, dim=-1)  # (B, T, V)
    per_response = []
    for i, n in enumerate(lengths):
        terms = []
        for t in range(n):
            ratio = torch.exp(logp[i, t] - logp[i, t].detach())
            term = -adv[i][t] * ratio
            if not cfg.kl_in_reward:
                term = term + cfg.beta * k3_token(logp[i, t], logp_ref[i, t])
            if cfg.entropy_coeff:
                term = term + cfg.entropy_coeff * (probs[i, t] * probs[i, t].log()).sum()
            terms.append(term)
        per_response.append(sum(terms) / n)
    loss = sum(per_response) / len(per_response)
    opt = torch.optim.SGD(slow.parameters(), lr=0.5)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(slow.parameters(), cfg.grad_clip)
    opt.step()
    moved = [not torch.equal(a, b) for a, b in zip(fast.parameters(), sft_policy.parameters())]
    assert any(moved)
    for a, b in zip(fast.parameters(), slow.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def k3_token(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    d = logp_ref - logp
    return torch.exp(d) - d - 1
