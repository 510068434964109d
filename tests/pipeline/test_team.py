"""Team mode, for real: a shared MLflow server and a shared DVC remote, as docs/team.md says.

One tiny repo (the real dvc.yaml on `conftest.tiny_raw()` params) runs `dvc repro` against a live
`mlflow server` (SQLite backend, proxied artifact root in a temp folder) and then plays "clone A":
it commits its results and pushes them, with the run-cache, to a DVC remote (a local folder stands
in for S3/GCS/SSH). Clones B then get the results without training anything with A's `dvc.lock`
(`dvc pull`); without it, from the run-cache alone, only the stages DVC run-caches come back.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import sh, tiny_checkout

pytestmark = pytest.mark.slow  # integration: dvc repro and an MLflow server

BIN = Path(sys.executable).parent
MLFLOW = BIN / "mlflow"
SERVER_START_S = 60  # ~15-30 s here on 2 busy cores
SERVER_STOP_S = 20


# ---------------------------------------------------------------- shell and files


def git_commit(d: Path, env: dict, message: str, *paths: str) -> None:
    """Commit `paths` (everything not ignored when none are named) with a throw-away identity."""
    add = " ".join(shlex.quote(p) for p in paths) if paths else "-A"
    sh(f"git add {add} && git -c user.name=t -c user.email=t@t commit -qm {shlex.quote(message)}", d, env)


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def lock_stages(d: Path) -> dict:
    """The `stages:` of a repo's dvc.lock."""
    return yaml.safe_load((d / "dvc.lock").read_text())["stages"]


def output_md5s(d: Path, lock: dict) -> dict[str, str]:
    """{path: md5} of every file the stages of `lock` wrote in repo `d` (directory outputs file by
    file): what two clones must agree on, byte for byte."""
    found = {}
    for entry in lock.values():
        for out in entry.get("outs", []):
            top = d / out["path"]
            for f in sorted(top.rglob("*")) if top.is_dir() else [top]:
                if f.is_file():
                    found[str(f.relative_to(d))] = md5(f)
    return found


def run_cache_stages(d: Path) -> set[str]:
    """The stages of repo `d` with an entry in its own run-cache (.dvc/cache/runs: one YAML file per
    run, holding the stage's cmd, deps, params and outs), i.e. what `dvc push --run-cache` sends."""
    by_cmd = {entry["cmd"]: name for name, entry in lock_stages(d).items()}
    entries = [yaml.safe_load(p.read_text()) for p in (d / ".dvc/cache/runs").rglob("*") if p.is_file()]
    return {by_cmd[e["cmd"]] for e in entries}


def fully_cached_stages(d: Path) -> set[str]:
    """The stages of repo `d` whose every output is DVC-cached: the only ones a clone can restore from
    a remote's run-cache. DVC 3 run-caches a stage only when its outputs other than metrics and plots
    are cached (`Stage.run`), and `dvc push --run-cache` sends the run records and the workspace's
    cached files, never the `cache: false` files a record names."""
    from dvc.repo import Repo as DvcRepo

    with DvcRepo(str(d)) as repo:
        return {s.name for s in repo.index.stages if all(o.use_cache for o in s.outs)}


# ---------------------------------------------------------------- the MLflow server


@dataclass
class Server:
    uri: str  # http://127.0.0.1:PORT, what teammates put in MLFLOW_TRACKING_URI
    artifacts: Path  # --artifacts-destination: where the server stores what clients upload


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(folder: Path, port: int) -> list[str]:
    """A team server in miniature: SQL backend store, artifacts proxied by the server into a folder
    (clients upload over HTTP and never see the folder, as they would not see an S3 bucket).
    One worker: this machine has two cores."""
    return [
        str(MLFLOW),
        "server",
        "--backend-store-uri",
        f"sqlite:///{folder / 'mlflow.db'}",
        "--artifacts-destination",
        str(folder / "artifacts"),
        "--serve-artifacts",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]


