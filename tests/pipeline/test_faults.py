"""Faults: each ends in one line and loses nothing.

Damaged, foreign and stale checkpoints are covered in test_checkpoint.py, a truncated metrics file
in `rlvr diff` in test_compare.py, the values `rlvr check` refuses (seeds outside [0, 2**32),
repeated seeds, non-finite or non-positive learning rates...) and a run that diverges anyway in
test_check_values.py; everything else a fault run against the CLI found is here.
"""

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import ROOT, at_head, tiny_raw, tmpfs

from rlvr.fields import ConfigError
from rlvr.io.params import load_params, read_yaml
from rlvr.pipeline import guard
from rlvr.tasks import check_params

BIN = Path(sys.executable).parent


def _writes_into_read_only_folders() -> bool:
    """Whether this process ignores folder permissions (root, unless its capabilities were dropped)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o555)
        try:
            Path(d, "x").write_text("x")
            return True
        except PermissionError:
            return False
        finally:
            os.chmod(d, 0o755)


IS_ROOT = _writes_into_read_only_folders()  # permissions do not bind it


def _write_params(tmp_path: Path, raw: dict | str) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(raw if isinstance(raw, str) else yaml.safe_dump(raw, sort_keys=False))
    return path


def _checked(path: Path):
    params = load_params(path)
    check_params(params)
    return params


# ------------------------------------------------------------------ rlvr check rejects what a stage would


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda r: r["tasks"]["two_digit"].update(heldout=9000),
            r"tasks.two_digit.heldout \+ validation = 9300: must lie in \[0, 8099\]",
        ),
        (lambda r: r["model"].update(max_len=8), r"model.max_len = 8: run two_digit needs \d+ positions"),
        (
            lambda r: r["tasks"]["two_digit"].update(max_new_tokens=2),
            r"tasks.two_digit.max_new_tokens = 2: an answer",
        ),
        (lambda r: r["variants"]["grpo"].update(seeds=[]), r"variants.grpo.seeds"),
        (lambda r: r["hack"].pop("seeds"), r"hack.seeds: missing"),
    ],
)
def test_check_rejects_what_a_stage_would_reject(tmp_path, mutate, message):
    raw = tiny_raw()
    mutate(raw)
    with pytest.raises(ConfigError, match=message):
        _checked(_write_params(tmp_path, raw))


def test_params_are_read_by_yaml_1_2_as_dvc_reads_them(tmp_path):
    """`lr: 2e-4` is a float to DVC (YAML 1.2) and was a string to PyYAML (YAML 1.1)."""
    text = yaml.safe_dump(tiny_raw(), sort_keys=False)
    text = text.replace(
        "variants:\n", "variants:\n  lr_test: {task: two_digit, sft: two_digit, lr: 2e-4}\n", 1
    )
    params = _checked(_write_params(tmp_path, text))
    assert params.variant("lr_test").lr == 2e-4


def test_the_cli_check_exits_2_with_one_line(tmp_path):
    raw = tiny_raw()
    raw["model"]["max_len"] = 8
    out = subprocess.run(
        [sys.executable, "-m", "rlvr", "--params", str(_write_params(tmp_path, raw)), "check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert (
        out.returncode == 2
        and out.stderr.count("\n") == 1
        and out.stderr.startswith("rlvr: error: model.max_len")
    )


# ------------------------------------------------------------------ nothing lost


@pytest.fixture(scope="module")
def small_repo(tmp_path_factory):
    """A git + DVC repo with tiny params in which `dvc repro worked` has run (check + worked)."""
    d = tmp_path_factory.mktemp("faults")
    shutil.copytree(ROOT / "rlvr", d / "rlvr", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", ".gitignore"):
        shutil.copy(ROOT / name, d / name)
    _write_params(d, tiny_raw())
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(d)}
    env.pop("MLFLOW_TRACKING_URI", None)
    for cmd in ("git init -q", "dvc init -q"):
        subprocess.run(cmd, shell=True, cwd=d, env=env, check=True, capture_output=True)
    shutil.copy(ROOT / ".dvc" / "config", d / ".dvc" / "config")
    shutil.copytree(ROOT / ".dvc" / "plots", d / ".dvc" / "plots")  # the templates dvc.yaml's views name
    for cmd in (f"{sys.executable} -m rlvr pipeline --write", "dvc repro worked"):
        out = subprocess.run(cmd, shell=True, cwd=d, env=env, capture_output=True, text=True)
        assert out.returncode == 0, f"{cmd}: {out.stderr[-2000:]}"
    return d, env


def _lock_outputs(d: Path) -> dict[str, str]:
    lock = yaml.safe_load((d / "dvc.lock").read_text())["stages"]
    return {o["path"]: o.get("md5") for s in lock.values() for o in s.get("outs", [])}


def _md5(path: Path) -> str:
    import hashlib

    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_a_typo_in_params_stops_repro_before_any_output_is_removed(small_repo):
    d, env = small_repo
    outputs = _lock_outputs(d)
    assert "reports/metrics/worked.json" in outputs
    before = {p: _md5(d / p) for p in outputs if (d / p).is_file() and p != "data/params.checked"}
    good = (d / "params.yaml").read_text()
    (d / "params.yaml").write_text(good.replace("kl_samples:", "kl_sample:"))
    try:
        out = subprocess.run("dvc repro worked", shell=True, cwd=d, env=env, capture_output=True, text=True)
    finally:
        (d / "params.yaml").write_text(good)
    assert out.returncode != 0
    assert "rlvr: error: worked.kl_sample: unknown key" in out.stderr
    assert "Running stage 'worked'" not in out.stdout  # stopped at `check`
    assert {p: _md5(d / p) for p in before} == before  # every output still there, unchanged
    again = subprocess.run("dvc repro worked", shell=True, cwd=d, env=env, capture_output=True, text=True)
    assert (
        again.returncode == 0 and "Running stage 'worked'" not in again.stdout
    )  # the marker is back, same bytes


def _repro_worked_with_store(d, env, uri: str):
    """`dvc repro worked` after a param change, tracking to `uri`: it must fail before the stage runs
    and leave every committed output as it was. Returns the finished process."""
    before = {p: _md5(d / p) for p in _lock_outputs(d) if (d / p).is_file() and p != "data/params.checked"}
    good = (d / "params.yaml").read_text()
    (d / "params.yaml").write_text(good.replace("kl_samples: 500", "kl_samples: 600"))
    try:
        out = subprocess.run(
            "dvc repro worked",
            shell=True,
            cwd=d,
            capture_output=True,
            text=True,
            env={**env, "MLFLOW_TRACKING_URI": uri},
            timeout=300,
        )
    finally:
        (d / "params.yaml").write_text(good)
    assert out.returncode != 0 and "Running stage 'worked'" not in out.stdout
    assert {p: _md5(d / p) for p in before} == before
    return out


@pytest.mark.slow
def test_a_stopped_tracking_server_stops_repro_before_any_output_is_removed(small_repo):
    """A param changed while the MLflow server is down: the guard `check` fails first."""
    out = _repro_worked_with_store(*small_repo, "http://127.0.0.1:9")
    assert "rlvr: error: MLflow tracking server http://127.0.0.1:9 is unreachable" in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault, message",
    [
        (
            {"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"},
            "MLflow tracking server http://127.0.0.1:9 is unreachable",
        ),
        ({"RLVR_THREADS": "0"}, "RLVR_THREADS = '0': must be a whole number >= 1"),
    ],
)
def test_the_guard_runs_on_every_repro_even_with_params_unchanged(small_repo, fault, message):
    """params.yaml as last seen (so `check` would be cached, or restored from the run-cache) and one
    output of `worked` missing, so `worked` must rerun: the guard still runs first and stops
    `dvc repro` before DVC removes worked's other outputs."""
    d, env = small_repo
    missing = d / "reports/figures/worked-a8-memory.png"
    kept = d / "reports/metrics/worked.json"
    before = _md5(kept)
    saved = missing.read_bytes()
    missing.unlink()
    try:
        out = subprocess.run(
            "dvc repro worked",
            shell=True,
            cwd=d,
            capture_output=True,
            text=True,
            env={**env, **fault},
            timeout=300,
        )
        assert out.returncode != 0 and "Running stage 'worked'" not in out.stdout
        assert "Running stage 'check'" in out.stdout  # not skipped, not restored from the run-cache
        assert f"rlvr: error: {message}" in out.stderr
        assert kept.is_file() and _md5(kept) == before  # the committed metrics are still there
    finally:
        missing.write_bytes(saved)


@pytest.mark.slow
def test_an_unwritable_output_fails_before_any_work(small_repo, tmp_path):
    """reports/metrics is a file, not a folder: the stage stops in one line before it trains or writes."""
    d, env = small_repo
    work = tmp_path / "w"
    shutil.copytree(d, work, symlinks=True)
    shutil.rmtree(work / "reports" / "metrics")
    (work / "reports" / "metrics").write_text("in the way")
    figure = work / "reports/figures/worked-a8-memory.png"
    stamp = figure.stat().st_mtime_ns
    out = subprocess.run(
        [sys.executable, "-m", "rlvr.pipeline", "worked"],
        cwd=work,
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(work)},
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "rlvr: error: reports/metrics/worked.json: cannot be written: reports/metrics is not a folder"
    ]
    assert figure.stat().st_mtime_ns == stamp  # nothing was redrawn


