"""The two workloads the benchmarks time, and what each costs the machine.

Sampling: 300 held-out two_digit prompts x 64 samples, up to 4 response tokens, on a fresh model.
A GRPO step: P prompts x G, sampled, scored with random rewards (every group mixed), one update.
Each comes with its FLOPs (`rlvr.flops`) and the fp32 GEMM rate at the rows its products see, so a
benchmark reports its share of the machine's limit. `bench.suite` and `bench.compiled` time them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import torch

from rlvr.bench import fair
from rlvr.configs import ModelConfig
from rlvr.io.params import Params
from rlvr.model import DECODE_CHUNK_ROWS, TinyLM, prompt_levels, sample
from rlvr.optim import AdamW
from rlvr.rollout import prompt_tensor
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer

SAMPLES, SAMPLE_TOKENS = 64, 4  # the sampling workload: 300 held-out prompts x 64, up to 4 tokens


def shared_columns(prompts: torch.Tensor) -> int:
    """How many leading tokens the sampler and the loss encode once for all of `prompts` (P, Tp)."""
    return prompts.shape[1] - prompt_levels(prompts)[-1].shape[1]


def sampling_work(params: Params) -> tuple[int, dict[int, float]]:
    """The sampling workload's FLOPs (`flops.sampling_flops`) and the fp32 GEMM rate on the rows its
    products see: all 19,200 at once, and one decode block (`model.DECODE_CHUNK_ROWS`), where the
    GEMM runs faster; the limit is the better of the two."""
    from rlvr import flops

    tok = Tokenizer()
    _, held = split("two_digit", 300, params.seed)[:2]
    prompts = prompt_tensor(held, tok)  # (300, Tp)
    work = flops.sampling_flops(
        params.model, len(held), prompts.shape[1], SAMPLES, SAMPLE_TOKENS, len(tok), shared_columns(prompts)
    )
    block_rows = max(1, DECODE_CHUNK_ROWS // SAMPLES) * SAMPLES
    return work, {rows: flops.gemm_rate(params.model, rows) for rows in (len(held) * SAMPLES, block_rows)}


def sampling_call(params: Params) -> Callable[[], object]:
    """One run of the sampling workload (300 held-out prompts x 64, 4 tokens, a fresh default model)."""
    tok = Tokenizer()
    _, held = split("two_digit", 300, params.seed)[:2]
    prompts = prompt_tensor(held, tok)  # (300, Tp)
    model = TinyLM(params.model, len(tok)).eval()
    gen = torch.Generator().manual_seed(0)
    return lambda: sample(model, prompts, SAMPLES, SAMPLE_TOKENS, tok.eos_id, tok.pad_id, 1.0, gen)


def grpo_step_work(
    params: Params, P: int = 16, G: int = 8, m: int = 4, beta: float = 0.0
) -> tuple[int, float]:
    """One GRPO step's FLOPs (`flops.grpo_step_flops`) and the fp32 GEMM rate at its batch (P x G rows)."""
    from rlvr import flops

    tok = Tokenizer()
    train, _ = split("two_digit", 300, params.seed)[:2]
    every = prompt_tensor(train, tok)  # (N, Tp): what any batch of them shares, at least
    work = flops.grpo_step_flops(params.model, P, G, every.shape[1], m, len(tok), beta, shared_columns(every))
    return work, flops.gemm_rate(params.model, P * G)


def grpo_stepper(
    params: Params,
    model: ModelConfig,
    P: int,
    G: int,
    new_tokens: int,
    beta: float,
    seed: int = 0,
    form: str = "chat",
) -> Callable[[], float]:
    """A function that runs one GRPO step (sample P prompts x G, score, one update) of a fresh
    model of shape `model` and returns its seconds. Rewards are drawn at random so every group is
    mixed (an untrained model solves nothing); responses run up to `new_tokens`; prompts are in
    `form` (`fair.FORMS`: the chat template, or the bare question)."""
    from rlvr.grpo_loop import grpo_update, rollout_groups

    tok = fair.tokenizer(form)
    train, _ = split("two_digit", 300, params.seed)[:2]
    cfg = replace(params.variant("grpo"), prompts_per_step=P, group_size=G, beta=beta)
    torch.manual_seed(seed)
    policy = TinyLM(model, len(tok))
    ref = TinyLM(model, len(tok)).requires_grad_(False) if beta > 0 else None
    opt = AdamW(policy.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(seed)

    def step() -> float:
        problems = [train[i] for i in torch.randint(len(train), (P,), generator=gen).tolist()]
        t0 = time.perf_counter()
        batch = rollout_groups(policy, problems, cfg, new_tokens, tok, gen)
        batch = replace(batch, rewards=torch.rand(batch.rewards.shape, generator=gen).round())  # mixed groups
        grpo_update(policy, ref, opt, batch, cfg, new_tokens, shared_prefix=True)
        return time.perf_counter() - t0

    return step
