"""What a figure calls a model: the run's name and how it was made, read from the settings that made
it (params.yaml through the stage, or dvc.lock's record of them), never typed into a plot.

Chapter B's start and chapter A's contrast reach about the same accuracy by different mechanisms
(stopping early on true labels, or fitting corrupted labels to the end), and what GRPO does from a
start depends on which: a legend that says only "SFT" hides the one thing that tells them apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


def label_source(noise: Mapping[str, Any]) -> str:
    """The labels an SFT run fits, in words: its `noise` setting (`rlvr.configs`' UniformNoise or
    SlipNoise as a mapping)."""
    kind = noise.get("kind")
    if kind == "slips":
        return f"slip labels Beta({noise['alpha']:g}, {noise['beta']:g})"
    if kind == "uniform":
        rate = float(noise["rate"])
        return "true labels" if rate == 0 else f"labels {rate:.0%} uniformly replaced"
    raise ValueError(f"noise.kind = {kind!r}: not a label noise; valid: uniform, slips")


def sft_mechanism(noise: Mapping[str, Any], target: float | None, epochs: int) -> str:
    """How an SFT run made its policy: the labels it fits, and where it stops (at its validation
    target, or after its epochs). Stopping early on true labels is the chapter's under-trained start."""
    labels = label_source(noise)
    if target is None:
        return f"fit to {labels}, {epochs} epochs"
    if labels == "true labels":
        return f"under-trained on true labels, stopped at accuracy {target:g}"
    return f"{labels}, stopped at accuracy {target:g}"


def sft_label(name: str, noise: Mapping[str, Any], target: float | None, epochs: int) -> str:
    """A start as a legend names it: "SFT two_digit (under-trained on true labels, stopped at
    accuracy 0.53)"."""
    return f"SFT {name} ({sft_mechanism(noise, target, epochs)})"


def sft_run_label(name: str, run: Any) -> str:
    """`sft_label` of an SFT run's settings as a stage holds them (`rlvr.configs.SFTConfig`); reads
    only its noise, target and epochs."""
    return sft_label(name, dataclasses.asdict(run.noise), run.target, run.epochs)