@pytest.mark.slow
def test_a_stage_process_leaves_fast_with_its_whole_summary_printed(small_repo, tmp_path):
    """`python -m rlvr.pipeline` skips the interpreter's teardown (os._exit): what it printed to a pipe
    must still arrive whole, and its exit status be the stage's."""
    d, env = small_repo
    work = tmp_path / "w"
    shutil.copytree(d, work, symlinks=True)
    buffered = {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}  # stdout to a pipe: block-buffered
    out = subprocess.run(
        [sys.executable, "-m", "rlvr.pipeline", "worked", "--quiet"],
        cwd=work,
        capture_output=True,
        text=True,
        env={**buffered, "PYTHONPATH": str(work)},
    )
    assert out.returncode == 0, out.stderr
    # block-buffered to a pipe: lost without the flush before os._exit
    assert out.stdout.splitlines() == [
        "rlvr: worked done",
        "rlvr: wrote reports/metrics/worked.json, reports/runs/worked.json (every number: rlvr ui)",
    ]


def test_a_stage_that_fails_part_way_removes_what_it_wrote(tmp_path):
    ckpt, metrics = tmp_path / "sft.pt", tmp_path / "metrics.json"
    ckpt.write_text("old weights")
    metrics.write_text("old metrics")
    with pytest.raises(RuntimeError):
        with guard.outputs_or_nothing([ckpt, metrics]):
            ckpt.write_text("new weights")  # the checkpoint is replaced, then the stage dies
            raise RuntimeError("disk full")
    assert not ckpt.exists() and not metrics.exists()  # never new weights beside old metrics
    metrics.write_text("old metrics")
    with pytest.raises(RuntimeError):
        with guard.outputs_or_nothing([ckpt, metrics]):
            raise RuntimeError("failed before writing")
    assert metrics.read_text() == "old metrics"  # nothing written, nothing removed


@pytest.mark.skipif(IS_ROOT, reason="root may write into a read-only folder")
def test_a_read_only_folder_is_named_before_any_work(tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(guard.OutputError, match="no write permission"):
            guard.preflight([folder / "x.json"])
    finally:
        folder.chmod(0o755)


@pytest.mark.slow
def test_a_failed_write_is_one_line_naming_the_file_not_a_hang(small_repo, tmp_path):
    """`ulimit -f` (a disk-full stand-in): the write fails with EFBIG, named, within seconds."""
    d, env = small_repo
    work = tmp_path / "w"
    shutil.copytree(d, work, symlinks=True)
    out = subprocess.run(  # a hang would end in TimeoutExpired
        f"ulimit -f 64 && {sys.executable} -m rlvr.pipeline worked",
        shell=True,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": str(work)},
    )
    assert out.returncode == 2, out.stderr[-2000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("rlvr: error:")]
    assert len(errors) == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "too large" in errors[0] or "File too large" in errors[0] or "cannot be used" in errors[0]


# ------------------------------------------------------------------ tracking: no hangs, no stale runs


def test_a_missing_store_folder_fails_at_once_naming_it(tmp_path, monkeypatch):
    from rlvr.pipeline.store import TrackingError
    from rlvr.pipeline.tracking import stage_run

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/missing/dir/x.db")
    with pytest.raises(TrackingError, match=f"folder {tmp_path}/missing/dir does not exist"):
        with stage_run("sft@x", {}, {}, "h"):
            pass
    assert not (tmp_path / "missing").exists()  # refused before the driver could create anything


@pytest.mark.slow  # a child stage that opens an MLflow run and waits to be killed
def test_a_run_left_running_by_a_killed_stage_is_marked_killed(mlflow_store, tmp_path):
    script = textwrap.dedent("""
        import time
        from rlvr.pipeline.tracking import stage_run
        with stage_run("sft@x", {}, {}, "h") as run:
            print(run.run_id, flush=True)
            time.sleep(120)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_store},
    )
    run_id = proc.stdout.readline().strip()
    proc.send_signal(signal.SIGKILL)  # nothing can mark its run
    proc.wait()
    from mlflow.tracking import MlflowClient

    from rlvr.pipeline.tracking import stage_run

    client = MlflowClient(mlflow_store)
    assert client.get_run(run_id).info.status == "RUNNING"
    with stage_run("sft@x", {}, {}, "h"):
        pass
    assert client.get_run(run_id).info.status == "KILLED"


# ------------------------------------------------------------------ orphans and interrupts


@pytest.mark.slow
def test_a_stage_stops_when_the_dvc_that_started_it_dies(tmp_path):
    """A parent standing in for `dvc` starts a stage-like child through a shell that stays between
    them (dash does not exec the command), with DVC's environment, as DVC does, and is killed with
    SIGKILL: the child stops within seconds and never writes its output."""
    output, watching = tmp_path / "late-output.txt", tmp_path / "watching"
    child = (
        f"import time, pathlib; from rlvr.pipeline import guard; out = pathlib.Path({str(output)!r}); "
        f"assert guard.watch_dvc(0.2); pathlib.Path({str(watching)!r}).touch(); time.sleep(8); "
        "out.write_text('written behind dvc')"
    )
    fake_dvc = tmp_path / "bin" / "dvc"
    fake_dvc.parent.mkdir()
    fake_dvc.write_text(
        textwrap.dedent(f"""
        import json, os, pathlib, subprocess, sys, time
        env = dict(os.environ, DVC_ROOT={str(tmp_path)!r}, DVC_STAGE="late")
        p = subprocess.Popen(["/bin/sh", "-c", {f"{sys.executable} -c {child!r}; echo done"!r}], env=env)
        print(p.pid, flush=True)
        time.sleep(60)
    """)
    )
    parent = subprocess.Popen(
        [sys.executable, str(fake_dvc)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    shell_pid = int(parent.stdout.readline())
    time.sleep(2)  # the child is up and watching
    parent.kill()
    parent.wait()
    time.sleep(10)  # longer than the child would have slept before writing
    assert watching.exists(), "the child found no dvc to watch"
    assert not output.exists()
    try:
        os.kill(shell_pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_no_watchdog_without_dvc(monkeypatch):
    monkeypatch.delenv("DVC_STAGE", raising=False)  # pytest was not started by dvc
    assert guard.watch_dvc() is None


PRINT_DVC_PID = "from rlvr.pipeline import guard; print(guard.dvc_pid())"


@pytest.mark.parametrize("through_shell", [True, False])
def test_the_dvc_running_a_stage_is_its_nearest_ancestor_dvc_did_not_start(tmp_path, through_shell):
    """This test stands in for `dvc`: it starts a stage-like process with DVC's environment, through
    a shell that stays between them (`; true` keeps dash from exec-ing the command) or directly."""
    env = {**os.environ, "DVC_ROOT": str(tmp_path), "DVC_STAGE": "s", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", PRINT_DVC_PID]
    if through_shell:
        command = ["/bin/sh", "-c", f"{sys.executable} -c '{PRINT_DVC_PID}'; true"]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(os.getpid())
    env.pop("DVC_STAGE")  # DVC sets DVC_STAGE for every command it runs
    out = subprocess.run([sys.executable, "-c", PRINT_DVC_PID], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "None"


def test_ctrl_c_in_a_stage_is_one_line(monkeypatch, capsys):
    import rlvr.pipeline.run as stages

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(stages, "run_stage", interrupted)
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # leave pytest's own handlers alone
    assert stages.main(["sft", "two_digit"]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "Traceback" not in err


def test_report_json_of_a_failed_stage_is_not_left_half_written(tmp_path):
    """Every stage output goes through an atomic rename: a reader sees the old file or the new one."""
    from rlvr.io.files import write_json

    path = tmp_path / "m.json"
    write_json(path, {"a": 1})
    with pytest.raises(TypeError):
        write_json(path, {"a": object()})  # fails while serialising
    assert json.loads(path.read_text()) == {"a": 1} and list(tmp_path.iterdir()) == [path]


@pytest.mark.slow
def test_stages_starting_together_on_a_fresh_store_both_log(tmp_path):
    """`dvc queue start -j 2` on a fresh checkout: two stages create the SQLite store at once."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    script = "from rlvr.pipeline.tracking import stage_run\nwith stage_run('sft@x', {}, {}, 'h'):\n    pass\n"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "MLFLOW_TRACKING_URI": uri},
        )
        for _ in range(3)
    ]
    errors = [p.communicate(timeout=180)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e[-500:] for e in errors]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    assert len(client.search_runs([client.get_experiment_by_name("rlvr-repro").experiment_id])) == 3


SHORT_WRITE = """
import sys, torch
from rlvr.configs import ModelConfig
from rlvr.fields import UserError
from rlvr.model import TinyLM
from rlvr.pipeline import checkpoint
from rlvr.io.files import write_json
from rlvr.tokenizer import Tokenizer
from conftest import make

tok = Tokenizer()
model = TinyLM(make(ModelConfig, d_model=64, n_layer=2, n_head=2), len(tok))
try:
    if sys.argv[1] == "checkpoint":
        checkpoint.save(sys.argv[2], model, tok, "sft@x", "h")
    else:
        write_json(sys.argv[2], {"x": "y" * 200_000})
except UserError as exc:
    print(f"rlvr: error: {exc}", file=sys.stderr)
    sys.exit(2)
"""


@pytest.mark.parametrize("what", ["checkpoint", "metrics"])
def test_a_write_past_the_file_size_limit_is_one_line_and_keeps_the_old_file(tmp_path, what):
    """Under `ulimit -f` (64 KiB) a checkpoint (torch's zip writer: "unexpected pos") or a metrics
    file fails in one line naming the file and the limit; the file it would replace is untouched and
    no temp file is left."""
    target = tmp_path / ("sft.pt" if what == "checkpoint" else "m.json")
    target.write_bytes(b"the committed version")
    out = subprocess.run(
        ["bash", "-c", f'ulimit -f 64; exec "{sys.executable}" -c "$0" {what} {target}', SHORT_WRITE],
        cwd=ROOT / "tests",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"},
        timeout=120,
    )
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and lines[0].startswith(f"rlvr: error: {target}: cannot be written (")
    assert lines[0].endswith("the file-size limit (ulimit -f) is 65536 bytes); raise the limit")
    assert target.read_bytes() == b"the committed version"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no temp file left


