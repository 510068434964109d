"""Checkpoints: the weights and the config that shapes them, nothing volatile.

A checkpoint holds the state dict, the ModelConfig, the tokenizer's vocabulary, the name of the stage
instance that wrote it (`run`: "sft@two_digit", "grpo@dapo/seed1") and `config_hash`, the hash of that
instance's params (`rlvr.pipeline.specs.config_hash`). No timings, no run ids: those live in the metrics
JSON. Identical training therefore gives an identical file, and DVC keeps downstream stages cached.

Loading checks what the caller expects (vocabulary, run name, config hash), so a checkpoint copied
from another run, left over from other params, or cut short, is refused in one line naming the file.
It checks the file against itself too: a checkpoint records the `digest` of everything else it
holds (every tensor's dtype, shape and bytes; every other value), so bytes damaged after the stage
wrote them (a bad cache object, a disk) are refused before anything trains from them, however
readable they still are.

A stage hands its tasks checkpoints by value (`carried`: the file's bytes, read and checked by the
stage process), so a task needs no file system shared with the stage; `load` and `load_warmup` take
those bytes as they take a path.

Every tensor is saved on the CPU, so a checkpoint trained on a GPU loads on any machine; loading
puts the model on the device asked for (params.yaml's `device` in the stages).

A warm-up state (`save_warmup`) is a checkpoint plus what an SFT run needs to continue it exactly:
the optimiser's moments and step counts, the data-order generator, the curve so far, and a digest
of the true answers it was trained on.
"""

from __future__ import annotations

import copy
import hashlib
import io
import pickle
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from rlvr.configs import ModelConfig
from rlvr.fields import ConfigError, UserError
from rlvr.io.files import FileBytes, atomic_write
from rlvr.io.params import build
from rlvr.model import TinyLM
from rlvr.tokenizer import Tokenizer

FORMAT = "rlvr-checkpoint/2"
WARMUP_FORMAT = "rlvr-warmup/2"


class CheckpointError(UserError):
    """A checkpoint that cannot be used here (missing, unreadable, or not the one expected)."""


def save(path: str | Path, model: TinyLM, tok: Tokenizer, run: str, config_hash: str) -> Path:
    """Write the checkpoint atomically."""
    return _write(path, _checkpoint(FORMAT, model, tok, run, config_hash))


Source = str | Path | FileBytes  # a checkpoint's file, or its bytes carried to a task


def carried(path: str | Path) -> FileBytes:
    """A checkpoint file's bytes, to hand a task by value (`load` and `load_warmup` take them);
    refused in one line when the file is missing or unreadable."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: not found (run its DVC stage first: dvc repro)")
    try:
        return FileBytes(path, path.read_bytes())
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CheckpointError(f"{path}: cannot be read ({reason}); re-run the stage that writes it") from None


def load(
    path: Source,
    tok: Tokenizer,
    run: str | None = None,
    config_hash: str | None = None,
    device: str | torch.device = "cpu",
) -> TinyLM:
    """Rebuild the model of a checkpoint on `device`, in eval mode. `run` and `config_hash`, when
    given, must match what the checkpoint records; otherwise a one-line CheckpointError names the file."""
    return _model(_name(path), _read(path, FORMAT, tok, run, config_hash), device)


@dataclass
class WarmupState:
    """What `load_warmup` returns: the model (train mode) and the rest of the run's state."""

    model: TinyLM
    optimizer: dict  # AdamW.state_dict() on the CPU (its load_state_dict copies it to the weights)
    generator: torch.Tensor  # the data-order generator's get_state() after the warm-up's last shuffle
    curve: list[dict]  # the warm-up's per-step rows
    answers: str  # answers_digest of the clean tokens it trained on


def answers_digest(tokens: torch.Tensor) -> str:
    """A digest of the clean (true-answer) token rows (N, T): runs that share a warm-up must agree on it."""
    return hashlib.sha256(str(tuple(tokens.shape)).encode() + tokens.numpy().tobytes()).hexdigest()[:16]


def save_warmup(
    path: str | Path,
    model: TinyLM,
    tok: Tokenizer,
    run: str,
    config_hash: str,
    optimizer: dict,
    generator: torch.Tensor,
    curve: list[dict],
    answers: str,
) -> Path:
    """Write a warm-up state atomically (no timings or run ids: identical training, identical file)."""
    obj = {
        **_checkpoint(WARMUP_FORMAT, model, tok, run, config_hash),
        "optimizer": _on_cpu(optimizer),
        "generator": generator,
        "curve": curve,
        "answers": answers,
    }
    return _write(path, obj)


def load_warmup(
    path: Source, tok: Tokenizer, run: str, config_hash: str, device: str | torch.device = "cpu"
) -> WarmupState:
    """Read a warm-up state, checked like `load`, its model on `device`."""
    ckpt = _read(path, WARMUP_FORMAT, tok, run, config_hash)
    model = _model(_name(path), ckpt, device).train()
    return WarmupState(model, ckpt["optimizer"], ckpt["generator"], ckpt["curve"], ckpt["answers"])


