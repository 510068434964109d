"""The per-step statistics a GRPO step logs (the quantities TRL logs too), against brute force on
tiny batches."""

import copy
import dataclasses
import math
import statistics

import pytest
import torch
from conftest import make

from rlvr.configs import GRPOConfig, ModelConfig
from rlvr.grpo import policy_objective
from rlvr.grpo_loop import GRPOData, gather_logp, grpo_update, response_logits, rollout_groups, train_grpo
from rlvr.grpo_stats import Groups, reward_std, step_metrics, step_tokens, truncated_frac
from rlvr.model import TinyLM
from rlvr.optim import AdamW
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer

TOK = Tokenizer()
PROBLEMS = split("single_digit", 0, seed=0)[0]
E, P_ = TOK.eos_id, TOK.pad_id


def test_reward_std_is_the_mean_of_each_groups_sample_sd():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.5, 1.0, 0.25]])
    want = statistics.fmean(statistics.stdev(row) for row in rewards.tolist())
    assert reward_std(rewards) == pytest.approx(want, abs=1e-7)
    assert math.isnan(reward_std(rewards[:0])) and math.isnan(reward_std(rewards[:, :1]))


def _groups(responses: list[list[int]], prompt_len: int = 2, samples: int | None = None) -> Groups:
    """A hand-made batch: prompts of `prompt_len` ones, then each response padded with <pad>; its
    mask covers the tokens up to and including the first <eos>."""
    width = max(len(r) for r in responses)
    tokens = torch.tensor([[1] * prompt_len + r + [P_] * (width - len(r)) for r in responses])
    mask = torch.zeros(len(responses), width)
    for i, r in enumerate(responses):
        mask[i, : (r.index(E) + 1 if E in r else len(r))] = 1.0
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0]])[: len(responses) // 2]
    n = len(responses) if samples is None else samples
    return Groups(
        tokens=tokens,
        mask=mask,
        prompt_len=prompt_len,
        rewards=rewards,
        correct=rewards,
        generated_tokens=int(mask.sum()),
        samples=n,
        answers=["1"] * (len(responses) // 2),
    )


def test_truncated_responses_are_those_without_eos_under_the_mask():
    d1, d2 = TOK.ids["3"], TOK.ids["4"]
    batch = _groups([[d1, E], [d1, d2, d1], [d2, E, P_], [d1, d2, E]])  # the second hit the cap: cut
    brute = sum(E not in r for r in ([d1, E], [d1, d2, d1], [d2, E], [d1, d2, E])) / 4
    assert truncated_frac(batch, E) == brute == 0.25
    assert math.isnan(truncated_frac(_empty(), E))


def _empty() -> Groups:
    """A step whose groups were all dropped (dynamic sampling): 8 responses sampled, none kept."""
    z = torch.zeros(0, 3)
    return Groups(
        tokens=z.long(),
        mask=z,
        prompt_len=2,
        rewards=torch.zeros(0, 2),
        correct=torch.zeros(0, 2),
        generated_tokens=0,
        samples=8,
        answers=[],
    )


def test_num_tokens_counts_every_prompt_and_response_token_sampled_so_far():
    d1 = TOK.ids["3"]
    batch = _groups([[d1, E], [d1, d1, E], [E], [d1, d1, d1]], prompt_len=5, samples=4)
    assert step_tokens(batch) == (2 + 3 + 1 + 3) + 4 * 5
    stats = {"grad_tokens": 0, "loss": 0.5}
    row = step_metrics(batch, stats, E, tokens_before=100)
    assert stats == {"grad_tokens": 0, "loss": 0.5} and row["loss"] == 0.5 and "grad_tokens" not in row
    assert row["num_tokens"] == 100 + 29 and row["reward_std"] == pytest.approx(
        statistics.fmean([statistics.stdev([1.0, 0.0]), 0.0])
    )
    assert step_metrics(_empty(), {"grad_tokens": 0}, E, 29)["num_tokens"] == 29 + 8 * 2  # all were dropped


def test_the_clip_region_is_the_tokens_clipped_low_or_high():
    torch.manual_seed(0)
    logp_old = torch.randn(6, 5).clamp(max=-0.1)
    logp = logp_old + 0.6 * torch.randn(6, 5)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, 0.0])
    mask = torch.ones(6, 5)
    mask[2, 3:] = 0
    for kind in ("token", "cispo"):
        _, stats = policy_objective(logp, logp_old, adv, mask, kind, 0.2, 0.28)
        ratio, live, a = (logp - logp_old).exp(), mask > 0, adv[:, None].expand(6, 5)
        if kind == "token":
            low, high = (ratio < 0.8) & (a < 0), (ratio > 1.28) & (a > 0)
        else:
            low, high = ratio < 0.8, ratio > 1.28
        brute = float(((low | high) & live).sum() / live.sum())
        assert brute > 0 and stats["clip_frac_region"] == pytest.approx(brute, abs=1e-7)
        assert stats["clip_frac_region"] == pytest.approx(stats["clip_frac_low"] + stats["clip_frac_high"])


