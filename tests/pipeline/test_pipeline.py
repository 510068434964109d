"""Pipeline smoke: the real dvc.yaml on tiny params in a throw-away copy of the repo."""

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from conftest import sh, tiny_checkout, tiny_raw

from rlvr.pipeline.provenance import embedded_provenance

pytestmark = pytest.mark.slow  # integration: dvc repro

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A temp git + dvc repo holding this checkout's code, pipeline and tiny params."""
    d = tmp_path_factory.mktemp("repo")
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(d),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    tiny_checkout(d, env)
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm init", d, env)
    return d, env


def test_repro_produces_every_output_and_second_repro_runs_nothing(repo):
    """Every stage runs to its outputs (none reads a params key it does not declare: that would stop
    it, `rlvr.pipeline.stageparams`), and a second `dvc repro` finds nothing to do."""
    d, env = repo
    first = sh("dvc repro", d, env)
    assert "is empty" not in first  # chapter A's task has no held-out split: its file still holds JSON
    assert json.loads((d / "data/single_digit/heldout.json").read_text()) == {
        "task": "single_digit",
        "problems": [],
        "validation": [],
    }
    lock = yaml.safe_load((d / "dvc.lock").read_text())
    for name, entry in lock["stages"].items():
        for out in entry.get("outs", []):
            assert (d / out["path"]).exists(), f"{name}: missing {out['path']}"
    raw = tiny_raw()
    expected = {f"sft@{r}" for r in raw["sft"]} | {f"warmup@{w}" for w in raw["warmups"]}
    expected |= {f"grpo@{v}" for v in raw["variants"]} | {
        "check",
        "data",
        "worked",
        "passk",
        "hack",
        "report",
    }
    assert set(lock["stages"]) == expected
    grpo = json.loads((d / "reports/metrics/grpo-grpo.json").read_text())
    assert grpo["seeds"] == [0, 1] and len(grpo["per_seed"]["eval_acc_final"]) == 2
    assert (d / "data/grpo/dapo/seed1.pt").exists() and (d / "reports/curves/grpo/a_grpo/seed0.tsv").exists()
    passk = json.loads((d / "reports/metrics/passk.json").read_text())
    assert set(passk["variants"]) == {"grpo_end", "grpo", "dapo"} and passk["n"] == 8  # two_digit only
    assert passk["variants"]["dapo"]["samples_per_problem"] == 4  # not a headline variant: n_others
    counts = json.loads((d / "reports/passk-counts.json").read_text())["counts"]
    models = ("sft", "two_digit", "grpo_end", "grpo", "dapo")  # one GRPO seed a chain each
    assert set(counts) == {f"{m}/seed{s}" for m in models for s in (0, 1)}
    assert passk["sft"]["seeds"] == [0, 1] and len(passk["sft"]["per_seed"]["pass_at_1"]) == 2  # over chains
    sft = json.loads((d / "reports/metrics/sft-two_digit.json").read_text())
    assert sft["seeds"] == [0, 1] and len(sft["per_seed"]["sampled_acc_heldout"]) == 2
    assert (d / "data/two_digit/sft/seed1.pt").exists() and (d / "data/warmup/two_digit/seed1.pt").exists()
    assert (d / "reports/curves/sft/single_digit/seed1.tsv").exists()
    hack = json.loads((d / "reports/metrics/hack.json").read_text())
    assert len(hack["per_seed"]["digits_per_response_end"]) == 2
    for fig in (
        "passk-curves.png",
        "passk-scatter.png",
        "hack-reward-vs-accuracy.png",
        "worked-b14-demo.png",
    ):
        assert (d / "reports/figures" / fig).stat().st_size > 1000
        assert (d / "reports/report-figures" / fig).is_file()
    report = json.loads((d / "reports/report.json").read_text())
    assert sum(report["counts"].values()) == len(yaml.safe_load((d / "experiments/claims.yaml").read_text()))
    assert "rlvr-repro report" in (d / "reports/report.md").read_text()
    metrics = json.loads((d / "reports/metrics/sft-two_digit.json").read_text())
    record = json.loads((d / "reports/runs/sft-two_digit.json").read_text())  # timings, run ids
    assert len(record["mlflow_run_id"]) == 32 and 0 <= metrics["sampled_acc_heldout"] <= 1
    assert (d / "mlflow.db").exists()

    second = sh("dvc repro", d, env)
    assert [line for line in second.splitlines() if "Running stage" in line] == ["Running stage 'check':"]
    assert json.loads(sh("dvc status --json", d, env)) == {"check": ["always changed"]}  # only the guard