@pytest.mark.slow
def test_a_stage_runs_under_the_callers_file_size_limit_and_only_that_call(small_repo):
    """A limit the caller sets applies to the stages DVC starts: the guard finds the store cannot
    grow under it and stops in one line before worked's outputs are touched; the next `dvc repro`
    without it is not limited (no server or earlier process carries a limit over)."""
    d, env = small_repo
    kept = d / "reports/metrics/worked.json"
    before = _md5(kept)
    limited = subprocess.run(
        ["bash", "-c", "ulimit -f 4096 && dvc repro -f worked"],
        cwd=d,
        env=env,
        capture_output=True,
        text=True,
    )
    assert limited.returncode != 0 and "Running stage 'worked'" not in limited.stdout
    assert "the file-size limit (ulimit -f) of 4194304 bytes leaves mlflow.db" in limited.stderr
    assert _md5(kept) == before
    free = subprocess.run("dvc repro -f worked", shell=True, cwd=d, env=env, capture_output=True, text=True)
    assert free.returncode == 0, free.stderr[-2000:]
    assert "Running stage 'worked'" in free.stdout and kept.is_file()


ORPHAN = """
import os, sys, time
from pathlib import Path
from rlvr.pipeline.workers import seed_results

def slow(seed, out):
    os.write(1, f"{os.getpid()}\\n".encode())  # one write: the two workers' lines never interleave
    time.sleep(20)
    Path(out, f"seed{seed}").write_text("finished")  # what a worker orphaned by SIGKILL would do
    return seed

with seed_results(slow, [0, 1], (sys.argv[1],), workers=2) as results:
    print(list(results))
"""


@pytest.mark.slow  # a child stage with forked seed workers, killed, then waited on
def test_seed_workers_die_with_their_stage_and_write_nothing(tmp_path):
    """SIGKILL the stage process (no handler can run): its two seed workers go within seconds, and
    neither writes the file it would have written at the end of its seed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    workers = [int(proc.stdout.readline()) for _ in range(2)]
    proc.kill()
    proc.wait(timeout=10)

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"  # a zombie has exited

    deadline = time.monotonic() + 10  # the kernel signals at once; a loaded machine may take a moment
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in workers), "a seed worker outlived its stage"
    time.sleep(0.5)
    assert list(tmp_path.iterdir()) == []


def test_a_second_stage_training_in_the_same_workspace_is_warned_about(tmp_path, monkeypatch, capsys):
    """Two `dvc repro` of disjoint stages in one workspace share the cores: the later stage says so.
    Processes of its own stage (its shell, its seed workers) are not counted, nor a stage running in
    another workspace."""
    monkeypatch.setenv("DVC_STAGE", "sft@two_digit")

    def stage(name: str, root: Path) -> subprocess.Popen:
        env = {**os.environ, "DVC_ROOT": str(root), "DVC_STAGE": name}
        return subprocess.Popen(["sleep", "30"], env=env)

    procs = [stage("sft@two_digit", tmp_path), stage("grpo@dapo", tmp_path)]
    procs.append(stage("grpo@rloo", tmp_path / "x"))
    try:
        theirs = procs[1].pid
        assert guard.other_repros(tmp_path) == {theirs: "grpo@dapo"}
        assert guard.other_repros(tmp_path / "elsewhere") == {}
        monkeypatch.setattr(os, "cpu_count", lambda: 2)
        guard.warn_if_sharing(tmp_path, threads=2)
        err = capsys.readouterr().err
        assert err.startswith(
            f"rlvr: warning: another dvc repro runs a stage in {tmp_path}: grpo@dapo (pid {theirs}); "
            "2 stages x 2 threads on 2 cores"
        )
        assert "RLVR_THREADS=1" in err and len(err.splitlines()) == 1
        guard.warn_if_sharing(tmp_path, threads=1)  # 2 stages x 1 thread on 2 cores: fine
        assert capsys.readouterr().err == ""
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)


STORE_FULL = """
import resource, sys
from pathlib import Path
from rlvr.fields import UserError
from rlvr.pipeline.tracking import stage_run

db = Path(sys.argv[1])
try:
    with stage_run("x", {"a": 1}, {}, "h") as run:
        size = db.stat().st_size
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))  # no room to grow
        run.log_params({f"p{i}": "x" * 500 for i in range(3000)})
except UserError as exc:
    print(f"rlvr: error: {exc}", file=sys.stderr)
    sys.exit(2)
"""


@pytest.mark.slow
def test_a_store_that_cannot_grow_is_one_line_and_left_readable(tmp_path):
    """The SQLite store hits a file-size limit mid-stage: one line naming the store and the limit
    (not MLflow's "disk I/O error" traceback), and no hot journal is left for readers to trip on."""
    db = tmp_path / "mlflow.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": f"sqlite:///{db}"}
    env.pop("DVC_STAGE", None)
    made = subprocess.run(
        [
            sys.executable,
            "-c",
            "from rlvr.pipeline.tracking import stage_run\nwith stage_run('x', {}, {}, 'h'): pass",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    out = subprocess.run([sys.executable, "-c", STORE_FULL, str(db)], env=env, capture_output=True, text=True)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr[-3000:]
    assert lines[0].startswith(f"rlvr: error: MLflow tracking store sqlite:///{db}: ")
    assert "the file-size limit (ulimit -f) is" in lines[0]
    assert not (tmp_path / "mlflow.db-journal").exists()
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:  # a read-only reader, as `mlflow ui`
        assert con.execute("select count(*) from runs").fetchone()[0] >= 1


def test_an_empty_sweep_is_refused_and_the_committed_sweep_kept(tmp_path, monkeypatch, capsys):
    """`rlvr sweep-report` with no DVC experiment (only the baseline and a changed workspace) is one
    line and leaves reports/sweep/ as it was (it used to write a two-row table over the old one)."""
    from rlvr import cli

    for name in ("dvc.yaml", "params.yaml"):
        (tmp_path / name).write_text("{}\n")
    sweep = tmp_path / "reports/sweep"
    sweep.mkdir(parents=True)
    (sweep / "sweep.md").write_text("the committed sweep\n")
    (sweep / "sweep.png").write_bytes(b"png")
    data = {"params": {"params.yaml": {"data": {"variants": {"grpo": {}}}}}}
    passk = {"sft": {"pass_at_1": 0.5}, "variants": {"grpo": {"pass_at_1_rl": 0.8, "crossover_k": 65}}}
    results = tmp_path / "reports/metrics/passk.json"  # the workspace's pass@k; its commit has none
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps(passk))
    shown = json.dumps([{"rev": "workspace", "data": data}, {"rev": "abc1234", "name": "main", "data": data}])
    real_run = subprocess.run
    monkeypatch.setattr(  # `dvc exp show --json` as a checkout without experiments answers it
        subprocess,
        "run",
        lambda cmd, *a, **k: (
            subprocess.CompletedProcess(cmd, 0, stdout=shown, stderr="")
            if cmd[1:5] == ["-m", "dvc", "exp", "show"]
            else real_run(cmd, *a, **k)
        ),
    )
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sweep-report"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no DVC experiment with pass@k results" in err[0]
    assert (sweep / "sweep.md").read_text() == "the committed sweep\n" and (
        sweep / "sweep.png"
    ).read_bytes() == b"png"


# ------------------------------------------------------------------ the guard asks the store what stages ask


class _FakeServer:
    """An HTTP tracking server on 127.0.0.1 that answers /health and, when `api` is True, the
    MLflow REST calls the guard makes (an experiment, runs made, updated, deleted, searched);
    otherwise every API call fails as a broken backend does (500 with MLflow's error body)."""

    def __init__(self, api: bool) -> None:
        import http.server
        import threading

        self.api, self.calls, self.runs, self.experiments = api, [], {}, {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _answer(self, code: int, body: dict | str) -> None:
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def _handle(self, method: str) -> None:
                from urllib.parse import parse_qs, urlparse

                url = urlparse(self.path)
                if url.path == "/health":
                    return self._answer(200, "OK")
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}") if method == "POST" else parse_qs(url.query)
                server.calls.append(url.path.removeprefix("/api/2.0/mlflow/"))
                if not server.api:
                    broken = {"error_code": "INTERNAL_ERROR", "message": "no such table: runs"}
                    return self._answer(500, broken)
                self._answer(*server.respond(url.path.removeprefix("/api/2.0/mlflow/"), body))

        self.artifacts = Path(tempfile.mkdtemp(prefix="fake-artifacts-")).as_uri()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def respond(self, call: str, body: dict) -> tuple[int, dict]:
        if call == "experiments/get-by-name":
            name = body["experiment_name"][0]
            if name not in self.experiments:
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": f"no {name}"}
            return 200, {"experiment": {"experiment_id": self.experiments[name], "name": name}}
        if call == "experiments/create":
            self.experiments[body["name"]] = str(len(self.experiments) + 1)
            return 200, {"experiment_id": self.experiments[body["name"]]}
        if call == "runs/create":
            run_id = f"run{len(self.runs)}"
            self.runs[run_id] = {"status": "RUNNING", "experiment_id": body["experiment_id"]}
            return 200, {"run": {"info": {"run_id": run_id, "experiment_id": body["experiment_id"]}}}
        if call == "runs/get":  # MLflow's client asks where the run's artifacts go: a local folder
            run_id = body["run_id"][0]
            info = {"run_id": run_id, "run_uuid": run_id, "experiment_id": self.runs[run_id]["experiment_id"]}
            return 200, {"run": {"info": {**info, "artifact_uri": self.artifacts}, "data": {}}}
        if call in ("runs/log-batch", "runs/update", "runs/delete"):
            run = self.runs[body["run_id"]]
            run.update(status=body.get("status", run["status"]), deleted=call == "runs/delete")
            return 200, {}
        if call == "runs/search":
            return 200, {"runs": []}
        return 404, {"error_code": "ENDPOINT_NOT_FOUND", "message": call}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_server():
    servers = []
    yield lambda api: servers.append(_FakeServer(api)) or servers[-1]
    for s in servers:
        s.close()


def test_the_guard_refuses_a_server_that_answers_health_but_not_the_api(fake_server):
    """/health says OK, every MLflow call fails: the guard names the server and the call that failed
    (it used to pass, and DVC then removed the stage's outputs before the stage failed)."""
    from rlvr.pipeline.probe import probe_store
    from rlvr.pipeline.store import TrackingError

    server = fake_server(api=False)
    with pytest.raises(TrackingError) as caught:
        probe_store(server.uri)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"MLflow tracking server {server.uri}: ")
    assert "experiments/get-by-name failed (HTTP 500 INTERNAL_ERROR: no such table: runs)" in line


