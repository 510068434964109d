"""`rlvr restore` brings every output back to the bytes dvc.lock records: a half-present folder
whole, git-kept outputs from the commit that recorded them, never a damaged cache object, never
HEAD's older copy of an output whose recorded bytes were never committed. A small DVC project of
one stage (a cached folder, a git-kept file and folder) stands in for the pipeline."""

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # git, dvc repro and dvc checkout in a throw-away project

MAKE = """
import pathlib, sys
version = pathlib.Path("version").read_text().strip()
for name in ("a", "b"):
    pathlib.Path("ckpt").mkdir(exist_ok=True)
    pathlib.Path(f"ckpt/{name}.pt").write_text(f"weights {name} {version}")
pathlib.Path("rec.json").write_text('{"version": "' + version + '"}')
pathlib.Path("curves").mkdir(exist_ok=True)
pathlib.Path("curves/x.tsv").write_text(f"step\\tx\\n0\\t{version}\\n")
"""

DVC_YAML = """
stages:
  make:
    cmd: python make.py
    deps: [make.py, version]
    outs:
    - ckpt
    - rec.json:
        cache: false
    - curves:
        cache: false
"""


def sh(d, *args, check=True):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(list(args), cwd=d, env=env, capture_output=True, text=True, check=check)


def dvc(d, *args, check=True):
    return sh(d, sys.executable, "-m", "dvc", *args, check=check)


def restore(d):
    return sh(d, sys.executable, "-m", "rlvr", "restore", check=False)


def clean(d) -> bool:
    return json.loads(dvc(d, "status", "--json").stdout or "{}") == {}


@pytest.fixture
def project(tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    (d / "make.py").write_text(MAKE)
    (d / "dvc.yaml").write_text(DVC_YAML)
    (d / "version").write_text("1\n")
    (d / "params.yaml").write_text("seed: 0\n")  # with dvc.yaml: what marks a project root for rlvr
    sh(d, "git", "init", "-q")
    dvc(d, "init", "-q")
    dvc(d, "config", "core.analytics", "false")
    dvc(d, "repro", "-q")
    sh(d, "git", "add", "-A")
    sh(d, "git", "commit", "-qm", "results")
    return d


def test_a_half_present_folder_and_missing_kept_outputs_come_back_as_recorded(project):
    d = project
    before = {p: (d / p).read_text() for p in ("ckpt/a.pt", "ckpt/b.pt", "rec.json", "curves/x.tsv")}
    (d / "ckpt/b.pt").unlink()
    (d / "ckpt/a.pt").unlink()
    (d / "ckpt/a.pt").write_text("the killed run's first new checkpoint")
    (d / "ckpt/c.pt").write_text("a file the recorded folder never had")
    (d / "rec.json").unlink()
    (d / "curves/x.tsv").write_text("half written")
    run = restore(d)
    assert run.returncode == 0, run.stderr
    done = json.loads(run.stdout)
    assert done["restored_from_dvc_cache"] == ["ckpt"]
    assert set(done["restored_from_git"]) == {"rec.json", "curves"}
    assert {p: (d / p).read_text() for p in before} == before
    assert sorted(p.name for p in (d / "ckpt").iterdir()) == ["a.pt", "b.pt"]
    assert clean(d)


def test_recorded_bytes_never_committed_are_named_not_replaced_by_heads(project):
    """A repro whose results are not committed yet records new hashes; when the next run of that
    stage is killed after DVC removed its outputs, HEAD's older copy is not what dvc.lock records:
    it is not put back, and the line names the file and the stage to rerun."""
    d = project
    (d / "version").write_text("2\n")
    dvc(d, "repro", "-q")
    (d / "rec.json").unlink()
    run = restore(d)
    assert run.returncode != 0 and not (d / "rec.json").exists()
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("rlvr: error: rec.json: no commit holds the bytes dvc.lock records")
    assert line.endswith("rerun what made them: dvc repro make")


BACK_UP = """
from rlvr.pipeline.backup import keep
keep(pathlib.Path("."), ["rec.json", "curves"])  # what every rlvr stage does as it finishes
"""


def test_recorded_bytes_never_committed_come_back_from_the_stages_backup(project):
    """As above, but the stage backs up its git-kept outputs as it finishes: the bytes dvc.lock
    records, a file and a folder, come back from the backup store, not from HEAD."""
    d = project
    (d / "make.py").write_text(MAKE + BACK_UP)
    (d / "version").write_text("2\n")
    dvc(d, "repro", "-q")
    recorded = {p: (d / p).read_text() for p in ("rec.json", "curves/x.tsv")}
    (d / "rec.json").unlink()  # the killed rerun: DVC removed them, the stage began anew
    (d / "curves/x.tsv").unlink()
    (d / "curves/y.tsv").write_text("the killed run's first new curve")
    run = restore(d)
    assert run.returncode == 0, run.stderr
    assert set(json.loads(run.stdout)["restored_from_backup"]) == {"rec.json", "curves"}
    assert {p: (d / p).read_text() for p in recorded} == recorded
    assert sorted(p.name for p in (d / "curves").iterdir()) == ["x.tsv"]
    assert clean(d)


def test_a_damaged_backup_object_is_never_put_back(project):
    d = project
    (d / "make.py").write_text(MAKE + BACK_UP)
    (d / "version").write_text("2\n")
    dvc(d, "repro", "-q")
    digest = __import__("hashlib").md5((d / "rec.json").read_bytes()).hexdigest()
    obj = d / ".rlvr/backup" / digest[:2] / digest[2:]
    obj.chmod(0o644)
    obj.write_text('{"version": "3"}')
    (d / "rec.json").unlink()
    run = restore(d)
    assert run.returncode != 0 and not (d / "rec.json").exists()
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("rlvr: error: rec.json: damaged in the backup store")
    assert line.endswith("dvc repro make")


def test_a_damaged_cache_object_is_never_put_back(project):
    d = project
    digest = __import__("hashlib").md5(b"weights a 1").hexdigest()
    cache = d / ".dvc/cache/files/md5" / digest[:2] / digest[2:]
    cache.chmod(0o644)
    cache.write_text("weights a 1, one byte flipped")
    for p in (d / "ckpt").iterdir():
        p.unlink()
    (d / "ckpt").rmdir()
    run = restore(d)
    assert run.returncode != 0 and not (d / "ckpt").exists()
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("rlvr: error: ckpt/a.pt: missing or damaged in DVC's cache")
    assert line.endswith("dvc repro make")


def test_nothing_to_restore_changes_nothing(project):
    run = restore(project)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"restored_from_dvc_cache": [], "restored_from_git": {}}


