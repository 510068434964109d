import copy
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

# The checkout is not the tests': its store, outputs and dvc.lock are watched over the session.
from checkout_guard import _checkout_unchanged, pytest_sessionfinish, pytest_terminal_summary  # noqa: F401

from rlvr.configs import GRPOConfig, ModelConfig, SFTConfig, TaskConfig, WorkedConfig
from rlvr.io.params import build, parse_params, read_yaml

ROOT = Path(__file__).resolve().parents[1]
_COMMITTED: dict[str, Path] = {}  # a path of the checkout -> its HEAD version, extracted this session


def at_head(rel: str) -> Path:
    """`rel` (a file or folder of this checkout: "dvc.lock", "reports/metrics") as HEAD has it,
    extracted once a session into a temporary folder. Tests that need the committed results read
    these, never the working tree's: those are the user's, which `dvc repro` rewrites (and the
    session guard, `checkout_guard`, watches)."""
    import atexit
    import io
    import shutil
    import subprocess
    import tarfile
    import tempfile

    if rel not in _COMMITTED:
        tar = subprocess.run(
            ["git", "archive", "--format=tar", "HEAD", "--", rel], cwd=ROOT, capture_output=True, check=True
        ).stdout
        into = Path(tempfile.mkdtemp(prefix="rlvr-committed-"))
        atexit.register(shutil.rmtree, into, True)
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            archive.extractall(into, filter="data")
        _COMMITTED[rel] = into / rel
    return _COMMITTED[rel]


# Full settings for configs that tests build by hand (params.yaml has no defaults, so neither do the
# dataclasses): the values the unit tests were written against, independent of params.yaml.
TEST_SETTINGS = {
    ModelConfig: {"d_model": 128, "n_layer": 2, "n_head": 4, "max_len": 32},
    TaskConfig: {"heldout": 0, "validation": 0, "max_new_tokens": 2},
    SFTConfig: {
        "task": "single_digit",
        "seeds": [0],
        "model": None,
        "noise": {"kind": "uniform", "rate": 0.5},
        "repeats": 4,
        "warmup": "single_digit",
        "clean_epochs": 0,
        "epochs": 10,
        "batch_size": 64,
        "lr": 3e-3,
        "schedule": "cosine",
        "weight_decay": 0.0,
        "grad_clip": 1.0,
        "eval_max_prompts": 300,
        "target": None,
        "check_every": 1,
        "near": 0.1,
        "redraws": 0,
    },
    GRPOConfig: {
        "task": "single_digit",
        "sft": "single_digit",
        "seeds": [0],
        "grpo_seeds": 1,
        "steps": 25,
        "prompts_per_step": 16,
        "group_size": 8,
        "temperature": 1.0,
        "lr": 1e-3,
        "grad_clip": 1.0,
        "beta": 0.04,
        "kl_estimator": "k3",
        "kl_in_reward": False,
        "entropy_coeff": 0.0,
        "clip_eps_low": 0.2,
        "clip_eps_high": 0.2,
        "ratio": "token",
        "advantage": "group",
        "aggregation": "seq_mean",
        "inner_epochs": 1,
        "dynamic_sampling": False,
        "max_gen_rounds": 4,
        "overlong_buffer": 0,
        "overlong_penalty": 1.0,
        "eval_every": 5,
        "target": None,
        "check_every": 5,
        "near": 0.05,
    },
    WorkedConfig: {
        "seed": 0,
        "kl_samples": 4000,
        "kl_vocab": 10,
        "demo_prompts": 24,
        "demo_group_size": 8,
        "demo_iters": 200,
        "demo_lr": 0.01,
        "demo_d_min": -2.0,
        "demo_d_max": 5.0,
    },
}


def make(cls, **overrides):
    """A validated config of type `cls`: TEST_SETTINGS[cls] with `overrides` (a bad value raises
    ConfigError, as params.yaml would)."""
    return build(cls, {**TEST_SETTINGS[cls], **overrides}, f"test.{cls.__name__}")


def tiny_raw() -> dict:
    """params.yaml shrunk so every stage runs in seconds (same keys, smaller numbers)."""
    raw = read_yaml(ROOT / "params.yaml")  # as the stages read it
    raw = copy.deepcopy(raw)
    raw["model"].update(d_model=32, n_layer=1, n_head=2)
    del raw["sft"]["single_digit_hi"], raw["warmups"]["single_digit_hi"]  # a_hi_*'s: dropped below
    for run in raw["sft"].values():
        run.update(seeds=[0, 1], epochs=1, repeats=1, batch_size=256, eval_max_prompts=20)
        run["clean_epochs"] = min(run.get("clean_epochs", raw["sft_defaults"]["clean_epochs"]), 1)
    raw["grpo"]["defaults"].update(seeds=[0, 1], steps=2, prompts_per_step=4, group_size=4, eval_every=1)
    keep = ("grpo_end", "grpo", "dapo", "a_grpo")  # both tasks, a controlled end, dynamic sampling, beta 0
    raw["variants"] = {
        k: {**v, "seeds": [0, 1], **({"steps": 2, "eval_every": 1} if "steps" in v else {})}
        for k, v in raw["variants"].items()
        if k in keep
    }
    raw["variants"]["grpo_end"].update(check_every=1, eval_every=1)  # its cap: 2 steps
    raw["passk"]["contrast"] = "two_digit"  # params.yaml scores none: two_digit stands in for one
    raw["worked"].update(kl_samples=500, demo_iters=20)
    raw["passk"].update(n=8, n_others=4, ks=[1, 2, 4], bootstrap=20)
    raw["hack"].update(seeds=[0, 1], steps=2, window=1, max_new_tokens=3, sample_rows=2)
    raw["starts"]["candidates"] = ["two_digit", "two_digit_slips"]  # two of the three
    raw["starts"]["chains"] = [0, 1]
    raw["starts"]["runs"]["two_digit_slips"].update(
        seeds=[0, 1], clean_epochs=1, epochs=1, batch_size=256, eval_max_prompts=20
    )
    return raw


