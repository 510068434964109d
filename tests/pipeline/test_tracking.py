import time

import pytest
from mlflow.tracking import MlflowClient

from rlvr.io.system import cpu_model
from rlvr.pipeline.store import TrackingError
from rlvr.pipeline.tracking import COMPARE_NOTE, EXPERIMENT, NOTE_TAG, stage_run


def runs(uri):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    return client, client.search_runs([exp.experiment_id])


def test_finished_run_has_tags_params_and_step_metrics(mlflow_store):
    with stage_run("sft@x", {"sft": {"lr": 0.1}}, {"task": "single_digit", "seed": 3}, "abc") as run:
        for step in range(5):
            run.log_step(step, {"loss": 1.0 / (step + 1)})
        run.log_metrics({"final_loss": 0.2, "note": "skipped"})
    client, (r,) = runs(mlflow_store)
    assert r.info.status == "FINISHED"
    for key in ("dvc.stage", "git.commit", "params.hash", "task", "seed"):
        assert key in r.data.tags
    assert "dvc.exp" not in r.data.tags  # set only inside `dvc exp run`, never as an empty string
    assert r.data.tags["params.hash"] == "abc" and r.data.tags["seed"] == "3"
    assert r.data.params == {"sft.lr": "0.1"}
    history = client.get_metric_history(r.info.run_id, "loss")
    assert [m.step for m in history] == [0, 1, 2, 3, 4]
    assert r.data.metrics["final_loss"] == 0.2


def test_a_stage_runs_page_says_compare_does_not_pair_chains_and_its_seed_runs_do_not_repeat_it(
    mlflow_store,
):
    with stage_run("grpo@v", {}, {"variant": "v"}, "h") as run:
        with run.child("grpo@v/seed3", {"seed": 3}):
            pass
    _, found = runs(mlflow_store)
    stage = next(r for r in found if "mlflow.parentRunId" not in r.data.tags)
    seed = next(r for r in found if "mlflow.parentRunId" in r.data.tags)
    assert stage.data.tags[NOTE_TAG] == COMPARE_NOTE and "rlvr diff" in COMPARE_NOTE
    assert "does not pair chains" in COMPARE_NOTE
    assert NOTE_TAG not in seed.data.tags


def test_dvc_exp_tag_names_the_experiment_inside_dvc_exp_run(mlflow_store, monkeypatch):
    monkeypatch.setenv("DVC_EXP_NAME", "lr-sweep-1")
    with stage_run("sft@x", {}, {}, "h"):
        pass
    _, (r,) = runs(mlflow_store)
    assert r.data.tags["dvc.exp"] == "lr-sweep-1"


def test_child_runs_inherit_the_stage_tags_and_carry_their_params(mlflow_store):
    with stage_run("grpo@v", {"variants.v.lr": 0.1}, {"variant": "v"}, "h") as run:
        with run.child("grpo@v/seed3", {"seed": 3}, {"variants.v.lr": 0.1, "seed": 3}):
            pass
    client, found = runs(mlflow_store)
    child = next(r for r in found if "mlflow.parentRunId" in r.data.tags)
    assert child.data.tags["dvc.stage"] == "grpo@v" and child.data.tags["variant"] == "v"
    assert child.data.tags["params.hash"] == "h" and child.data.tags["seed"] == "3"
    assert child.data.params == {"variants.v.lr": "0.1", "seed": "3"}


def test_a_logged_policy_is_a_model_of_its_seed_run_that_mlflow_loads(mlflow_store, tmp_path, monkeypatch):
    import mlflow.pytorch
    import torch

    from rlvr.configs import ModelConfig
    from rlvr.model import TinyLM
    from rlvr.pipeline import checkpoint
    from rlvr.pipeline.seeds import log_policy
    from rlvr.tokenizer import Tokenizer

    monkeypatch.chdir(tmp_path)
    tok = Tokenizer()
    model = TinyLM(ModelConfig(d_model=16, n_layer=1, n_head=2, max_len=8), len(tok))
    saved = checkpoint.save("data/grpo/dapo/seed3.pt", model, tok, "grpo@dapo/seed3", "h")
    with stage_run("grpo@dapo", {}, {"variant": "dapo"}, "h") as run:
        with run.child("grpo@dapo/seed3", {"seed": 3}, {"beta": 0.0, "seed": 3}) as child:
            child.log_metrics({"eval_acc_final": 0.8})
            model_id = log_policy(child, model, saved, "grpo@dapo/seed3")
    client, found = runs(mlflow_store)
    child_run = next(r for r in found if "mlflow.parentRunId" in r.data.tags)
    logged = client.get_logged_model(model_id)
    assert logged.name == "grpo-dapo-seed3" and logged.source_run_id == child_run.info.run_id
    assert logged.tags["dvc.artifact"] == "grpo-dapo" and logged.tags["dvc.path"] == "data/grpo/dapo/seed3.pt"
    assert model_id in {o.model_id for o in client.get_run(child_run.info.run_id).outputs.model_outputs}
    assert logged.params == {"beta": "0.0", "seed": "3"}  # what trained it, on its own page
    assert {(m.key, m.value) for m in logged.metrics} == {("eval_acc_final", 0.8)}  # and how it scored
    loaded = mlflow.pytorch.load_model(f"models:/{model_id}")  # found through MLFLOW_TRACKING_URI
    assert isinstance(loaded, TinyLM) and not loaded.training  # as `checkpoint.load` gives it
    x = torch.tensor([[1, 2, 3]])
    assert torch.equal(loaded(x), model(x))


