"""Atomic file output and the readers of what stages write: JSON, JSON lines, TSV.

Every output goes through a temp file in its folder and a rename, so a reader (DVC, a later stage,
a crash) never sees half a file.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.fields import UserError


class WriteError(UserError):
    """An output that could not be written (disk full, a file-size limit, an I/O error): one line
    naming the file and what failed; the file it would have replaced is left as it was."""


def _file_size_limit() -> int | None:
    """The soft file-size limit (`ulimit -f`) in bytes; None when there is none."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def errno_reason(code: int, text: str | None = None) -> str:
    """errno's words (or `text`), with the limit behind EFBIG: "File too large: the file-size limit
    (ulimit -f) is 65536 bytes"."""
    import errno

    reason = text or os.strerror(code)
    if code == errno.EFBIG and (soft := _file_size_limit()) is not None:
        reason += f": the file-size limit (ulimit -f) is {soft} bytes"
    return reason


def what_to_do(code: int | None) -> str | None:
    """What a user does about a failed write with this errno (None: nothing general to say)."""
    import errno

    return {
        errno.EFBIG: "raise the limit",
        errno.ENOSPC: "free some space",
        errno.EDQUOT: "free some space",
        errno.EACCES: "make it writable",
        errno.EPERM: "make it writable",
        errno.EROFS: "make it writable",
    }.get(code)


def why_write_failed(exc: BaseException, folder: Path) -> tuple[str, str | None]:
    """What stopped a write, in words, and what to do about it: errno's text where there is one,
    else what the machine says (torch's zip writer reports a short write as "unexpected pos",
    naming no cause)."""
    import errno
    import shutil

    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():  # mkdir says "File exists", or "Not a directory"
        return f"{existing} is not a folder", "move it away"
    if isinstance(exc, OSError) and exc.errno:
        return errno_reason(exc.errno), what_to_do(exc.errno)
    if (soft := _file_size_limit()) is not None:
        return f"write failed; the file-size limit (ulimit -f) is {soft} bytes", what_to_do(errno.EFBIG)
    try:
        if shutil.disk_usage(folder).free < 16 * 2**20:
            return "write failed; the disk is full", what_to_do(errno.ENOSPC)
    except OSError:
        pass
    first = (str(exc).splitlines() or [type(exc).__name__])[0]
    return f"write failed: {first[:120]}", None


# torch reports a failed file operation in a RuntimeError: "unable to resize file </torch_1_2_0> to
# the right size: File too large (27)" (a shared-memory file), "unable to open file <x.pt>: ... (2)"
_TORCH_FILE_ERROR = re.compile(
    r"unable to [^<]*<(?P<file>[^>]+)>[^:]*: (?P<reason>.+?) \((?P<errno>\d+)\)\s*$"
)


def file_failure(exc: BaseException) -> tuple[str | None, int | None, str] | None:
    """(file, errno, words) of a failed read or write, found in `exc` or in the errors it wraps (a
    seed worker's error is re-raised in the stage with the worker's as its cause); None when none
    of them is one. A torch shared-memory file is named where it lives (/dev/shm)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and not isinstance(exc, UserError) and (exc.errno or exc.filename):
            return exc.filename, exc.errno, exc.strerror or str(exc)
        found = _TORCH_FILE_ERROR.search(str(exc)) if isinstance(exc, RuntimeError) else None
        if found:
            name = found["file"]
            name = f"/dev/shm{name}" if name.startswith("/torch_") else name
            return name, int(found["errno"]), found["reason"]
        exc = exc.__cause__ or exc.__context__
    return None


def os_failure(exc: BaseException) -> str | None:
    """One line for a failed read or write however it was raised (`file_failure`): "<file>:
    <why>; <what to do>"; None when `exc` is not one (a bug keeps its traceback)."""
    failure = file_failure(exc)
    if failure is None:
        return None
    name, code, text = failure
    reason = errno_reason(code, text) if code else text
    advice = what_to_do(code)
    return f"{name + ': ' if name else ''}{reason}{'; ' + advice if advice else ''}"


def secrets() -> list[str]:
    """The secrets the environment gives MLflow's client: the password in MLFLOW_TRACKING_URI's
    `user:password@host`, MLFLOW_TRACKING_PASSWORD and MLFLOW_TRACKING_TOKEN. Never printed."""
    from urllib.parse import unquote, urlsplit

    found = [os.environ.get(k, "") for k in ("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")]
    try:
        password = urlsplit(os.environ.get("MLFLOW_TRACKING_URI", "")).password
    except ValueError:  # a malformed URI: its netloc after the last '@' is not a host
        password = None
    if password:
        found += [password, unquote(password)]
    return [s for s in found if s]