@pytest.fixture
def tiny_raw_params() -> dict:
    return tiny_raw()


@pytest.fixture
def tiny_params():
    return parse_params(tiny_raw())


@pytest.fixture
def mlflow_store(tmp_path_factory, monkeypatch):
    """A private SQLite MLflow store for one test, in a folder of its own (tmp_path stays the
    test's), with its artifacts beside it: the experiment is made here with that artifact folder (a
    store without one writes to ./mlruns, in the checkout when the test runs from it)."""
    import logging

    from mlflow.tracking import MlflowClient

    from rlvr.pipeline.tracking import EXPERIMENT, KIND, KIND_TAG

    folder = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.delenv("DVC_EXP_NAME", raising=False)
    loggers = [logging.getLogger(name) for name in ("mlflow", "alembic")]  # "Creating ... tables"
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.WARNING)
    try:
        MlflowClient(uri).create_experiment(
            EXPERIMENT, artifact_location=(folder / "mlartifacts").as_uri(), tags={KIND_TAG: KIND}
        )
    finally:
        for log, level in zip(loggers, levels):
            log.setLevel(level)
    return uri


@pytest.fixture
def tiny_repo(tmp_path, monkeypatch, mlflow_store):
    """A working folder with tiny params and both tasks' data, warm-ups and SFT starts made by the
    stages themselves (in this process, logging to the test's own store): GRPO and pass@k stages
    can run from it."""
    from rlvr.pipeline.run import run_stage

    monkeypatch.chdir(tmp_path)
    raw = tiny_raw()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    run_stage("data", None, progress=False)
    for run in ("single_digit", "two_digit"):
        run_stage("warmup", run, progress=False)
        run_stage("sft", run, progress=False)
    return tmp_path, raw


@pytest.fixture(autouse=True)
def _threads():
    import torch

    torch.set_num_threads(int(os.environ.get("RLVR_TEST_THREADS", "2")))


def sh(cmd: str, cwd: Path, env: dict) -> str:
    """Run a shell command in `cwd` and return what it printed (stdout, then stderr); fail the test
    with the tail of both when it fails."""
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, shell=True)
    assert out.returncode == 0, f"{cmd} failed in {cwd}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout + out.stderr


def tiny_checkout(d: Path, env: dict) -> None:
    """This checkout's code, claims and pipeline in `d` as a git + DVC repo (nothing committed), with
    tiny params, this checkout's DVC config and plot templates, and the dvc.yaml they give (its plots
    name the tiny variants)."""
    import shutil
    import subprocess
    import sys

    shutil.copytree(ROOT / "rlvr", d / "rlvr", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "experiments", d / "experiments")
    committed = ("reports/benchmarks.json", "reports/starts/starts.json", "reports/rerun.json")
    for name in ("pyproject.toml", ".gitignore", *committed):
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(at_head(name) if name.startswith("reports/") else ROOT / name, d / name)
    (d / "params.yaml").write_text(yaml.safe_dump(tiny_raw(), sort_keys=False))
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=d, env=env, check=True, capture_output=True)
    shutil.copy(ROOT / ".dvc" / "config", d / ".dvc" / "config")  # analytics off, the offline plots page
    shutil.copytree(ROOT / ".dvc" / "plots", d / ".dvc" / "plots")  # the templates dvc.yaml's views name
    subprocess.run(
        [sys.executable, "-m", "rlvr", "pipeline", "--write"], cwd=d, env=env, check=True, capture_output=True
    )


def ctrl_c_as_at_a_terminal() -> None:
    """In the child before exec: SIGINT back to its default. A test suite started in the background
    (`cmd &` in a script) passes SIGINT on ignored, and an ignored SIGINT stays ignored across exec;
    a user's foreground `rlvr ui` has the default, which the test's Ctrl-C needs."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A real file system of `size` mounted at `where` for the test (root with CAP_SYS_ADMIN, as on
    the CI machine; elsewhere the test is skipped: the guard's patched tests stand in)."""
    where.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.strip() or mount.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)
