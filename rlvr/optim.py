"""AdamW, written out: torch.optim's arithmetic on CPU, without torch.optim's start-up cost.

Every torch.optim optimizer imports torch._dynamo the first time one is built or stepped, about
1.7 s on this project's 2-core machine, and every training process of the pipeline pays it: four
SFT stages and two seed workers per GRPO stage, some 30 s of a `dvc repro`. The update below is
the one torch.optim.Adam / AdamW runs on CPU tensors (its single-tensor path: CPU has no foreach or
fused kernels; no amsgrad, no maximize), operation for operation, so the trained weights are
bit-identical to torch.optim's (tests/test_optim.py checks that against torch.optim).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


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
        beta1, beta2 = self.betas
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