def wait_healthy(uri: str, proc: subprocess.Popen, log: Path, timeout: float = SERVER_START_S) -> None:
    """Poll `/health` until the server answers; fail with its log if it exits or stays silent."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(
                f"mlflow server exited with {proc.returncode} before answering:\n{log.read_text()[-3000:]}"
            )
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(
        f"mlflow server did not answer {uri}/health within {timeout:.0f} s:\n{log.read_text()[-3000:]}"
    )


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_group(proc: subprocess.Popen) -> None:
    """Stop the server and every process it started (uvicorn and its workers share its process
    group): SIGTERM, then SIGKILL for whatever is still there after SERVER_STOP_S."""
    pgid = proc.pid  # started with start_new_session: the group id is the leader's pid
    if group_alive(pgid):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + SERVER_STOP_S
    while group_alive(pgid) and time.monotonic() < deadline:
        proc.poll()  # reap the leader so that it does not linger as a zombie
        time.sleep(0.2)
    if group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)
    proc.wait()


@contextmanager
def running_server(folder: Path, artifacts: Path | None = None) -> Iterator[Server]:
    """A live `mlflow server` on 127.0.0.1 and a free port, its stores in `folder` (its artifacts in
    `artifacts`, default `folder/artifacts`), stopped (whole process group) on leaving even when a
    test or the start itself fails. Job execution (GenAI scorer workers) is switched off: nothing
    here uses it and it would start seven more processes on two cores."""
    if not MLFLOW.exists():
        pytest.skip(f"no `mlflow` executable beside {sys.executable}: the MLflow CLI is not installed")
    port = free_port()
    command = server_command(folder, port)
    artifacts = artifacts or folder / "artifacts"
    command[command.index("--artifacts-destination") + 1] = str(artifacts)
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    log = folder / "server.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            command, cwd=folder, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        uri = f"http://127.0.0.1:{port}"
        wait_healthy(uri, proc, log)
        yield Server(uri, artifacts)
    finally:
        stop_group(proc)


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("mlflow-server")) as server:
        yield server


# ---------------------------------------------------------------- clone A: the tiny repo


def team_env(d: Path, tracking_uri: str) -> dict:
    """A teammate's shell in repo `d`: this venv first on PATH, the repo's code importable, the shared
    tracking server set, no DVC stage variables leaking in from an outer run."""
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(d),
        "MLFLOW_TRACKING_URI": tracking_uri,
    }
    for name in ("DVC_ROOT", "DVC_STAGE", "DVC_EXP_NAME"):
        env.pop(name, None)
    return env


def own_cache(d: Path, env: dict) -> None:
    """Give repo `d` a DVC cache of its own (in .dvc/config.local, not committed): a global
    `cache.dir` shared by the clones would let B find A's files without pulling anything."""
    sh(f"dvc cache dir --local {shlex.quote(str(d / '.dvc' / 'cache'))}", d, env)


def trained(out: str) -> list[str]:
    """The stages `dvc repro` ran, less the guard `check`, which runs on every repro."""
    return [line for line in out.splitlines() if "Running stage" in line and "'check'" not in line]


def build_tiny_repo(d: Path, env: dict) -> None:
    """This checkout's code, experiments and pipeline with tiny params, as a git + DVC repo whose
    first commit holds everything a clone needs to run `dvc repro` (.dvc/ included)."""
    tiny_checkout(d, env)
    own_cache(d, env)
    git_commit(d, env, "code, params and pipeline")


@dataclass
class Repo:
    path: Path
    env: dict  # its teammate's shell (team_env)


@pytest.fixture(scope="module")
def clone_a(tmp_path_factory, mlflow_server) -> Repo:
    """The tiny repo after `dvc repro` with every stage logging to the shared server."""
    d = tmp_path_factory.mktemp("clone-a")
    env = team_env(d, mlflow_server.uri)
    build_tiny_repo(d, env)
    sh("dvc repro", d, env)
    return Repo(d, env)


@pytest.fixture(scope="module")
def published(clone_a, tmp_path_factory) -> str:
    """Clone A shares its work: the remote's URL committed to `.dvc/config` (every teammate then gets
    it with `git clone`; credentials would go to `.dvc/config.local`), then the results (dvc.lock and
    the small `cache: false` outputs) committed, then the DVC-cached outputs and the run-cache pushed.
    The remote is $RLVR_DVC_REMOTE when set, else a temp folder. Returns the remote's URL."""
    d, env = clone_a.path, clone_a.env
    url = os.environ.get("RLVR_DVC_REMOTE") or str(tmp_path_factory.mktemp("dvc-remote"))
    sh(f"dvc remote add -d team {shlex.quote(url)}", d, env)
    git_commit(d, env, "team remote", ".dvc/config")
    git_commit(d, env, "results of dvc repro")
    sh("dvc push --run-cache", d, env)
    return url


def clone_b(a: Repo, where: Path) -> Repo:
    """`git clone` of A with its own DVC cache: no data yet, only what git holds."""
    sh(f"git clone -q {shlex.quote(str(a.path))} {shlex.quote(str(where))}", where.parent, a.env)
    env = {**a.env, "PYTHONPATH": str(where)}
    own_cache(where, env)
    assert not (where / "data/two_digit/sft/seed0.pt").exists()
    return Repo(where, env)


# ---------------------------------------------------------------- tests