def test_a_clone_that_never_pulled_is_restored_as_far_as_it_can_be_and_told_the_rest(project, tmp_path):
    """After a failed `dvc exp run -S` in a fresh clone (no DVC cache, no remote): the git-kept
    outputs DVC removed come back, the cached ones it never had are named with what makes them (not
    an error), and params.yaml, which the experiment rewrote, is named and left as it is."""
    clone = tmp_path / "clone"
    sh(tmp_path, "git", "clone", "-q", str(project), str(clone))
    recorded = (clone / "rec.json").read_text()
    (clone / "rec.json").unlink()  # what DVC removes before it runs a stage
    (clone / "params.yaml").write_text("seed: 'abc'\n")
    run = restore(clone)
    assert run.returncode == 0, run.stderr
    done = json.loads(run.stdout)
    assert set(done["restored_from_git"]) == {"rec.json"} and (clone / "rec.json").read_text() == recorded
    assert (
        done["not_in_this_cache"]["outputs"] == ["ckpt"] and "dvc pull" in done["not_in_this_cache"]["note"]
    )
    assert "git checkout params.yaml" in done["params_yaml"]
    assert (clone / "params.yaml").read_text() == "seed: 'abc'\n"


def test_a_profiles_folder_restores_to_its_own_lock_not_the_roots(tmp_path):
    """Run from a profile's folder (`cd powered && rlvr restore`), the committed locks and bytes it
    reads are that folder's: the root's dvc.lock and its files of the same names are never taken."""
    from rlvr.tools.restore import Changed, lock_history, recorded_in

    for where, version in ((tmp_path, "root"), (tmp_path / "powered", "profile")):
        where.mkdir(exist_ok=True)
        (where / "rec.json").write_text(f'{{"version": "{version}"}}')
        digest = sh(
            where,
            sys.executable,
            "-c",
            "import hashlib; print(hashlib.md5(open('rec.json','rb').read()).hexdigest())",
        )
        lock = {"stages": {"make": {"outs": [{"path": "rec.json", "md5": digest.stdout.strip()}]}}}
        (where / "dvc.lock").write_text(json.dumps(lock))
    sh(tmp_path, "git", "init", "-q")
    sh(tmp_path, "git", "add", ".")
    sh(tmp_path, "git", "commit", "-q", "-m", "results")
    profile = tmp_path / "powered"
    (profile / "rec.json").write_text("damaged")
    locks = lock_history(profile)
    entry = locks[0][1]["make"]["outs"][0]
    assert entry == json.loads((profile / "dvc.lock").read_text())["stages"]["make"]["outs"][0]
    assert recorded_in(profile, Changed("make", "rec.json", "modified", entry), locks) == locks[0][0]
