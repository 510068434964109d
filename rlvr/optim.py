"""AdamW, written out: torch.optim's arithmetic on CPU, without torch.optim's start-up cost.

Every torch.optim optimizer imports torch._dynamo the first time one is built or stepped, about
1.7 s on this project's 2-core machine, and every training process of the pipeline pays it: four
SFT stages and two seed workers per GRPO stage, some 30 s of a `dvc repro`. The update below is
the one torch.optim.Adam / AdamW runs on CPU tensors (its single-tensor path: CPU has no foreach or
fused kernels; no amsgrad, no maximize), operation for operation, so the trained weights are
bit-identical to torch.optim's (tests/maths/test_optim.py checks that against torch.optim).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch

from rlvr.fields import UserError


class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019); weight_decay 0 is plain Adam.

    `lr` is a plain attribute: a schedule sets it before each `step()`. Each parameter keeps its own
    step count, which advances only on steps where it has a gradient (as in torch.optim).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("AdamW got no parameters that require a gradient")
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"lr = {lr}, eps = {eps}, weight_decay = {weight_decay}: each must be >= 0")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas = {betas}: each must lie in [0, 1)")
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.steps = [0] * len(self.params)
        self.exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]

    def state_dict(self) -> dict:
        """Per-parameter step counts and moments (copies): with the weights and the data order, all a
        run needs to continue bit for bit in another process (SFT after its warm-up)."""
        return {
            "steps": list(self.steps),
            "exp_avg": [m.clone() for m in self.exp_avg],
            "exp_avg_sq": [v.clone() for v in self.exp_avg_sq],
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()` output into this optimiser (same parameters, in the same order)."""
        shapes = [tuple(p.shape) for p in self.params]
        for key in ("exp_avg", "exp_avg_sq"):
            got = [tuple(t.shape) for t in state[key]]
            if got != shapes:
                raise ValueError(f"optimiser state {key}: shapes {got} do not match the parameters' {shapes}")
        if len(state["steps"]) != len(self.params):
            raise ValueError(
                f"optimiser state: {len(state['steps'])} step counts for {len(self.params)} parameters"
            )
        self.steps = [int(t) for t in state["steps"]]
        for mine, saved in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"]):
            mine.copy_(saved)

    def zero_grad(self) -> None:
        """Drop every gradient (set to None, as torch.optim does by default)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter with a gradient. An lr so large that the first update's
        step size (lr / (1 - beta1)) is beyond the weights' float range raises `Diverged`, before
        anything changes (torch would fail converting it, mid-update)."""
        beta1, beta2 = self.betas
        dtype = self.params[0].dtype
        if not self.lr / (1 - beta1) <= torch.finfo(dtype).max:
            what = f"Adam's step size lr / (1 - beta1) = {self.lr / (1 - beta1):g} (beyond {dtype})"
            raise Diverged(what, self.lr, None, {"lr": self.lr})
        for i, (p, m, v) in enumerate(zip(self.params, self.exp_avg, self.exp_avg_sq)):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t, grad = self.steps[i], p.grad
            if self.weight_decay != 0:
                p.mul_(1 - self.lr * self.weight_decay)
            m.lerp_(grad, 1 - beta1)  # first moment
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)  # second moment
            step_size = self.lr / (1 - beta1**t)  # bias corrections, in Python floats as torch does
            denom = (v.sqrt() / (1 - beta2**t) ** 0.5).add_(self.eps)
            p.addcdiv_(m, denom, value=-step_size)


# --------------------------------------------------------------------------------------------
# A run that diverges stops at once: a NaN or infinite loss, gradient or weight is never trained on,
# saved or scored.


class Diverged(UserError):
    """Training met a NaN or an infinity (the loss, the gradient norm, the weights after an update,
    or an Adam step beyond the float range). One line: where (the params section and chain, once
    the stage has said them), the step, the value, and the settings to look at with their values.
    A UserError: the stage stops with status 2, and its outputs are never written (or removed, if
    other chains' were).

    Pickled whole (its args), so a seed worker's reaches the stage process as it was raised."""

    def __init__(
        self,
        what: str,  # what was not finite, as said: "loss = nan"
        value: float,
        step: int | None,
        settings: dict[str, float],
        where: str = "",
        chain: int | None = None,
        paths: dict[str, str] | None = None,
    ) -> None:
        super().__init__(what, value, step, settings, where, chain, paths)
        self.what, self.value, self.step, self.settings = what, value, step, settings
        self.where, self.chain, self.paths = where, chain, paths or {}

    def at(
        self,
        where: str | None = None,
        chain: int | None = None,
        step: int | None = None,
        paths: dict[str, str] | None = None,
    ) -> Diverged:
        """The same error, placed: its params section (`sft.two_digit`), chain, step, or the dotted
        path of a setting that is not `<where>.<name>` (the hack's lr is its variant's)."""
        return Diverged(
            self.what,
            self.value,
            self.step if step is None else step,
            self.settings,
            self.where if where is None else where,
            self.chain if chain is None else chain,
            {**self.paths, **(paths or {})},
        )

    def __str__(self) -> str:
        place = self.where or "training"
        if self.chain is not None:
            place += f" chain {self.chain}"
        step = "" if self.step is None else f" at step {self.step}"
        prefix = f"{self.where}." if self.where else ""
        look = ", ".join(f"{self.paths.get(k, prefix + k)} ({v:g})" for k, v in self.settings.items())
        return f"{place}: {self.what}{step}: training diverged; lower or check {look}"


@contextmanager
def diverged_at(
    where: str | None = None,
    chain: int | None = None,
    step: int | None = None,
    paths: dict[str, str] | None = None,
) -> Iterator[None]:
    """Place a Diverged raised inside the block (`Diverged.at`): a stage says its params section, a
    seed worker its chain, a training loop its step."""
    try:
        yield
    except Diverged as exc:
        raise exc.at(where, chain, step, paths) from None


def check_step(loss: float, grad_norm: torch.Tensor, step: int | None, settings: dict[str, float]) -> None:
    """Raise Diverged if a step's loss (a float) or its gradient norm (the 0-d tensor
    `clip_grad_norm_` returns, before the optimiser steps on it) is NaN or infinite."""
    if not math.isfinite(loss):
        raise Diverged(f"loss = {loss}", loss, step, settings)
    norm = float(grad_norm)
    if not math.isfinite(norm):
        raise Diverged(f"gradient norm = {norm}", norm, step, settings)


def check_weights(params: Iterable[torch.Tensor], step: int | None, settings: dict[str, float]) -> None:
    """Raise Diverged if any weight is NaN or infinite: after an update, whose overflow no loss shows
    until the next step (after the last, none does; GRPO samples from the weights before that)."""
    bad = sum(int((~torch.isfinite(p.detach())).sum()) for p in params)
    if bad:
        raise Diverged(f"{bad} weights are NaN or infinite", math.nan, step, settings)
