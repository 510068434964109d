"""The backup store keeps a finished stage's git-kept outputs by md5, as dvc.lock records them:
each object written once, read-only, and checked before it is put back, so a damaged one is
refused, never restored."""

import os

import pytest
import yaml

from rlvr.io.files import md5
from rlvr.pipeline.backup import STORE, BackupError, keep, listing, listing_bytes, object_path, put_back


@pytest.fixture
def outputs(tmp_path):
    """A workspace with a git-kept file and folder, as a stage leaves them."""
    (tmp_path / "rec.json").write_text('{"version": 1}\n')
    (tmp_path / "curves" / "sub").mkdir(parents=True)
    (tmp_path / "curves" / "seed0.tsv").write_text("step\tloss\n0\t1.5\n")
    (tmp_path / "curves" / "sub" / "seed1.tsv").write_text("step\tloss\n0\t2.5\n")
    return tmp_path


def folder_digest(folder) -> str:
    return __import__("hashlib").md5(listing_bytes(listing(folder))).hexdigest() + ".dir"


def test_a_folders_digest_is_the_one_dvc_records(outputs):
    from dvc_data.hashfile.hash_info import HashInfo
    from dvc_data.hashfile.meta import Meta
    from dvc_data.hashfile.tree import Tree

    tree = Tree()
    for item in listing(outputs / "curves"):
        tree.add(tuple(item["relpath"].split("/")), Meta(), HashInfo("md5", item["md5"]))
    tree.digest()
    assert folder_digest(outputs / "curves") == tree.hash_info.value


def test_keep_stores_each_file_by_its_md5_read_only(outputs):
    new = keep(outputs, ["rec.json", "curves"])
    store = outputs / STORE
    rec = object_path(store, md5(outputs / "rec.json"))
    assert rec.read_bytes() == (outputs / "rec.json").read_bytes()
    assert not os.access(rec, os.W_OK) or os.geteuid() == 0
    assert set(new) == {
        md5(outputs / "rec.json"),
        md5(outputs / "curves/seed0.tsv"),
        md5(outputs / "curves/sub/seed1.tsv"),
        folder_digest(outputs / "curves"),
    }


def test_keep_skips_objects_already_there_and_passes_over_a_missing_output(outputs):
    keep(outputs, ["rec.json", "curves"])
    rec = object_path(outputs / STORE, md5(outputs / "rec.json"))
    before = rec.stat().st_mtime_ns
    assert keep(outputs, ["rec.json", "curves", "never-written.json"]) == []
    assert rec.stat().st_mtime_ns == before


def test_keep_rewrites_an_object_found_damaged(outputs):
    keep(outputs, ["rec.json"])
    rec = object_path(outputs / STORE, md5(outputs / "rec.json"))
    rec.chmod(0o644)
    rec.write_text("damaged")
    assert keep(outputs, ["rec.json"]) == [md5(outputs / "rec.json")]
    assert rec.read_bytes() == (outputs / "rec.json").read_bytes()


def test_put_back_restores_a_file_and_a_folder_as_kept(outputs):
    keep(outputs, ["rec.json", "curves"])
    recorded = {
        p: (outputs / p).read_bytes() for p in ("rec.json", "curves/seed0.tsv", "curves/sub/seed1.tsv")
    }
    rec_digest, curves_digest = md5(outputs / "rec.json"), folder_digest(outputs / "curves")
    (outputs / "rec.json").unlink()
    (outputs / "curves/seed0.tsv").write_text("half written")
    (outputs / "curves/new.tsv").write_text("a file the kept folder never had")
    assert put_back(outputs, "rec.json", rec_digest)
    assert put_back(outputs, "curves", curves_digest)
    assert {p: (outputs / p).read_bytes() for p in recorded} == recorded
    assert sorted(p.name for p in (outputs / "curves").iterdir()) == ["seed0.tsv", "sub"]


def test_put_back_of_bytes_never_kept_is_false_and_changes_nothing(outputs):
    assert not put_back(outputs, "rec.json", "0" * 32)
    assert (outputs / "rec.json").read_text() == '{"version": 1}\n'


def test_a_damaged_object_is_refused_and_the_output_left_as_it_is(outputs):
    keep(outputs, ["rec.json", "curves"])
    curves_digest = folder_digest(outputs / "curves")
    part = object_path(outputs / STORE, md5(outputs / "curves/sub/seed1.tsv"))
    part.chmod(0o644)
    part.write_text("step\tloss\n0\t2.6\n")  # one digit flipped
    (outputs / "curves/seed0.tsv").write_text("half written")
    with pytest.raises(BackupError) as err:
        put_back(outputs, "curves", curves_digest)
    (line,) = str(err.value).splitlines()
    assert line.startswith(f"{outputs / 'curves/sub/seed1.tsv'}: damaged in the backup store")
    assert (outputs / "curves/seed0.tsv").read_text() == "half written"


def test_a_finished_stage_backs_up_its_git_kept_outputs(tmp_path, monkeypatch, mlflow_store):  # noqa: ARG001
    """Stages run as DVC runs them: the data stage, every output of which DVC caches, leaves nothing
    in the store (each run's data still reads through the checked reader); the worked stage leaves
    each of its git-kept outputs there, byte for byte."""
    from conftest import tiny_raw

    from rlvr.io.params import load_params
    from rlvr.pipeline.paths import data
    from rlvr.pipeline.run import run_stage
    from rlvr.pipeline.rundata import read_run_data
    from rlvr.pipeline.specs import kept_by_git

    monkeypatch.chdir(tmp_path)
    raw = tiny_raw()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    run_stage("data", None, progress=False)
    assert not [f for f in (tmp_path / STORE).rglob("*") if f.is_file()]
    assert all(read_run_data(data(run)).rows for run in raw["sft"])
    run_stage("worked", None, progress=False)
    kept = kept_by_git("worked", None, load_params(tmp_path / "params.yaml"))
    assert any(p.name == "worked.json" for p in kept)
    for path in kept:
        assert object_path(tmp_path / STORE, md5(path)).read_bytes() == path.read_bytes()
