"""A content-addressed copy of every output git keeps, made as its stage finishes.

Outputs declared `cache: false` (results, run records, curves, figures) live only in the workspace
until they are committed: DVC's cache never holds them. When a `dvc repro` records new hashes for
them in dvc.lock and the next repro kills that stage after DVC removed its outputs, neither the
cache nor any commit holds the recorded bytes. So every stage, once it has written all its outputs,
copies each git-kept one here (`keep`), keyed by its md5 as dvc.lock records it, and `rlvr restore`
looks here for bytes no commit holds (`put_back`).

The layout follows DVC's cache: `<workspace>/.rlvr/backup/ab/cdef...`, one object per file, named
by its md5; a folder is its files plus its listing (`ab/cdef....dir`: the JSON list of each file's
md5 and relative path, the bytes whose md5 DVC records for the folder). An object already there
whole is not written again; each is written atomically and read-only. Every object's md5 is checked
before it is put back, so a damaged one is refused, never restored. The folder is git-ignored and
per workspace (a profile's folder has its own); nothing prunes it (objects are the size of what git
keeps: kilobytes to a few megabytes a repro).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from rlvr.fields import UserError
from rlvr.io.files import atomic_write, md5

STORE = Path(".rlvr") / "backup"  # under the workspace root (the folder of dvc.yaml)


class BackupError(UserError):
    """An object of the backup store that cannot be put back (damaged, or a folder's file missing)."""


def object_path(store: Path, digest: str) -> Path:
    """Where the store keeps the object of `digest` (an md5, or a folder's md5 ending in `.dir`)."""
    return store / digest[:2] / digest[2:]


def listing(folder: Path) -> list[dict]:
    """A folder's files as DVC lists them: {"md5", "relpath"} of each, sorted by relative path."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    return sorted(
        ({"md5": md5(p), "relpath": p.relative_to(folder).as_posix()} for p in files),
        key=lambda item: item["relpath"],
    )


def listing_bytes(items: list[dict]) -> bytes:
    """A listing serialised as DVC serialises it: the md5 of these bytes, plus `.dir`, is the
    folder's hash in dvc.lock."""
    return json.dumps(items, sort_keys=True).encode()


def _store(store: Path, digest: str, write) -> bool:
    """Write the object of `digest` with `write(tmp)` unless it is there whole; True when written."""
    obj = object_path(store, digest)
    if obj.is_file() and md5(obj) == digest.removesuffix(".dir"):
        return False

    def read_only(tmp: str) -> None:
        write(tmp)
        Path(tmp).chmod(0o444)

    atomic_write(obj, read_only)
    return True


def keep(root: Path, outputs: list[str | Path]) -> list[str]:
    """Copy each output under `root` (a file, or a folder file by file with its listing) into the
    store; returns the digests newly stored. A missing output is passed over."""
    store = root / STORE
    new = []
    for out in outputs:
        target = root / out
        if target.is_file():
            digest = md5(target)
            new += [digest] if _store(store, digest, lambda tmp, t=target: shutil.copyfile(t, tmp)) else []
        elif target.is_dir():
            items = listing(target)
            for item in items:
                src = target / item["relpath"]
                new += (
                    [item["md5"]]
                    if _store(store, item["md5"], lambda tmp, s=src: shutil.copyfile(s, tmp))
                    else []
                )
            data = listing_bytes(items)
            digest = hashlib.md5(data).hexdigest() + ".dir"
            new += [digest] if _store(store, digest, lambda tmp, d=data: Path(tmp).write_bytes(d)) else []
    return new


def checked(store: Path, digest: str, name: str) -> Path:
    """The object of `digest`, its md5 checked; a missing or damaged one is refused naming `name`."""
    obj = object_path(store, digest)
    if not obj.is_file():
        raise BackupError(f"{name}: missing from the backup store ({obj})")
    if md5(obj) != digest.removesuffix(".dir"):
        raise BackupError(f"{name}: damaged in the backup store ({obj}: its md5 is not its name)")
    return obj


def put_back(root: Path, path: str, digest: str) -> bool:
    """Replace output `path` under `root` with the store's bytes of `digest`, every object checked
    before anything is replaced. False: the store does not hold it; BackupError: it holds it
    damaged or in part."""
    store = root / STORE
    if not digest or not object_path(store, digest).is_file():
        return False
    obj = checked(store, digest, path)
    target = root / path.rstrip("/")
    if not digest.endswith(".dir"):
        if target.is_dir():
            shutil.rmtree(target)
        atomic_write(target, lambda tmp: Path(tmp).write_bytes(obj.read_bytes()))
        return True
    items = json.loads(obj.read_text())
    parts = {item["relpath"]: checked(store, item["md5"], f"{target}/{item['relpath']}") for item in items}
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as tmp:
        built = Path(tmp) / target.name
        built.mkdir()
        for relpath, part in parts.items():
            (built / relpath).parent.mkdir(parents=True, exist_ok=True)
            (built / relpath).write_bytes(part.read_bytes())
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        built.replace(target)
    return True
