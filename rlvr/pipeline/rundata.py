"""The one reader of an SFT run's data files, checked against the sha256 the data stage recorded.

The data stage writes each run's rows and held-out file and, beside them, a small digest file
(`digests.json`: {file name: sha256}), all three DVC-cached, so the stage stays whole in DVC's
run-cache. Every stage that trains or scores from a run's data reads it through `read_run_data`,
which checks both files against those digests before parsing them: bytes changed after the data
stage wrote them (a flipped digit in a label, a bad cache object, a disk) are refused in one line
naming the file, before any training and before anything is written, where the parsers alone would
read them as valid rows. The digest file is not a DVC dependency of the stages that read it: it
changes only with the files it describes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlvr.io.files import (
    InputError,
    file_digest,
    read_heldout,
    read_json,
    read_jsonl,
    read_validation,
    write_json,
)
from rlvr.pipeline.paths import DataPaths

REMEDY = "put it back with `rlvr restore`, or re-run the data stage (dvc repro data)"


@dataclass(frozen=True)
class RunData:
    """What a stage reads of a run's data: its SFT rows, held-out and validation problems."""

    rows: list[dict]
    heldout: list[dict]
    validation: list[dict]  # empty where the task has no validation split


def sha256(path: str | Path) -> str:
    """The file's sha256, what `digests.json` records."""
    return file_digest(path, "sha256")


def digested(paths: DataPaths) -> tuple[Path, ...]:
    """The files whose digests the data stage records."""
    return (paths.rows, paths.heldout)


def record_digests(paths: DataPaths) -> Path:
    """Write the sha256 of the run's rows and held-out file beside them (the data stage, once both
    are written)."""
    return write_json(paths.digests, {p.name: sha256(p) for p in digested(paths)})


def recorded_digests(paths: DataPaths) -> dict[str, str]:
    """{file name: sha256} as the data stage recorded them; a missing or damaged record is refused."""
    if not paths.digests.is_file():
        raise InputError(f"{paths.digests}: not found (the data stage's sha256 of its files); {REMEDY}")
    recorded = read_json(paths.digests)
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        raise InputError(f"{paths.digests}: not a record of sha256 digests; {REMEDY}")
    return recorded


def check_digests(paths: DataPaths) -> None:
    """Refuse, in one line naming the file, a rows or held-out file that is missing or whose bytes
    are not those the data stage recorded."""
    recorded = recorded_digests(paths)
    for path in digested(paths):
        if not path.is_file():
            raise InputError(f"{path}: not found; {REMEDY}")
        if path.name not in recorded:
            raise InputError(f"{paths.digests}: records no sha256 for {path.name}; {REMEDY}")
        if sha256(path) != recorded[path.name]:
            raise InputError(
                f"{path}: damaged since the data stage wrote it (its sha256 differs from the one "
                f"{paths.digests} records); {REMEDY}"
            )


def read_run_data(paths: DataPaths) -> RunData:
    """A run's rows, held-out and validation problems, read once their digests check."""
    check_digests(paths)
    return RunData(read_jsonl(paths.rows), read_heldout(paths.heldout), read_validation(paths.heldout))