def redact(text: str) -> str:
    """`text` with every secret (`secrets`) replaced by ***."""
    for secret in sorted(secrets(), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def error_line(exc: BaseException) -> str | None:
    """What a command prints for an error a user can cause, in one line: a UserError's message, a
    missing file, or a failed read or write (`os_failure`); None for anything else (a bug keeps its
    traceback). The one rule both entry points (`rlvr`, `python -m rlvr.pipeline`) follow. No secret
    of the tracking store's is ever in it (`redact`)."""
    if isinstance(exc, UserError | FileNotFoundError):
        return redact(str(exc))
    line = os_failure(exc)
    return None if line is None else redact(line)


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Write through a temp file in the same folder, then rename: readers never see half a file.
    A failed write removes the temp file, leaves `path` as it was and raises WriteError naming it."""
    path = Path(path)
    tmp = None
    try:  # a folder that cannot be made, or a temp file that cannot be opened, is the output's failure
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        write(tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:  # RuntimeError: torch.save's zip writer on a short write
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        reason, advice = why_write_failed(exc, path.parent)
        raise WriteError(f"{path}: cannot be written ({reason}){'; ' + advice if advice else ''}") from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return path


MAX_TEXT_BYTES = 4 * 2**20  # a settings or claims file: a few tens of KB here
MAX_VALUES = 100_000  # values a settings file may hold once its YAML aliases are expanded


def bounded_text(path: str | Path, what: str) -> str:
    """A settings file's text, refused in one line when it is larger than any such file could be
    (read no further than the limit)."""
    with Path(path).open("rb") as f:
        raw = f.read(MAX_TEXT_BYTES + 1)
    if len(raw) > MAX_TEXT_BYTES:
        raise UserError(f"{path}: larger than {MAX_TEXT_BYTES // 2**20} MiB: not a {what}")
    return raw.decode()


def check_expansion(data: Any, path: str | Path, what: str) -> None:
    """Refuse, in one line and without expanding anything, parsed YAML whose aliases would expand to
    more than MAX_VALUES values (an alias bomb: nine levels of nine aliases are 387 million) or refer
    to themselves. Counts each shared object once per use, by memo, so the check is linear in the
    file."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: Any) -> int:
        if not isinstance(node, (dict, list)):
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise UserError(f"{path}: a YAML alias refers to itself: not a {what}")
        open_.add(key)
        children = node.values() if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_VALUES:
                raise UserError(
                    f"{path}: its YAML aliases expand to more than {MAX_VALUES:,} values: not a {what}"
                )
        open_.discard(key)
        sizes[key] = total
        return total

    size(data)


def file_digest(path: str | Path, algorithm: str = "md5") -> str:
    """The file's hex digest under `algorithm` (a hashlib name), read a megabyte at a time."""
    import hashlib

    h = hashlib.new(algorithm)
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def md5(path: str | Path) -> str:
    """The file's md5: what DVC records for a file."""
    return file_digest(path, "md5")


def svg_beside(png: str | Path) -> Path:
    """Where a figure's SVG lies: beside its PNG, under the same name (every figure is written as both)."""
    return Path(png).with_suffix(".svg")


def write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def write_json(path: str | Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_jsonl(path: str | Path, rows: list[dict]) -> Path:
    return write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


@dataclass(frozen=True)
class FileBytes:
    """An input file's bytes, read by the stage process and handed to a task by value: a task may
    run on another machine (a Ray cluster shares no file system), and the bytes a task trained from
    are then the ones the stage checked. `path` names the file in error lines."""

    path: Path
    data: bytes

    def __repr__(self) -> str:  # a task's arguments in a traceback: not megabytes of weights
        return f"FileBytes({str(self.path)!r}, {len(self.data)} bytes)"


class InputError(UserError):
    """A file a stage or a report reads that is damaged or not what its writer writes (cut short, a
    merge conflict, edited by hand): one line naming it and the stage to rerun."""


def damaged(path: str | Path, what: str) -> InputError:
    return InputError(f"{path}: {what}; rerun the stage that writes it (dvc repro)")


def _parse(path: Path, text: str, line: int | None = None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {line}" if line is not None else f"line {exc.lineno} column {exc.colno}"
        raise damaged(path, f"not valid JSON ({exc.msg} at {where})") from None
    except RecursionError:  # a hand-made file nested deeper than Python's parser goes
        raise damaged(path, "not a file the pipeline writes (JSON nested too deeply to read)") from None


def _text(path: Path) -> str:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (run its DVC stage first: dvc repro)")
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise damaged(path, "not text (not UTF-8)") from None


def read_json(path: str | Path) -> Any:
    """A JSON file's contents; a damaged one is one InputError naming it."""
    return _parse(Path(path), _text(Path(path)))


def read_heldout(path: str | Path) -> list[dict]:
    """The held-out problems a data stage wrote (rows of a, b, prompt, answer)."""
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("problems"), list):
        raise damaged(path, "no list `problems`: not a held-out file")
    return data["problems"]


def read_validation(path: str | Path) -> list[dict]:
    """The validation problems the data stage wrote beside the held-out ones (empty where the task
    has no validation split)."""
    data = read_json(path)
    return data.get("validation", []) if isinstance(data, dict) else []


def read_jsonl(path: str | Path) -> list[dict]:
    """The rows of a JSON-lines file, each a JSON object; a damaged line is one InputError."""
    path = Path(path)
    rows = [(i, _parse(path, line, i)) for i, line in enumerate(_text(path).splitlines(), 1) if line.strip()]
    bad = next((i for i, row in rows if not isinstance(row, dict)), None)
    if bad is not None:
        raise damaged(path, f"line {bad} is not a JSON object")
    return [row for _, row in rows]


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
    return {p.name: read_json(p) for p in sorted(Path(folder).glob("*.json"))}
