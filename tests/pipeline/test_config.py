import subprocess
import sys

import pytest
import yaml

from rlvr.cli import main
from rlvr.fields import ConfigError
from rlvr.io.params import parse_params


def run_check(tmp_path, raw, capsys):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    code = main(["--params", str(path), "check"])
    err = capsys.readouterr().err.strip()
    return code, err


def with_grpo(raw, variant=None, **defaults):
    """A one-variant matrix on single_digit, with `defaults` changed in grpo.defaults."""
    raw["grpo"]["defaults"].update(seeds=[0], **defaults)
    raw["variants"] = {"grpo": {"task": "single_digit", "sft": "single_digit", **(variant or {})}}
    raw["hack"]["variant"] = "grpo"
    raw["starts"].update(variant="grpo", candidates=["single_digit"])
    raw["passk"]["headline"] = ["grpo"]
    return raw


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda r: r["model"].update(width=3), "model.width: unknown key; allowed keys: d_model, n_layer"),
        (lambda r: r.update(extra=1), "extra: unknown key; allowed keys: seed, threads"),
        (
            lambda r: r["sft"]["single_digit"]["noise"].update(rate=1.5),
            "sft.single_digit.noise.rate = 1.5: must lie in [0, 1]",
        ),
        (
            lambda r: r["sft"]["two_digit"].update(noise={"kind": "uniform", "rate": -0.1}),
            "sft.two_digit.noise.rate = -0.1: must lie in [0, 1]",
        ),
        (
            lambda r: r["sft"]["two_digit"].update(noise={"kind": "slips", "alpha": 0, "beta": 1}),
            "sft.two_digit.noise.alpha = 0.0: must be > 0",
        ),
        (
            lambda r: r["sft"]["two_digit"].update(noise={"kind": "typos"}),
            "sft.two_digit.noise.kind = 'typos': must be one of uniform, slips",
        ),
        (
            lambda r: r["sft"]["two_digit"].update(noise={"kind": "slips", "rate": 0.3}),
            "sft.two_digit.noise.rate: unknown key; allowed keys: kind, alpha, beta",
        ),
        (
            lambda r: r["sft"]["single_digit"]["model"].update(n_head=5),
            "sft.single_digit.model.n_head = 5: must divide",
        ),
        (lambda r: r["sft"]["two_digit"].update(lr=-0.001), "sft.two_digit.lr = -0.001: must be > 0"),
        (
            lambda r: r["sft"]["two_digit"].update(task="three_digit"),
            "sft.two_digit.task = 'three_digit': must be one of",
        ),
        (
            lambda r: r["tasks"].update(three_digit={"heldout": 1}),
            "tasks.three_digit = 'three_digit': unknown task",
        ),
        (lambda r: with_grpo(r, group_size=1), "grpo.defaults.group_size = 1: must be >= 2"),
        (lambda r: with_grpo(r, {"group_size": 1}), "variants.grpo.group_size = 1: must be >= 2"),
        (lambda r: with_grpo(r, {"sft": "nope"}), "variants.grpo.sft = 'nope': must name an sft run"),
        (
            lambda r: with_grpo(r, {"task": "two_digit"}),
            "variants.grpo.task = 'two_digit': must be the task of sft run",
        ),
        (lambda r: with_grpo(r, lr=-1.0), "grpo.defaults.lr = -1.0: must be > 0"),
        (
            lambda r: r["passk"].update(n=8, ks=[1, 16]),
            "passk.ks[1] = 16: must satisfy 1 <= k <= min(n, n_others) (4)",
        ),
        (lambda r: r["passk"].update(temperatures=[1.0, 0.0]), "passk.temperatures[1] = 0.0: must be > 0"),
        (lambda r: r["passk"].update(temperatures=[1.0, -0.6]), "passk.temperatures[1] = -0.6: must be > 0"),
        (lambda r: r["passk"].update(temperatures=[]), "passk.temperatures = []: list at least one"),
        (
            lambda r: r["passk"].update(temperatures=[1.0, 0.6, 1]),
            "passk.temperatures[2] = 1.0: is listed twice: each temperature once",
        ),
        (lambda r: r["passk"].pop("temperatures"), "passk.temperatures: missing required key"),
        (lambda r: r["hack"].update(variant="zzz"), "hack.variant = 'zzz': must name a variant"),
        (lambda r: r["hack"].update(temperature=0), "hack.temperature = 0.0: must be > 0"),
        (lambda r: r["worked"].update(demo_group_size=1), "worked.demo_group_size = 1: must be >= 2"),
        (
            lambda r: r["sft"]["two_digit"].update(epochs="many"),
            "sft.two_digit.epochs = 'many': must be an integer",
        ),
        (
            lambda r: r["sft"]["two_digit"].update(clean_epochs=-1),
            "sft.two_digit.clean_epochs = -1: must be >= 0",
        ),
        (lambda r: r["sft_defaults"].pop("lr"), "sft.two_digit.lr: missing required key"),  # states none
        (lambda r: r["grpo"]["defaults"].pop("beta"), "grpo.defaults.beta: missing required key"),
        (lambda r: r.pop("worked"), "worked: missing required key"),
        (lambda r: r["hack"].pop("temperature"), "hack.temperature: missing required key"),
        (
            lambda r: r["variants"]["grpo"].update(advantage="no_such_kind"),
            "variants.grpo.advantage = 'no_such_kind': must be one of group, mean_only, rloo, batch_std",
        ),
        (
            lambda r: r["variants"]["grpo"].update(advantage="reinforce"),
            "variants.grpo.advantage = 'reinforce': must be one of group, mean_only, rloo, batch_std, "
            "reinforce_pp, passk",
        ),
        (
            lambda r: r["variants"]["grpo"].update(entropy_coeff=-0.01),
            "variants.grpo.entropy_coeff = -0.01: must be >= 0",
        ),
        (
            lambda r: r["grpo"]["defaults"].update(kl_in_reward="yes"),
            "grpo.defaults.kl_in_reward = 'yes': must be true or false",
        ),
        (
            lambda r: r["variants"]["grpo"].update(kl_in_reward=True, beta=0.0),
            "variants.grpo.kl_in_reward = True: puts beta * KL in the reward, so it needs "
            "variants.grpo.beta > 0 (it is 0)",
        ),
        (
            lambda r: r["variants"]["grpo"].update(advantage="reinforce_pp", ratio="sequence"),
            "variants.grpo.advantage = 'reinforce_pp': gives every token its own advantage; "
            "variants.grpo.ratio sequence needs one per response",
        ),
        (
            lambda r: r["grpo"]["defaults"].pop("entropy_coeff"),
            "grpo.defaults.entropy_coeff: missing required key",
        ),
        (
            lambda r: r["grpo"]["defaults"].update(aggregation="sum"),
            "grpo.defaults.aggregation = 'sum': must be one of seq_mean, token_mean, seq_sum_const",
        ),
        (
            lambda r: r["variants"]["grpo"].update(seeds=[]),
            "variants.grpo.seeds = []: list at least one seed",
        ),
        (lambda r: r["hack"].update(seeds=[1, 1]), "hack.seeds = [1, 1]: seeds must differ"),
        (
            lambda r: r["passk"].update(contrast="single_digit"),
            "passk.contrast = 'single_digit': must be an sft run of",
        ),
        (
            lambda r: r["hack"].update(sft="two_digit"),
            "hack.sft = 'two_digit': must be an sft run of variant 'a_grpo'",
        ),
        (lambda r: r["model"].update(n_head=3), "model.n_head = 3: must divide model.d_model"),
        (
            lambda r: r["sft"].update(extra={**r["sft"]["two_digit"], "warmup": "nope"}),
            "sft.extra.warmup = 'nope': must name a warm-up under warmups (single_digit, two_digit)",
        ),
        (
            lambda r: r["variants"]["grpo"].update(seeds=[0, 9]),
            "variants.grpo.seeds = [0, 9]: seed 9 has no SFT start: every seed must be one of "
            "sft.two_digit.seeds",
        ),
        (lambda r: r["hack"].update(seeds=[5]), "hack.seeds = [5]: seed 5 has no SFT start"),
        (
            lambda r: r["sft"]["two_digit"].update(seeds=[]),
            "sft.two_digit.seeds = []: list at least one seed",
        ),
        (
            lambda r: r["starts"].update(candidates=["nope"]),
            "starts.candidates[0] = 'nope': must name an sft run",
        ),
        (
            lambda r: r["starts"].update(candidates=["single_digit"]),
            "starts.candidates[0] = 'single_digit': must be a run of task two_digit",
        ),
        (
            lambda r: r["starts"].update(variant="a_grpo"),
            "starts.candidates[0] = 'two_digit': must be a run of task single_digit",
        ),
        (
            lambda r: r["starts"]["runs"].update(two_digit=r["sft"]["two_digit"]),
            "starts.runs.two_digit = 'two_digit': is already an sft run",
        ),
        (
            lambda r: r["starts"]["runs"]["two_digit_slips"].update(lr=0),
            "starts.runs.two_digit_slips.lr = 0.0: must be > 0",
        ),
        (
            lambda r: r["sft"]["two_digit"].update(schedule="linear"),
            "sft.two_digit.schedule = 'linear': must be one of",
        ),
        (
            lambda r: (
                r["sft"]["two_digit_uniform"].update(seeds=[0])
                if "two_digit_uniform" in r["sft"]
                else r["sft"].update(extra={**r["sft"]["two_digit"], "seeds": [0]})
            ),
            "seeds = [0]: must equal sft.two_digit.seeds ([0, 1])",
        ),
        (
            lambda r: r["sft"].update(extra={**r["sft"]["two_digit"], "lr": 0.1}),
            "sft.extra.lr = 0.1: must equal sft.two_digit.lr (0.003): the run starts from warm-up "
            "'two_digit'",
        ),
        (
            lambda r: r["sft"].update(
                extra={**r["sft"]["two_digit"], "model": {**r["model"], "d_model": 64}}
            ),
            "sft.extra.model = ModelConfig(d_model=64",
        ),
        (
            lambda r: r["warmups"].update(w={"run": "single_digit"}),
            "warmups.w.run = 'single_digit': must be a run that starts from this warm-up "
            "(sft.single_digit.warmup is",
        ),
        (
            lambda r: r["warmups"]["two_digit"].update(run="zzz"),
            "warmups.two_digit.run = 'zzz': must name an sft run",
        ),
        (lambda r: r.pop("warmups"), "warmups: missing required key"),
        (lambda r: r["sft_defaults"].update(lr=-1), "sft_defaults.lr = -1.0: must be > 0"),
        (
            lambda r: r["sft_defaults"].update(task="two_digit"),
            "sft_defaults.task = 'two_digit': unknown key; allowed keys: model, clean_epochs,",
        ),
        (  # what a run is, each run states: a stage reading only that declares the run's own key
            lambda r: r["sft_defaults"].update(target=0.5),
            "sft_defaults.target = 0.5: unknown key; allowed keys: model,",
        ),
        (lambda r: r["sft"]["two_digit"].pop("noise"), "sft.two_digit.noise: missing required key"),
    ],
)
def test_bad_params_give_one_clear_line_and_exit_2(tmp_path, capsys, tiny_raw_params, mutate, expected):
    mutate(tiny_raw_params)
    code, err = run_check(tmp_path, tiny_raw_params, capsys)
    assert code == 2
    assert err.startswith("rlvr: error: ") and expected in err
    assert "\n" not in err


