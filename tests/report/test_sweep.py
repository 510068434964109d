"""`rlvr sweep-report` on what `dvc exp show --json` prints: the grid's axes, one row per experiment."""

import pytest

from rlvr.fields import ConfigError
from rlvr.report.sweep import PASSK, experiments, sweep_report, sweep_rows, varied


def _exp(name, beta, steps, pass1, pass64, never, cross):
    params = {
        "variants": {"grpo": {"task": "two_digit", "beta": beta, "steps": steps}},
        "seed": 0,
        "passk": {"ks": [1, 64]},
    }
    passk = {
        "sft": {"pass_at_1": 0.52, "pass_at_n": 0.987, "never_solved": 4},
        "variants": {
            "grpo": {
                "pass_at_1_rl": pass1,
                "pass_at_n_rl": pass64,
                "never_solved_rl": never,
                "crossover_k": 65 if all(k is None for k in cross) else min(k for k in cross if k),
                "chains": len(cross),
                "chains_crossing": sum(k is not None for k in cross),
            }
        },
    }
    return {
        "rev": name * 8,
        "name": name,
        "data": {
            "params": {"params.yaml": {"data": params}},
            "metrics": {PASSK: {"data": passk}},
        },
    }


def show():
    base = _exp("workspace", 0.04, 100, 0.846, 0.986, 4.25, [16, None])
    head = {
        **_exp("abc1234", 0.04, 100, 0.846, 0.986, 4.25, [16, None]),
        "name": None,
        "experiments": [
            {"revs": [_exp("sweep-b0", 0.0, 100, 0.85, 0.981, 5.75, [20, 24])]},
            {"revs": [_exp("sweep-b1", 0.1, 50, 0.80, 0.990, 3.0, [None, None])]},
        ],
    }
    return [base, head]


def test_experiments_and_axes_come_from_dvc_exp_show():
    exps = experiments(show())
    assert [e["name"] for e in exps] == ["workspace", "abc1234", "sweep-b0", "sweep-b1"]
    assert varied(exps) == ["variants.grpo.beta", "variants.grpo.steps"]


def test_rows_say_where_rl_narrows():
    header, rows = sweep_rows(experiments(show()))
    assert header[1:3] == ["variants.grpo.beta", "variants.grpo.steps"]
    by_name = {r[0]: r for r in rows}
    assert by_name["sweep-b0"][3:] == ["0.520 → 0.850", "0.987 / 0.981", "4 / 5.75", "20 (2/2)", "yes"]
    assert by_name["sweep-b1"][-2:] == ["none (0/2)", "no"]
    assert by_name["abc1234"][-2] == "16 (1/2)"


def test_report_writes_table_and_figure_and_needs_two_experiments(tmp_path):
    out = sweep_report(show(), tmp_path)
    assert out["experiments"] == 4 and (tmp_path / "sweep.md").read_text().count("\n|") >= 5
    assert (tmp_path / "sweep.png").stat().st_size > 1000 and (tmp_path / "sweep.svg").is_file()
    with pytest.raises(ConfigError, match="no DVC experiment with pass@k results"):
        sweep_report(show()[:1], tmp_path)


def test_no_experiments_is_one_line_and_leaves_the_committed_sweep(tmp_path):
    """A baseline and a workspace that differs from it are two rows, but no sweep: refused."""
    sweep_report(show(), tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    head = {k: v for k, v in show()[1].items() if k != "experiments"}
    with pytest.raises(ConfigError) as err:
        sweep_report([show()[0], head], tmp_path)
    assert "\n" not in str(err.value) and "is left as it is" in str(err.value)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_failed_runs_are_left_out_and_inherited_settings_filled_in():
    ok = _exp("sweep-ok", 0.0, 50, 0.8, 0.98, 5.0, [30, None])
    failed = {
        **_exp("sweep-failed", 0.0, 100, 0.846, 0.986, 4.25, [16, None]),
        "error": {"msg": "Experiment run failed"},
    }
    base = _exp("abc1234", 0.0, 0, 0.846, 0.986, 4.25, [16, None])
    base["data"]["params"]["params.yaml"]["data"] = {
        "grpo": {"defaults": {"beta": 0.04, "steps": 100}},
        "variants": {"grpo": {"task": "two_digit"}},
    }
    workspace = {**base, "rev": "workspace", "name": None}
    exps = experiments([workspace, {**base, "experiments": [{"revs": [ok]}, {"revs": [failed]}]}])
    assert [e["name"] for e in exps] == ["abc1234", "sweep-ok"]  # workspace = its commit; failed run dropped
    assert exps[0]["params"]["variants.grpo.beta"] == 0.04 and exps[0]["params"]["variants.grpo.steps"] == 100


def test_each_experiments_pass_at_k_is_read_from_its_own_commit(tmp_path):
    """DVC's metrics are the short headlines, without each variant's pass@k: the sweep reads the
    passk stage's results file as each experiment's commit (the workspace: its disk) holds it."""
    import json
    import subprocess

    from rlvr.report.sweep import results_at, with_results

    bare = show()
    results = {}
    for e in [bare[0], bare[1], *(r for g in bare[1]["experiments"] for r in g["revs"])]:
        results[e["rev"]] = e["data"].pop("metrics")[PASSK]["data"]
    assert experiments(bare) == []  # DVC's metrics alone: no pass@k of the variant
    assert len(experiments(with_results(bare, results.get))) == 4

    def commit(value: float) -> str:
        (tmp_path / PASSK).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / PASSK).write_text(json.dumps({"sft": {"pass_at_1": value}}))
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
        subprocess.run([*git, "commit", "-qm", "x"], cwd=tmp_path, check=True)
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True
        ).stdout

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    first, _ = commit(0.5).strip(), commit(0.6)
    (tmp_path / PASSK).write_text(json.dumps({"sft": {"pass_at_1": 0.7}}))
    assert results_at(first, tmp_path) == {"sft": {"pass_at_1": 0.5}}
    assert results_at("workspace", tmp_path) == {"sft": {"pass_at_1": 0.7}}
    assert results_at("0" * 40, tmp_path) is None