def _mlflow_runs(d: Path) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{d / 'mlflow.db'}")
    exp = client.get_experiment_by_name("rlvr-repro")
    return client, exp, client.search_runs([exp.experiment_id], max_results=5000)


def test_mlflow_holds_one_run_per_stage_seed_runs_with_params_and_curve_artifacts(repo):
    """After the first `dvc repro`: every stage that ran has exactly one top-level run tagged with
    its DVC stage name; its params are its settings (a variant's resolved config, flat), the raw
    params.yaml keys behind them its artifact params.json; seed runs carry the stage's params, its
    tags and their seed, and span their training; each GRPO seed run holds its curves and
    checkpoint; each pass@k model's run holds its curve as a step series (step = k)."""
    d, _ = repo
    client, exp, runs = _mlflow_runs(d)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"  # the UI opens on training runs
    lock = yaml.safe_load((d / "dvc.lock").read_text())["stages"]
    top = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    stages = sorted(r.data.tags["dvc.stage"] for r in top)
    assert stages == sorted(s for s in lock if s != "check")  # data, worked and report, none twice; the
    # guard runs on every repro and logs no run
    assert all("dvc.exp" not in r.data.tags for r in runs)  # only set inside `dvc exp run`
    grpo = next(r for r in top if r.data.tags["dvc.stage"] == "grpo@grpo")
    dapo = next(r for r in top if r.data.tags["dvc.stage"] == "grpo@dapo")
    assert grpo.data.params["beta"] == "0.04" and dapo.data.params["beta"] == "0.0"
    assert not [k for r in top for k in r.data.params if "." in k]  # no raw dotted keys
    assert "params.json" in {a.path for a in client.list_artifacts(grpo.info.run_id)}
    seeds = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == grpo.info.run_id]
    units = sorted((r.data.tags["seed"], r.data.tags["grpo_seed"]) for r in seeds)
    assert units == [("0", "0"), ("1", "0")]  # a chain each, one GRPO seed
    a_grpo = next(r for r in top if r.data.tags["dvc.stage"] == "grpo@a_grpo")
    nested = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == a_grpo.info.run_id]
    assert sorted((r.data.tags["seed"], r.data.tags["grpo_seed"]) for r in nested) == [
        ("0", "0"),
        ("0", "1"),
        ("1", "0"),
        ("1", "1"),
    ]  # chains x GRPO seeds
    for r in seeds:
        assert r.data.tags["dvc.stage"] == "grpo@grpo" and len(r.data.tags["git.commit"]) >= 7
        assert r.data.tags["params.raw_hash"] == grpo.data.tags["params.raw_hash"]
        ids = {"seed": r.data.tags["seed"], "grpo_seed": r.data.tags["grpo_seed"]}
        assert r.data.params == {**grpo.data.params, **ids}
        assert grpo.info.start_time <= r.info.start_time < r.info.end_time <= grpo.info.end_time
        files = {a.path for a in client.list_artifacts(r.info.run_id, "seed")}
        u = f"seed{ids['seed']}" + ("" if ids["grpo_seed"] == "0" else f"-g{ids['grpo_seed']}")
        assert files == {f"seed/{u}.tsv", f"seed/{u}-eval.tsv"}  # the weights: its logged model
    passk = next(r for r in top if r.data.tags["dvc.stage"] == "passk")
    models = {
        r.data.tags["model"]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == passk.info.run_id
    }
    assert set(models) == {"sft", "two_digit", "grpo_end", "grpo", "dapo"}
    history = client.get_metric_history(models["sft"].info.run_id, "pass_at_k")
    assert sorted(m.step for m in history) == [1, 2, 3, 4]  # k up to max(ks) = 4
    assert {"pass_at_1", "pass_at_4", "never_solved"} <= set(models["dapo"].data.metrics)