def test_repro_logs_every_stage_to_the_server_and_its_artifact_root(clone_a, mlflow_server):
    """Experiment rlvr-repro lives on the server; each stage in dvc.lock has exactly
    one top-level run tagged with its name; the files the stages logged (a GRPO seed's checkpoint, the
    report page) are in the server's artifact root, identical to the repo's; the repo keeps no MLflow
    store of its own."""
    from mlflow.tracking import MlflowClient

    d = clone_a.path
    client = MlflowClient(mlflow_server.uri)
    exp = client.get_experiment_by_name("rlvr-repro")
    assert exp is not None, f"no experiment rlvr-repro on {mlflow_server.uri}"
    assert exp.artifact_location.startswith("mlflow-artifacts:")  # proxied by the server, not a local path
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    top = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    # every stage but the guard, which runs on every repro and logs no run
    assert sorted(r.data.tags["dvc.stage"] for r in top) == sorted(s for s in lock_stages(d) if s != "check")
    assert {r.info.status for r in runs} == {"FINISHED"}

    seed0 = json.loads((d / "reports/runs/grpo-grpo.json").read_text())["mlflow_seed_run_ids"][
        "seed0"
    ]  # run record
    report = next(r.info.run_id for r in top if r.data.tags["dvc.stage"] == "report")
    assert seed0  # its policy is a logged model: its files go to the server's artifact root too
    assert list(mlflow_server.artifacts.rglob("MLmodel")), "no logged model under the artifact root"
    stored = [p for p in mlflow_server.artifacts.rglob("report.html") if report in p.parts]
    assert len(stored) == 1, f"report.html of run {report} not under {mlflow_server.artifacts}"
    assert md5(stored[0]) == md5(d / "reports/report.html")
    assert not (d / "mlartifacts").exists() and not (d / "mlflow.db").exists()


def test_clone_with_the_lock_pulls_every_output_and_reruns_nothing(clone_a, published, tmp_path):
    """B = git clone of A: `dvc pull` fetches the DVC-cached outputs, `dvc repro` then runs nothing,
    and every output file (checkpoints, metrics, curves, figures, report) matches A's."""
    b = clone_b(clone_a, tmp_path / "b")
    sh("dvc pull --run-cache", b.path, b.env)
    out = sh("dvc repro", b.path, b.env)
    assert trained(out) == [], out  # only the guard ran, as on every repro
    assert json.loads(sh("dvc status --json", b.path, b.env)) == {"check": ["always changed"]}  # the guard
    lock = lock_stages(clone_a.path)
    assert md5(b.path / "data/two_digit/sft/seed0.pt") == md5(clone_a.path / "data/two_digit/sft/seed0.pt")
    assert output_md5s(b.path, lock) == output_md5s(clone_a.path, lock)


def test_without_the_lock_the_run_cache_restores_only_stages_whose_outputs_are_all_cached(
    clone_a, published, tmp_path
):
    """B checks out the commit before A's results (code, params, dvc.yaml; no dvc.lock, no metrics).
    `dvc repro --pull` fetches the run-cache and, for a stage found there, its outputs; it restores
    the stages whose outputs are all DVC-cached (data) without running them, with A's lock
    entries. A stage with `cache: false` outputs (every training stage: metrics, curves, figures)
    cannot come back that way: DVC does not run-cache it, and `dvc push --run-cache` would not send
    those files anyway; a dry run shows it would train again."""
    a = clone_a.path
    restorable = fully_cached_stages(a)
    assert restorable and restorable <= run_cache_stages(a)
    computed = {
        s for s in lock_stages(a) if s.split("@")[0] in ("sft", "grpo", "passk", "hack", "worked", "report")
    }
    assert computed and not computed & run_cache_stages(a), (
        "model stages are run-cached now: update docs/team.md"
    )

    b = clone_b(clone_a, tmp_path / "b")
    sh("git reset -q --hard HEAD~1", b.path, b.env)  # back to "team remote": A's results are not here
    assert not (b.path / "dvc.lock").exists() and not (b.path / "reports/metrics").exists()
    out = sh(f"dvc repro --pull {' '.join(sorted(restorable))}", b.path, b.env)
    assert trained(out) == [], out
    assert out.count("is cached - skipping run") == len(restorable), out
    lock = {name: entry for name, entry in lock_stages(a).items() if name in restorable}
    assert {k: v for k, v in lock_stages(b.path).items() if k != "check"} == lock  # the guard ran, as always
    assert output_md5s(b.path, lock) == output_md5s(a, lock)
    # the first training stage on the way to sft@two_digit (a dry run cannot go past it: DVC hashes
    # the deps of the next stage, and the warm-up state it would write is not there)
    assert "Running stage 'warmup@two_digit'" in sh("dvc repro --dry warmup@two_digit", b.path, b.env)


