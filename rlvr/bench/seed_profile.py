"""`rlvr bench --only seed_profile`: where one GRPO seed's time goes, as the pipeline spends it, by
phase of the loop and by class of torch op: what a faster kernel, or less Python, could gain."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import torch

from rlvr.configs import GRPOConfig
from rlvr.determinism import SEED_THREADS, set_determinism
from rlvr.io.params import Params
from rlvr.model import TinyLM
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer


class Phases:
    """Exclusive seconds per phase: `wrap(fn, name)` times each call of fn, less the time spent in
    wrapped calls nested inside it, under `name(*args)` (a phase may depend on the call)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.stack: list[tuple[str, list[float]]] = []  # open calls: (phase, [seconds of nested calls])

    def inside(self, name: str) -> bool:
        return any(phase == name for phase, _ in self.stack)

    def wrap(self, fn: Callable, name: str | Callable[..., str]) -> Callable:
        def timed(*args, **kwargs):
            phase, nested, t0 = (
                name if isinstance(name, str) else name(*args, **kwargs),
                [0.0],
                time.perf_counter(),
            )
            self.stack.append((phase, nested))
            try:
                return fn(*args, **kwargs)
            finally:
                self.stack.pop()
                took = time.perf_counter() - t0
                self.seconds[phase] = self.seconds.get(phase, 0.0) + took - nested[0]
                if self.stack:
                    self.stack[-1][1][0] += took

        return timed


SEED_PHASES = (
    "training rollouts (sample, score)",
    "reference forward",
    "policy forward",
    "loss, backward, optimiser",
    "evaluation (exact accuracy, drift on one sample a problem)",
)
# torch op name patterns -> class, first match wins; the rest is "other elementwise, reductions"
OP_CLASSES = {
    "matrix products": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "attention kernel": ("scaled_dot_product",),
    "GELU, layer norm, softmax": ("gelu", "layer_norm", "softmax"),
    "memory (copy, cat, fill, index)": (
        "aten::copy_",
        "aten::cat",
        "aten::fill_",
        "aten::zero_",
        "aten::clone",
        "aten::index",
        "aten::gather",
        "aten::scatter",
        "aten::empty",
        "aten::repeat_interleave",
        "aten::embedding",
    ),
}


def op_class(name: str) -> str:
    """The class of a torch op (`OP_CLASSES`) by its profiler name."""
    return next(
        (cls for cls, keys in OP_CLASSES.items() if any(k in name for k in keys)),
        "other elementwise, reductions",
    )


def _grpo_seed(params: Params, variant: str) -> tuple[Callable[[GRPOConfig], list[dict]], str]:
    """A function that trains one seed of `variant` (seed 0) as a pipeline worker does, from a fresh
    copy of its SFT checkpoint (an untrained model when `dvc repro` has not made it), and what it starts
    from."""
    from rlvr.grpo_loop import GRPOData, train_grpo
    from rlvr.pipeline import checkpoint, paths

    cfg = params.variant(variant)
    task = params.task(cfg.task)
    tok = Tokenizer()
    train, held = split(cfg.task, task.heldout, params.seed)[:2]
    ckpt = paths.sft(cfg.sft).checkpoint(params.sft_run(cfg.sft).seeds[0])
    start = str(ckpt) if ckpt.is_file() else "untrained"

    def one_seed(c: GRPOConfig) -> list[dict]:
        set_determinism(0, SEED_THREADS)
        policy = checkpoint.load(ckpt, tok) if ckpt.is_file() else TinyLM(params.model, len(tok)).eval()
        data = GRPOData(train, held or train, tok, task.max_new_tokens)
        return train_grpo(policy, c, data, torch.Generator().manual_seed(0), shared_prefix=True)

    return one_seed, start


def bench(params: Params, variant: str = "grpo", profiled_steps: int = 25) -> dict:
    """Where one GRPO seed's time goes, as the pipeline spends it: one seed of `variant` with all its
    steps and evaluations on one torch thread (a seed worker's), from its SFT checkpoint.

    Two views. Phases of the loop, exclusive seconds (a forward inside an evaluation counts as
    evaluation). Then torch's profiler over a run of `profiled_steps` steps (evaluated at its start
    and end, as the seed is every `eval_every`): each op class's share of the op time (`OP_CLASSES`),
    and the op time's share of the wall (the rest is Python and dispatch). This is what says how much
    a faster kernel, or less Python, could gain."""
    from torch.profiler import ProfilerActivity, profile

    from rlvr import grpo_loop as grpo

    one_seed, start = _grpo_seed(params, variant)
    cfg = params.variant(variant)
    timer = Phases()

    def forward(*_args, **_kwargs) -> str:  # the loss's forwards, unless an evaluation runs them
        evaluation = SEED_PHASES[4]
        return (
            evaluation
            if timer.inside(evaluation)
            else SEED_PHASES[2]
            if torch.is_grad_enabled()
            else SEED_PHASES[1]
        )

    wrapped = {
        "rollout_groups": SEED_PHASES[0],
        "response_logits": forward,
        "grpo_update": SEED_PHASES[3],
        "evaluate": SEED_PHASES[4],
    }
    originals = {name: getattr(grpo, name) for name in wrapped}
    try:
        for name, phase in wrapped.items():
            setattr(grpo, name, timer.wrap(originals[name], phase))
        t0 = time.perf_counter()
        one_seed(cfg)
        wall = time.perf_counter() - t0
    finally:
        for name, fn in originals.items():
            setattr(grpo, name, fn)
    seconds = {
        **{p: timer.seconds.get(p, 0.0) for p in SEED_PHASES},
        "the rest (checkpoint, reference copy, step rows)": wall - sum(timer.seconds.values()),
    }
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        one_seed(replace(cfg, steps=profiled_steps))
        profiled_wall = time.perf_counter() - t0
    by_class: dict[str, float] = {}
    for event in prof.key_averages():
        cls = op_class(event.key)
        by_class[cls] = by_class.get(cls, 0.0) + event.self_cpu_time_total / 1e6
    op_seconds = sum(by_class.values())
    return {
        "variant": variant,
        "start": start,
        "threads": SEED_THREADS,
        "steps": cfg.steps,
        "eval_every": cfg.eval_every,
        "seconds": round(wall, 2),
        "phases": [
            {"phase": p, "seconds": round(v, 2), "share": round(v / wall, 3)} for p, v in seconds.items()
        ],
        "profiled_steps": profiled_steps,
        "op_classes": [
            {"class": c, "share": round(v / op_seconds, 3)}
            for c, v in sorted(by_class.items(), key=lambda kv: -kv[1])
        ],
        "op_share_of_wall": round(op_seconds / profiled_wall, 3),
    }
