"""A run's rows and held-out file are read through one reader that checks them against the sha256
the data stage recorded: a flipped digit in a label, or a missing record, is refused in one line
naming the file and the remedy, before anything is parsed."""

import pytest

from rlvr.io.files import InputError, write_json, write_jsonl
from rlvr.pipeline.paths import DataPaths
from rlvr.pipeline.rundata import read_run_data, record_digests

ROWS = [{"a": 3, "b": 4, "answer": "7", "noised": False}, {"a": 5, "b": 6, "answer": "11", "noised": True}]
HELD = {"task": "two_digit", "problems": [{"a": 1, "b": 2, "answer": "3"}], "validation": [{"a": 2}]}


@pytest.fixture
def run_files(tmp_path) -> DataPaths:
    """One run's data files as the data stage leaves them, with their digests recorded."""
    paths = DataPaths(tmp_path / "sft.jsonl", tmp_path / "heldout.json", tmp_path / "digests.json")
    write_jsonl(paths.rows, ROWS)
    write_json(paths.heldout, HELD)
    record_digests(paths)
    return paths


def flip_digit(path, old: str, new: str) -> None:
    """Replace the first `old` in the file with `new`, leaving it valid JSON."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_an_intact_run_reads_as_written(run_files):
    data = read_run_data(run_files)
    assert (data.rows, data.heldout, data.validation) == (ROWS, HELD["problems"], HELD["validation"])


def test_a_flipped_digit_in_a_label_is_refused_naming_the_rows_and_the_remedy(run_files):
    flip_digit(run_files.rows, '"answer": "11"', '"answer": "12"')
    with pytest.raises(InputError) as err:
        read_run_data(run_files)
    (line,) = str(err.value).splitlines()
    assert line.startswith(f"{run_files.rows}: damaged since the data stage wrote it")
    assert "rlvr restore" in line and "dvc repro data" in line


def test_a_flipped_digit_in_the_heldout_file_is_refused(run_files):
    flip_digit(run_files.heldout, '"answer": "3"', '"answer": "4"')
    with pytest.raises(InputError, match=f"^{run_files.heldout}: damaged since the data stage wrote it"):
        read_run_data(run_files)


def test_a_missing_digest_file_is_refused_naming_it(run_files):
    run_files.digests.unlink()
    with pytest.raises(InputError) as err:
        read_run_data(run_files)
    (line,) = str(err.value).splitlines()
    assert line.startswith(f"{run_files.digests}: not found")
    assert "rlvr restore" in line and "dvc repro data" in line


def test_a_digest_file_that_records_neither_file_is_refused(run_files):
    write_json(run_files.digests, {})
    with pytest.raises(InputError, match="records no sha256 for sft.jsonl"):
        read_run_data(run_files)


def test_every_stage_that_reads_a_runs_data_depends_on_its_digests_and_logs_only_what_it_uses():
    """A stage reads a run's data through `read_run_data`, which checks the files against their
    digests: dvc.yaml names the digests file among its deps, so DVC reruns it when either file
    changes. Its MLflow dataset inputs stay the files it uses: the rows it trains on, the held-out
    problems it evaluates on."""
    from pathlib import Path

    from conftest import tiny_raw

    from rlvr.io.params import parse_params
    from rlvr.pipeline import paths, specs
    from rlvr.pipeline.stageparams import stage_params

    params = parse_params(tiny_raw())
    readers = [
        s.name
        for s in specs.STAGES.values()
        if "read_run_data(" in (Path(paths.__file__).parent / "stages" / f"{s.name}.py").read_text()
    ]
    assert sorted(readers) == ["grpo", "hack", "passk", "sft", "warmup"]
    uses = {"warmup": {"training"}, "sft": {"training", "evaluation"}, "grpo": {"training", "evaluation"}}
    uses |= {"passk": {"evaluation"}, "hack": {"training"}}
    for name in readers:
        keys = getattr(params, specs.stage(name).foreach) if specs.stage(name).foreach else [None]
        for key in keys:
            deps = set(specs.instance_inputs(name, key, params))
            runs = {d.parent for d in deps if d.name in (paths.ROWS, paths.HELDOUT)}
            assert runs and all(run / paths.DIGESTS in deps for run in runs), (name, key)
            logged = stage_params(name, key, params).inputs
            assert {role for _, role in logged} == uses[name], (name, key)
