"""Stage-layer behaviour that the pipeline smoke test does not pin down."""

import hashlib
import json

import pytest
import yaml

from conftest import tiny_raw
from rlvr.stages import run_stage


@pytest.fixture
def tiny_repo(tmp_path, monkeypatch, mlflow_store):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RLVR_RECORD_READS", raising=False)
    raw = tiny_raw()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    for run in ("single_digit", "two_digit"):
        run_stage("data", run, progress=False)
        run_stage("sft", run, progress=False)
    return tmp_path, raw


def _grpo_outputs(d) -> tuple[dict, list[str]]:
    m = json.loads((d / "reports/metrics/grpo-a_grpo.json").read_text())
    stable = {k: v for k, v in m.items() if "mlflow" not in k and "seconds" not in k}
    stable["per_seed"] = {k: v for k, v in m["per_seed"].items() if "seconds" not in k}
    stable["ci95"] = {k: v for k, v in m["ci95"].items() if "seconds" not in k}
    hashes = [hashlib.md5((d / f"data/grpo/a_grpo/seed{s}.pt").read_bytes()).hexdigest() for s in m["seeds"]]
    return stable, hashes


def test_seed_results_do_not_depend_on_how_many_workers_trained_them(tiny_repo):
    """Seeds train one torch thread each, in worker processes when the thread budget allows: two
    workers and none give the same numbers and byte-identical checkpoints."""
    d, raw = tiny_repo
    results = []
    for budget in ("1", "2"):  # 1: in this process, one seed after the other; 2: two spawned workers
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RLVR_THREADS", budget)
            run_stage("grpo", "a_grpo", progress=False)
        results.append(_grpo_outputs(d))
    assert results[0] == results[1]


def test_a_bad_thread_budget_is_one_line(tiny_repo, monkeypatch):
    from rlvr.config import ConfigError

    monkeypatch.setenv("RLVR_THREADS", "two")
    with pytest.raises(ConfigError, match="RLVR_THREADS = 'two': must be a whole number >= 1"):
        run_stage("grpo", "a_grpo", progress=False)