@pytest.fixture(scope="module")
def tiny_batch():
    torch.manual_seed(0)
    policy = TinyLM(make(ModelConfig, d_model=32, n_layer=1, n_head=2), len(TOK))
    cfg = make(GRPOConfig, group_size=4, temperature=1.0)
    batch = rollout_groups(policy, PROBLEMS[:6], cfg, 2, TOK, torch.Generator().manual_seed(1))
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0] * 4, [1.0, 1.0, 0.0, 1.0]] * 2)  # an untrained
    return policy, dataclasses.replace(batch, rewards=rewards)  # model is never right: rewards by hand


def _grad_norm(model) -> float:
    return math.sqrt(
        sum(float(p.grad.double().square().sum()) for p in model.parameters() if p.grad is not None)
    )


def test_grad_norm_is_the_norm_before_clipping(tiny_batch):
    policy, batch = tiny_batch
    norms = {}
    for clip in (1e9, 1e-3):
        model = copy.deepcopy(policy)
        cfg = make(GRPOConfig, group_size=4, beta=0.0, grad_clip=clip)
        stats = grpo_update(model, None, AdamW(model.parameters(), lr=0.0), batch, cfg, 2)
        norms[clip] = (stats["grad_norm"], _grad_norm(model))  # the reported one, and what is left
    reported, unclipped = norms[1e9]
    assert reported == pytest.approx(unclipped, rel=1e-5) and unclipped > 1e-3
    assert norms[1e-3][0] == pytest.approx(reported, rel=1e-6)  # reported before the clip ...
    assert norms[1e-3][1] == pytest.approx(1e-3, rel=1e-3)  # ... which left the gradient at 1e-3


def test_kl_per_token_is_trls_kl_the_masked_mean_of_k3(tiny_batch):
    policy, batch = tiny_batch
    ref = copy.deepcopy(policy)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(2)))
    targets = batch.tokens[:, batch.prompt_len :]
    with torch.no_grad():
        logp = gather_logp(response_logits(policy, batch.tokens, batch.prompt_len, 4), targets)
        logp_ref = gather_logp(response_logits(ref, batch.tokens, batch.prompt_len, 4), targets)
    live = batch.mask > 0
    l = (logp_ref - logp)[live]
    brute = float((l.exp() - l - 1).mean())
    model = copy.deepcopy(policy)
    cfg = make(GRPOConfig, group_size=4, beta=0.04)
    stats = grpo_update(model, ref, AdamW(model.parameters(), lr=1e-3), batch, cfg, 2)
    assert brute > 0 and stats["kl_k3_token_nats"] == pytest.approx(brute, rel=1e-4)
    per_response = torch.where(live, (logp_ref - logp).exp() - (logp_ref - logp) - 1, 0.0).sum(1).mean()
    assert stats["kl_k3_nats"] == pytest.approx(float(per_response), rel=1e-4)  # ours: per response


def test_every_step_logs_the_learning_rate_and_the_tokens_sampled_so_far(tiny_batch):
    policy, _ = tiny_batch
    cfg = make(GRPOConfig, group_size=4, prompts_per_step=4, steps=3, eval_every=3, lr=3e-3)
    data = GRPOData(PROBLEMS, PROBLEMS[:4], TOK, 2)
    rows = train_grpo(copy.deepcopy(policy), cfg, data, torch.Generator().manual_seed(3))[1:]
    assert [r["lr"] for r in rows] == [3e-3] * 3
    prompt_len = len(TOK.prompt_ids(PROBLEMS[0].prompt))
    per_step = [16 * prompt_len + r["response_len_mean"] * 16 for r in rows]  # 4 prompts x 4 samples
    assert [r["num_tokens"] for r in rows] == pytest.approx([sum(per_step[: i + 1]) for i in range(3)])
    assert all(r["grad_norm"] >= 0 and 0 <= r["truncated_frac"] <= 1 and r["reward_std"] >= 0 for r in rows)