def _checkpoint(fmt: str, model: TinyLM, tok: Tokenizer, run: str, config_hash: str) -> dict:
    return {
        "format": fmt,
        "run": run,
        "config_hash": config_hash,
        "model_config": asdict(model.cfg),
        "vocab": list(tok.vocab),
        "model": _on_cpu(model.state_dict()),
    }


def _on_cpu(obj):
    """`obj` with every tensor in it (in dicts and lists) on the CPU, each container's type kept (a
    state dict's metadata too): a checkpoint made on a GPU loads anywhere. `.cpu()` of a CPU tensor
    is that tensor, so a CPU run's file keeps its bytes."""
    if isinstance(obj, torch.Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        out = copy.copy(obj)  # an OrderedDict state dict keeps its `_metadata`
        out.update((k, _on_cpu(v)) for k, v in obj.items())
        return out
    if isinstance(obj, list):
        return [_on_cpu(v) for v in obj]
    return obj


def digest(obj) -> str:
    """A sha256 of a checkpoint's contents (dicts by sorted key, lists in order, each tensor's dtype,
    shape and bytes, any other value by its repr): what `_write` records and `_read` checks."""
    h = hashlib.sha256()

    def feed(x) -> None:
        if isinstance(x, torch.Tensor):
            t = x.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(x, dict):
            h.update(b"{")
            for k in sorted(x, key=str):
                feed(str(k))
                feed(x[k])
            h.update(b"}")
        elif isinstance(x, list | tuple):
            h.update(b"[")
            for v in x:
                feed(v)
            h.update(b"]")
        else:
            h.update(f"{type(x).__name__}:{x!r};".encode())

    feed(obj)
    return h.hexdigest()


def _write(path: str | Path, obj: dict) -> Path:
    """Saved through an open file handle: `torch.save` to a path names the zip's root folder after
    that (random, temporary) path, a handle names it `archive`. The contents' `digest` goes with
    them."""
    obj = {**obj, "digest": digest(obj)}

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            torch.save(obj, f)

    return atomic_write(path, write)


def _name(source: Source) -> Path:
    return source.path if isinstance(source, FileBytes) else Path(source)


def _read(source: Source, fmt: str, tok: Tokenizer, run: str | None, config_hash: str | None) -> dict:
    """The checked contents of a checkpoint of format `fmt`, from its file or its carried bytes."""
    path = _name(source)
    if not isinstance(source, FileBytes) and not path.is_file():
        raise CheckpointError(f"{path}: not found (run its DVC stage first: dvc repro)")
    try:
        where = io.BytesIO(source.data) if isinstance(source, FileBytes) else path
        ckpt = torch.load(where, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's text advises weights_only=False: unsafe, and no cure for damage
        raise CheckpointError(
            f"{path}: not a readable checkpoint (it holds objects a weights-only load refuses); "
            "re-run the stage that writes it (dvc repro)"
        ) from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        reason = reason if len(reason) <= 80 else reason[:77] + "..."
        raise CheckpointError(
            f"{path}: not a readable checkpoint ({reason}); re-run the stage that writes it (dvc repro)"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != fmt:
        raise CheckpointError(
            f"{path}: not an rlvr checkpoint (expected format {fmt!r}); re-run the "
            f"stage that writes it (dvc repro)"
        )
    body = {k: v for k, v in ckpt.items() if k != "digest"}
    if ckpt.get("digest") != digest(body):
        raise CheckpointError(
            f"{path}: damaged since its stage wrote it (its contents no longer match their digest); "
            f"put it back with `rlvr restore`, or re-run {str(ckpt.get('run', 'its stage')).split('/')[0]} "
            "(dvc repro)"
        )
    if ckpt["vocab"] != list(tok.vocab):
        raise CheckpointError(
            f"{path}: vocabulary differs from the tokenizer's; re-run the stage that writes it"
        )
    if run is not None and ckpt["run"] != run:
        raise CheckpointError(
            f"{path}: holds {ckpt['run']!r}, expected {run!r}; re-run {run.split('/')[0]} "
            f"(dvc repro) instead of copying checkpoints"
        )
    if config_hash is not None and ckpt["config_hash"] != config_hash:
        raise CheckpointError(
            f"{path}: made with other params (config hash {ckpt['config_hash']}, params.yaml "
            f"gives {config_hash}); re-run {ckpt['run'].split('/')[0]} first (dvc repro)"
        )
    return ckpt


def _model(path: Path, ckpt: dict, device: str | torch.device) -> TinyLM:
    try:  # where=(): the shape comes from the file, not from params.yaml (no params read to record)
        shape = build(ModelConfig, ckpt["model_config"], f"{path}: model_config")
    except ConfigError as exc:
        raise CheckpointError(str(exc)) from None
    model = TinyLM(shape, len(ckpt["vocab"]))
    model.load_state_dict(ckpt["model"])
    return model.to(device).eval()