def test_only_sft_and_grpo_policies_belong_to_a_dvc_model_artifact():
    from rlvr.pipeline.paths import model_artifact

    assert model_artifact("hack") is None and model_artifact("sft@two_digit") == "sft-two_digit"
    assert model_artifact("passk") is None


def test_stage_that_raises_leaves_a_failed_run_with_its_steps(mlflow_store):
    with pytest.raises(RuntimeError):
        with stage_run("sft@x", {}, {}, "h") as run:
            run.log_step(0, {"loss": 1.0})
            raise RuntimeError("boom")
    client, (r,) = runs(mlflow_store)
    assert r.info.status == "FAILED"
    assert len(client.get_metric_history(r.info.run_id, "loss")) == 1


def test_interrupted_stage_leaves_a_killed_run(mlflow_store):
    with pytest.raises(KeyboardInterrupt):
        with stage_run("sft@x", {}, {}, "h"):
            raise KeyboardInterrupt
    assert runs(mlflow_store)[1][0].info.status == "KILLED"


def test_a_signal_leaves_killed_the_seed_run_a_generator_holds_open(mlflow_store):
    """As a stage consumes its seeds (`over_seeds` yields inside each seed's run): a signal that
    stops it mid-loop unwinds the loop, the generator is closed (GeneratorExit, not the interrupt,
    reaches the seed's run) and every run it opened ends KILLED, none FAILED or RUNNING."""
    import os
    import signal

    def seeds(run):
        for seed in (0, 1):
            with run.child(f"grpo@v/seed{seed}", {"seed": seed}) as child:
                yield child

    with pytest.raises(KeyboardInterrupt):
        with stage_run("grpo@v", {}, {}, "h") as run:
            for _ in seeds(run):
                os.kill(os.getpid(), signal.SIGTERM)  # as DVC stops a stage
                time.sleep(5)  # the handler raises here
    _, found = runs(mlflow_store)
    assert sorted((r.info.run_name, r.info.status) for r in found) == [
        ("grpo@v", "KILLED"),
        ("grpo@v/seed0", "KILLED"),
    ]
    with pytest.raises(RuntimeError):  # and a later failure is a failure again
        with stage_run("grpo@w", {}, {}, "h"):
            raise RuntimeError("boom")
    _, found = runs(mlflow_store)
    assert {r.info.run_name: r.info.status for r in found}["grpo@w"] == "FAILED"


def test_nested_runs_point_at_their_parent(mlflow_store):
    with stage_run("grpo@v", {}, {}, "h") as parent:
        with parent.child("seed0", {"seed": 0}) as child:
            child.log_step(0, {"reward": 0.5})
    _, found = runs(mlflow_store)
    kids = [r for r in found if r.data.tags.get("mlflow.parentRunId") == parent.run_id]
    assert len(found) == 2 and len(kids) == 1 and kids[0].info.status == "FINISHED"