def test_passk_may_score_no_contrast(tiny_raw_params):
    """passk.contrast: null scores the start and its variants only; the stage then neither depends
    on a second SFT run's checkpoints nor on its seeds."""
    from rlvr.pipeline.specs import STAGES

    raw = {**tiny_raw_params, "passk": {**tiny_raw_params["passk"], "contrast": None}}
    params = parse_params(raw)
    stage = STAGES["passk"]
    x = stage.paths(None, None, params)
    assert x.contrast is None
    assert x.start.checkpoints in stage.deps(x)
    assert [k for k in stage.params(None, None, params) if k.startswith("sft.")] == [
        "sft.two_digit.task",
        "sft.two_digit.seeds",
        "sft.two_digit.noise",  # the three the figures name the start by
        "sft.two_digit.target",
        "sft.two_digit.epochs",
    ]


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            {"task": "single_digit", "sft": "single_digit", "target": 0.5, "check_every": 1},
            "variants.bad.target = 0.5: a controlled end",
        ),
        (
            {"task": "two_digit", "sft": "two_digit", "target": 0.8, "check_every": 9, "steps": 2},
            "variants.bad.check_every = 9: must be at most variants.bad.steps (2)",
        ),
        (
            {"task": "two_digit", "sft": "two_digit", "target": 1.0, "check_every": 1},
            "variants.bad.target = 1.0: a controlled end's",
        ),
    ],
)
def test_a_controlled_end_needs_validation_problems_a_cap_past_its_checks_and_a_reachable_target(
    tiny_raw_params, override, expected
):
    tiny_raw_params["variants"]["bad"] = override
    with pytest.raises(ConfigError) as err:
        parse_params(tiny_raw_params)
    assert str(err.value).startswith(expected)