def test_each_trained_policy_is_a_logged_model_that_mlflow_pytorch_loads(repo):
    """Every SFT start and GRPO policy is an MLflow logged model of its seed's run, tagged with the
    DVC copy of its weights, and `mlflow.pytorch.load_model` gives back those weights."""
    import mlflow
    import mlflow.pytorch
    import torch
    from mlflow.entities import LoggedModelStatus

    from rlvr.io.files import md5
    from rlvr.pipeline import checkpoint
    from rlvr.tokenizer import Tokenizer

    d, _ = repo
    client, exp, runs = _mlflow_runs(d)
    models = client.search_logged_models(experiment_ids=[exp.experiment_id])
    by_name = {m.name: m for m in models}
    assert {"sft-two_digit-seed0", "grpo-dapo-seed1", "grpo-a_grpo-seed0-g1"} <= set(by_name)
    assert all(m.status == LoggedModelStatus.READY for m in models)
    dapo = by_name["grpo-dapo-seed1"]
    assert dapo.tags["dvc.artifact"] == "grpo-dapo" and dapo.tags["dvc.path"] == "data/grpo/dapo/seed1.pt"
    run = client.get_run(dapo.source_run_id)
    assert run.data.tags["dvc.stage"] == "grpo@dapo" and run.data.tags["seed"] == "1"
    assert dapo.model_id in {o.model_id for o in run.outputs.model_outputs}
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{d / 'mlflow.db'}")  # where `models:/<id>` is looked up
    try:
        loaded = mlflow.pytorch.load_model(f"models:/{dapo.model_id}")
    finally:
        mlflow.set_tracking_uri(previous)
    kept = checkpoint.load(d / dapo.tags["dvc.path"], Tokenizer())
    assert md5(d / dapo.tags["dvc.path"]) == dapo.tags["checkpoint.md5"]
    for (k, a), (_, b) in zip(loaded.state_dict().items(), kept.state_dict().items(), strict=True):
        assert torch.equal(a, b), k


def test_one_commit_names_the_code_in_the_run_the_record_and_the_figure(repo, monkeypatch):
    """Every stage's MLflow run (MLflow's source tags and ours), its run record and the report's
    figure copies of its outputs name the same commit: the code that ran, HEAD then."""
    from PIL import Image

    d, env = repo
    sh("dvc repro", d, env)
    head = sh("git rev-parse HEAD", d, env).strip()
    client, _, runs = _mlflow_runs(d)
    for record in sorted((d / "reports/runs").glob("*.json")):
        made = json.loads(record.read_text())["made"]
        run = next(r for r in runs if r.info.run_id == json.loads(record.read_text())["mlflow_run_id"])
        tags = run.data.tags
        assert made["git_commit"] == tags["git.commit"] == tags["mlflow.source.git.commit"] == head, record
        assert made["git_dirty"] is False and tags["git.dirty"] == "false", record
        assert made["host"] == tags["rlvr.host"] and tags["mlflow.source.name"].startswith(
            "python -m rlvr.pipeline"
        )
    passk = json.loads((d / "reports/runs/passk.json").read_text())["made"]
    with Image.open(d / "reports/report-figures/passk-curves.png") as im:
        assert im.text["rlvr:git_commit"] == head and json.loads(im.text["rlvr:made"]) == passk
    assert f"code: git {head[:10]}, made on {passk['host']}" in (d / "reports/report.md").read_text()
    from rlvr.tools import verify

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the repo's own store, as a user's
    assert verify.commit_problems(d) == []  # dvc.lock, run records, figures and MLflow: one commit
    run_id = json.loads((d / "reports/runs/passk.json").read_text())["mlflow_run_id"]
    client.set_tag(run_id, "git.commit", "0" * 40)
    try:
        assert verify.commit_problems(d) == [
            f"stage passk: MLflow run {run_id} says commit 0000000000, its run record {head[:10]}"
        ]
    finally:
        client.set_tag(run_id, "git.commit", head)