def test_the_guard_makes_and_deletes_a_probe_run_on_a_working_server(fake_server):
    """What a stage asks of the store: its experiment (made when missing, as a stage makes it), a
    search for runs, a run created, logged to, ended; the probe run is then deleted."""
    from rlvr.pipeline.probe import probe_store

    server = fake_server(api=True)
    probe_store(server.uri)
    assert server.experiments == {"rlvr-repro": "1"}
    assert server.calls == [
        "experiments/get-by-name",
        "experiments/create",
        "runs/search",
        "runs/create",
        "runs/log-batch",
        "runs/get",  # MLflow's own client, writing the probe's artifact where the run says
        "runs/update",
        "runs/delete",
    ]
    assert (Path(server.artifacts.removeprefix("file://")) / "rlvr-guard-probe.txt").is_file()
    assert server.runs == {"run0": {"status": "FINISHED", "experiment_id": "1", "deleted": True}}
    probe_store(server.uri)  # the experiment is found now: not made again
    assert server.calls.count("experiments/create") == 1 and server.runs["run1"]["deleted"]


def test_the_guard_refuses_a_sqlite_file_that_is_not_an_mlflow_store(tmp_path):
    import sqlite3

    from rlvr.pipeline.probe import probe_store
    from rlvr.pipeline.store import TrackingError

    db = tmp_path / "mlflow.db"
    with sqlite3.connect(db) as con:
        con.execute("create table notes (x)")
    with pytest.raises(TrackingError, match=r"mlflow.db has no table experiments: not an MLflow store"):
        probe_store(f"sqlite:///{db}")


HOT_JOURNAL = """
import os, sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("pragma cache_size = 1")  # spill to the database file at once: the journal is hot
con.execute("begin immediate")
con.executemany("insert into scratch values (?)", [("x" * 500,)] * 2000)
os._exit(0)  # killed mid-write: no commit, no rollback
"""


def test_the_guard_says_when_it_finds_a_write_cut_short(mlflow_store, capsys):
    """A stage killed mid-write (or stopped by a full disk) leaves a hot `mlflow.db-journal`; the
    next open rolls it back. The guard says so in one line, and the store is as before that write."""
    import sqlite3

    from rlvr.pipeline.probe import probe_store

    db = Path(mlflow_store.removeprefix("sqlite:///"))
    with sqlite3.connect(db) as con:
        con.execute("create table scratch (x)")
    subprocess.run([sys.executable, "-c", HOT_JOURNAL, str(db)], check=True)
    journal = Path(f"{db}-journal")
    assert journal.stat().st_size > 0
    probe_store(mlflow_store)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"rlvr: note: {journal} was left by a write cut short")
    assert "SQLite has rolled it back" in err[0]
    assert not journal.exists() or journal.stat().st_size == 0
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from scratch").fetchone()[0] == 0
    probe_store(mlflow_store)  # nothing found the second time
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------ run records are outputs too

SFT_COMMITTED = (
    "data/two_digit/sft/seed0.pt",
    "data/two_digit/sft/seed1.pt",
    "reports/curves/sft/two_digit/seed0.tsv",
    "reports/metrics/sft-two_digit.json",
    "reports/runs/sft-two_digit.json",
)


@pytest.fixture
def committed_sft(tmp_path, monkeypatch):
    """A checkout in tmp_path (tiny params) holding sft@two_digit's committed outputs, each a few
    bytes saying so: a stage that stops before any work leaves every one as it was."""
    monkeypatch.chdir(tmp_path)
    _write_params(tmp_path, tiny_raw())
    for rel in SFT_COMMITTED:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"committed {rel}\n")
    return tmp_path


def _unchanged(root: Path, rels=SFT_COMMITTED) -> bool:
    return all((root / rel).read_text() == f"committed {rel}\n" for rel in rels)


def test_a_run_record_folder_in_the_way_fails_before_any_work(committed_sft):
    """reports/runs is a file: the stage names its run record before it reads or trains anything
    (it used to train, fail on a temp file's name and remove the committed checkpoints)."""
    from rlvr.pipeline.run import run_stage

    d = committed_sft
    shutil.rmtree(d / "reports/runs")
    (d / "reports/runs").write_text("in the way")
    with pytest.raises(
        guard.OutputError,
        match=r"^reports/runs/sft-two_digit\.json: cannot be written: reports/runs is not a folder$",
    ):
        run_stage("sft", "two_digit", progress=False)
    assert _unchanged(d, [r for r in SFT_COMMITTED if not r.startswith("reports/runs")])


@pytest.mark.skipif(IS_ROOT, reason="root may write into a read-only folder")
def test_a_read_only_run_record_folder_fails_before_any_work(committed_sft):
    from rlvr.pipeline.run import run_stage

    d = committed_sft
    (d / "reports/runs").chmod(0o555)
    try:
        with pytest.raises(guard.OutputError, match=r"^reports/runs/sft-two_digit\.json: cannot be written"):
            run_stage("sft", "two_digit", progress=False)
    finally:
        (d / "reports/runs").chmod(0o755)
    assert _unchanged(d)


def test_a_stage_that_fails_part_way_removes_its_run_record_too(committed_sft, monkeypatch):
    """A stage that wrote its metrics and run record, then failed: both go, with its other outputs
    (never a stale record beside no metrics, nor new metrics beside an old record)."""
    import rlvr.pipeline.stages.sft as sft_stage
    from rlvr.pipeline.records import write_metrics
    from rlvr.pipeline.run import run_stage

    d = committed_sft

    def fails_after_its_metrics(params, name, paths, progress=True):
        write_metrics(paths.metrics, {"sft_run": name, "mlflow_run_id": "new"})
        raise RuntimeError("failed after writing its metrics")

    monkeypatch.setattr(sft_stage, "run", fails_after_its_metrics)
    with pytest.raises(RuntimeError):
        run_stage("sft", "two_digit", progress=False)
    assert not any((d / rel).exists() for rel in SFT_COMMITTED)


def test_a_write_into_a_folder_that_cannot_be_made_names_the_file_not_a_temp_file(tmp_path):
    from rlvr.io.files import WriteError, write_json

    (tmp_path / "runs").write_text("in the way")
    target = tmp_path / "runs" / "x.json"
    with pytest.raises(WriteError) as caught:
        write_json(target, {"a": 1})
    assert (
        str(caught.value)
        == f"{target}: cannot be written ({tmp_path / 'runs'} is not a folder); move it away"
    )


# ------------------------------------------------------------------ room for every write, checked first


def test_an_output_larger_than_the_file_size_limit_fails_before_any_work(committed_sft):
    """Under `ulimit -f 64` (64 KiB) the stage would write its checkpoints anew (100 KiB now):
    it says so in one line before it reads or trains anything, and every committed file stays."""
    d = committed_sft
    (d / "data/two_digit/sft/seed1.pt").write_bytes(b"w" * 100 * 1024)
    out = subprocess.run(
        ["bash", "-c", f'ulimit -f 64; exec "{sys.executable}" -m rlvr.pipeline sft two_digit --quiet'],
        cwd=d,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "rlvr: error: data/two_digit/sft/seed1.pt: too large for the file-size limit (ulimit -f) of "
        "65536 bytes (the stage writes it anew: 102400 bytes now); raise the limit"
    ]
    assert (d / "data/two_digit/sft/seed1.pt").stat().st_size == 100 * 1024
    assert _unchanged(d, [r for r in SFT_COMMITTED if not r.endswith("seed1.pt")])


def test_a_disk_without_room_for_the_outputs_fails_before_any_work(committed_sft, monkeypatch):
    import collections

    from rlvr.pipeline.run import run_stage

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(guard.shutil, "disk_usage", lambda p: usage(2**30, 2**30 - 2**20, 2**20))
    with pytest.raises(guard.OutputError) as caught:
        run_stage("sft", "two_digit", progress=False)
    assert str(caught.value).startswith("data/two_digit/sft: cannot be written: 1.0 MiB free on its disk")
    assert str(caught.value).endswith("; free some space")
    assert _unchanged(committed_sft)


def test_the_guard_checks_what_every_stage_will_write(committed_sft, mlflow_store):
    """`check` runs before DVC removes any output: a run record that no stage could write (here
    the hack's, its folder a file) stops it, whichever stages `dvc repro` would run next."""
    from rlvr.pipeline.run import run_stage

    d = committed_sft
    shutil.rmtree(d / "reports/runs")
    (d / "reports/runs").write_text("in the way")
    with pytest.raises(
        guard.OutputError, match=r"^reports/runs/\S+\.json: cannot be written: reports/runs is"
    ):
        run_stage("check", None, progress=False)
    assert not (d / "data/params.checked").exists()


