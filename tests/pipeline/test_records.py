"""A stage's results and its run record: timings and run ids never reach the files the report reads."""

import json

import pytest

from rlvr.pipeline.records import (
    headline,
    headline_path,
    read_record,
    record_path,
    split,
    stable_row,
    write_metrics,
)


def test_timings_and_run_ids_move_to_the_run_record_at_every_level():
    metrics = {
        "eval_acc_final": 0.6,
        "step_seconds_median": 0.04,
        "mlflow_run_id": "abc",
        "mlflow_seed_run_ids": {"0": "s0"},
        "per_seed": {"eval_acc_final": [0.5, 0.7], "train_seconds": [9.0, 9.5]},
        "ci95": {"eval_acc_final": [0.1, 1.0], "tokens_per_second": [1, 2]},
        "seeds": [0, 1],
    }
    stable, volatile = split(metrics)
    assert stable == {
        "eval_acc_final": 0.6,
        "per_seed": {"eval_acc_final": [0.5, 0.7]},
        "ci95": {"eval_acc_final": [0.1, 1.0]},
        "seeds": [0, 1],
    }
    assert volatile == {
        "step_seconds_median": 0.04,
        "mlflow_run_id": "abc",
        "mlflow_seed_run_ids": {"0": "s0"},
        "per_seed": {"train_seconds": [9.0, 9.5]},
        "ci95": {"tokens_per_second": [1, 2]},
    }
    assert stable_row({"step": 1, "loss": 0.5, "step_seconds": 0.04}) == {"step": 1, "loss": 0.5}


def test_two_runs_that_differ_only_in_time_write_identical_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = {"acc": 0.6, "train_seconds": 9.0, "mlflow_run_id": "a"}
    m, r = write_metrics("reports/metrics/sft-x.json", first)
    before = m.read_bytes()
    write_metrics("reports/metrics/sft-x.json", {**first, "train_seconds": 11.0, "mlflow_run_id": "b"})
    assert m.read_bytes() == before  # what the report depends on did not change
    assert (
        r == record_path("reports/metrics/sft-x.json") and json.loads(r.read_text())["mlflow_run_id"] == "b"
    )
    assert read_record("reports/metrics/sft-x.json") == {"train_seconds": 11.0, "mlflow_run_id": "b"}
    assert read_record("reports/metrics/none.json") == {}


def test_a_record_sits_beside_its_metrics_file_wherever_that_is(tmp_path):
    assert str(record_path("reports/report.json")) == "reports/runs/report.json"
    assert str(record_path("reports/metrics/sft-x.json")) == "reports/runs/sft-x.json"
    m, r = write_metrics(tmp_path / "reports/metrics/w.json", {"a": 1, "mlflow_run_id": "x"})
    assert r == tmp_path / "reports/runs/w.json" and r.is_file()


def test_a_headline_is_the_results_few_numbers_under_short_names(tmp_path):
    results = {
        "eval_acc_final": 0.6,
        "sampled_acc_train": 0.4,
        "ci95": {"eval_acc_final": [0.5, 0.7]},
        "sft": {"pass_at_1": 0.52, "per_seed": {"pass_at_1": [0.5, 0.54]}},
        "variants": {"grpo": {"pass_at_1_rl": 0.85, "chains_crossing": 3}, "dapo": {"pass_at_1_rl": 0.8}},
    }
    names = {
        "acc_start": ("sampled_acc_heldout", "sampled_acc_train"),  # the first the results have
        "acc_end": "variants.grpo.pass_at_1_rl",
        "passk_start": "sft.pass_at_1",
        "passk_end": "variants.rloo.pass_at_n_rl",  # not in the results: left out
    }
    assert headline(results, names) == {"acc_start": 0.4, "acc_end": 0.85, "passk_start": 0.52}
    for bad in ("16, none", [16, 20], True, {"a": 1}):  # what `dvc metrics diff` cannot subtract
        with pytest.raises(TypeError, match="a metric must be a number"):
            headline({"x": {"y": bad}}, {"loss": "x.y"})
    with pytest.raises(KeyError, match="sampled_acc_train.*not in records.NAMES"):
        headline(results, {"sampled_acc_train": "sampled_acc_train"})  # a name of its own: a column more
    m, r = write_metrics(tmp_path / "reports/metrics/passk.json", {**results, "mlflow_run_id": "x"}, names)
    h = headline_path(m)
    assert h == tmp_path / "reports/headline/passk.json" and str(headline_path("reports/report.json")) == (
        "reports/headline/report.json"
    )
    assert json.loads(h.read_text()) == headline(results, names) and "mlflow_run_id" not in h.read_text()
    m, _ = write_metrics(tmp_path / "reports/metrics/worked.json", {"a2": {"advantages": [1.0]}})
    assert m.is_file() and not headline_path(m).exists()  # no names given: no headline


def test_where_when_and_which_code_go_to_the_record_not_the_results(tmp_path):
    made = {
        "git_commit": "2b521db",
        "git_dirty": False,
        "host": "box",
        "started_utc": "2026-12-02T07:18:39+00:00",
    }
    m, r = write_metrics(tmp_path / "reports/metrics/grpo-x.json", {"eval_acc_final": 0.6, "made": made}, {})
    assert json.loads(r.read_text())["made"] == made
    assert "made" not in json.loads(m.read_text()) and json.loads(headline_path(m).read_text()) == {}