def test_unknown_variant_and_run_are_named_with_the_known_ones(tiny_raw_params):
    params = parse_params(with_grpo(tiny_raw_params))
    with pytest.raises(ConfigError, match="variant 'nope': unknown; known variants: grpo"):
        params.variant("nope")
    with pytest.raises(ConfigError, match="sft run 'x': unknown; known runs: single_digit, two_digit"):
        params.sft_run("x")


def test_valid_params_pass(tmp_path, capsys, tiny_raw_params):
    assert run_check(tmp_path, tiny_raw_params, capsys)[0] == 0


def test_cli_user_error_has_no_traceback(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "rlvr", "--params", str(tmp_path / "missing.yaml"), "check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert (
        out.stderr.strip() == f"rlvr: error: {tmp_path / 'missing.yaml'}: params file not found "
        "(run from the repo root or pass --params)"
    )


def test_stage_commands_reject_unknown_names_before_any_work(tmp_path, capsys, tiny_raw_params):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(tiny_raw_params))
    assert main(["--params", str(path), "grpo", "--variant", "nope"]) == 2
    assert "variant 'nope': unknown; known variants: a_grpo, dapo, grpo" in capsys.readouterr().err
    assert main(["--params", str(path), "sft", "--run", "nope"]) == 2
    assert "sft run 'nope': unknown" in capsys.readouterr().err
    assert main(["--params", str(path), "bench", "--only", "nope"]) == 2
    assert (
        "bench 'nope': unknown; known benchmarks: "
        "sampling, sft, grpo_step, passk_model, bootstrap, pipeline, queue" in capsys.readouterr().err
    )


