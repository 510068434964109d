"""A chain's warm-up state as an SFT run resumes it.

Stage `warmup@{name}` saves, per chain, where the clean epochs left it (weights, AdamW moments, the
data-order generator, the curve so far); every SFT run naming that warm-up continues from it in its
chain tasks. `Warmup` is what such a run knows of its warm-up: the states themselves (each file's
bytes, read by the stage process and carried to the tasks by value), whose they must be, the true
answers they were trained on, and what a redraw needs to make a chain's start afresh the warm-up's
way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from rlvr.configs import ModelConfig, SFTConfig
from rlvr.fields import UserError
from rlvr.io.files import FileBytes
from rlvr.optim import AdamW
from rlvr.pipeline import checkpoint
from rlvr.pipeline.paths import seed_file
from rlvr.tokenizer import Tokenizer


def read_states(folder: Path, seeds: list[int]) -> dict[int, FileBytes]:
    """Each chain's warm-up state file under `folder`, as bytes a task can carry."""
    return {seed: checkpoint.carried(seed_file(folder, seed)) for seed in seeds}


@dataclass(frozen=True)
class Warmup:
    states: Mapping[int, FileBytes]  # the warm-up stage's state of each chain (its seed<n>.pt)
    run: str  # its checkpoints' run name ("warmup@two_digit"): a state of another run is refused
    config_hash: str  # its params hash: a state trained with other settings is refused
    answers: str  # digest of this SFT run's true answers: the warm-up must have trained on them
    model: ModelConfig  # a redraw's fresh start: its model
    clean: tuple[torch.Tensor, torch.Tensor]  # and its clean epochs' rows, tokens (N, T), mask (N, T-1)
    perturbation: float  # and the perturbation of its initial weights (RLVR_PERTURB), as the warm-up's

    def load(self, seed: int, tok: Tokenizer, device: str | torch.device = "cpu") -> checkpoint.WarmupState:
        """Chain `seed`'s state, its model on `device`; refused if it is not this warm-up's own."""
        state = self.states[seed]
        return checkpoint.load_warmup(state, tok, f"{self.run}/seed{seed}", self.config_hash, device)

    def check(self, name: str, cfg: SFTConfig, tok: Tokenizer) -> None:
        """Every chain's state loads (none missing, damaged or another run's) and was trained on SFT
        run `name`'s true answers: refused in one line before any chain trains."""
        for seed in cfg.seeds:
            if self.load(seed, tok).answers != self.answers:
                raise UserError(
                    f"sft.{name}: its rows' true answers differ from those warm-up {cfg.warmup!r} trained "
                    f"on; give sft.{name} a warm-up of its own (warmups: {{{name}: {{run: {name}}}}}, "
                    f"sft.{name}.warmup: {name})"
                )

    def resume(
        self, seed: int, cfg: SFTConfig, tok: Tokenizer, gen: torch.Generator
    ) -> tuple[torch.nn.Module, AdamW, list[dict]]:
        """Chain `seed` where its warm-up left it: the model (on the generator's device), the
        optimiser at `cfg`'s lr with the warm-up's moments, the data-order generator (set in place),
        and the warm-up's curve."""
        state = self.load(seed, tok, gen.device)
        opt = AdamW(state.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        opt.load_state_dict(state.optimizer)
        gen.set_state(state.generator)
        return state.model, opt, state.curve