HANDOFF = """
import sys, torch
from rlvr.fields import UserError
from rlvr.pipeline.workers import seed_results

def echo(seed, data):
    return torch.zeros(2**21, dtype=torch.uint8) if sys.argv[1] == "back" else int(data[seed])

big = torch.zeros(2**21 if sys.argv[1] == "out" else 4, dtype=torch.uint8)  # 2 MiB to the workers
try:
    with seed_results(echo, [0, 1], (big,), workers=2) as results:
        print([type(r).__name__ for r in results])
except UserError as exc:
    print(f"rlvr: error: {exc}", file=sys.stderr)
    sys.exit(2)
"""


@pytest.mark.parametrize("way", ["out", "back"])
def test_tensors_too_large_for_the_workers_shared_memory_are_one_line(tmp_path, way):
    """Seed workers get their inputs (out) and return their weights (back) through shared memory
    files in /dev/shm, which a file-size limit also caps: one line naming the file and what to do
    (it was torch's traceback "unable to resize file </torch_...>: File too large")."""
    out = subprocess.run(
        ["bash", "-c", f'ulimit -f 1024; exec "{sys.executable}" -c "$0" {way}', HANDOFF],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr[-3000:]
    assert lines[0].startswith("rlvr: error: /dev/shm/torch_")
    assert (
        ": cannot be written (File too large: the file-size limit (ulimit -f) is 1048576 bytes)" in lines[0]
    )
    assert lines[0].endswith(
        "seed workers hand their tensors back through shared memory: raise the limit, or set "
        "RLVR_THREADS=1 to train the seeds in the stage process"
    )


@pytest.mark.parametrize(
    "error, line",
    [
        (
            RuntimeError(
                "unable to resize file </torch_7_8_0> to the right size: No space left on device (28)"
            ),
            "/dev/shm/torch_7_8_0: No space left on device; free some space",
        ),
        (OSError(27, "File too large", "data/x.pt"), "data/x.pt: File too large"),  # and the limit, if any
        (
            PermissionError(13, "Permission denied", "reports/runs/x.json"),
            "reports/runs/x.json: Permission denied; make it writable",
        ),
    ],
)
@pytest.mark.parametrize("wrapped", [False, True])
def test_an_os_failure_that_reaches_the_cli_is_one_line_naming_the_file(
    monkeypatch, capsys, error, line, wrapped
):
    """Whatever raised it, as it was or wrapped in another error (a worker's re-raised in the
    stage, torch's errno inside a RuntimeError): one line naming the file. A bug stays a traceback."""
    import rlvr.pipeline.run as stages
    from rlvr import cli

    def fails(*args, **kwargs):
        if not wrapped:
            raise error
        raise RuntimeError("while saving") from error

    monkeypatch.setattr(stages, "run_stage", fails)
    assert cli.main(["sft", "--run", "two_digit"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"rlvr: error: {line}"), err
    monkeypatch.setattr(stages, "run_stage", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        cli.main(["sft", "--run", "two_digit"])


# ------------------------------------------------------------------ every input loaded before any work


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _mlflow_runs(uri: str) -> list[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    return [
        r.info.run_name
        for r in client.search_runs([client.get_experiment_by_name("rlvr-repro").experiment_id])
    ]


def test_a_damaged_warm_up_of_a_later_chain_stops_sft_before_any_training(committed_sft, mlflow_store):
    """Chain 1's warm-up state is cut short: sft@two_digit names it before any chain trains (it
    used to train the chains before it, then fail, a FAILED run and the committed outputs lost)."""
    from rlvr.pipeline.checkpoint import CheckpointError
    from rlvr.pipeline.run import run_stage

    d = committed_sft
    run_stage("data", None, progress=False)
    run_stage("warmup", "two_digit", progress=False)  # two_digit: no clean epochs, no training
    _truncate(d / "data/warmup/two_digit/seed1.pt")
    before = _mlflow_runs(mlflow_store)
    with pytest.raises(CheckpointError, match=r"^data/warmup/two_digit/seed1\.pt: not a readable checkpoint"):
        run_stage("sft", "two_digit", progress=False)
    assert _mlflow_runs(mlflow_store) == before  # no run opened: nothing trained
    assert _unchanged(d)


def _passk_checkpoints(params) -> list[Path]:
    """Every checkpoint passk scores, written (untrained weights, the right run names and hashes)."""
    from rlvr.model import TinyLM
    from rlvr.pipeline import checkpoint
    from rlvr.pipeline.paths import unit_name
    from rlvr.pipeline.specs import instance_paths, scored_variants
    from rlvr.pipeline.stageparams import config_hash
    from rlvr.tokenizer import Tokenizer

    tok, paths = Tokenizer(), instance_paths("passk", None, params)
    run = params.passk.sft
    model = TinyLM(params.sft_run(run).model or params.model, len(tok))
    made = []
    for s in params.sft_run(run).seeds:
        made.append(paths.start.checkpoint(s))
        checkpoint.save(made[-1], model, tok, f"sft@{run}/seed{s}", config_hash("sft", run, params))
    for v in scored_variants(params):
        cfg = params.variant(v)
        for s in cfg.seeds:
            for r in range(cfg.grpo_seeds):
                made.append(paths.variant_checkpoint(v, s, r))
                unit = f"grpo@{v}/{unit_name(s, r)}"
                checkpoint.save(made[-1], model, tok, unit, config_hash("grpo", v, params))
    return made


def test_a_damaged_checkpoint_of_any_scored_model_stops_passk_before_any_scoring(
    tmp_path, monkeypatch, mlflow_store
):
    """The last checkpoint passk scores is cut short: named before any model is scored (its
    workers used to find it, after the others had been scored)."""
    from rlvr.io.params import load_params
    from rlvr.pipeline.checkpoint import CheckpointError
    from rlvr.pipeline.run import run_stage

    monkeypatch.chdir(tmp_path)
    _write_params(tmp_path, tiny_raw())
    run_stage("data", None, progress=False)
    made = _passk_checkpoints(load_params())
    _truncate(made[-1])
    before = _mlflow_runs(mlflow_store)
    with pytest.raises(CheckpointError, match=rf"^{made[-1]}: not a readable checkpoint"):
        run_stage("passk", None, progress=False)
    assert _mlflow_runs(mlflow_store) == before  # no run opened: nothing scored
    assert not (tmp_path / "reports/passk-counts.json").exists()


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda t: t[: len(t) // 2], r"not valid JSON \(.* at line \d+\)"),
        (lambda t: t.replace("{", "[", 1), r"not valid JSON \(.*\)"),
        (lambda t: "[1, 2]\n" + t, r"line 1 is not a JSON object"),
    ],
)
def test_damaged_training_rows_are_one_line_before_any_work(
    tmp_path, monkeypatch, mlflow_store, damage, message
):
    """A stage's JSON input cut short or edited by hand: one line naming it, not json's traceback.
    A stage refuses it by its digest before parsing it; a reader of the file alone, by its parser."""
    from rlvr.io.files import InputError, read_jsonl
    from rlvr.pipeline.run import run_stage

    monkeypatch.chdir(tmp_path)
    _write_params(tmp_path, tiny_raw())
    run_stage("data", None, progress=False)
    rows = tmp_path / "data/two_digit/sft.jsonl"
    rows.write_text(damage(rows.read_text()))
    with pytest.raises(InputError, match=r"^data/two_digit/sft\.jsonl: damaged since the data stage"):
        run_stage("sft", "two_digit", progress=False)
    with pytest.raises(InputError, match=rf"^data/two_digit/sft\.jsonl: {message}; rerun the stage"):
        read_jsonl("data/two_digit/sft.jsonl")


# ------------------------------------------------------------------ damaged report inputs: one line


@pytest.fixture
def committed_reports(tmp_path):
    """The committed results (HEAD's reports/, experiments/ and dvc.lock) in tmp_path, to damage."""
    shutil.copytree(at_head("reports"), tmp_path / "reports")
    shutil.copytree(at_head("experiments"), tmp_path / "experiments")
    shutil.copy(at_head("dvc.lock"), tmp_path / "dvc.lock")
    return tmp_path


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    data = change(data) or data
    path.write_text(json.dumps(data))


def _cut(path: Path) -> None:
    path.write_text(path.read_text()[: path.stat().st_size // 2])


VERDICTS_DAMAGE = {
    "a list": (lambda p: p.write_text("[]"), r"expected a mapping, found a list"),
    "empty": (lambda p: p.write_text("{}"), r"no `counts`"),
    "a claim a string": (
        lambda p: _edit_json(p, lambda d: d["claims"].update({"A-dynamic-sampling": "reproduced"})),
        r"claims\.A-dynamic-sampling: expected a mapping, found a string",
    ),
    "a verdict a number": (
        lambda p: _edit_json(p, lambda d: d["claims"]["A-dynamic-sampling"].update(verdict=3)),
        r"claims\.A-dynamic-sampling\.verdict: expected a string, found a number",
    ),
    "cut short": (_cut, r"not valid JSON"),
}


@pytest.mark.parametrize("damage", list(VERDICTS_DAMAGE))
def test_summary_and_verify_name_a_damaged_report_json(committed_reports, damage):
    """`rlvr summary` and `rlvr verify` on a report.json that is a list, empty, holds a claim of the
    wrong type or is cut short: one line naming the file and the place (they were tracebacks)."""
    from rlvr.io.files import InputError
    from rlvr.report.summary import summary
    from rlvr.tools.verify import claims_problems

    d = committed_reports
    path = d / "reports/report.json"
    harm, where = VERDICTS_DAMAGE[damage]
    harm(path)
    message = rf"^{path}: {where}.*; rerun the stage that writes it \(dvc repro\)$"
    with pytest.raises(InputError, match=message):
        summary(d / "reports")
    with pytest.raises(InputError, match=message):
        claims_problems(d)


@pytest.mark.parametrize(
    "rel",
    ["reports/runs/grpo-grpo.json", "reports/metrics/grpo-grpo.json", "reports/metrics/sft-two_digit.json"],
)
def test_summary_names_a_damaged_metrics_file_or_run_record(committed_reports, rel):
    from rlvr.io.files import InputError
    from rlvr.report.summary import summary

    path = committed_reports / rel
    _cut(path)
    with pytest.raises(InputError, match=rf"^{path}: not valid JSON"):
        summary(committed_reports / "reports")
    path.write_text(json.dumps({"per_seed": "x"}))
    with pytest.raises(InputError, match=rf"^{path}: "):
        summary(committed_reports / "reports")


def test_verify_names_a_damaged_metrics_file(committed_reports):
    from rlvr.io.files import InputError
    from rlvr.tools.verify import claims_problems

    path = committed_reports / "reports/metrics/passk.json"
    _edit_json(path, lambda d: d.update(variants=[1, 2]))
    with pytest.raises(InputError, match=rf"^{path}: variants: expected a mapping, found a list"):
        claims_problems(committed_reports)


S0, S1, _, S3 = read_yaml(ROOT / "params.yaml")["variants"]["dr_grpo"]["seeds"]  # a 4-chain variant's chains
COUNTS_DAMAGE = {
    "n a string": (lambda d: d.update(n="256"), r"n: expected an integer, found a string"),
    "counts a list": (lambda d: d.update(counts=[]), r"counts: expected a mapping, found a list"),
    "a count a string": (
        lambda d: d["counts"][f"grpo/seed{S0}"].__setitem__(3, "7"),
        rf"counts\.grpo/seed{S0}\[3\]: expected an integer, found a string",
    ),
    "n_by_model a list": (lambda d: d.update(n_by_model=[]), r"n_by_model: expected a mapping, found a list"),
    "a row cut to 10 problems": (
        lambda d: d["counts"].update({f"grpo/seed{S3}": d["counts"][f"grpo/seed{S3}"][:10]}),
        rf"counts\.grpo/seed{S3}: 10 values for 300 problems",
    ),
    "a count above its samples": (
        lambda d: d["counts"][f"dapo/seed{S1}"].__setitem__(0, 10**6),
        rf"counts\.dapo/seed{S1}\[0\] = 1000000: must lie in \[0, 64\], the samples drawn",
    ),
}


@pytest.mark.parametrize("damage", list(COUNTS_DAMAGE))
def test_diff_refuses_damaged_or_misshapen_pass_at_k_counts(committed_reports, damage):
    """One damaged field of passk-counts.json is one line naming it; a row cut to 10 of 300
    problems is refused (it used to be compared silently: the paired p-value moved 0.175 -> 0.717)."""
    from rlvr.io.files import InputError
    from rlvr.report.compare import diff_variants

    d = committed_reports
    counts = d / "reports/passk-counts.json"
    change, where = COUNTS_DAMAGE[damage]
    _edit_json(counts, change)
    with pytest.raises(InputError, match=rf"^{counts}: {where}"):
        diff_variants(d / "reports/metrics", counts, "grpo", "dr_grpo")


def test_every_committed_report_input_passes_its_schema():
    """The schemas describe what the stages write: HEAD's own files all pass."""
    from rlvr.report import inputs

    reports = at_head("reports")
    assert inputs.read_verdicts(reports / "report.json")["claims"]
    metrics = inputs.read_metrics_dir(reports / "metrics")
    assert {"passk.json", "grpo-grpo.json", "sft-two_digit.json"} <= set(metrics)
    assert inputs.read_records_dir(reports / "runs")
    counts = inputs.read_counts(reports / "passk-counts.json")
    assert all(len(row) == len(counts["problems"]) for row in counts["counts"].values())


# ------------------------------------------------------------------ minors


def _sweep_show(param: str = "beta", passk_moves: bool = True) -> list[dict]:
    """`dvc exp show --json` for a workspace (no name, as DVC prints it), its commit and two
    experiments over `variants.grpo.<param>`; their pass@k results move with it unless told not to."""
    from rlvr.report.sweep import PASSK

    def entry(rev, name, value, pass1):
        params = {"variants": {"grpo": {"task": "two_digit", param: value}}, "hack": {"steps": value}}
        params["passk"] = {"ks": [1, 64]}
        variant = {
            "pass_at_1_rl": pass1,
            "pass_at_n_rl": 0.98,
            "never_solved_rl": 4.0,
            "crossover_k": 65,
            "chains": 2,
            "chains_crossing": 0,
        }
        passk = {
            "sft": {"pass_at_1": 0.5, "pass_at_n": 0.99, "never_solved": 4},
            "variants": {"grpo": variant},
        }
        data = {
            "params": {"params.yaml": {"data": params}},
            "metrics": {PASSK: {"data": passk}},  # the pass@k headline sweep-report reads
        }
        return {"rev": rev, "name": name, "data": data}

    moved = (lambda x: x) if passk_moves else (lambda x: 0.8)
    head = entry("abc1234" * 5, None, 1, 0.8)
    head["experiments"] = [
        {"revs": [entry("b" * 40, "exp-2", 2, moved(0.7))]},
        {"revs": [entry("c" * 40, "exp-3", 3, moved(0.6))]},
    ]
    return [entry("workspace", None, 5, moved(0.9)), head]


def test_the_sweep_table_names_the_workspace_whole():
    from rlvr.report.sweep import experiments

    assert [e["name"] for e in experiments(_sweep_show())] == ["workspace", "abc1234", "exp-2", "exp-3"]


def test_a_sweep_that_does_not_reach_pass_at_k_keeps_the_committed_table(tmp_path):
    """A sweep over a param pass@k does not depend on (the hack's steps): every experiment's pass@k
    results are its baseline's, so there is no table to make; the committed one stays."""
    from rlvr.fields import ConfigError
    from rlvr.report.sweep import sweep_report

    (tmp_path / "sweep.md").write_text("the committed sweep\n")
    with pytest.raises(ConfigError) as err:
        sweep_report(_sweep_show("steps", passk_moves=False), tmp_path)
    message = str(err.value)
    assert "\n" not in message and "every experiment's pass@k results are the same" in message
    assert "hack.steps" in message and f"{tmp_path} is left as it is" in message
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.md"]
    assert (tmp_path / "sweep.md").read_text() == "the committed sweep\n"
    assert sweep_report(_sweep_show("steps"), tmp_path)["experiments"] == 4  # pass@k moved: a table


def test_a_sweep_that_reaches_pass_at_k_but_moves_no_count_still_gets_its_table(tmp_path):
    """Equal pass@k results are refused only when no swept param feeds the passk stage: a few GRPO
    steps that change no drawn count are a finding, and the table says so; a sweep of params the
    stage does not read is still refused."""
    from rlvr.fields import ConfigError
    from rlvr.report.sweep import sweep_report

    same = _sweep_show("steps", passk_moves=False)  # sweeps variants.grpo.steps and hack.steps
    made = sweep_report(same, tmp_path, feeding={"passk", "variants.grpo"})
    assert made["experiments"] == 4 and made["same_results"] is True
    assert "Every experiment's pass@k results are the same" in (tmp_path / "sweep.md").read_text()
    with pytest.raises(ConfigError, match="do not reach pass@k"):
        sweep_report(same, tmp_path / "other", feeding={"passk", "variants.dapo"})
    assert not (tmp_path / "other").exists()


def test_the_params_feeding_a_stage_follow_its_deps_upstream():
    """A stage's keys, its makers' keys through an output folder or a file inside one, and nothing
    from a stage it does not depend on."""
    from rlvr.pipeline.dvcfile import params_feeding

    def stage(params, deps=(), outs=()):
        return {
            "params": {"params.yaml": dict.fromkeys(params, 1)},
            "deps": [{"path": d} for d in deps],
            "outs": [{"path": o} for o in outs],
        }

    lock = {
        "stages": {
            "data": stage(["tasks.two_digit"], outs=["data/two_digit"]),
            "sft": stage(["sft.two_digit"], deps=["data/two_digit/rows.jsonl"], outs=["data/sft"]),
            "grpo": stage(["variants.grpo"], deps=["data/sft"], outs=["data/grpo/grpo"]),
            "hack": stage(["hack"], deps=["data/sft"], outs=["data/hack"]),
            "passk": stage(["passk"], deps=["data/grpo"], outs=["reports/passk.json"]),
        }
    }
    assert params_feeding("passk", lock) == {"passk", "variants.grpo", "sft.two_digit", "tasks.two_digit"}
    assert params_feeding("hack", lock) == {"hack", "sft.two_digit", "tasks.two_digit"}
    assert params_feeding("absent", lock) == set()


def test_a_sweep_report_into_a_file_says_it_is_not_a_folder(tmp_path):
    from rlvr.fields import ConfigError
    from rlvr.report.sweep import sweep_report

    readme = tmp_path / "README.md"
    readme.write_text("docs\n")
    with pytest.raises(ConfigError, match=rf"^--out {readme}: not a folder \(sweep-report writes sweep\.md"):
        sweep_report(_sweep_show(), readme)
    assert readme.read_text() == "docs\n"


def test_every_interval_a_stage_writes_lies_within_what_its_metric_can_take():
    """Chains' t-intervals are cut to the metric's range: an SFT accuracy's at 1 (it reached 1.34
    in a metrics file), a KL's and a loss's at 0, a difference of rates at [-1, 1]."""
    from rlvr.stats import metric_bounds, seed_metrics

    per_seed = {  # four chains, one near each edge
        s: {"greedy_acc_heldout": a, "kl_k3_nats_max": k, "final_loss": f, "accuracy_gain": g, "steps": n}
        for s, (a, k, f, g, n) in enumerate(
            [
                (1.0, 0.0, 0.01, -0.9, 0),
                (0.2, 9.0, 0.02, -0.1, 2000),
                (1.0, 0.1, 2.0, -1.0, 10),
                (1.0, 0.0, 0.0, 0.0, 5),
            ]
        )
    }
    ci = seed_metrics(per_seed)["ci95"]
    assert ci["greedy_acc_heldout"][1] == 1.0 and 0 < ci["greedy_acc_heldout"][0] < 1
    assert ci["kl_k3_nats_max"][0] == 0.0 and ci["final_loss"][0] == 0.0 and ci["steps"][0] == 0.0
    assert ci["accuracy_gain"][0] == -1.0
    assert metric_bounds("reward_minus_accuracy_end") == (-1.0, 1.0)
    assert metric_bounds("start_val") == metric_bounds("reached") == (0.0, 1.0)
    assert metric_bounds("never_solved") == metric_bounds("digits_per_response_end") == (0.0, math.inf)
    assert metric_bounds("made_up_metric") == (-math.inf, math.inf)
    from rlvr.passk_summary import _band  # pass@k's curves: a rate's band, and its difference from SFT's

    assert _band([1.0, 0.2, 1.0, 1.0], "pass_at_k")["pass_at_k_hi"] == 1.0
    assert _band([-1.0, -0.2, -1.0, -1.0], "minus_sft")["minus_sft_lo"] == -1.0


@pytest.mark.slow
def test_the_sft_metrics_file_clips_its_accuracy_intervals(tmp_path, monkeypatch, mlflow_store):
    """The SFT stage writes its chains' intervals through seed_metrics: an accuracy's never above 1
    (here chains of 1.0, 0.2, 1.0, 1.0 by hand: the t-interval's top would be 1.43)."""
    import rlvr.pipeline.stages.sft as sft_stage
    from rlvr.pipeline.run import run_stage

    monkeypatch.chdir(tmp_path)
    raw = tiny_raw()
    raw["sft"]["two_digit"]["seeds"] = [0, 1, 2, 3]
    raw["sft"]["two_digit"]["redraws"] = 0  # a redraw seeds torch anew: the chain is told by its seed
    _write_params(tmp_path, raw)
    run_stage("data", None, progress=False)
    run_stage("warmup", "two_digit", progress=False)
    accuracy = {0: 1.0, 1: 0.2, 2: 1.0, 3: 1.0}
    monkeypatch.setattr(
        sft_stage,
        "start_accuracies",
        lambda model, max_new_tokens, train, held, gen: {
            "greedy_acc_heldout": accuracy[torch.initial_seed()],
            "sampled_acc_heldout": 0.5,
        },
    )
    run_stage("sft", "two_digit", progress=False)
    ci = json.loads((tmp_path / "reports/metrics/sft-two_digit.json").read_text())["ci95"]
    assert ci["greedy_acc_heldout"][1] == 1.0 and ci["greedy_acc_heldout"][0] > 0


# ------------------------------------------------------------------ under dvc repro: the guard first


@pytest.mark.slow
def test_a_server_failing_the_mlflow_api_stops_repro_before_any_output_is_removed(small_repo, fake_server):
    """/health answers, the MLflow API does not: `check` fails, and DVC removes nothing (it used
    to pass, and DVC deleted the stage's committed files before the stage failed)."""
    server = fake_server(api=False)
    out = _repro_worked_with_store(*small_repo, server.uri)
    assert f"rlvr: error: MLflow tracking server {server.uri}: experiments/get-by-name failed" in out.stderr


@pytest.mark.slow
def test_a_run_record_no_stage_could_write_stops_repro_before_any_output_is_removed(small_repo, tmp_path):
    """reports/runs is in the way: `check` names a run record before DVC removes worked's outputs."""
    d, env = small_repo
    work = tmp_path / "w"
    shutil.copytree(d, work, symlinks=True)
    (work / "params.yaml").write_text(
        (work / "params.yaml").read_text().replace("kl_samples: 500", "kl_samples: 600")
    )
    kept = {
        p: _md5(work / p) for p in ("reports/metrics/worked.json", "reports/figures/worked-a8-memory.png")
    }
    shutil.rmtree(work / "reports/runs")
    (work / "reports/runs").write_text("in the way")
    out = subprocess.run(
        "dvc repro worked",
        shell=True,
        cwd=work,
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(work)},
        timeout=300,
    )
    assert out.returncode != 0 and "Running stage 'worked'" not in out.stdout
    errors = [line for line in out.stderr.splitlines() if line.startswith("rlvr: error:")]
    assert len(errors) == 1 and errors[0].endswith(": cannot be written: reports/runs is not a folder")
    assert {p: _md5(work / p) for p in kept} == kept


@pytest.mark.slow
def test_rlvr_restore_puts_back_what_dvc_removed_before_a_stage_that_failed(small_repo, tmp_path):
    """DVC removes a stage's outputs before it runs the stage; when the stage then fails, `rlvr
    restore` puts back every recorded output the workspace lacks: git-tracked ones from HEAD,
    cached ones (checkpoints) from DVC's cache; byte for byte, and nothing else is touched."""
    src, env = small_repo
    d = tmp_path / "repo"
    shutil.copytree(src, d, symlinks=True)
    env = {
        **env,
        "PYTHONPATH": str(d),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    made = subprocess.run("dvc repro data", shell=True, cwd=d, env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-2000:]  # a stage whose outputs live in DVC's cache
    subprocess.run("git add -A && git commit -qm results", shell=True, cwd=d, env=env, check=True)
    lock = yaml.safe_load((d / "dvc.lock").read_text())["stages"]
    recorded = [o["path"] for s in lock.values() for o in s.get("outs", [])]
    # what DVC removes before it runs `worked` and the stages above it (the guard's marker aside:
    # `check` writes it again on every repro); an earlier test of this module may have left one gone
    removed = [p for p in dict.fromkeys(recorded) if (d / p).exists() and p != "data/params.checked"]
    assert any(p.startswith("reports/metrics/") for p in removed)
    assert any(p.startswith("data/") for p in removed)
    before = {p: _md5(d / p) for p in removed if (d / p).is_file()}
    for p in removed:
        shutil.rmtree(d / p) if (d / p).is_dir() else (d / p).unlink()
    run = subprocess.run(
        [sys.executable, "-m", "rlvr", "restore"], cwd=d, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert set(summary["restored_from_git"]) | set(summary["restored_from_dvc_cache"]) >= set(removed)
    assert summary["restored_from_dvc_cache"]  # the checkpoints: in DVC's cache, not in git
    assert all((d / p).exists() for p in removed)
    assert {p: _md5(d / p) for p in before} == before
    status = subprocess.run(
        "git status --porcelain", shell=True, cwd=d, env=env, capture_output=True, text=True
    )
    assert status.stdout == ""


@pytest.mark.slow  # a child stage that opens an MLflow run and is sent a signal
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stage_stopped_by_dvc_or_a_closed_terminal_marks_its_run_killed(mlflow_store, sig):
    script = textwrap.dedent("""
        import time
        from rlvr.pipeline.tracking import stage_run
        try:
            with stage_run("sft@x", {}, {}, "h") as run:
                print(run.run_id, flush=True)
                time.sleep(120)
        except KeyboardInterrupt:
            raise SystemExit(130)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_store},
    )
    run_id = proc.stdout.readline().strip()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    from mlflow.tracking import MlflowClient

    assert proc.returncode == 130 and "Traceback" not in err
    assert MlflowClient(mlflow_store).get_run(run_id).info.status == "KILLED"


KILLED_WORKER = """
import os, signal, sys, time
from rlvr.io.files import error_line
from rlvr.pipeline.workers import seed_results

def seed_fn(seed):
    if seed == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer does
    time.sleep(2)
    return seed

try:
    with seed_results(seed_fn, [0, 1, 2, 3], (), workers=2) as results:
        print(list(results))
except Exception as exc:
    print(f"rlvr: error: {error_line(exc)}", file=sys.stderr)
    raise SystemExit(2)
"""


@pytest.mark.slow  # forked seed workers, one killed
def test_a_seed_worker_killed_from_outside_is_one_line(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", KILLED_WORKER],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        "rlvr: error: a seed worker died before returning its seed (killed from outside: out of memory? "
        "`dmesg` says); rerun the stage (dvc repro), or set RLVR_THREADS=1 to train the seeds in the "
        "stage process"
    ]


def _ctrl_c_on_a_terminal(d: Path, env: dict, argv: list[str], ready) -> str:
    """Run `argv` in `d` on a pseudo-terminal, as a user's shell would, and type Ctrl-C into it once
    `ready(output so far)` holds; -> everything the terminal showed. Fails if it never got ready or
    the command was not stopped."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: a shell on the terminal, as a user's
        os.chdir(d)
        # a terminal's foreground job takes Ctrl-C, whatever started the tests (a shell's background
        # job inherits SIGINT ignored, and an ignored signal stays ignored across exec)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execvpe(argv[0], argv, env)
    seen, deadline = b"", time.monotonic() + 300
    sent = False
    while time.monotonic() < deadline:
        ready_fds, _, _ = select.select([fd], [], [], 0.2)
        if ready_fds:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the terminal closed: every process on it exited
                break
            if not chunk:
                break
            seen += chunk
        if not sent and ready(seen):
            os.write(fd, b"\x03")  # Ctrl-C, as typed
            sent = True
    _, status = os.waitpid(pid, 0)
    text = seen.decode(errors="replace")
    assert sent, text[-2000:]
    assert os.waitstatus_to_exitcode(status) != 0, text[-2000:]
    return text


def _committed_copy(small_repo, tmp_path) -> tuple[Path, dict]:
    src, env = small_repo
    d = tmp_path / "repo"
    shutil.copytree(src, d, symlinks=True)
    ident = {k: "t" for k in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")}
    env = {**env, "PYTHONPATH": str(d), **ident, "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run("git add -A && git commit -qm results", shell=True, cwd=d, env=env, check=True)
    return d, env


@pytest.mark.slow  # dvc repro on a pseudo-terminal, Ctrl-C typed into it, then `rlvr restore`
def test_ctrl_c_on_a_terminal_during_repro_is_one_line_and_restore_brings_the_outputs_back(
    small_repo, tmp_path
):
    """Ctrl-C typed into the terminal reaches dvc and the stage (the foreground process group): the
    stage says one line and no process prints a traceback; DVC had removed the stage's outputs, and
    `rlvr restore` puts them back byte for byte."""
    d, env = _committed_copy(small_repo, tmp_path)
    outs = [o["path"] for o in yaml.safe_load((d / "dvc.lock").read_text())["stages"]["worked"]["outs"]]
    before = {p: _md5(d / p) for p in outs if (d / p).is_file()}
    started = {}

    def ready(seen: bytes) -> bool:  # the stage process is up, importing and computing
        if b"Running stage 'worked'" in seen:
            started.setdefault("at", time.monotonic())
        return "at" in started and time.monotonic() - started["at"] > 1.5

    text = _ctrl_c_on_a_terminal(d, env, ["dvc", "repro", "-f", "worked"], ready)
    assert "Traceback" not in text, text[-3000:]
    assert "rlvr: stage worked interrupted" in text
    run = subprocess.run(
        [sys.executable, "-m", "rlvr", "restore"], cwd=d, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert {p: _md5(d / p) for p in before} == before


SFT_STAGE = "^python -m rlvr.pipeline sft"  # the stage's command line, and its forked workers'


def _statuses(uri: str, prefix: str) -> dict[str, str]:
    """Run name -> status of every run in the store whose name starts with `prefix` (none: {})."""
    import sqlite3

    db = uri.removeprefix("sqlite:///")
    if not Path(db).is_file():
        return {}
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            rows = con.execute("select name, status from runs where name like ?", (prefix + "%",)).fetchall()
    except sqlite3.OperationalError:  # no runs table yet, or the store busy
        return {}
    return dict(rows)


def _processes(pattern: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(x) for x in found.stdout.split()]


@pytest.mark.slow  # dvc repro of an SFT stage on a pseudo-terminal, Ctrl-C while its seed workers train
def test_ctrl_c_while_seed_workers_train_is_one_line_and_leaves_no_process(small_repo, tmp_path):
    """The same Ctrl-C with the stage's forked seed workers training (they share the terminal's
    process group, so they get it too): one line, no traceback from multiprocessing, the pool or a
    worker, no worker left, the stage's run KILLED and no run left RUNNING (a seed that finished
    before the key was pressed keeps its FINISHED run)."""
    d, env = _committed_copy(small_repo, tmp_path)
    raw = yaml.safe_load((d / "params.yaml").read_text())
    # long enough to be interrupted mid-training: no controlled stop (a chain reaching its target
    # early would let the stage finish before the key is pressed), many full-batch epochs
    raw["sft"]["single_digit"].update(epochs=20000, target=None, redraws=0)
    (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))

    store = f"sqlite:///{d / 'mlflow.db'}"

    def ready(seen: bytes) -> bool:  # forked workers training (same command line) and the run open
        return (
            b"Running stage 'sft@single_digit'" in seen
            and len(_processes(SFT_STAGE)) >= 2
            and "RUNNING" in _statuses(store, "sft@").values()
        )

    text = _ctrl_c_on_a_terminal(d, {**env, "RLVR_THREADS": "2"}, ["dvc", "repro", "sft@single_digit"], ready)
    assert not [w for w in ("Traceback", "ConnectionResetError", "BrokenProcessPool") if w in text], text[
        -3000:
    ]
    assert "rlvr: stage sft@single_digit interrupted" in text, text[-3000:]
    deadline = time.monotonic() + 30
    while _processes(SFT_STAGE) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _processes(SFT_STAGE), "a seed worker outlived its stage"
    statuses = _statuses(store, "sft@")
    assert statuses.pop("sft@single_digit", None) == "KILLED", statuses
    # a seed's run opens when its result comes back: none yet, or FINISHED ones, or one cut KILLED
    assert set(statuses.values()) <= {"KILLED", "FINISHED"}, statuses


def _stage_and_workers(pattern: str) -> tuple[int | None, list[int]]:
    """The stage process matching `pattern` and its forked seed workers (its children that match)."""
    pids = _processes(pattern)
    parents = {p: int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]) for p in pids}
    stage = next((p for p in pids if parents[p] not in pids), None)
    return stage, [p for p in pids if parents[p] == stage]


@pytest.mark.slow  # dvc repro of an SFT stage, one of its seed workers killed as the OOM killer would
def test_a_seed_worker_killed_under_repro_is_one_line_fails_the_run_and_restore_mends_it(
    small_repo, tmp_path
):
    """SIGKILL to one forked seed worker while the SFT stage trains: one line naming what happened
    and what to do (no BrokenProcessPool traceback), no worker left, the stage's MLflow run FAILED
    and none RUNNING; `rlvr restore` then leaves the checkout as committed."""
    d, env = _committed_copy(small_repo, tmp_path)
    raw = yaml.safe_load((d / "params.yaml").read_text())
    # long enough to be killed mid-training: no controlled stop, many full-batch epochs
    raw["sft"]["single_digit"].update(epochs=20000, target=None, redraws=0)
    (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    subprocess.run("git commit -qam 'longer sft'", shell=True, cwd=d, env=env, check=True)
    store = f"sqlite:///{d / 'mlflow.db'}"
    proc = subprocess.Popen(
        ["dvc", "repro", "sft@single_digit"],
        cwd=d,
        env={**env, "RLVR_THREADS": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline, workers = time.monotonic() + 300, []
    while time.monotonic() < deadline and proc.poll() is None:
        stage, workers = _stage_and_workers(SFT_STAGE)
        if len(workers) >= 2 and "RUNNING" in _statuses(store, "sft@").values():
            break
        time.sleep(0.5)
    assert workers and proc.poll() is None, f"no seed worker to kill: {proc.communicate()[0][-3000:]}"
    os.kill(workers[0], signal.SIGKILL)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "Traceback" not in out and "BrokenProcessPool" not in out, out[-3000:]
    died = "rlvr: error: a seed worker died before returning its seed (killed from outside"
    assert died in out, out[-3000:]
    assert not _processes(SFT_STAGE), "a seed worker outlived its stage"
    statuses = _statuses(store, "sft@")
    assert statuses.get("sft@single_digit") == "FAILED" and "RUNNING" not in statuses.values(), statuses
    run = subprocess.run(
        [sys.executable, "-m", "rlvr", "restore"], cwd=d, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    # nothing committed is missing or changed: dvc.lock alone records the warm-up that the longer
    # SFT's settings reran, which succeeded and stands
    changed = subprocess.run(["git", "diff", "--name-only"], cwd=d, capture_output=True, text=True).stdout
    assert set(changed.split()) <= {"dvc.lock"}, changed


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind, message",
    [
        ("folder", "is a folder, not an SQLite file; move it away"),
        ("dangling link", "which does not exist; remove the link"),
        ("older schema", "was made by an older MLflow (schema"),
        ("newer schema", "was made by a newer MLflow than the installed"),
        ("read-only file system", "is on a read-only file system; remount it read-write"),
        ("full disk", "MiB free on its disk, a stage needs about 16 MiB to log; free some space"),
    ],
)
def test_a_store_a_stage_could_not_use_stops_repro_at_check(small_repo, tmp_path, kind, message):
    """A param changed, and a store no stage could log to: `dvc repro` stops at `check` in one line,
    before DVC removes any of `worked`'s committed outputs (`_repro_worked_with_store` checks them)."""
    import sqlite3

    from rlvr.pipeline.probe import schema_revisions

    d, env = small_repo
    with contextlib.ExitStack() as stack:
        folder = tmp_path
        if kind in ("read-only file system", "full disk"):  # a real one: 12 MiB, or remounted read-only
            folder = stack.enter_context(tmpfs(tmp_path / "fs", "12m"))
        db = folder / "mlflow.db"
        if kind == "folder":
            db.mkdir()
        elif kind == "dangling link":
            db.symlink_to(tmp_path / "gone" / "mlflow.db")
        else:  # the store `worked` logged to
            shutil.copy(d / "mlflow.db", db)
        if kind.endswith("schema"):  # its schema revision changed
            known, head = schema_revisions()
            revision = sorted(known - {head})[0] if kind == "older schema" else "f00dfeedbeef"
            with sqlite3.connect(db) as con:
                con.execute("update alembic_version set version_num = ?", (revision,))
        if kind == "read-only file system":
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        out = _repro_worked_with_store(d, env, f"sqlite:///{db}")
    assert f"rlvr: error: MLflow tracking store sqlite:///{db}: " in out.stderr and message in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_a_password_in_the_tracking_uri_is_never_printed_by_repro(small_repo):
    secret = "pw-8f2c1e"
    out = _repro_worked_with_store(*small_repo, f"http://alice:{secret}@127.0.0.1:9/")
    assert secret not in out.stdout + out.stderr
    assert "MLflow tracking server http://alice:***@127.0.0.1:9/ is unreachable" in out.stderr
