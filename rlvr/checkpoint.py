"""Checkpoints: the weights and the config that shapes them, nothing volatile.

A checkpoint holds the state dict, the ModelConfig, the tokenizer's vocabulary, the name of the stage
instance that wrote it (`run`: "sft@two_digit", "grpo@dapo/seed1") and `config_hash`, the hash of that
instance's params (`rlvr.pipeline.config_hash`). No timings, no run ids: those live in the metrics
JSON. Identical training therefore gives an identical file, and DVC keeps downstream stages cached.

Loading checks what the caller expects (vocabulary, run name, config hash), so a checkpoint copied
from another run, left over from other params, or cut short, is refused in one line naming the file.
"""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import asdict
from pathlib import Path

import torch

from rlvr.config import ConfigError, ModelConfig, UserError, build
from rlvr.model import TinyLM
from rlvr.runtime import atomic_write
from rlvr.tokenizer import Tokenizer

FORMAT = "rlvr-checkpoint/1"


class CheckpointError(UserError):
    """A checkpoint that cannot be used here (missing, unreadable, or not the one expected)."""


def save(path: str | Path, model: TinyLM, tok: Tokenizer, run: str, config_hash: str) -> Path:
    """Write the checkpoint atomically. Saved through an open file handle: `torch.save` to a path
    names the zip's root folder after that (random, temporary) path, a handle names it `archive`."""
    obj = {"format": FORMAT, "run": run, "config_hash": config_hash, "model_config": asdict(model.cfg),
           "vocab": list(tok.vocab), "model": model.state_dict()}

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            torch.save(obj, f)

    return atomic_write(path, write)


def load(path: str | Path, tok: Tokenizer, run: str | None = None, config_hash: str | None = None) -> TinyLM:
    """Rebuild the model of a checkpoint, in eval mode. `run` and `config_hash`, when given, must
    match what the checkpoint records; otherwise a one-line CheckpointError names the file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: not found (run its DVC stage first: dvc repro)")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CheckpointError(f"{path}: not a readable checkpoint ({reason}); re-run the stage that "
                              f"writes it (dvc repro)") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an rlvr checkpoint (expected format {FORMAT!r}); re-run the "
                              f"stage that writes it (dvc repro)")
    if ckpt["vocab"] != list(tok.vocab):
        raise CheckpointError(f"{path}: vocabulary differs from the tokenizer's; re-run the stage that writes it")
    if run is not None and ckpt["run"] != run:
        raise CheckpointError(f"{path}: holds {ckpt['run']!r}, expected {run!r}; re-run {run.split('/')[0]} "
                              f"(dvc repro) instead of copying checkpoints")
    if config_hash is not None and ckpt["config_hash"] != config_hash:
        raise CheckpointError(f"{path}: made with other params (config hash {ckpt['config_hash']}, params.yaml "
                              f"gives {config_hash}); re-run {ckpt['run'].split('/')[0]} first (dvc repro)")
    try:  # where=(): the shape comes from the file, not from params.yaml (no params read to record)
        shape = build(ModelConfig, ckpt["model_config"], f"{path}: model_config", where=())
    except ConfigError as exc:
        raise CheckpointError(str(exc)) from None
    model = TinyLM(shape, len(tok))
    model.load_state_dict(ckpt["model"])
    return model.eval()
