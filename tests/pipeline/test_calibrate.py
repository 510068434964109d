"""`rlvr calibrate`: the declared rule picks a recipe from validation values alone, and a plan that
lacks a declared key is refused in one line before anything trains."""

import pytest
from conftest import ROOT

from rlvr.fields import UserError
from rlvr.tools.calibrate import choose_setting, end_cap, grpo_setting, load_plan


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
        UserError,
        match=r"grpo_end lacks target, budget_prompts, grid, kl_max_nats, matrix_prompts, end_cap_miss$",
    ):
        load_plan(plan)
    plan.write_text("- a list\n")
    with pytest.raises(UserError, match="must be a mapping"):
        load_plan(plan)


def test_the_committed_plan_declares_every_key():
    plan = load_plan()
    assert plan["grpo_end"]["target"] == 0.83 and set(plan["grpo_end"]["chains"]).isdisjoint(range(900))


def test_the_end_cap_is_the_declared_miss_bound_of_the_chosen_settings_runs():
    """One more run misses the cap with the declared probability: the upper one-sided prediction
    bound of the chosen setting's steps to the end (log scale, t), rounded up to 100 steps; a run
    that missed the end, or another setting's, does not count."""
    import math

    steps = [458, 151, 229, 162]
    logs = [math.log(t) for t in steps]
    mean, sd = sum(logs) / 4, (sum((x - sum(logs) / 4) ** 2 for x in logs) / 3) ** 0.5
    bound = math.exp(mean + 2.3533634348018264 * sd * math.sqrt(1.25))  # t(3) at 0.95
    assert 800 < bound <= 900
    rows = [{"setting": 2, "reached": True, "steps": t} for t in steps]
    rows += [{"setting": 2, "reached": False, "steps": 800}, {"setting": 0, "reached": True, "steps": 5000}]
    assert end_cap(rows, 2, 0.05) == 900
    assert end_cap(rows, 2, 0.01) == 3000  # rarer misses cost steps
    with pytest.raises(UserError, match="a cap needs two"):
        end_cap(rows, 1, 0.05)


def test_params_hold_the_end_cap_the_committed_calibration_gives():
    """params.yaml's grpo_end cap is what the declared rule gives on the committed calibration."""
    import json

    from rlvr.io.params import load_params

    plan = load_plan()
    done = json.loads((ROOT / "reports/calibration/grpo_end.json").read_text())
    chosen = done["chosen"]
    settings = [{k: s[k] for k in ("lr", "prompts_per_step")} for s in done["settings"]]
    at = settings.index({"lr": chosen["lr"], "prompts_per_step": chosen["prompts_per_step"]})
    cap = end_cap(done["runs"], at, plan["grpo_end"]["end_cap_miss"])
    assert load_params(ROOT / "params.yaml").variant("grpo_end").steps == cap == 1000