def test_every_declared_model_artifact_loads_as_docs_tracking_md_shows(repo):
    """Each model of dvc.yaml's `artifacts:` (DVC's model registry) is a folder of seed<n>.pt that
    loads back, as docs/tracking.md's one-liner loads one, into a TinyLM in eval mode that answers."""
    d, env = repo
    doc = (Path(__file__).parents[2] / "docs/tracking.md").read_text()
    assert "from rlvr.pipeline.checkpoint import load; from rlvr.tokenizer import Tokenizer" in doc
    script = """
import json, sys
from dvc.repo import Repo
from rlvr.pipeline.checkpoint import load
from rlvr.tokenizer import Tokenizer
with Repo(".") as repo:
    (declared,) = repo.artifacts.read().values()
loaded = {}
for name, artifact in declared.items():
    files = sorted(__import__("pathlib").Path(artifact.path).glob("seed*.pt"))
    assert files, name
    model = load(str(files[0]), Tokenizer())
    assert not model.training, name
    loaded[name] = [str(f) for f in files]
print(json.dumps(loaded))
"""
    loaded = json.loads(sh(f"{sys.executable} -c '{script}'", d, env).strip().splitlines()[-1])
    raw = tiny_raw()
    assert set(loaded) == {f"sft-{r}" for r in raw["sft"]} | {f"grpo-{v}" for v in raw["variants"]}


def test_dvc_plots_overlay_each_variant_without_combs(repo):
    """`dvc plots show --json`: the chapter B accuracy chart overlays one curve per fixed-budget
    variant, coloured by file, with a value in every row (an empty cell would be drawn as 0, a comb);
    a controlled end's chains, which stop at different steps, are drawn one line each in their own
    view, never as a mean over the chains still running."""
    d, env = repo
    charts = json.loads(sh("dvc plots show --json 2>/dev/null", d, env))["data"]
    views = {"grpo-accuracy-chapter-b", "grpo-accuracy-chapter-a", "passk", "passk-gain", "sft-loss", "hack"}
    assert views | {"grpo-controlled-end"} <= set(charts)
    ended = {r["filename"] for r in charts["grpo-controlled-end"][0]["content"]["data"]["values"]}
    assert ended and all(name.endswith("-eval.tsv") for name in ended)
    spec = charts["grpo-accuracy-chapter-b"][0]["content"]
    rows = spec["data"]["values"]
    assert {r["filename"] for r in rows} == {"grpo.tsv", "dapo.tsv"}
    assert all(r["eval_acc"] != "" and 0 <= float(r["eval_acc"]) <= 1 for r in rows)
    assert sorted(int(r["step"]) for r in rows if r["filename"] == "grpo.tsv") == [0, 1, 2]  # eval_every 1
    colours = {layer["encoding"]["color"]["field"] for layer in spec["layer"] if "color" in layer["encoding"]}
    assert colours == {"series"}  # one colour per file, not per revision
    assert "hack-samples" not in json.dumps(list(charts))


def test_a_moved_checkout_logs_into_its_own_artifact_folder(repo, tmp_path):
    """MLflow records the artifact folder as an absolute path; a copy of the checkout must not write
    into the original's."""
    d, env = repo
    copy = tmp_path / "moved"
    shutil.copytree(d, copy, symlinks=True)
    before = sorted(p.relative_to(d) for p in (d / "mlartifacts").rglob("*"))
    sh(
        "dvc repro -f -s worked",
        copy,
        {**env, "PYTHONPATH": str(copy)},
    )
    assert sorted(p.relative_to(d) for p in (d / "mlartifacts").rglob("*")) == before
    client, exp, runs = _mlflow_runs(copy)
    assert exp.artifact_location == (copy / "mlartifacts").as_uri()
    worked = max(
        (r for r in runs if r.data.tags.get("dvc.stage") == "worked"), key=lambda r: r.info.start_time
    )
    assert worked.info.artifact_uri.startswith((copy / "mlartifacts").as_uri())
    assert any((copy / "mlartifacts").rglob("worked.json"))


def test_identical_training_leaves_identical_checkpoints_and_downstream_cached(repo):
    """A forced rerun of an SFT stage writes a byte-identical checkpoint (no timings or run ids in it),
    so DVC sees no change for the GRPO stages that start from it."""
    d, env = repo
    ckpt = d / "data/single_digit/sft/seed1.pt"
    before = hashlib.md5(ckpt.read_bytes()).hexdigest()
    sh("dvc repro -f -s sft@single_digit", d, env)
    assert hashlib.md5(ckpt.read_bytes()).hexdigest() == before
    status = sh("dvc status", d, env)
    assert "grpo@" not in status and "hack" not in status, status


