"""The guard refuses, in one line naming cause and fix, every store and output a stage could not
use: checked at `check`, before DVC removes any stage's outputs."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest
from conftest import ROOT, tmpfs

from rlvr.pipeline import guard
from rlvr.pipeline.probe import probe_store, schema_revisions
from rlvr.pipeline.store import TrackingError, public_uri


def refused(uri: str) -> str:
    with pytest.raises(TrackingError) as caught:
        probe_store(uri)
    line = str(caught.value)
    assert "\n" not in line
    return line


def test_a_folder_where_the_store_goes_is_refused(tmp_path):
    (tmp_path / "mlflow.db").mkdir()
    assert "mlflow.db is a folder, not an SQLite file; move it away" in refused(
        f"sqlite:///{tmp_path / 'mlflow.db'}"
    )


def test_a_dangling_link_where_the_store_goes_is_refused(tmp_path):
    (tmp_path / "mlflow.db").symlink_to(tmp_path / "gone" / "mlflow.db")
    line = refused(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert "mlflow.db is a link to" in line and "which does not exist; remove the link" in line


def test_a_read_only_store_is_refused(mlflow_store, monkeypatch):
    db = Path(mlflow_store.removeprefix("sqlite:///"))
    db.chmod(0o444)
    if os.geteuid() == 0:  # root writes a read-only file anyway: the guard asks as a user would be told
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == db else real(p, mode))
    assert "mlflow.db is read-only; make it writable (chmod u+w" in refused(mlflow_store)


def test_a_store_that_refuses_a_real_write_is_refused(mlflow_store, monkeypatch):
    """BEGIN IMMEDIATE alone passes a read-only database; the guard's probe writes (and rolls back)."""
    db = Path(mlflow_store.removeprefix("sqlite:///"))
    with sqlite3.connect(db) as con:  # a table of the probe's name: its write fails as a real one would
        con.execute("create table rlvr_guard_probe (x)")
    assert "cannot be written (table rlvr_guard_probe already exists)" in refused(mlflow_store)


def test_the_probe_leaves_the_store_as_it_was(mlflow_store):
    db = Path(mlflow_store.removeprefix("sqlite:///"))
    before = db.read_bytes()
    probe_store(mlflow_store)
    assert db.read_bytes() == before


def test_a_full_disk_under_the_store_is_refused(mlflow_store, monkeypatch):
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr("shutil.disk_usage", lambda p: Usage(10**9, 10**9 - 2**20, 2**20))
    line = refused(mlflow_store)
    assert "1.0 MiB free on its disk, a stage needs about 16 MiB to log; free some space" in line


def test_a_store_on_a_read_only_file_system_is_refused(mlflow_store, tmp_path):
    """No patching: the store on a file system remounted read-only, which even root cannot write."""
    with tmpfs(tmp_path / "ro", "64m") as mnt:
        shutil.copy(mlflow_store.removeprefix("sqlite:///"), mnt / "mlflow.db")
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        line = refused(f"sqlite:///{mnt / 'mlflow.db'}")
    assert "/ro is on a read-only file system; remount it read-write" in line


def test_a_store_on_a_full_disk_is_refused(mlflow_store, tmp_path):
    """No patching: the store on a 4 MiB file system, less than the 16 MiB a stage needs to log."""
    with tmpfs(tmp_path / "small", "4m") as mnt:
        shutil.copy(mlflow_store.removeprefix("sqlite:///"), mnt / "mlflow.db")
        line = refused(f"sqlite:///{mnt / 'mlflow.db'}")
    assert "MiB free on its disk, a stage needs about 16 MiB to log; free some space" in line


def test_a_store_made_by_the_installed_mlflow_passes_and_its_schema_is_the_newest(mlflow_store):
    db = Path(mlflow_store.removeprefix("sqlite:///"))
    with sqlite3.connect(db) as con:
        (revision,) = con.execute("select version_num from alembic_version").fetchone()
    known, head = schema_revisions()
    assert revision == head and head in known and len(known) > 10
    probe_store(mlflow_store)


def _set_revision(uri: str, revision: str) -> None:
    with sqlite3.connect(uri.removeprefix("sqlite:///")) as con:
        con.execute("update alembic_version set version_num = ?", (revision,))


def test_a_store_made_by_an_older_mlflow_is_refused_with_the_upgrade(mlflow_store):
    known, head = schema_revisions()
    older = next(iter(sorted(known - {head})))
    _set_revision(mlflow_store, older)
    line = refused(mlflow_store)
    assert f"was made by an older MLflow (schema {older}" in line
    assert f"upgrade it with `mlflow db upgrade {mlflow_store}`" in line


def test_a_store_made_by_a_newer_mlflow_is_refused(mlflow_store):
    _set_revision(mlflow_store, "f00dfeedbeef")
    assert "was made by a newer MLflow than the installed" in refused(mlflow_store)


@pytest.mark.parametrize(
    "make, name, message",
    [
        (lambda p: p.mkdir(), "metrics.json", "it is a folder where the stage writes a file"),
        (lambda p: p.write_text("x"), "checkpoints", "it is a file where the stage writes a folder"),
        (lambda p: p.symlink_to(p.parent / "gone"), "curves.tsv", "which does not exist"),
    ],
)
def test_an_output_of_the_wrong_kind_is_refused_before_any_work(tmp_path, make, name, message):
    out = tmp_path / name
    make(out)
    with pytest.raises(guard.OutputError, match=message):
        guard.preflight([out])


SECRET = "s3cr3t-pw"


def test_a_credentialed_uri_is_shown_with_its_password_masked():
    assert public_uri(f"http://alice:{SECRET}@example.org:5000/x") == "http://alice:***@example.org:5000/x"
    assert public_uri("sqlite:///mlflow.db") == "sqlite:///mlflow.db"


@pytest.mark.parametrize("module", ["rlvr", "rlvr.pipeline"])
def test_a_password_in_the_tracking_uri_is_never_printed(tmp_path, module):
    """The URI goes to the server without its credentials (they travel as Basic auth, as MLflow's
    client sends them), and the one-line refusal masks the password."""
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"http://alice:{SECRET}@127.0.0.1:9/",
        "PYTHONPATH": str(ROOT),
    }
    params = ["--params", str(ROOT / "params.yaml")]
    command = [*params, "check"] if module == "rlvr" else ["check", *params]
    run = subprocess.run(
        [sys.executable, "-m", module, *command], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 2
    assert SECRET not in run.stdout + run.stderr
    assert "http://alice:***@127.0.0.1:9/ is unreachable ([Errno 111] Connection refused)" in run.stderr
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")]
