import json

import pytest
from conftest import TEST_SETTINGS, make, tiny_raw

from rlvr.configs import WorkedConfig
from rlvr.fields import ConfigError
from rlvr.io.params import build, parse_params
from rlvr.worked import (
    a1_group_of_eight,
    a2_three_groups,
    a3_advantage_table,
    a4_k3_sampled,
    a5_aggregation_sign,
    a6_length_dilution,
    a7_kl_estimator_bias,
    a8_memory,
    b1_two_of_four,
    b2_one_of_four,
    b3_equal_rewards,
    b4_std_weighting,
    b5_signal_probability,
    b6_token_weights,
    b7_clip_zero_gradient,
    b8_k3_derivative,
    b10_passk_toy,
    b14_demo,
)

FIGURES = [
    "worked-a2-group-advantages.png",
    "worked-a7-kl-estimators.png",
    "worked-a8-memory.png",
    "worked-b5-signal-probability.png",
    "worked-b10-passk-toy.png",
    "worked-b14-demo.png",
]


@pytest.fixture(scope="module")
def demo():
    return b14_demo(make(WorkedConfig))


# ---------------------------------------------------------------- chapter A


def test_a1_half_correct_group_gets_plus_and_minus_one():
    m = a1_group_of_eight()
    assert (m["group_mean"], m["group_std_population"]) == (0.5, 0.5)
    assert round(m["advantage_correct"], 2) == 1.0 and round(m["advantage_wrong"], 2) == -1.0
    assert sorted(round(a) for a in m["advantages"]) == [-1] * 4 + [1] * 4


def test_a2_three_groups_match_the_figure_labels():
    m = a2_three_groups()
    assert round(m["advantage_correct_3_of_8"], 2) == 1.29 and round(m["advantage_wrong_3_of_8"], 2) == -0.77
    assert round(m["advantage_correct_1_of_8"], 2) == 2.65 and round(m["advantage_wrong_1_of_8"], 2) == -0.38
    assert m["all_correct_group_all_zero"]


def test_a3_table_equals_closed_form_and_is_zero_at_both_ends():
    m = a3_advantage_table()
    assert m["max_abs_diff_closed_form_eps0_float64"] < 1e-12
    assert m["max_abs_diff_closed_form_default_eps"] < 1e-4  # eps = 1e-6 in the std divisor
    for i in (0, 8):
        assert m["advantage_correct"][i] == 0.0 and m["advantage_wrong"][i] == 0.0
    assert round(m["advantage_correct"][1], 2) == 2.65  # sqrt(7)


def test_a4_k3_is_non_negative_and_tracks_exact_kl_within_002():
    m = a4_k3_sampled(make(WorkedConfig))
    assert m["samples"] == 4000 and m["k3_all_non_negative"] and m["k3_min_nats"] >= 0
    assert m["kl_exact_nats"] > 0.1  # a KL large enough for the check to mean something
    assert m["abs_diff_nats"] < 0.02


def test_a5_sequence_mean_cancels_and_token_mean_lets_the_long_response_dominate():
    m = a5_aggregation_sign()
    assert m["loss_seq_mean"] == 0.0
    assert m["loss_token_mean"] < 0
    assert m["loss_token_mean"] == pytest.approx(-0.6, abs=1e-6)  # (-4 + 1) / 5


def test_a6_long_wrong_answer_gets_one_twentieth_of_the_per_token_gradient():
    m = a6_length_dilution()
    assert m["ratio_long_to_short"] == pytest.approx(1 / 20, abs=1e-6)
    assert m["grad_per_token_short"] == pytest.approx(0.5, abs=1e-6)  # 1 / (B |y|), B = 2
    assert m["grad_per_token_long"] == pytest.approx(0.025, abs=1e-6)


def test_a7_k2_bias_is_third_order_while_k1_and_k3_are_unbiased():
    m = a7_kl_estimator_bias(make(WorkedConfig))
    assert m["k2_min_over_tokens"] >= 0
    assert m["max_abs_bias_k1_nats"] < 1e-12 and m["max_abs_bias_k3_nats"] < 1e-12
    assert m["k2_bias_loglog_slope_small_delta"] == pytest.approx(3.0, abs=0.1)
    ratio = m["k2_bias_over_delta_cubed"][0]  # smallest delta
    assert ratio == pytest.approx(m["k2_bias_over_delta_cubed_limit"], rel=0.05)
    assert max(abs(r) for r in m["k2_bias_over_delta_cubed"]) < 1.0  # bounded across the grid
    assert m["var_k1"][0] > 1e3 * m["var_k3"][0]  # near pi_ref, k1 is by far the noisiest


