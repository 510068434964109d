"""The settings a stage's MLflow run logs as its params: the resolved config of what it ran, flat and
by short names (`beta`, `lr`, `advantage`, `group_size`...), not the params.yaml keys it was built
from. A variant is `grpo.defaults` overridden by `variants.<name>`: its run logs `beta` 0.0 once, not
`grpo.defaults.beta` beside `variants.no_kl.beta`, so runs of every variant line up column by column.

The raw keys stay with the run in other forms: the tag `params.raw_hash` (the hash its checkpoints
and metrics file carry) and the artifact `params.json` (`rlvr.pipeline.tracking`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlvr.configs import GRPOConfig, ModelConfig, SFTConfig, TaskConfig
from rlvr.pipeline.config import GRPO_SETTINGS, WARMUP_KEYS, Params
from rlvr.pipeline.specs import scored_variants


def _fields(section, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The section's fields (or `names` of them), nested sections flattened with their name as prefix
    (`noise_kind`, `noise_rate`)."""
    out: dict[str, Any] = {}
    for name in names or tuple(f.name for f in dataclasses.fields(section)):
        value = getattr(section, name)
        if dataclasses.is_dataclass(value):
            out.update({f"{name}_{k}": v for k, v in _fields(value).items()})
        else:
            out[name] = value
    return out


def model_settings(model: ModelConfig) -> dict[str, Any]:
    """TinyLM's shape: d_model, n_layer, n_head, max_len."""
    return _fields(model)


def task_settings(task: TaskConfig) -> dict[str, Any]:
    return {"heldout": task.heldout, "validation": task.validation, "max_new_tokens": task.max_new_tokens}


def sft_settings(name: str, cfg: SFTConfig, params: Params) -> dict[str, Any]:
    """An SFT run: every SFTConfig field (its noise as `noise_kind`, `noise_rate`...), its model's
    shape (the top-level one when the run names none) and its task's."""
    names = tuple(f.name for f in dataclasses.fields(cfg) if f.name != "model")
    return {
        "sft_run": name,
        **_fields(cfg, names),
        **model_settings(cfg.model or params.model),
        **task_settings(params.task(cfg.task)),
    }


def warmup_settings(name: str, params: Params) -> dict[str, Any]:
    """A warm-up: the settings of its run that its clean epochs depend on (WARMUP_KEYS), no others."""
    w = params.warmup(name)
    cfg = params.sft_run(w.run)
    return {
        "warmup": name,
        "sft_run": w.run,
        **_fields(cfg, tuple(k for k in WARMUP_KEYS if k != "model")),
        **model_settings(cfg.model or params.model),
    }


def grpo_settings(variant: str, cfg: GRPOConfig, max_new_tokens: int) -> dict[str, Any]:
    """A GRPO run: the variant's resolved GRPOConfig (defaults with its overrides applied), its start
    (`sft_run`) and its response cap."""
    return {
        "variant": variant,
        "task": cfg.task,
        "sft_run": cfg.sft,
        **_fields(cfg, GRPO_SETTINGS),
        "max_new_tokens": max_new_tokens,
    }


# The stages that run TinyLM, on params.yaml's `device`: their runs log it beside their settings.
ON_DEVICE = ("warmup", "sft", "grpo", "hack", "passk")


def effective_params(stage: str, key: str | None, params: Params) -> dict[str, Any]:
    """The MLflow params of stage `stage` (instance `key`): what it ran with, flat, and where
    (`device`, for the stages that run the model)."""
    settings = _settings(stage, key, params)
    return {**settings, "device": params.device} if stage in ON_DEVICE else settings


def _settings(stage: str, key: str | None, params: Params) -> dict[str, Any]:
    """The settings of stage `stage` (instance `key`), flat."""
    if stage == "grpo":
        cfg = params.variant(key)
        return grpo_settings(key, cfg, params.task(cfg.task).max_new_tokens)
    if stage == "sft":
        return sft_settings(key, params.sft_run(key), params)
    if stage == "warmup":
        return warmup_settings(key, params)
    if stage == "hack":
        h = params.hack
        return {
            **grpo_settings(h.variant, params.hack_grpo(), h.max_new_tokens),
            # its own start, seeds, steps, temperature and response cap replace the variant's
            **_fields(h, tuple(f.name for f in dataclasses.fields(h) if f.name != "sft")),
            "sft_run": h.sft,
        }
    if stage == "passk":
        p = params.passk
        task = params.sft_run(p.sft).task
        return {
            "sft_run": p.sft,
            "contrast": p.contrast,
            "task": task,
            "variants": list(scored_variants(params)),
            "n": p.n,
            "n_others": p.n_others,
            "headline": p.headline,
            "ks": p.ks,
            "temperatures": p.temperatures,
            "bootstrap": p.bootstrap,
            "master_seed": params.seed,  # every model's draws start there (`seed`: a seed run's chain)
            "max_new_tokens": params.task(task).max_new_tokens,
        }
    if stage == "worked":
        return {("worked_seed" if k == "seed" else k): v for k, v in _fields(params.worked).items()}
    if stage == "data":
        return {"master_seed": params.seed}  # the splits and noise draws
    return {}  # check, report: no settings of their own


def data_run_settings(name: str, params: Params) -> dict[str, Any]:
    """One SFT run's rows (the data stage's child run): its task's split and its labels' noise."""
    cfg = params.sft_run(name)
    return {
        "sft_run": name,
        "task": cfg.task,
        "heldout": params.task(cfg.task).heldout,
        "validation": params.task(cfg.task).validation,
        **_fields(cfg, ("noise", "repeats")),
        "master_seed": params.seed,
    }