def test_ci_runs_exactly_the_readme_test_command():
    from conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    command = next(
        line for line in readme.splitlines() if "pytest" in line and line.startswith("python3 -m venv")
    )
    assert command in (ROOT / ".ci/run").read_text().splitlines()


def test_a_run_merges_the_sft_defaults_and_states_only_what_differs(tmp_path):
    """params.yaml's runs merge the `sft_defaults` anchor (YAML's `<<`): a run gets every default it
    does not state, its own value wins, and no two runs share a value object once read."""
    from rlvr.io.params import read_yaml

    path = tmp_path / "p.yaml"
    path.write_text(
        "sft_defaults: &sft\n  lr: 0.003\n  noise: {kind: uniform, rate: 0.0}\n"
        "sft:\n  a:\n    <<: *sft\n    lr: 0.01\n  b:\n    <<: *sft\n"
    )
    raw = read_yaml(path)
    assert raw["sft"]["a"] == {"lr": 0.01, "noise": {"kind": "uniform", "rate": 0.0}}
    assert raw["sft"]["b"] == {"lr": 0.003, "noise": {"kind": "uniform", "rate": 0.0}}
    raw["sft"]["a"]["noise"]["rate"] = 0.5
    assert raw["sft"]["b"]["noise"]["rate"] == 0.0 and raw["sft_defaults"]["noise"]["rate"] == 0.0


