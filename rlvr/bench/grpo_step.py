"""`rlvr bench --only grpo_step`: one GRPO step (sample 16 prompts x G = 8, score, one update) on a
default-size model with 4-token answers, at beta = 0 and 0.04; with `--peer trl`, TRL's GRPOTrainer
on a GPT-2 of the same shape, each side at its best and alone (`rlvr.bench.fair`), for both prompt forms.
`bench.scaling` times the same step as one dimension of it moves."""

from __future__ import annotations

from typing import NamedTuple

from rlvr.bench import fair
from rlvr.bench import peer as peers
from rlvr.bench.targets import TARGETS
from rlvr.bench.workloads import grpo_step_work, grpo_stepper
from rlvr.configs import ModelConfig
from rlvr.determinism import set_determinism
from rlvr.io.params import Params
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer

WARMUP = 3  # steps dropped before timing: allocator, kernel selection, TRL's first-step set-up


class StepShape(NamedTuple):
    """One GRPO-step workload: P prompts x G completions of m tokens each, at `beta`, in prompt `form`
    ("chat" or "bare")."""

    P: int
    G: int
    m: int
    beta: float
    form: str


def _trl_prompts(params: Params, P: int, form: str = "chat") -> list[str]:
    """TRL's P prompts as text in `form`: the same token ids as ours once its tokenizer encodes them."""
    tok = fair.tokenizer(form)
    train, _ = split("two_digit", 300, params.seed)[:2]
    return [tok.decode(tok.prompt_ids(p.prompt)) for p in train[:P]]


def ours_alone(
    params: Params, model: ModelConfig, P: int, G: int, new_tokens: int, beta: float, steps: int
) -> list[float]:
    """Seconds of `steps` of our GRPO steps on the workload, in this process, after WARMUP."""
    step = grpo_stepper(params, model, P, G, new_tokens, beta)
    return [step() for _ in range(steps + WARMUP)][WARMUP:]


def ours_grpo_block(
    params: Params, model: ModelConfig, shape: StepShape, steps: int, warmup: int
) -> list[float]:
    """One block of ours alone: `steps` GRPO steps timed after `warmup`, as the pipeline runs them
    (deterministic ops, params' threads)."""
    set_determinism(params.seed, params.threads)
    step = grpo_stepper(params, model, shape.P, shape.G, shape.m, shape.beta, form=shape.form)
    return [step() for _ in range(warmup + steps)][warmup:]


def trl_block(
    params: Params, model: ModelConfig, shape: StepShape, steps: int, warmup: int, generation_batch: int
) -> list[float]:
    """One block of TRL's GRPOTrainer alone: `steps` optimizer steps timed after `warmup`, its
    `generate` drawing `generation_batch` completions a call."""
    peers.as_a_user_runs(params.threads, params.seed)
    P, G, m, beta, form = shape
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
    params: Params, model: ModelConfig, shape: StepShape, steps: int, batches: tuple[int, ...]
) -> dict:
    """Ours against TRL's GRPOTrainer at its best on one GRPO-step workload in `form`: every block
    alone in a fresh process, ABAB over TRL's generation `batches` (`fair.compare`)."""
    args = (params, model, shape, steps, WARMUP)
    peer = {b: fair.alone(trl_block, *args, b) for b in batches}
    return {
        "prompts": shape.form,
        **fair.compare(fair.alone(ours_grpo_block, *args), peer, "generation_batch"),
    }


def bench(params: Params, steps: int = 30, peer: bool = False) -> dict:
    """One GRPO step (sample 16 prompts x G = 8, score, one update) on a default-size model with
    4-token answers, at beta = 0 (no reference forward) and beta = 0.04; with `peer`, TRL's
    GRPOTrainer on a GPT-2 of the same shape, each side at its best and alone (`grpo_vs_trl`), for
    both prompt forms. Median seconds per step, and our share of the fp32 GEMM limit at the step's
    batch (128 rows)."""
    P, G, m = 16, 8, 4
    if peer:
        peers.require()
    out: dict = {}
    for beta in (0.0, 0.04):
        row: dict = {"step_seconds": fair.spread(ours_alone(params, params.model, P, G, m, beta, steps))}
        work, limit = grpo_step_work(params, P, G, m, beta)
        row["share_of_gemm_limit"] = round(work / row["step_seconds"]["median"] / limit, 3)
        if peer:
            batches = trl_generation_batches(P, G)
            row["vs_trl"] = {
                form: grpo_vs_trl(params, params.model, StepShape(P, G, m, beta, form), steps, batches)
                for form in fair.FORMS
            }
        out[f"beta_{beta}"] = row
    out.update(
        {
            "prompts": P,
            "group_size": G,
            "response_tokens": m,
            "gemm_limit_flops_per_second": round(limit),
            **TARGETS["grpo_step"],
        }
    )
    if peer:
        out["trl"] = peers.versions()
        out["peer_method"] = fair.METHOD
    else:
        out["trl"] = peers.note(False)
    return out
