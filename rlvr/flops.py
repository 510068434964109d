"""The ceiling a benchmark is measured against: FLOPs counted from the model's shapes, and the
machine's measured fp32 GEMM rate at those shapes.

A workload's share of the limit is (its FLOPs / its seconds) / (the GEMM rate on the matrices the
workload multiplies). Only the matrix products are counted (the linears, attention's two products,
the tied LM head); layer norms, softmax, sampling and Python are the overhead that share measures.
A forward costs 2 FLOPs per multiply-add; a backward twice its forward.
"""

from __future__ import annotations

import statistics
import time

import torch

from rlvr.configs import ModelConfig


def token_flops(cfg: ModelConfig, context: int, vocab: int, logits: bool = True) -> int:
    """Forward FLOPs of one token attending over `context` positions (itself included).

    Per layer: qkv 3 d^2, output projection d^2, MLP 8 d^2 multiply-adds (24 d^2 FLOPs), plus
    q.k and w.v over the context (4 d context); the tied LM head 2 d V when the token's logits are needed.
    """
    d = cfg.d_model
    return cfg.n_layer * (24 * d * d + 4 * d * context) + (2 * d * vocab if logits else 0)


def sequence_flops(cfg: ModelConfig, start: int, length: int, vocab: int, logits: bool = True) -> int:
    """Forward FLOPs of `length` tokens at positions start .. start + length - 1 (causal)."""
    return sum(token_flops(cfg, start + t + 1, vocab, logits) for t in range(length))


def prompts_flops(cfg: ModelConfig, prompts: int, prompt_len: int, vocab: int, shared: int = 0) -> int:
    """Encoding `prompts` prompts whose first `shared` tokens are the same (the chat template's system
    part): those once, each prompt's rest once, logits at each prompt's last position only."""
    return sequence_flops(cfg, 0, shared, vocab, logits=False) + prompts * (
        sequence_flops(cfg, shared, prompt_len - shared, vocab, logits=False) + 2 * cfg.d_model * vocab
    )


def sampling_flops(
    cfg: ModelConfig, prompts: int, prompt_len: int, n: int, new_tokens: int, vocab: int, shared: int = 0
) -> int:
    """Our sampler's work: the prompts encoded once (`prompts_flops`), then prompts * n rows decode
    new_tokens - 1 steps (the last token needs no forward)."""
    decode = prompts * n * sequence_flops(cfg, prompt_len, new_tokens - 1, vocab)
    return prompts_flops(cfg, prompts, prompt_len, vocab, shared) + decode


def grpo_step_flops(
    cfg: ModelConfig,
    prompts: int,
    group: int,
    prompt_len: int,
    new_tokens: int,
    vocab: int,
    beta: float,
    shared: int = 0,
) -> int:
    """One GRPO step at mu = 1: the rollout, the policy's forward and backward over the responses
    (prompts encoded once per group, as our loss does), and the reference's forward when beta > 0."""
    rollout = sampling_flops(cfg, prompts, prompt_len, group, new_tokens, vocab, shared)
    forward = prompts_flops(cfg, prompts, prompt_len, vocab, shared) + prompts * group * sequence_flops(
        cfg, prompt_len, new_tokens - 1, vocab
    )
    return rollout + 3 * forward + (forward if beta > 0 else 0)


def gemm_rate(cfg: ModelConfig, rows: int, repeats: int = 20) -> float:
    """Measured fp32 FLOP/s of one layer's four products at `rows` tokens: (rows, d) @ (d, 3d),
    (d, d), (d, 4d) and (rows, 4d) @ (4d, d), back to back, median of `repeats`, at the current
    torch thread count. This is the limit: our model is these products and little else."""
    d = cfg.d_model
    x, h = torch.randn(rows, d), torch.randn(rows, 4 * d)
    weights = [torch.randn(d, 3 * d), torch.randn(d, d), torch.randn(d, 4 * d)]
    w_out = torch.randn(4 * d, d)
    flops = 2 * rows * d * (3 * d + d + 4 * d) + 2 * rows * 4 * d * d
    times = []
    for r in range(repeats + 2):
        t0 = time.perf_counter()
        for w in weights:
            torch.mm(x, w)
        torch.mm(h, w_out)
        if r >= 2:  # warm-up: allocator and kernel selection
            times.append(time.perf_counter() - t0)
    return flops / statistics.median(times)