def test_an_identical_rerun_reruns_only_the_report_and_provenance_reaches_its_run(repo):
    """A forced rerun of a GRPO stage trains the same weights but takes other seconds and makes new
    MLflow runs: those go to its run record (reports/runs/), so its metrics and curves keep their
    bytes and `passk` stays cached; the report, whose figures name the record, reruns and names the
    new run; provenance follows dvc.lock to the record and the new run."""
    d, env = repo
    metrics = d / "reports/metrics/grpo-grpo.json"
    before = hashlib.md5(metrics.read_bytes()).hexdigest()
    old_run = json.loads((d / "reports/runs/grpo-grpo.json").read_text())["mlflow_run_id"]
    sh("dvc repro -f -s grpo@grpo", d, env)
    assert hashlib.md5(metrics.read_bytes()).hexdigest() == before
    record = json.loads((d / "reports/runs/grpo-grpo.json").read_text())
    assert record["mlflow_run_id"] != old_run and "step_seconds_median" in record
    assert "mlflow_run_id" not in json.loads(metrics.read_text())
    assert "step_seconds" not in (d / "reports/curves/grpo/grpo/seed0.tsv").read_text().splitlines()[0]
    status = json.loads(sh("dvc status --json", d, env))
    assert "report" in status and set(status) <= {"check", "report"}, (
        status
    )  # passk: nothing it reads changed
    figure = d / "reports/report-figures/grpo-curves-chapter-b.png"
    assert record["mlflow_run_id"] not in embedded_provenance(figure)["rlvr:mlflow_runs"]
    out = sh("dvc repro", d, env)
    assert "Running stage 'report'" in out and "Running stage 'passk'" not in out, out
    assert record["mlflow_run_id"] in embedded_provenance(figure)["rlvr:mlflow_runs"]
    prov = json.loads(sh("rlvr provenance reports/metrics/grpo-grpo.json --json --no-status", d, env))
    assert prov["mlflow_runs"]["stage"] == record["mlflow_run_id"]


def test_a_rerun_in_a_fresh_clone_is_identical_on_this_machine(repo):
    """`rlvr verify --rerun`: the committed results, rerun from scratch in a fresh clone of HEAD
    (`dvc repro --force`, the clone's own code and store), come out bit-equal, and the record of it
    goes into reports/rerun.json beside the ones already there."""
    d, env = repo
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm results", d, env)
    before = json.loads((d / "reports/rerun.json").read_text())
    out = sh("rlvr verify --rerun", d, env)
    assert out.splitlines()[0].startswith("identical               a fresh clone of "), out
    record = json.loads((d / "reports/rerun.json").read_text())
    assert record["perturbed"] == before["perturbed"]  # the other kind's record is kept
    rerun = record["rerun"]
    assert rerun["command"] == "rlvr verify --rerun" and rerun["perturbation"] is None
    assert rerun["metrics_differing"] == [] and rerun["flips"] == rerun["moves"] == []
    assert rerun["stages_run"] == len(yaml.safe_load((d / "dvc.lock").read_text())["stages"])
    assert rerun["commit"] == sh("git rev-parse HEAD", d, env).strip()


