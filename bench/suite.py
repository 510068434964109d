"""`rlvr bench`: speed and memory benchmarks, written to reports/benchmarks.json.

Benchmarks are run on demand, never as timed tests. Each repeats its measurement several times
and reports the median with the min and max, so one noisy run cannot pass for a result.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from bench import fair
from bench.floor import bench_pipeline
from bench.workloads import SAMPLE_TOKENS, SAMPLES, grpo_step_work, grpo_stepper, sampling_work
from rlvr.configs import GRPOConfig, ModelConfig, SFTConfig
from rlvr.files import write_json
from rlvr.model import DECODE_CHUNK_ROWS, TinyLM, sample
from rlvr.noise import sft_rows
from rlvr.optim import AdamW
from rlvr.pipeline.config import Params
from rlvr.pipeline.determinism import SEED_THREADS, cpu_model, set_determinism
from rlvr.rollout import prompt_tensor
from rlvr.sft import encode_sft, sft_loss_shared_prefix
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer

_spread = fair.spread  # median, min, max and count of one measurement's runs


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


PEER_MISSING = "not installed"  # a peer figure when the `peer` extra is absent
PEER_SKIPPED = "not run (rlvr bench --peer trl)"


def _peer_note(peer: bool) -> str:
    """What a peer column says when it was not measured: the extra is missing, or it was not asked
    for ("" when it was measured)."""
    from bench import peer as peers

    return PEER_MISSING if not peers.available() else "" if peer else PEER_SKIPPED


HF_PROMPTS_PER_CALL = (25, 50, 100, 300)  # HF `generate`'s sweep: prompts (x 64 rows) per call
SAMPLING_BLOCK_RUNS = 2  # timed runs of the whole workload per block, after one warm-up


def bench_sampling(params: Params, repeats: int = 5, peer: bool = False) -> dict:
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
    rates = []
    for r in range(repeats + 1):
        gen = torch.Generator().manual_seed(r)
        t0 = time.perf_counter()
        sample(model, prompts, n, max_new_tokens, tok.eos_id, tok.pad_id, 1.0, gen)
        seconds = time.perf_counter() - t0
        if r:  # the first run warms up allocators and kernels
            rates.append(len(held) * n / seconds)
    rss = _peak_rss_mb()
    work, limits = sampling_work(params)
    block_rows = max(1, DECODE_CHUNK_ROWS // n) * n
    limit = max(limits.values())
    out = {
        "completions_per_second": _spread(rates),
        "completions": len(held) * n,
        "max_new_tokens": max_new_tokens,
        "model_params": model.num_params(),
        "decode_block_rows": block_rows,
        "gemm_flops_per_second_at_rows": {str(r): round(v) for r, v in limits.items()},
        "peak_rss_mb": round(rss, 1),
        "target_completions_per_second": 20000,
        "target_peak_rss_mb": 1536,
        "flops": work,
        "gemm_limit_flops_per_second": round(limit),
        "share_of_gemm_limit": round(work * statistics.median(rates) / (len(held) * n) / limit, 3),
        "target_share_of_gemm_limit": 0.75,
        "target_speedup_vs_hf_generate": 6.0,
    }
    if not peer:
        out["hf_generate"] = _peer_note(peer)
        return out
    from bench import peer as peers

    _require_peer()
    out["hf_generate"] = {
        **peers.versions(),
        "model_params": sum(p.numel() for p in peers.hf_model(params.model, tok).parameters()),
    }
    out["vs_hf_generate"] = {form: sampling_vs_hf(params, form) for form in fair.FORMS}
    out["peer_method"] = fair.METHOD
    return out


def bench_compiled(params: Params) -> dict:
    """Compiled kernels against eager ones, compile time included (`bench.compiled`)."""
    from bench import compiled

    work, limits = sampling_work(params)
    return compiled.bench_compiled(
        params, {"grpo_step": grpo_step_work(params), "sampling": (work, max(limits.values()))}
    )


def _held_prompts(params: Params, form: str) -> torch.Tensor:
    """The sampling workload's 300 held-out prompts in `form` ("chat" or "bare"): (300, Tp)."""
    _, held = split("two_digit", 300, params.seed)[:2]
    return prompt_tensor(held, fair.tokenizer(form))


