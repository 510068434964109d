"""A controlled end (rlvr.controlled, rlvr.grpo_loop.train_grpo's `stop`): GRPO stops at the first
check where its validation value reaches the target, keeps the nearer of that check and the one
before, records a path beside the rule, and never changes the trajectory it stops."""

import copy

import numpy as np
import pytest
import torch
from conftest import make
from test_grpo_loop import DATA, PROBLEMS, TOK, sft_policy  # noqa: F401 (a fixture)

from rlvr.configs import GRPOConfig
from rlvr.controlled import StopAtTarget, accuracy_stop
from rlvr.grpo_loop import train_grpo
from rlvr.passk import exact_pass_at_k, grid_crossing, pass_at_k
from rlvr.rollout import answer_probability

TRAIN_COLS = ("reward_mean", "loss", "kl_k3_nats", "entropy_nats")


class Scripted:
    """A measure that returns the given values in turn (one per check), ignoring the model."""

    def __init__(self, values):
        self.values, self.calls = list(values), 0

    def __call__(self, model) -> float:
        self.calls += 1
        return self.values.pop(0)


def run(policy, stop=None, **overrides):
    steps = overrides.get("steps", 6)  # held-out evaluations at the start and the last step only
    cfg = make(
        GRPOConfig, **{"steps": 6, "prompts_per_step": 8, "group_size": 4, "eval_every": steps, **overrides}
    )
    return train_grpo(policy, cfg, DATA, torch.Generator().manual_seed(0), shared_prefix=True, stop=stop)


def test_the_run_stops_at_the_first_check_that_reaches_its_target_and_never_changes_what_came_before(
    sft_policy,  # noqa: F811
):
    free = run(copy.deepcopy(sft_policy))
    stop = StopAtTarget(0.5, 1, 0.0, Scripted([0.1, 0.2, 0.3, 0.6, 0.9, 0.95, 0.99]))
    stopped = run(copy.deepcopy(sft_policy), stop)
    assert stop.reached and stop.chosen["step"] == 3  # 0.6 at step 3 is nearer 0.5 than 0.3 at step 2
    assert [r["step"] for r in stopped] == [0, 1, 2, 3]
    for a, b in zip(free, stopped):  # the checks drew nothing from the training generator
        assert all(a.get(k) == b.get(k) for k in TRAIN_COLS)
    assert "eval_acc" in stopped[-1]  # the kept policy is evaluated


def test_the_nearer_check_before_is_kept_with_its_weights(sft_policy):  # noqa: F811
    stop = StopAtTarget(0.5, 1, 0.0, Scripted([0.1, 0.48, 0.9]))
    policy = copy.deepcopy(sft_policy)
    curve = run(policy, stop)
    assert stop.chosen == {"step": 1, "value": 0.48} and [r["step"] for r in curve] == [0, 1]
    one_step = copy.deepcopy(sft_policy)
    run(one_step, steps=1)
    assert all(
        torch.equal(a, b) for a, b in zip(policy.state_dict().values(), one_step.state_dict().values())
    )


def test_a_run_the_cap_stops_first_is_not_reached_and_keeps_every_step(sft_policy):  # noqa: F811
    stop = StopAtTarget(0.99, 2, 0.0, Scripted([0.1] * 10))
    curve = run(copy.deepcopy(sft_policy), stop)
    assert not stop.reached and [r["step"] for r in curve] == list(range(7))
    assert [c["step"] for c in stop.checks] == [0, 2, 4, 6]  # every 2 steps, and the cap's own
    assert stop.chosen["step"] == 6


def test_a_start_already_past_an_end_reached_from_below_takes_no_step(sft_policy):  # noqa: F811
    stop = StopAtTarget(0.1, 1, 0.0, Scripted([0.4]), from_below=True)
    curve = run(copy.deepcopy(sft_policy), stop)
    assert stop.reached and [r["step"] for r in curve] == [0]
    above = StopAtTarget(0.1, 1, 0.0, Scripted([0.4, 0.3, 0.2, 0.12, 0.09, 0.1, 0.1]))  # a start's side
    run(copy.deepcopy(sft_policy), above)
    assert above.from_below is False and above.reached and above.chosen["step"] == 4


def test_checks_come_every_step_near_the_target_and_every_few_far_from_it(sft_policy):  # noqa: F811
    stop = StopAtTarget(0.5, 3, 0.1, Scripted([0.1, 0.42, 0.45, 0.47, 0.49, 0.49, 0.49]))
    run(copy.deepcopy(sft_policy), stop)
    assert [c["step"] for c in stop.checks] == [0, 3, 4, 5, 6]


def test_the_rule_is_exact_validation_pass_at_1_and_the_path_is_exact_pass_at_k_beside_it(sft_policy):  # noqa: F811
    val, test = PROBLEMS[:30], PROBLEMS[30:]
    stop = accuracy_stop(0.99, 1, 0.0, val, TOK, {"val": val, "test": test}, 8)
    stop(sft_policy, 0)
    (check,) = stop.checks
    p_val = answer_probability(sft_policy, val, TOK)
    p_test = answer_probability(sft_policy, test, TOK).double().numpy()
    assert check["value"] == float(p_val.mean())  # the rule's value, as torch means it
    assert check["val_pass_at_1"] == pytest.approx(check["value"], abs=1e-6)  # the path's, in float64
    assert check["test_pass_at_8"] == pytest.approx(float(np.mean(1 - (1 - p_test) ** 8)))
    assert set(check) == {
        "step",
        "value",
        "val_pass_at_1",
        "val_pass_at_8",
        "test_pass_at_1",
        "test_pass_at_8",
    }


def test_exact_pass_at_k_is_what_the_unbiased_estimator_averages_to():
    p = np.array([0.0, 0.1, 0.5, 0.97])
    n, k = 16, 4
    # E[pass@k estimate] over c ~ Binomial(n, p), exactly, problem by problem
    from scipy.stats import binom

    expected = np.mean(
        [sum(binom.pmf(c, n, pi) * pass_at_k(np.array([c]), n, k)[0] for c in range(n + 1)) for pi in p]
    )
    assert exact_pass_at_k(p, k) == pytest.approx(expected, abs=1e-12)
    assert exact_pass_at_k(p, 1) == pytest.approx(p.mean())
    with pytest.raises(ValueError, match="solve probabilities in"):
        exact_pass_at_k([0.5, 1.2], 4)
    with pytest.raises(ValueError, match="k >= 1"):
        exact_pass_at_k([0.5], 0)


def test_a_runs_first_crossing_on_the_chapters_grid():
    ks = [1, 2, 4, 8, 16, 32, 64]
    diff = np.zeros(64)
    diff[:12] = 0.02  # RL ahead to k = 12, behind from 13: first grid k below is 16
    diff[12:] = -0.01
    assert grid_crossing(ks, diff) == 16
    assert grid_crossing(ks, np.full(64, 0.01)) is None  # never falls below on the grid
    assert grid_crossing(ks, np.full(64, -0.01)) is None  # not ahead at k = 1