def test_a_run_takes_the_defaults_it_does_not_state_however_the_file_is_rewritten(tiny_raw_params):
    """The loader fills each SFT run (and each starts run) in from `sft_defaults`, its own value
    winning: changing a default moves every run that states none, as it does after `dvc exp run -S`
    rewrites params.yaml (no anchor in the file for a rewrite to copy into the runs)."""
    from conftest import ROOT

    raw = tiny_raw_params
    text = (ROOT / "params.yaml").read_text()
    assert "<<:" not in text and not any(
        line.split("#")[0].rstrip().endswith(("&sft", "*sft")) for line in text.splitlines()
    )
    raw["sft_defaults"]["grad_clip"] = 0.5
    raw["sft"]["single_digit"]["weight_decay"] = 0.1
    params = parse_params(raw)
    assert all(params.sft_run(r).grad_clip == 0.5 for r in params.sft)
    assert all(run.grad_clip == 0.5 for run in params.starts.runs.values())
    assert (
        params.sft_run("single_digit").weight_decay == 0.1 and params.sft_run("two_digit").weight_decay == 0.0
    )
    assert params.sft_run("two_digit").lr == raw["sft_defaults"]["lr"] != params.sft_run("single_digit").lr


@pytest.mark.parametrize("name", ["params.yaml", "powered/params.yaml"])
def test_every_params_file_is_written_as_dvc_writes_it_back(name):
    """`dvc exp run -S` rewrites a params file in its own layout; a file already in that layout is
    a fixed point, so an experiment's diff shows only the keys it set (the slow test
    test_params_rewrite runs DVC itself)."""
    from conftest import ROOT

    from rlvr.tools.paramsfile import layout_problem

    assert layout_problem(ROOT / name) is None


def test_a_file_out_of_dvcs_layout_is_named_at_its_line_and_rewritten_with_the_same_values(tmp_path):
    from rlvr.io.params import read_yaml
    from rlvr.tools.paramsfile import dvc_layout, layout_problem

    path = tmp_path / "p.yaml"
    text = "a: 1  # kept\nb:\n  c: null\n  seeds: [" + ", ".join(str(s) for s in range(100, 132)) + "]\n"
    path.write_text(text)
    values = read_yaml(path)
    problem = layout_problem(path)
    assert problem.startswith(f"{path}: line 3 is not as `dvc exp run -S` writes it")
    assert "rlvr check --layout" in problem
    rewritten = dvc_layout(text)
    assert dvc_layout(rewritten) == rewritten  # one pass reaches the fixed point
    assert "a: 1  # kept\n" in rewritten and "  c:\n" in rewritten
    path.write_text(rewritten)
    assert layout_problem(path) is None and read_yaml(path) == values


def test_a_comment_dvc_would_drop_is_named_when_the_layout_is_written(tmp_path):
    """A comment directly below a list goes with the list when DVC replaces it: writing the layout
    reaches the fixed point and names the comment instead of losing it silently."""
    from rlvr.tools.paramsfile import layout_problem, write_layout

    path = tmp_path / "p.yaml"
    path.write_text("a:\n  seeds: [1, 2]\n  # about b\n  b: 3  # kept\n")
    dropped = write_layout(path)
    assert layout_problem(path) is None
    assert dropped == ["# about b (below a list, where DVC drops it: put it above the list's key)"]
    assert path.read_text() == "a:\n  seeds:\n  - 1\n  - 2\n  b: 3  # kept\n"
    assert write_layout(path) == []


def test_check_layout_writes_the_params_file_in_dvcs_layout(tmp_path, capsys, tiny_raw_params):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(tiny_raw_params, width=1000, default_flow_style=None))
    assert main(["--params", str(path), "check"]) == 0
    assert "is not as `dvc exp run -S` writes it" in capsys.readouterr().out
    before = path.read_text()
    assert main(["--params", str(path), "check", "--layout"]) == 0
    assert '"layout": "as `dvc exp run -S` writes it"' in capsys.readouterr().out
    assert path.read_text() != before and yaml.safe_load(path.read_text()) == yaml.safe_load(before)


