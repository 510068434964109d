"""`rlvr calibrate`: the declared rule picks a recipe from validation values alone, and a plan that
lacks a declared key is refused in one line before anything trains."""

import pytest

from rlvr.fields import UserError
from rlvr.tools.calibrate import choose_setting, grpo_setting, load_plan


def runs(setting, rows):
    return [
        {"setting": setting, "chain": c, "reached": r, "rollouts": n, "kl_exact_nats": kl}
        for c, (r, n, kl) in enumerate(rows)
    ]


SETTINGS = [
    {"lr": 3e-4, "prompts_per_step": 32},
    {"lr": 5e-4, "prompts_per_step": 32},
    {"lr": 5e-4, "prompts_per_step": 64},
]


def test_the_cheapest_setting_where_every_run_gets_there_is_chosen():
    every = (
        runs(0, [(True, 900, 0.5)] * 4)
        + runs(1, [(True, 500, 0.6)] * 4)
        + runs(2, [(True, 400, 0.6)] * 3 + [(False, 0, 0.6)])
    )
    out = choose_setting(SETTINGS, every, kl_max=2.0)
    assert (
        out["chosen"]["lr"] == 5e-4 and out["chosen"]["prompts_per_step"] == 32
    )  # 2 is cheaper but one run missed
    assert [s["good"] for s in out["settings"]] == [4, 4, 3]


def test_a_run_whose_kl_ran_away_does_not_count_and_ties_go_to_the_lower_lr():
    rows = (
        runs(0, [(True, 500, 0.5)] * 4)
        + runs(1, [(True, 500, 0.5)] * 3 + [(True, 100, 2.5)])
        + runs(2, [(True, 500, 0.5)] * 4)
    )
    out = choose_setting(SETTINGS, rows, kl_max=2.0)
    assert out["chosen"]["lr"] == 3e-4  # setting 1 has a runaway; 0 and 2 tie on rollouts: the lower lr


def test_without_a_setting_where_every_run_gets_there_the_most_runs_win():
    rows = (
        runs(0, [(True, 500, 0.5)] * 2 + [(False, 0, 0.5)] * 2)
        + runs(1, [(True, 900, 0.5)] * 3 + [(False, 0, 0.5)])
        + runs(2, [(False, 0, 0.5)] * 4)
    )
    assert choose_setting(SETTINGS, rows, kl_max=2.0)["chosen"]["lr"] == 5e-4
    assert choose_setting(SETTINGS, rows, kl_max=2.0)["settings"][2]["median_rollouts"] == float("inf")


def test_a_setting_is_the_variant_at_its_lr_and_p_capped_at_the_budget(tiny_params):
    cfg = grpo_setting(tiny_params.variant("grpo_end"), 5e-4, 32, 25600, 0.83)
    assert (cfg.lr, cfg.prompts_per_step, cfg.steps, cfg.target) == (5e-4, 32, 800, 0.83)


def test_a_plan_lacking_a_declared_key_is_refused_in_one_line(tmp_path):
    plan = tmp_path / "calibration.yaml"
    plan.write_text("grpo_end: {variant: grpo_end, chains: [900]}\nhack_temperature: {sft: single_digit}\n")
    with pytest.raises(
        UserError, match=r"grpo_end lacks target, budget_prompts, grid, kl_max_nats, matrix_prompts$"
    ):
        load_plan(plan)
    plan.write_text("- a list\n")
    with pytest.raises(UserError, match="must be a mapping"):
        load_plan(plan)


def test_the_committed_plan_declares_every_key():
    plan = load_plan()
    assert plan["grpo_end"]["target"] == 0.83 and set(plan["grpo_end"]["chains"]).isdisjoint(range(900))