def test_changing_one_runs_param_reruns_only_its_stages(repo):
    """A chapter A SFT param: `dvc status` lists no chapter B stage, and `dvc repro` reruns none."""
    d, env = repo
    sh("dvc repro", d, env)  # up to date first (nothing to do after the tests above)
    raw = yaml.safe_load((d / "params.yaml").read_text())
    raw["sft"]["single_digit"]["epochs"] = 2
    (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    status = json.loads(sh("dvc status --json", d, env))
    # hack reads the params of its start (`hack.sft`, chapter A's single_digit) as well as its checkpoints
    assert set(status) == {"check", "warmup@single_digit", "sft@single_digit", "hack"}, status  # no chapter B
    out = sh("dvc repro", d, env)
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert {"sft@single_digit", "grpo@a_grpo", "hack"} <= ran
    assert not ran & {"data", "warmup@two_digit", "sft@two_digit", "grpo@grpo", "grpo@dapo", "passk"}, ran


def test_one_runs_noise_reruns_the_data_stage_but_only_that_runs_training(repo):
    """Every run's rows come from one `data` stage; the runs whose rows come out byte-identical keep
    their warm-up and SFT stages cached."""
    d, env = repo
    raw = yaml.safe_load((d / "params.yaml").read_text())
    raw["sft"]["two_digit"]["noise"] = {"kind": "uniform", "rate": 0.25}
    (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    out = sh("dvc repro", d, env)
    assert "Running stage 'data'" in out and "Running stage 'sft@two_digit'" in out
    assert "Running stage 'sft@single_digit'" not in out and "Running stage 'warmup@single_digit'" not in out


def test_dvc_exp_run_dry_on_the_committed_workspace_and_its_metrics_are_the_headlines(repo):
    """With the results committed, DVC's dry experiment (`--allow-missing`: its copy of the workspace
    lacks the DVC-cached files) plans only the guard; `dvc exp show` has a few numbers per stage,
    not every seed's."""
    d, env = repo
    sh("dvc repro", d, env)
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm results", d, env)
    out = sh("dvc exp run --dry --allow-missing", d, env)
    planned = [line for line in out.splitlines() if line.startswith("Running stage")]
    assert planned == ["Running stage 'check':"], out
    shown = json.loads(sh("dvc exp show --json", d, env))
    metrics = shown[0]["data"]["metrics"]
    assert metrics and all(f.startswith("reports/headline/") for f in metrics), sorted(metrics)
    assert set(metrics["reports/headline/grpo-grpo.json"]["data"]) == {"acc_start", "acc_end"}


def test_a_params_profile_runs_in_its_folder_and_its_report_shows_the_default_plan_beside(repo, monkeypatch):
    """A second plan as powered/ is one: its own params (other seeds), plan and dvc.yaml in a folder;
    `dvc repro p/dvc.yaml` writes every output there, none in the repository's own folders; its
    report names its plan and shows the default plan's verdicts beside; one commit names its results
    (followed through its links), and a moved default report is found."""
    d, env = repo
    sh("dvc repro", d, env)
    default_lock = (d / "dvc.lock").read_text()
    p = d / "p"
    raw = tiny_raw()
    for run in raw["sft"].values():
        run["seeds"] = [2, 3]
    raw["grpo"]["defaults"]["seeds"] = [2, 3]
    for v in raw["variants"].values():
        v["seeds"] = [2, 3]
    raw["hack"]["seeds"] = [2, 3]
    for run in raw["starts"]["runs"].values():  # `rlvr starts`' candidates share its chains
        run["seeds"] = [2, 3]
    raw["starts"]["chains"] = [2, 3]
    (p / "experiments").mkdir(parents=True)
    (p / "reports" / "starts").mkdir(parents=True)
    (p / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (p / "experiments" / "plan.yaml").write_text("beside: ../reports/report.json\n")
    for link, target in (
        ("experiments/claims.yaml", "../../experiments/claims.yaml"),
        ("reports/benchmarks.json", "../../reports/benchmarks.json"),
        ("reports/rerun.json", "../../reports/rerun.json"),
        ("reports/starts/starts.json", "../../../reports/starts/starts.json"),
    ):
        (p / link).symlink_to(target)
    sh(f"{sys.executable} -m rlvr pipeline --write --profile p", d, env)
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm profile", d, env)
    out = sh("dvc repro p/dvc.yaml", d, env)
    assert "Running stage 'p/dvc.yaml:report'" in out
    assert (d / "dvc.lock").read_text() == default_lock  # the default plan untouched
    report = json.loads((p / "reports/report.json").read_text())
    assert report["beside"]["path"] == "../reports/report.json"
    sft = json.loads((p / "reports/metrics/sft-two_digit.json").read_text())
    assert sft["seeds"] == [2, 3]
    md = (p / "reports/report.md").read_text()
    assert "`p/experiments/plan.yaml` as committed at" in md and "Beside the other plan" in md
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm results", d, env)
    from rlvr.tools import verify

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(d)
    assert verify.profiles(d) == [p]
    # (not its dvc.yaml: this process's rlvr renders from the checkout, not the copy; nor its claims:
    # the tiny pipeline runs a few variants. The committed powered/ is held to both by the fast tier)
    for name in ("one commit", "the other plan"):
        assert verify.PROFILE_CHECKS[name](p) == [], name
    report_json = d / "reports/report.json"
    report_json.write_text(report_json.read_text().replace('"claims"', '"claims"', 1) + "\n")
    assert verify.beside_problems(p) != []  # the default plan's verdicts moved since: found