UNSAFE_NAMES = ["x$(touch PWNED)", "x;touch PWNED;", "..", "a b", "x/y", "`id`", "", "a\nb", "v" * 65]


@pytest.mark.parametrize("name", UNSAFE_NAMES)
@pytest.mark.parametrize("section", ["variants", "sft", "warmups", "starts.runs"])
def test_a_name_that_a_shell_or_a_path_would_read_is_refused(
    tmp_path, capsys, tiny_raw_params, name, section
):
    """Entry names become stage commands, output paths and run names: anything but [A-Za-z0-9_]+ is
    refused by `rlvr check` (and so by the check stage, before DVC runs any other command), and no
    file is made by the name's shell text."""
    raw = tiny_raw_params
    if section == "variants":
        raw["variants"][name] = dict(next(iter(raw["variants"].values())))
    elif section == "sft":
        raw["sft"][name] = dict(raw["sft"]["two_digit"])
    elif section == "warmups":
        raw["warmups"][name] = {"run": "two_digit"}
    else:
        raw["starts"]["runs"] = {name: dict(raw["sft"]["two_digit"])}
    code, err = run_check(tmp_path, raw, capsys)
    assert code == 2
    assert "is not a valid name: use letters, digits and underscores only" in err
    assert "\n" not in err
    assert not (tmp_path / "PWNED").exists() and not __import__("os").path.exists("PWNED")


def test_the_pipeline_file_is_not_written_from_unsafe_names(tmp_path, tiny_raw_params):
    from rlvr.pipeline.dvcfile import render

    tiny_raw_params["variants"]["x;touch PWNED;"] = dict(next(iter(tiny_raw_params["variants"].values())))
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(tiny_raw_params))
    with pytest.raises(ConfigError, match="is not a valid name"):
        render(path)


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda r: r["passk"].update(ks=[]), "passk.ks = []: list at least one k"),
        (lambda r: r["passk"].update(ks=[4, 2]), "passk.ks = [4, 2]: must be in increasing order"),
        (lambda r: r["passk"].update(ks=[2, 2]), "passk.ks = [2, 2]: must be in increasing order"),
        (
            lambda r: r["tasks"][r["sft"][r["passk"]["sft"]]["task"]].update(heldout=0),
            "passk.sft = 'two_digit': scores its run's held-out problems; tasks.two_digit.heldout is 0",
        ),
        (
            lambda r: r["sft"]["two_digit"].update(target=0),
            "sft.two_digit.target = 0.0: a controlled start's validation accuracy must lie strictly",
        ),
        (
            lambda r: r["sft"]["two_digit"].update(target=1),
            "sft.two_digit.target = 1.0: a controlled start's",
        ),
        (
            lambda r: r["grpo"]["defaults"].update(clip_eps_low=1.5),
            "clip_eps_low = 1.5: must be at most 1",
        ),
        (
            lambda r: r["grpo"]["defaults"].update(eval_every=r["grpo"]["defaults"]["steps"] + 1),
            "eval_every = ",
        ),
    ],
)
def test_check_refuses_what_a_stage_would_crash_on(tmp_path, capsys, tiny_raw_params, mutate, expected):
    mutate(tiny_raw_params)
    code, err = run_check(tmp_path, tiny_raw_params, capsys)
    assert code == 2
    assert expected in err and "\n" not in err


def test_a_starts_candidate_with_none_of_the_studys_chains_is_refused(tmp_path, capsys, tiny_raw_params):
    """GRPO seed s is trained from a candidate's chain s: a candidate none of whose seeds are among
    `starts.chains` would leave its GRPO side empty (`rlvr starts` crashed there after its SFT side)."""
    name = tiny_raw_params["starts"]["candidates"][-1]
    runs = tiny_raw_params["starts"]["runs"]
    target = runs[name] if name in runs else tiny_raw_params["sft"][name]
    target["seeds"] = [77]
    code, err = run_check(tmp_path, tiny_raw_params, capsys)
    assert code == 2 and f"starts.candidates[1] = '{name}': shares no chain with starts.chains" in err
