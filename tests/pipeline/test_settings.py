"""What a stage's MLflow run logs as its params: the settings it ran with, resolved, flat, short."""

import json
from pathlib import Path

import pytest
from conftest import ROOT
from mlflow.tracking import MlflowClient

from rlvr.io.params import load_params
from rlvr.pipeline.seeds import tracked
from rlvr.pipeline.specs import STAGES
from rlvr.pipeline.stageparams import stage_params
from rlvr.pipeline.tracking import EXPERIMENT


@pytest.fixture(scope="module")
def params():
    return load_params(ROOT / "params.yaml")


def logged(stage: str, key: str | None, params) -> dict:
    """What the instance's MLflow run logs as its params."""
    return stage_params(stage, key, params).logged


def test_a_variant_logs_its_resolved_settings_once_by_their_short_names(params):
    no_kl, grpo = logged("grpo", "no_kl", params), logged("grpo", "grpo", params)
    assert no_kl["beta"] == 0.0 and grpo["beta"] == 0.04  # the override, and the default it replaces
    assert no_kl["lr"] == grpo["lr"] == params.grpo.defaults["lr"]  # a default no variant overrides
    assert set(no_kl) == set(grpo)  # every variant's run has the same columns
    assert (
        no_kl["variant"] == "no_kl"
        and no_kl["sft_run"] == "two_digit"
        and no_kl["seeds"] == list(range(500, 504))
    )
    assert {"advantage", "group_size", "aggregation", "ratio", "kl_estimator", "max_new_tokens"} <= set(no_kl)
    assert not [k for k in no_kl if "." in k]  # no `variants.no_kl.beta`, no `grpo.defaults.beta`


def test_sft_hack_and_warmup_runs_log_their_resolved_settings(params):
    sft = logged("sft", "single_digit", params)
    assert sft["noise_kind"] == "uniform" and sft["noise_rate"] == 0.0 and sft["schedule"] == "constant"
    assert logged("sft", "two_digit", params)["d_model"] == params.model.d_model  # `model: null`
    chapter_a = logged("sft", "single_digit", params)
    assert chapter_a["d_model"] == 32  # its own model
    hack = logged("hack", None, params)
    assert hack["temperature"] == params.hack.temperature and hack["steps"] == params.hack.steps
    assert hack["max_new_tokens"] == params.hack.max_new_tokens and hack["sft_run"] == params.hack.sft
    assert hack["beta"] == params.variant(params.hack.variant).beta
    warmup = logged("warmup", "single_digit", params)
    assert warmup["clean_epochs"] == 0 and "noise_rate" not in warmup  # a warm-up sees no noise


def test_logged_params_read_only_the_keys_the_stage_declares(params):
    """DVC reruns a stage for its declared params; its MLflow params must not say more than those:
    they are read through the stage's own params, which refuse any other key, so every instance's
    build succeeding is the check. And `seed` is a seed run's chain alone (the master seed is
    `master_seed`)."""
    instances = [(s.name, None) for s in STAGES.values() if s.foreach is None]
    instances += [("sft", r) for r in params.sft] + [("warmup", w) for w in params.warmups]
    instances += [("grpo", v) for v in params.variants]
    for stage, key in instances:
        assert "seed" not in logged(stage, key, params), (stage, key)


def test_a_stage_run_logs_settings_and_tags_the_raw_params_hash(params, mlflow_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a store without an artifact folder of its own writes to ./mlruns
    own = stage_params("grpo", "no_kl", params)
    with tracked(own, {"variant": "no_kl"}) as run:
        pass
    client = MlflowClient(mlflow_store)
    (r,) = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    assert r.data.params["beta"] == "0.0" and r.data.params["seeds"] == "500,501,502,503"
    assert r.data.params["advantage"] == "group"
    assert not [k for k in r.data.params if k.startswith(("variants.", "grpo.", "tasks."))]
    assert r.data.tags["params.raw_hash"] == own.hash == r.data.tags["params.hash"]
    raw = json.loads(Path(client.download_artifacts(run.run_id, "params.json", str(tmp_path))).read_text())
    assert raw == own.declared  # the params.yaml keys, behind that hash
    assert raw["variants.no_kl"]["beta"] == 0.0 and raw["grpo.defaults"]["beta"] == 0.04