def _peer_process(params: Params) -> None:
    """A peer's block as a user runs it: our thread count (the same cores), seeded, TRL's and
    transformers' chatter silenced; not our deterministic-ops mode, which costs the peer time."""
    torch.set_num_threads(params.threads)
    torch.manual_seed(params.seed)
    _require_peer()


def ours_sampling_block(params: Params, form: str, runs: int) -> list[float]:
    """Seconds of `runs` runs of our sampler over the sampling workload in `form`, after one
    warm-up run; as the pipeline samples (deterministic ops, params' threads)."""
    set_determinism(params.seed, params.threads)
    tok = Tokenizer()
    prompts = _held_prompts(params, form)
    model = TinyLM(params.model, len(tok)).eval()
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
    from bench import peer as peers

    _peer_process(params)
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


def bench_sft(params: Params, steps: int = 30) -> dict:
    """Training throughput of SFT on two_digit at the default batch size (tokens per second)."""
    tok = Tokenizer()
    cfg: SFTConfig = params.sft_run("two_digit")
    train, _ = split("two_digit", params.task("two_digit").heldout, params.seed)[:2]
    tokens, mask = encode_sft(sft_rows(train[: cfg.batch_size], cfg.noise, 1, params.seed), tok)
    model = TinyLM(params.model, len(tok))
    opt = AdamW(model.parameters(), lr=cfg.lr)
    times = []
    for s in range(steps + 3):
        t0 = time.perf_counter()
        loss = sft_loss_shared_prefix(model, tokens, mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if s >= 3:
            times.append(time.perf_counter() - t0)
    tps = [tokens.numel() / t for t in times]
    return {
        "step_seconds": _spread(times),
        "tokens_per_second": _spread(tps),
        "batch_size": cfg.batch_size,
        "tokens_per_step": tokens.numel(),
    }


def _require_peer() -> None:
    """The `peer` extra is importable (else one clear error), its chatter silenced."""
    from bench import peer

    if not peer.available():
        from rlvr.fields import ConfigError

        raise ConfigError("rlvr bench --peer trl needs TRL and transformers: pip install -e '.[peer]'")
    peer.quiet()


WARMUP = 3  # steps dropped before timing: allocator, kernel selection, TRL's first-step set-up


def _trl_prompts(params: Params, P: int, form: str = "chat") -> list[str]:
    """TRL's P prompts as text in `form`: the same token ids as ours once its tokenizer encodes them."""
    tok = fair.tokenizer(form)
    train, _ = split("two_digit", 300, params.seed)[:2]
    return [tok.decode(tok.prompt_ids(p.prompt)) for p in train[:P]]


def _ours_alone(
    params: Params, model: ModelConfig, P: int, G: int, new_tokens: int, beta: float, steps: int
) -> list[float]:
    """Seconds of `steps` of our GRPO steps on the workload, in this process, after WARMUP."""
    step = grpo_stepper(params, model, P, G, new_tokens, beta)
    return [step() for _ in range(steps + WARMUP)][WARMUP:]


def ours_grpo_block(
    params: Params,
    model: ModelConfig,
    P: int,
    G: int,
    m: int,
    beta: float,
    form: str,
    steps: int,
    warmup: int,
) -> list[float]:
    """One block of ours alone: `steps` GRPO steps timed after `warmup`, as the pipeline runs them
    (deterministic ops, params' threads)."""
    set_determinism(params.seed, params.threads)
    step = grpo_stepper(params, model, P, G, m, beta, form=form)
    return [step() for _ in range(warmup + steps)][warmup:]


def trl_block(
    params: Params,
    model: ModelConfig,
    P: int,
    G: int,
    m: int,
    beta: float,
    form: str,
    steps: int,
    warmup: int,
    generation_batch: int,
) -> list[float]:
    """One block of TRL's GRPOTrainer alone: `steps` optimizer steps timed after `warmup`, its
    `generate` drawing `generation_batch` completions a call."""
    from bench import peer as peers

    _peer_process(params)
    prompts = _trl_prompts(params, P, form)
    lr = params.variant("grpo").lr
    times = peers.grpo_trainer_steps(
        model, prompts, G, m, beta, warmup + steps, lr, Tokenizer(), generation_batch=generation_batch
    )
    return times[warmup:]


def trl_generation_batches(P: int, G: int) -> tuple[int, ...]:
    """TRL's generation batches swept: a quarter, half and all of a step's P x G completions, in
    whole groups (each optimizer step still covers all P prompts, on-policy)."""
    return tuple(dict.fromkeys(G * p for p in (P // 4, P // 2, P) if p and P % p == 0))


def grpo_vs_trl(
    params: Params,
    model: ModelConfig,
    P: int,
    G: int,
    m: int,
    beta: float,
    form: str,
    steps: int,
    batches: tuple[int, ...],
) -> dict:
    """Ours against TRL's GRPOTrainer at its best on one GRPO-step workload in `form`: every block
    alone in a fresh process, ABAB over TRL's generation `batches` (`fair.compare`)."""
    args = (params, model, P, G, m, beta, form, steps, WARMUP)
    peer = {b: fair.alone(trl_block, *args, b) for b in batches}
    return {"prompts": form, **fair.compare(fair.alone(ours_grpo_block, *args), peer, "generation_batch")}


def bench_grpo_step(params: Params, steps: int = 30, peer: bool = False) -> dict:
    """One GRPO step (sample 16 prompts x G = 8, score, one update) on a default-size model with
    4-token answers, at beta = 0 (no reference forward) and beta = 0.04; with `peer`, TRL's
    GRPOTrainer on a GPT-2 of the same shape, each side at its best and alone (`grpo_vs_trl`), for
    both prompt forms. Median seconds per step, and our share of the fp32 GEMM limit at the step's
    batch (128 rows)."""
    P, G, m = 16, 8, 4
    if peer:
        _require_peer()
    out: dict = {}
    for beta in (0.0, 0.04):
        row: dict = {"step_seconds": _spread(_ours_alone(params, params.model, P, G, m, beta, steps))}
        work, limit = grpo_step_work(params, P, G, m, beta)
        row["share_of_gemm_limit"] = round(work / row["step_seconds"]["median"] / limit, 3)
        if peer:
            batches = trl_generation_batches(P, G)
            row["vs_trl"] = {
                form: grpo_vs_trl(params, params.model, P, G, m, beta, form, steps, batches)
                for form in fair.FORMS
            }
        out[f"beta_{beta}"] = row
    out.update(
        {
            "prompts": P,
            "group_size": G,
            "response_tokens": m,
            "gemm_limit_flops_per_second": round(limit),
            "target_step_seconds": {"beta_0.0": 0.045, "beta_0.04": 0.06},
            "target_share_of_gemm_limit": 0.3,
            "target_speedup_vs_trl": 4.0,
        }
    )
    if peer:
        from bench import peer as peers

        out["trl"] = peers.versions()
        out["peer_method"] = fair.METHOD
    else:
        out["trl"] = _peer_note(False)
    return out


SCALING = {"group_size": (4, 8, 16, 64), "response_tokens": (2, 4, 8), "d_model": (64, 128, 256)}
SCALING_BASE = {"group_size": 8, "response_tokens": 4, "d_model": 128}
TRL_SCALING_POINTS = {"group_size": (8, 64)}  # where TRL is measured too


def bench_scaling(params: Params, steps: int = 10, peer: bool = False) -> dict:
    """How a GRPO step's cost grows: seconds per step (16 prompts, beta = 0.04) as one of group
    size, response length and model width moves from the base (G 8, 4 tokens, d_model 128) and the
    others stay; with `peer`, TRL at two group sizes, alone in ABAB blocks with ours (chat prompts,
    TRL's default generation batch: the whole step). A user predicts a bigger run from these."""
    if peer:
        _require_peer()
    rows = []
    for axis, values in SCALING.items():
        for value in values:
            point = {**SCALING_BASE, axis: value}
            model = replace(params.model, d_model=point["d_model"])
            G, tokens = point["group_size"], point["response_tokens"]
            trl = None
            if peer and value in TRL_SCALING_POINTS.get(axis, ()):
                r = grpo_vs_trl(params, model, 16, G, tokens, 0.04, "chat", steps, (16 * G,))
                trl = r["best"]["seconds"]["median"]
            rows.append(
                {
                    "axis": axis,
                    **point,
                    "seconds": statistics.median(_ours_alone(params, model, 16, G, tokens, 0.04, steps)),
                    "trl_seconds": trl,
                }
            )
    return {
        "prompts": 16,
        "beta": 0.04,
        "base": SCALING_BASE,
        "steps": steps,
        "rows": rows,
        "trl": _peer_note(peer)
        or "measured alone in ABAB blocks at group_size "
        + ", ".join(map(str, TRL_SCALING_POINTS["group_size"]))
        + " (chat prompts, TRL's default generation batch)",
        **({"peer_method": fair.METHOD} if peer else {}),
    }


def bench_passk_model(params: Params, repeats: int = 3) -> dict:
    """One model's pass@k workload: 300 held-out prompts x 64 samples, sampled and scored.

    Uses the two_digit SFT checkpoint when `dvc repro` has made it (rows stop at <eos> as in the
    real stage), else an untrained model (every row runs to the cap: the worst case)."""
    from rlvr.pipeline import checkpoint
    from rlvr.pipeline.paths import sft
    from rlvr.rollout import correct_counts

    tok = Tokenizer()
    task = params.task("two_digit")
    _, held = split("two_digit", 300, params.seed)[:2]
    ckpt = sft("two_digit").checkpoint(params.sft_run("two_digit").seeds[0])
    model = checkpoint.load(ckpt, tok) if ckpt.is_file() else TinyLM(params.model, len(tok)).eval()
    times = []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        correct_counts(model, held, 64, task.max_new_tokens, 1.0, tok, torch.Generator().manual_seed(r))
        if r:
            times.append(time.perf_counter() - t0)
    return {
        "seconds_per_model": _spread(times),
        "completions": len(held) * 64,
        "model": str(ckpt) if ckpt.is_file() else "untrained",
        "max_new_tokens": task.max_new_tokens,
        "target_seconds": 2.0,
    }


class _Phases:
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
    "evaluation (sample, score, drift)",
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
    from rlvr.grpo import GRPOData, train_grpo
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


def bench_seed_profile(params: Params, variant: str = "grpo", profiled_steps: int = 25) -> dict:
    """Where one GRPO seed's time goes, as the pipeline spends it: one seed of `variant` with all its
    steps and evaluations on one torch thread (a seed worker's), from its SFT checkpoint.

    Two views. Phases of the loop, exclusive seconds (a forward inside an evaluation counts as
    evaluation). Then torch's profiler over a run of `profiled_steps` steps (evaluated at its start
    and end, as the seed is every `eval_every`): each op class's share of the op time (`OP_CLASSES`),
    and the op time's share of the wall (the rest is Python and dispatch). This is what says how much
    a faster kernel, or less Python, could gain."""
    from torch.profiler import ProfilerActivity, profile

    from rlvr import grpo

    one_seed, start = _grpo_seed(params, variant)
    cfg = params.variant(variant)
    timer = _Phases()

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


QUEUE_KEY = "variants.a_grpo.lr"  # reruns grpo@a_grpo (6 seeds), hack (hack.variant is a_grpo), passk, report


def _clone_with_results(root: Path, into: Path, env: dict) -> None:
    """A clone of HEAD whose DVC outputs come from this checkout's cache (nothing recomputed)."""
    import subprocess
    import sys

    subprocess.run(["git", "clone", "--quiet", str(root), str(into)], check=True)
    cache = subprocess.run(
        [sys.executable, "-m", "dvc", "cache", "dir"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for cmd in (["config", "--local", "cache.dir", cache], ["checkout", "--quiet"]):
        subprocess.run(
            [sys.executable, "-m", "dvc", *cmd], cwd=into, env=env, check=True, capture_output=True
        )
    status = subprocess.run([sys.executable, "-m", "dvc", "status", "--quiet"], cwd=into, env=env)
    if status.returncode != 0:
        from rlvr.fields import ConfigError

        raise ConfigError(
            "the queue benchmark needs this checkout's results in the DVC cache; run `dvc repro` first"
        )


def bench_queue(params: Params) -> dict:
    """Two experiments (`dvc exp run -S variants.a_grpo.lr=...`) run back to back at `threads`, then two
    more queued and run by `dvc queue start -j 2` with RLVR_THREADS=1 (each job one core): the wall
    time of each way. Both start from a clone holding the committed results, so only the experiment's
    stages run. Values differ between the two ways so DVC's run-cache cannot answer for them."""
    import subprocess
    import sys
    import tempfile

    from rlvr.pipeline.tracking import repo_root

    root = repo_root()
    env = {
        k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT", "RLVR_THREADS")
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    dvc = [sys.executable, "-m", "dvc"]
    with tempfile.TemporaryDirectory(prefix="rlvr-queue-") as tmp:
        clone = Path(tmp) / "clone"
        _clone_with_results(root, clone, env)
        env["PYTHONPATH"] = str(clone)
        t0 = time.perf_counter()
        for lr in ("2e-3", "4e-3"):
            subprocess.run(
                [*dvc, "exp", "run", "-S", f"{QUEUE_KEY}={lr}"],
                cwd=clone,
                env=env,
                check=True,
                capture_output=True,
            )
        back_to_back = time.perf_counter() - t0
        for lr in ("2.5e-3", "3.5e-3"):
            subprocess.run(
                [*dvc, "exp", "run", "--queue", "-S", f"{QUEUE_KEY}={lr}"],
                cwd=clone,
                env=env,
                check=True,
                capture_output=True,
            )
        t0 = time.perf_counter()
        subprocess.run(
            [*dvc, "queue", "start", "-j", "2"],
            cwd=clone,
            env={**env, "RLVR_THREADS": "1"},
            check=True,
            capture_output=True,
        )
        while True:
            status = subprocess.run(
                [*dvc, "queue", "status"], cwd=clone, env=env, capture_output=True, text=True
            ).stdout
            if not any(word in status for word in ("Queued", "Running")):
                break
            time.sleep(2)
        queued = time.perf_counter() - t0
        subprocess.run([*dvc, "queue", "stop"], cwd=clone, env=env, capture_output=True)
        failed = status.count("Failed")
    return {
        "experiment": f"dvc exp run -S {QUEUE_KEY}=<lr> (grpo@a_grpo, hack, passk, report)",
        "experiments": 2,
        "back_to_back_seconds": round(back_to_back, 1),
        "back_to_back_threads": params.threads,
        "queue_j2_seconds": round(queued, 1),
        "queue_threads_each": 1,
        "queue_failed": failed,
        "speedup": round(back_to_back / queued, 2),
    }


BENCHMARKS: dict[str, Callable[..., dict]] = {
    "sampling": bench_sampling,
    "sft": bench_sft,
    "grpo_step": bench_grpo_step,
    "passk_model": bench_passk_model,
    "pipeline": bench_pipeline,
    "queue": bench_queue,
    "scaling": bench_scaling,
    "seed_profile": bench_seed_profile,
    "compiled": bench_compiled,
}
WITH_PEER = ("sampling", "grpo_step", "scaling")  # the benchmarks `--peer trl` adds TRL / HF figures to
PEERS = ("trl",)


RERUNS = {
    "fresh_clone": "rlvr verify --rerun",
    "perturbed": "rlvr verify --rerun --perturb",
}  # not benchmarks


def bench_all(params: Params, out: Path, only: list[str] | None = None, peer: str | None = None) -> dict:
    """Run the named benchmarks (default all) and merge their figures into `out`. With peer="trl",
    the sampling, GRPO-step and scaling benchmarks also measure TRL / HF `generate`, each side
    alone and at its best (`bench.fair`)."""
    from rlvr.fields import ConfigError

    names = only or list(BENCHMARKS)
    moved = [n for n in names if n in RERUNS]
    if moved:
        raise ConfigError(
            f"bench {moved[0]!r}: a rerun of the pipeline, not a benchmark: run `{RERUNS[moved[0]]}`"
        )
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise ConfigError(f"bench {unknown[0]!r}: unknown; known benchmarks: {', '.join(BENCHMARKS)}")
    if peer is not None and peer not in PEERS:
        raise ConfigError(f"--peer {peer!r}: unknown; known peers: {', '.join(PEERS)}")
    if peer is not None:
        _require_peer()  # missing extra: one clear error before any benchmark runs
    set_determinism(params.seed, params.threads)
    results = json.loads(out.read_text()) if out.is_file() else {}
    load_before = os.getloadavg()
    for name in sorted(
        names, key=list(BENCHMARKS).index
    ):  # one fixed order, whatever order they were named in
        kwargs = {"peer": peer is not None} if name in WITH_PEER else {}
        before = os.getloadavg()[0]
        results[name] = {
            **BENCHMARKS[name](params, **kwargs),
            "load_average_1min": {"before": round(before, 2), "after": round(os.getloadavg()[0], 2)},
        }
    results["machine"] = {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": params.threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "load_average_1min": {"before": round(load_before[0], 2), "after": round(os.getloadavg()[0], 2)},
        "last_run": names,
    }
    write_json(out, results)
    return {name: results[name] for name in names}