def test_a8_memory_bill_for_7b():
    m = a8_memory()
    assert m["grpo_7b_gb"] == 126 and m["ppo_7b_gb"] == 252 and m["grpo_beta0_7b_gb"] == 112
    assert m["beta0_saving_7b_gb"] == 14 and m["ppo_over_grpo"] == 2
    assert m["responses_per_step"] == 2048
    assert m["model_sizes_billion"][0] == 0.5 and m["model_sizes_billion"][-1] == 70


# ---------------------------------------------------------------- chapter B


def test_b1_b2_b3_group_advantages():
    assert [round(a) for a in b1_two_of_four()["advantages"]] == [1, -1, -1, 1]
    m = b2_one_of_four()
    assert m["group_mean"] == 0.25 and round(m["group_std_population"], 3) == 0.433
    assert round(m["advantage_correct"], 2) == 1.73 and round(m["advantage_wrong"], 3) == -0.577
    assert abs(m["advantage_sum"]) < 1e-6
    assert b3_equal_rewards()["all_zero"]


def test_b4_std_division_flattens_prompt_weights():
    m = b4_std_weighting()
    assert round(m["mean_abs_adv_std_1_of_8"], 2) == 0.66 and round(m["mean_abs_adv_std_4_of_8"], 2) == 1.0
    assert round(m["mean_abs_adv_mean_only_1_of_8"], 2) == 0.22
    assert round(m["mean_abs_adv_mean_only_4_of_8"], 2) == 0.5
    assert m["sum_sq_adv_correct_counts"] == list(range(1, 8))
    assert m["max_abs_dev_sum_sq_from_G"] < 1e-3  # squares sum to G, up to the std's eps


def test_b5_bigger_groups_rescue_hard_prompts_and_monte_carlo_agrees():
    m = b5_signal_probability(make(WorkedConfig))
    assert round(100 * m["signal_p005_g8"]) == 34 and round(100 * m["signal_p005_g64"]) == 96
    assert abs(m["mc_signal_probability"] - m["mc_exact"]) < 4 * m["mc_std_error"]
    assert len(m["signal_probability"]) == 5 and all(len(row) == 9 for row in m["signal_probability"])
    for row in m["signal_probability"]:  # symmetric in p <-> 1 - p
        assert row == pytest.approx(row[::-1])


def test_b6_token_weights_by_autograd_match_a_over_g_length():
    m = b6_token_weights()
    assert m["lengths"] == [3, 3, 4, 3] and [round(a) for a in m["advantages"]] == [1, -1, -1, 1]
    assert m["max_abs_diff_formula"] < 1e-6 and m["max_abs_diff_reinforce_form"] < 1e-6
    assert m["token_weights"][0][0] == pytest.approx(1 / 12, abs=1e-6)
    assert m["weight_per_token_long_wrong"] == pytest.approx(-1 / 16, abs=1e-6)
    assert m["weight_per_token_short_wrong"] == pytest.approx(-1 / 12, abs=1e-6)
    first = m["first_token_weight_by_token"]
    assert round(first["8"], 2) == 0.10 and first["8"] == pytest.approx(1 / 12 + 1 / 12 - 1 / 16, abs=1e-6)
    assert round(first["7"], 3) == -0.083
    # the chapter's -0.063 is -1/16 = -0.0625 rounded half away from zero; the eps in the std divisor
    # leaves -0.0624999, which plain 3-decimal rounding would turn into -0.062, hence no round() here
    assert m["weight_per_token_short_wrong"] < m["weight_per_token_long_wrong"] < 0  # pushed down less


