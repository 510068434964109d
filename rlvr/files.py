"""Atomic file output and the readers of what stages write: JSON, JSON lines, TSV.

Every output goes through a temp file in its folder and a rename, so a reader (DVC, a later stage,
a crash) never sees half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr.fields import UserError


class WriteError(UserError):
    """An output that could not be written (disk full, a file-size limit, an I/O error): one line
    naming the file and what failed; the file it would have replaced is left as it was."""


def why_write_failed(exc: BaseException, folder: Path) -> str:
    """What stopped a write, in words: errno's text where there is one, else what the machine says
    (torch's zip writer reports a short write as "unexpected pos", naming no cause)."""
    import errno
    import resource
    import shutil

    if isinstance(exc, OSError) and exc.errno:
        reason = os.strerror(exc.errno)
        if exc.errno == errno.EFBIG:
            soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
            reason += (
                f": the file-size limit (ulimit -f) is {soft} bytes" if soft != resource.RLIM_INFINITY else ""
            )
        return reason
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft != resource.RLIM_INFINITY:
        return f"write failed; the file-size limit (ulimit -f) is {soft} bytes"
    try:
        if shutil.disk_usage(folder).free < 16 * 2**20:
            return "write failed; the disk is full"
    except OSError:
        pass
    first = (str(exc).splitlines() or [type(exc).__name__])[0]
    return f"write failed: {first[:120]}"


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Write through a temp file in the same folder, then rename: readers never see half a file.
    A failed write removes the temp file, leaves `path` as it was and raises WriteError naming it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:  # RuntimeError: torch.save's zip writer on a short write
        Path(tmp).unlink(missing_ok=True)
        raise WriteError(f"{path}: cannot be written ({why_write_failed(exc, path.parent)})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def svg_beside(png: str | Path) -> Path:
    """Where a figure's SVG lies: beside its PNG, under the same name (every figure is written as both)."""
    return Path(png).with_suffix(".svg")


def write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def write_json(path: str | Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_jsonl(path: str | Path, rows: list[dict]) -> Path:
    return write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (run its DVC stage first: dvc repro)")
    return json.loads(path.read_text())


def read_heldout(path: str | Path) -> list[dict]:
    """The held-out problems a data stage wrote (rows of a, b, prompt, answer)."""
    return read_json(path)["problems"]


def read_validation(path: str | Path) -> list[dict]:
    """The validation problems the data stage wrote beside the held-out ones (empty where the task
    has no validation split)."""
    return read_json(path).get("validation", [])


def read_jsonl(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (run its DVC stage first: dvc repro)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_tsv(path: str | Path, rows: list[dict]) -> Path:
    """Rows -> tab-separated file with a header (what `dvc plots` reads). The columns are every key
    of any row, in first-seen order; a row without one leaves its cell blank."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["\t".join(cols)] + ["\t".join(_fmt(r.get(c, "")) for c in cols) for r in rows]
    return write_text(path, "\n".join(lines) + "\n")


def _fmt(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def read_json_dir(folder: str | Path) -> dict[str, Any]:
    """Every `*.json` in a folder, parsed: {file name: content}."""
    return {p.name: json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))}