def test_the_guard_refuses_a_server_whose_artifact_store_fails(tmp_path):
    """A server whose API works but whose artifact store cannot be written (its destination lies
    under a file): the guard's probe writes an artifact with MLflow's own client, so `check` refuses
    it in one line, and its probe run is deleted, not left RUNNING."""
    from rlvr.pipeline.probe import probe_store
    from rlvr.pipeline.store import TrackingError

    (tmp_path / "not-a-folder").write_text("a file where the artifacts' folder would be made")
    with running_server(tmp_path, tmp_path / "not-a-folder" / "artifacts") as server:
        with pytest.raises(TrackingError) as caught:
            probe_store(server.uri)
        line = str(caught.value)
        assert "\n" not in line
        assert line.startswith(f"MLflow tracking server {server.uri}: its artifact store refused")
        from mlflow.tracking import MlflowClient

        client = MlflowClient(server.uri)
        experiment = client.get_experiment_by_name("rlvr-repro").experiment_id
        runs = client.search_runs([experiment], run_view_type=3)  # 3: active and deleted
        assert [r.info.lifecycle_stage for r in runs] == ["deleted"]


UPLOADING_STAGE = """
import sys
from pathlib import Path
from rlvr.pipeline.tracking import stage_run
Path(sys.argv[1]).write_text("a stage's output")
with stage_run("sft@x", {"lr": 0.1}, {}, "h", raw_params={"lr": 0.1}) as run:
    print(run.run_id, flush=True)
    run.log_step(0, {"loss": 1.0})
    run.log_artifact(sys.argv[1])
"""


def test_a_stage_run_directly_against_a_failing_artifact_store_ends_its_run_failed(tmp_path):
    """No guard stands before a stage run by hand: its first upload to a server whose artifact store
    cannot be written fails, and the run it opened ends FAILED there (the refused upload leaves the
    server's connection closed: ending the run must not give up on the first try)."""
    from mlflow.tracking import MlflowClient

    (tmp_path / "not-a-folder").write_text("a file where the artifacts' folder would be made")
    with running_server(tmp_path, tmp_path / "not-a-folder" / "artifacts") as server:
        done = subprocess.run(
            [sys.executable, "-c", UPLOADING_STAGE, str(tmp_path / "out.txt")],
            capture_output=True,
            text=True,
            env={**os.environ, "MLFLOW_TRACKING_URI": server.uri},
            timeout=120,
        )
        assert done.returncode == 1 and "TrackingError" in done.stderr, done.stderr[-2000:]
        client = MlflowClient(server.uri)
        experiment = client.get_experiment_by_name("rlvr-repro").experiment_id
        runs = client.search_runs([experiment])
        assert [r.info.status for r in runs] == ["FAILED"]


FAILING_STAGE = """
import sys, time
from rlvr.pipeline.tracking import stage_run
try:
    with stage_run("sft@x", {"lr": 0.1}, {}, "h") as run:
        run.log_step(0, {"loss": 1.0})
        print(run.run_id, flush=True)
        if sys.argv[1] == "raise":
            raise RuntimeError("a failure part way")
        time.sleep(120)
except RuntimeError:
    raise SystemExit(1)
except KeyboardInterrupt:
    raise SystemExit(130)
"""


@pytest.mark.parametrize("how, status", [("raise", "FAILED"), ("sigterm", "KILLED")])
def test_a_stage_that_stops_part_way_marks_its_run_on_the_server(mlflow_server, how, status):
    """A stage that fails after it logged a step, or is stopped by DVC (SIGTERM), on a team server:
    its run is marked FAILED or KILLED there, its logged step kept, none left RUNNING."""
    from mlflow.tracking import MlflowClient

    proc = subprocess.Popen(
        [sys.executable, "-c", FAILING_STAGE, how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_server.uri},
    )
    run_id = proc.stdout.readline().strip()
    if how == "sigterm":
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (1 if how == "raise" else 130) and "Traceback" not in err, err
    client = MlflowClient(mlflow_server.uri)
    assert client.get_run(run_id).info.status == status
    assert [m.value for m in client.get_metric_history(run_id, "loss")] == [1.0]


PASSING_STAGE = """
from rlvr.pipeline.tracking import stage_run
with stage_run("sft@x", {"lr": 0.1}, {}, "h") as run:
    run.log_step(0, {"loss": 1.0})
"""


def test_a_password_in_the_uri_appears_in_no_line_of_a_successful_stage(mlflow_server):
    """MLflow's client prints a "View run ... at: <server>" link after every run; handed the URI
    without its credentials (they travel in the variables MLflow reads for Basic auth), that line
    and every other one a stage prints carry no password."""
    secret = "s3cret-Pa55"
    credentialed = mlflow_server.uri.replace("http://", f"http://alice:{secret}@")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    run = subprocess.run(
        [sys.executable, "-c", PASSING_STAGE],
        capture_output=True,
        text=True,
        env={**env, "MLFLOW_TRACKING_URI": credentialed},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"View run sft@x at: {mlflow_server.uri}/#/experiments/" in run.stdout
    assert secret not in run.stdout + run.stderr