def test_b7_token_past_the_upper_clip_gets_exactly_zero_gradient():
    m = b7_clip_zero_gradient()
    assert m["ratio_clipped"] == pytest.approx(1.25) and m["grad_logp_clipped"] == 0.0
    assert m["clip_frac_high_clipped"] == 1.0
    assert m["ratio_unclipped"] == pytest.approx(1.1)
    assert m["grad_logp_unclipped"] == pytest.approx(m["grad_logp_unclipped_formula"], abs=1e-6)
    assert m["grad_logp_unclipped"] != 0.0


def test_b8_k3_value_and_autograd_derivative():
    m = b8_k3_derivative()
    assert round(m["u"], 3) == 0.833 and round(m["k3_nats"], 4) == 0.0157
    assert m["dk3_dlogpi_autograd"] == pytest.approx(m["dk3_dlogpi_formula"], abs=1e-6)
    assert round(m["dk3_dlogpi_autograd"], 3) == 0.167


def test_b10_rl_wins_pass_at_1_and_loses_pass_at_64():
    m = b10_passk_toy()
    assert m["pass_at_1_rl"] > m["pass_at_1_base"] and m["pass_at_64_rl"] < m["pass_at_64_base"]
    k = m["crossover_k"]
    assert k is not None and 1 < k <= 64
    i = m["ks"].index(k)
    assert (
        m["pass_at_k_base"][i] > m["pass_at_k_rl"][i]
        and m["pass_at_k_base"][i - 1] <= m["pass_at_k_rl"][i - 1]
    )


def test_b14_accuracy_rises_wasted_groups_rise_and_hard_prompts_wait(demo):
    assert demo["accuracy_last"] > demo["accuracy_first"] + 0.3
    assert demo["share_all_correct_last"] > demo["share_all_correct_first"] + 0.3
    cross = demo["iteration_third_mean_p_exceeds_half"]
    assert cross["easy"] < cross["mid"] < cross["hard"] and demo["thirds_cross_in_order"]
    assert len(demo["p_per_prompt"]) == 200 and len(demo["p_per_prompt"][0]) == 24


def test_b14_demo_is_repeatable_for_a_seed(demo):
    again = b14_demo(make(WorkedConfig))
    assert again["mean_accuracy"] == demo["mean_accuracy"]
    assert again["share_all_correct"] == demo["share_all_correct"]


# ---------------------------------------------------------------- stage and config


def test_worked_stage_writes_the_json_and_every_figure(tmp_path, mlflow_store):
    """Its MLflow run goes to the test's own store (the checkout's mlflow.db is the user's)."""
    from rlvr.pipeline.paths import WorkedPaths
    from rlvr.pipeline.stageparams import stage_params
    from rlvr.pipeline.stages.worked import run

    paths = WorkedPaths(
        tmp_path / "metrics" / "worked.json", tuple(tmp_path / "figures" / f for f in FIGURES)
    )
    run(stage_params("worked", None, parse_params(tiny_raw())), paths)
    on_disk = json.loads(paths.metrics.read_text())
    ids = [f"A{i}" for i in range(1, 9)] + ["B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B10", "B14"]
    assert sorted(on_disk) == sorted(ids)
    json.dumps(on_disk, allow_nan=False)  # plain, finite JSON
    assert on_disk["A2"]["advantage_correct_1_of_8"] == a2_three_groups()["advantage_correct_1_of_8"]
    for path in paths.figures:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path.name
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("demo_lr", 0.0, "worked.demo_lr = 0.0: must be > 0"),
        ("demo_group_size", 1, "worked.demo_group_size = 1: must be >= 2"),
        ("demo_d_min", 6.0, "worked.demo_d_min = 6.0: must be < demo_d_max (5.0)"),
        ("kl_samples", 0, "worked.kl_samples = 0: must be >= 1"),
        ("kl_vocab", 1, "worked.kl_vocab = 1: must be >= 2"),
        ("demo_prompts", 2, "worked.demo_prompts = 2: must be >= 3"),
        ("demo_iters", 0, "worked.demo_iters = 0: must be >= 1"),
    ],
)
def test_bad_worked_config_names_the_field(field, value, expected):
    with pytest.raises(ConfigError) as err:
        build(WorkedConfig, {**TEST_SETTINGS[WorkedConfig], field: value}, "worked")
    assert str(err.value).startswith(expected)
    assert "\n" not in str(err.value)