def test_unreachable_server_stops_before_work_naming_the_uri(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    body_ran = False
    with pytest.raises(TrackingError, match=r"http://127\.0\.0\.1:9 is unreachable"):
        with stage_run("sft@x", {}, {}, "h"):
            body_ran = True
    assert not body_ran


def _slow_seed(seed: int, seconds: float):
    """A seed that trains for `seconds` and reports how long it took, as the stages' seeds do."""
    from rlvr.pipeline.workers import SeedResult

    t0 = time.perf_counter()
    time.sleep(seconds)
    return SeedResult({"train_seconds": time.perf_counter() - t0}, [{"step": 0, "loss": 1.0}], {})


@pytest.mark.slow  # seeds that sleep, in forked workers, beside an MLflow run
@pytest.mark.parametrize("workers", [1, 2])
def test_a_seed_run_spans_the_seed_training_not_its_logging(mlflow_store, workers):
    """Seeds train in workers (or lazily in this process) and are logged afterwards: each seed's run
    must start when its training started and end when it ended, inside the stage's run."""
    from rlvr.pipeline.seeds import over_seeds
    from rlvr.pipeline.workers import seed_results

    with seed_results(_slow_seed, [0, 1], (0.5,), workers) as results:
        with stage_run("grpo@v", {"beta": 0.0}, {}, "h", start=results.started) as parent:
            time.sleep(0.5)  # the stage opening its run (importing MLflow) while the workers train
            logged = {
                seed: result
                for seed, result, _ in over_seeds(parent, [0, 1], results, "grpo@v", {}, (), False)
            }
    client, found = runs(mlflow_store)
    seeds = {r.data.tags["seed"]: r for r in found if "mlflow.parentRunId" in r.data.tags}
    (stage,) = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
    for seed, result in logged.items():
        info = seeds[str(seed)].info
        assert info.status == "FINISHED"
        assert (info.end_time - info.start_time) / 1000 >= result.summary["train_seconds"] - 0.002
        assert info.start_time == int(result.started * 1000) and info.end_time == int(result.ended * 1000)
        assert stage.info.start_time <= info.start_time and info.end_time <= stage.info.end_time
        assert seeds[str(seed)].data.params == {"beta": "0.0", "seed": str(seed)}  # the stage's, and its seed


def _git(root, *args):
    import subprocess

    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_a_run_names_the_code_that_ran_as_mlflows_source_and_in_its_record(
    mlflow_store, tmp_path, monkeypatch
):
    """MLflow's Source and Version columns read `mlflow.source.name` and `mlflow.source.git.commit`:
    the command DVC runs and HEAD's commit, which `git.commit` also names, with `git.dirty`; the
    seed runs inherit them, and `run.made` (the stage's run record) names the same commit."""
    import subprocess

    monkeypatch.chdir(tmp_path)  # the checkout the stage runs in: repo_root() is the working folder
    (tmp_path / "rlvr").mkdir()
    (tmp_path / "rlvr/grpo.py").write_text("# the loop\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "code")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True
    ).stdout.strip()
    with stage_run("grpo@dapo", {}, {"variant": "dapo"}, "h") as run:
        with run.child("grpo@dapo/seed0", {"seed": 0}):
            pass
    (tmp_path / "rlvr/grpo.py").write_text("# the loop, edited\n")
    with stage_run("grpo@dapo", {}, {}, "h") as edited:
        pass
    client, found = runs(mlflow_store)
    by_id = {r.info.run_id: r for r in found}
    tags = by_id[run.run_id].data.tags
    assert tags["mlflow.source.git.commit"] == tags["git.commit"] == head == run.made["git_commit"]
    assert (
        tags["mlflow.source.name"] == "python -m rlvr.pipeline grpo dapo"
        and tags["mlflow.source.type"] == "LOCAL"
    )
    assert tags["git.dirty"] == "false" and run.made["git_dirty"] is False
    seed = next(r for r in found if r.data.tags.get("mlflow.parentRunId") == run.run_id)
    assert seed.data.tags["mlflow.source.git.commit"] == head and seed.data.tags["git.dirty"] == "false"
    assert by_id[edited.run_id].data.tags["git.dirty"] == "true" and edited.made["git_dirty"] is True
    assert run.made["host"] == tags["rlvr.host"] and run.made["tracking_uri"] == mlflow_store
    assert run.made["cpu"] == tags["rlvr.cpu"] == cpu_model() and run.made["cpu"]
    assert run.made["started_utc"].endswith("+00:00")


def test_a_servers_password_stays_out_of_the_record():
    from rlvr.pipeline.store import public_uri

    assert (
        public_uri("https://alice:s3cret@mlflow.example.org:8443/")
        == "https://alice:***@mlflow.example.org:8443/"
    )
    assert public_uri("https://tok@mlflow.example.org/") == "https://tok@mlflow.example.org/"
    assert public_uri("sqlite:////home/a/mlflow.db") == "sqlite:////home/a/mlflow.db"


def test_a_server_uri_keeps_its_host_and_port_and_sends_its_credentials_as_a_header(monkeypatch):
    """The masked URI and the bare one MLflow's client requests keep the host (an IPv6 one in
    brackets) and port; the credentials leave the URI for a Basic auth header."""
    import base64

    from rlvr.pipeline.store import public_uri, server_request

    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    uri = "http://bob:pw@[::1]:5000/mlflow"
    assert public_uri(uri) == "http://bob:***@[::1]:5000/mlflow"
    bare, headers = server_request(uri)
    assert bare == "http://[::1]:5000/mlflow"
    assert headers == {"Authorization": "Basic " + base64.b64encode(b"bob:pw").decode()}
    assert server_request("https://mlflow.example.org/") == ("https://mlflow.example.org/", {})


def test_the_alias_table_in_the_docs_is_the_one_the_runs_log():
    """docs/tracking.md's table pairs each of our per-step metrics with TRL's name: the pairs are
    TRL_NAMES, and a step logs each metric once, under TRL's name where TRL has one."""
    import re

    from conftest import ROOT

    from rlvr.pipeline.tracking import TRL_NAMES, trl_named

    rows = re.findall(r"^\| `([^`]+)` \| (`[^`]+`|—) \|", (ROOT / "docs/tracking.md").read_text(), re.M)
    assert {ours: trl.strip("`") for ours, trl in rows if trl != "—"} == TRL_NAMES
    assert trl_named({"reward_mean": 0.5, "grad_norm": 2.0, "accuracy": 0.4}) == {
        "reward": 0.5,
        "grad_norm": 2.0,
        "accuracy": 0.4,
    }


def test_a_grpo_stage_run_has_trl_names_its_source_intervals_and_datasets(tiny_repo, mlflow_store):
    """The MLflow runs of a GRPO stage, on tiny params and the tests' own store: each seed run's
    curves under TRL's names too, the stage's source tags naming the commit, each key number with
    its 95% interval over chains, and the data it read as dataset inputs with their md5s."""
    import hashlib
    import subprocess

    from rlvr.pipeline.run import run_stage
    from rlvr.pipeline.tracking import TRL_NAMES

    d, _ = tiny_repo
    _git(d, "init", "-q")
    _git(d, "add", "params.yaml")
    _git(d, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "params")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=d, capture_output=True, text=True).stdout.strip()
    run_stage("grpo", "a_grpo", progress=False)
    client, found = runs(mlflow_store)
    (stage,) = [
        r
        for r in found
        if r.data.tags.get("dvc.stage") == "grpo@a_grpo" and "mlflow.parentRunId" not in r.data.tags
    ]
    seeds = [r for r in found if r.data.tags.get("mlflow.parentRunId") == stage.info.run_id]
    assert stage.data.tags["mlflow.source.git.commit"] == stage.data.tags["git.commit"] == head
    assert stage.data.tags["mlflow.source.name"] == "python -m rlvr.pipeline grpo a_grpo"
    assert stage.data.tags["git.dirty"] == "false" and seeds[0].data.tags["mlflow.source.git.commit"] == head
    logged = set(seeds[0].data.metrics)
    assert set(TRL_NAMES.values()) <= logged  # TRL's name for every quantity it names
    assert not (set(TRL_NAMES) - set(TRL_NAMES.values())) & logged  # and never ours beside it
    from rlvr.pipeline.paths import GRPO_CURVES
    from rlvr.report.plots import read_tsv

    unit = seeds[0].info.run_name.rsplit("/", 1)[1]  # seed3 or seed3-g1: its curve's file name
    curve = read_tsv(d / GRPO_CURVES / "a_grpo" / f"{unit}.tsv")
    theirs = client.get_metric_history(seeds[0].info.run_id, "reward")
    logged_rows = sorted((m.step, float(f"{m.value:.6g}")) for m in theirs)  # the curve file keeps 6 digits
    assert logged_rows == [(int(r["step"]), float(r["reward_mean"])) for r in curve] and len(theirs) == 2
    m = stage.data.metrics
    assert m["eval_acc_final_ci95_lo"] <= m["eval_acc_final"] <= m["eval_acc_final_ci95_hi"]
    inputs = {i.dataset.name: i for i in client.get_run(stage.info.run_id).inputs.dataset_inputs}
    assert set(inputs) == {"data/single_digit/sft.jsonl", "data/single_digit/heldout.json"}
    rows = inputs["data/single_digit/sft.jsonl"]
    assert rows.dataset.digest == hashlib.md5((d / "data/single_digit/sft.jsonl").read_bytes()).hexdigest()
    assert [(t.key, t.value) for t in rows.tags] == [("mlflow.data.context", "training")]
    assert [t.value for t in inputs["data/single_digit/heldout.json"].tags] == ["evaluation"]
