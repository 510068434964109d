"""`rlvr bench --only sampling`: 300 held-out prompts x 64 samples, up to 4 response tokens, on a
fresh default-size model; with `--peer trl`, HF `generate` on the same workload, each side at its
best and alone (`rlvr.bench.fair`), for both prompt forms."""

from __future__ import annotations

import resource
import statistics
import time

import torch

from rlvr.bench import fair
from rlvr.bench import peer as peers
from rlvr.bench.targets import TARGETS
from rlvr.bench.workloads import SAMPLE_TOKENS, SAMPLES, sampling_work
from rlvr.determinism import set_determinism
from rlvr.io.params import Params
from rlvr.model import DECODE_CHUNK_ROWS, TinyLM, sample
from rlvr.rollout import prompt_tensor
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


HF_PROMPTS_PER_CALL = (25, 50, 100, 300)  # HF `generate`'s sweep: prompts (x 64 rows) per call
SAMPLING_BLOCK_RUNS = 2  # timed runs of the whole workload per block, after one warm-up


def bench(params: Params, repeats: int = 5, peer: bool = False) -> dict:
    """300 held-out prompts x 64 samples, up to 4 response tokens, default-size model; with
    `peer`, HF `generate` on a GPT-2 of the same shape, each side at its best and alone
    (`sampling_vs_hf`), for both prompt forms.

    An untrained model rarely emits <eos>, so every row runs the full 4 tokens: the worst case.
    Our share of the machine's limit: our sampler's FLOPs (`flops.sampling_flops`) per second over
    the fp32 GEMM rate on the rows its products see: the decode step runs blocks of whole prompts
    (`model.DECODE_CHUNK_ROWS`), where the GEMM runs faster than on all 19,200 rows at once, so the
    limit is the better of the two rates.
    """
    tok = Tokenizer()
    max_new_tokens, n = SAMPLE_TOKENS, SAMPLES
    _, held = split("two_digit", 300, params.seed)[:2]
    prompts = prompt_tensor(held, tok)  # (300, Tp)
    model = TinyLM(params.model, len(tok)).eval()
    rates = [len(held) * n / s for s in sampling_seconds(model, prompts, tok, repeats)]
    rss = _peak_rss_mb()
    work, limits = sampling_work(params)
    block_rows = max(1, DECODE_CHUNK_ROWS // n) * n
    limit = max(limits.values())
    out = {
        "completions_per_second": fair.spread(rates),
        "completions": len(held) * n,
        "max_new_tokens": max_new_tokens,
        "model_params": model.num_params(),
        "decode_block_rows": block_rows,
        "gemm_flops_per_second_at_rows": {str(r): round(v) for r, v in limits.items()},
        "peak_rss_mb": round(rss, 1),
        "flops": work,
        "gemm_limit_flops_per_second": round(limit),
        "share_of_gemm_limit": round(work * statistics.median(rates) / (len(held) * n) / limit, 3),
        **TARGETS["sampling"],
    }
    if not peer:
        out["hf_generate"] = peers.note(peer)
        return out
    peers.require()
    out["hf_generate"] = {
        **peers.versions(),
        "model_params": sum(p.numel() for p in peers.hf_model(params.model, tok).parameters()),
    }
    out["vs_hf_generate"] = {form: sampling_vs_hf(params, form) for form in fair.FORMS}
    out["peer_method"] = fair.METHOD
    return out


def _held_prompts(params: Params, form: str) -> torch.Tensor:
    """The sampling workload's 300 held-out prompts in `form` ("chat" or "bare"): (300, Tp)."""
    _, held = split("two_digit", 300, params.seed)[:2]
    return prompt_tensor(held, fair.tokenizer(form))


def ours_sampling_block(params: Params, form: str, runs: int) -> list[float]:
    """Seconds of `runs` runs of our sampler over the sampling workload in `form`, after one
    warm-up run; as the pipeline samples (deterministic ops, params' threads)."""
    set_determinism(params.seed, params.threads)
    tok = Tokenizer()
    prompts = _held_prompts(params, form)
    return sampling_seconds(TinyLM(params.model, len(tok)).eval(), prompts, tok, runs)


def sampling_seconds(model: TinyLM, prompts: torch.Tensor, tok: Tokenizer, runs: int) -> list[float]:
    """Seconds of `runs` runs of our sampler (SAMPLES a prompt, SAMPLE_TOKENS each, run r seeded r),
    after one warm-up run that readies allocators and kernels."""
    times = []
    for r in range(runs + 1):
        gen = torch.Generator().manual_seed(r)
        t0 = time.perf_counter()
        sample(model, prompts, SAMPLES, SAMPLE_TOKENS, tok.eos_id, tok.pad_id, 1.0, gen)
        times.append(time.perf_counter() - t0)
    return times[1:]


def hf_sampling_block(params: Params, form: str, per_call: int, runs: int) -> list[float]:
    """Seconds of `runs` runs of HF `generate` over the sampling workload in `form`, `per_call`
    prompts a call, after one warm-up call."""
    peers.as_a_user_runs(params.threads, params.seed)
    tok = Tokenizer()
    prompts = _held_prompts(params, form)
    model = peers.hf_model(params.model, tok)
    peers.generate_seconds(model, prompts[:per_call], SAMPLES, SAMPLE_TOKENS, tok, 0)
    return [
        peers.generate_seconds(model, prompts, SAMPLES, SAMPLE_TOKENS, tok, r + 1, per_call)
        for r in range(runs)
    ]


def sampling_vs_hf(params: Params, form: str, per_call: tuple[int, ...] | None = None) -> dict:
    """Ours against HF `generate` at its best on the sampling workload in `form`: every block
    alone in a fresh process, ABAB over `generate`'s prompts per call (default HF_PROMPTS_PER_CALL;
    `fair.compare`)."""
    ours = fair.alone(ours_sampling_block, params, form, SAMPLING_BLOCK_RUNS)
    sweep = per_call or HF_PROMPTS_PER_CALL
    peer = {k: fair.alone(hf_sampling_block, params, form, k, SAMPLING_BLOCK_RUNS) for k in sweep}
    completions = len(_held_prompts(params, form)) * SAMPLES
    return {"prompts": form, **fair.compare(ours, peer, "prompts_per_call", work=completions)}
