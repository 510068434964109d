"""`rlvr calibrate` (a command, not a DVC stage): the inputs that are chosen, chosen on validation.

Two inputs of the pipeline are choices no chapter states: chapter B's GRPO recipe (learning rate,
prompts per step, step cap) that takes its controlled end from pass@1 0.53 to the chapter's 0.83,
and the hackable verifier's rollout temperature. Each is chosen by a rule declared beforehand in
experiments/calibration.yaml, on calibration chains whose seeds no claim uses, from validation
values only: the GRPO runs stop on validation pass@1 and their cost, KL and path are measured on
the validation problems; the hack's rule reads its SFT start's own samples on its prompts, before
any RL. Every attempt is written to reports/calibration/ (JSON and a figure) and listed in
docs/calibration.md; params.yaml then holds what the rules chose. Chains train side by side in the
seed workers, one torch thread each, as the stages do.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from pathlib import Path
from typing import Any

import torch

from rlvr.chain import PATH_K, start
from rlvr.chain import grpo_run as chain_grpo
from rlvr.configs import GRPOConfig, SFTConfig
from rlvr.determinism import check_device, thread_budget
from rlvr.fields import UserError
from rlvr.io.files import write_json
from rlvr.io.params import Params, read_yaml
from rlvr.noise import sft_rows
from rlvr.optim import diverged_at
from rlvr.pipeline.paths import REPORTS
from rlvr.pipeline.workers import seed_results
from rlvr.rollout import Sampling, sample_scored
from rlvr.seeding import stream_seed
from rlvr.sft import encode_sft
from rlvr.stats import step_cap
from rlvr.tasks import Problem, problem_rows, problems_of, split
from rlvr.tokenizer import Tokenizer
from rlvr.verifiers import digit_counts

PLAN = Path("experiments/calibration.yaml")
OUT = REPORTS / "calibration"


def load_plan(path: Path = PLAN) -> dict:
    """The declared calibration: its two sections, each key present (one line naming what is not)."""
    raw = read_yaml(path)
    need = {
        "grpo_end": (
            "variant",
            "chains",
            "target",
            "budget_prompts",
            "grid",
            "kl_max_nats",
            "matrix_prompts",
            "end_cap_miss",
        ),
        "hack_temperature": ("sft", "chains", "grid", "samples", "min_multi_digit"),
    }
    if not isinstance(raw, dict):
        raise UserError(f"{path}: must be a mapping with sections {', '.join(need)}")
    for section, keys in need.items():
        body = raw.get(section)
        missing = [k for k in keys if not isinstance(body, dict) or k not in body]
        if missing:
            raise UserError(f"{path}: {section} lacks {', '.join(missing)}")
    return raw


def sft_start(seed: int, cfg: SFTConfig, model_cfg, data: tuple, val: list[Problem], device: str) -> dict:
    """Calibration chain `seed`'s start, `rlvr.chain.start` as for a pipeline chain: a fresh model
    under the seed, the run's clean then noisy epochs, stopped at its target on the validation
    problems, drawn again while its step cap comes first."""
    made = start(seed, cfg, model_cfg, data, val, 0.0, device)
    model, stop, draw = made.model, made.stop, made.draws
    return {
        "state": model.state_dict(),
        "model_cfg": model_cfg,
        "start_val": None if stop is None else stop.chosen["value"],
        "reached": None if stop is None else stop.reached,
        "redraws": draw,
    }


def grpo_setting(base: GRPOConfig, lr: float, prompts: int, budget: int, target: float) -> GRPOConfig:
    """One grid setting: the variant's config at this lr and P, its cap `budget` prompts."""
    return dataclasses.replace(
        base, lr=lr, prompts_per_step=prompts, steps=budget // prompts, target=target, eval_every=budget
    )


def grpo_run(
    index: int, units: list[tuple], starts: dict, train: list[Problem], val: list[Problem], max_new: int
) -> dict:
    """Unit units[index] = (chain, setting index, config): GRPO from the chain's calibration start to
    its controlled end on the validation problems, GRPO seed 0's stream (the grpo stage's). Its
    cost, KL and path are validation values; nothing here sees a test problem."""
    from rlvr.model import TinyLM

    chain, setting, cfg = units[index]
    tok = Tokenizer()
    policy = TinyLM(starts[chain]["model_cfg"], len(tok))
    policy.load_state_dict(starts[chain]["state"])
    policy.eval()
    # validation as the held-out problems too: its cost, KL and path are validation values
    curve, stop = chain_grpo(policy, cfg, (train, val, val), max_new, chain, 0, "cpu")
    steps = stop.chosen["step"]
    return {
        "chain": chain,
        "setting": setting,
        "reached": stop.reached,
        "steps": steps,
        "rollouts": steps * cfg.prompts_per_step * cfg.group_size,
        "val_at_stop": stop.chosen["value"],
        "kl_exact_nats": curve[-1]["eval_kl_exact_nats"],
        "path": [{k: c[k] for k in ("step", "value", f"val_pass_at_{PATH_K}")} for c in stop.checks],
    }


def choose_setting(settings: list[dict], runs: list[dict], kl_max: float) -> dict:
    """The declared rule (experiments/calibration.yaml): every setting's runs that reached the target
    without running away; the setting where all did with the fewest median rollouts to it (ties to
    the lower lr), else the one with the most such runs, then the fewest rollouts."""
    scored = []
    for i, s in enumerate(settings):
        mine = [r for r in runs if r["setting"] == i]
        good = [r for r in mine if r["reached"] and r["kl_exact_nats"] <= kl_max]
        cost = statistics.median([r["rollouts"] for r in good]) if good else float("inf")
        scored.append({**s, "runs": len(mine), "good": len(good), "median_rollouts": cost})
    best = min(scored, key=lambda s: (-(s["good"] == s["runs"]), -s["good"], s["median_rollouts"], s["lr"]))
    return {"chosen": best, "settings": scored}


def end_cap(runs: list[dict], setting: int, miss: float) -> int:
    """The controlled end's step cap (experiments/calibration.yaml `end_cap_miss`): one more run at
    the chosen `setting` misses it with probability `miss`, by its calibration runs' steps to the
    end (rlvr.stats.step_cap). One line where fewer than two of them got there."""
    steps = [r["steps"] for r in runs if r["setting"] == setting and r["reached"]]
    if len(steps) < 2:
        got = f"{len(steps)} runs of the chosen setting got to the end"
        raise UserError(f"calibration: {got}; a cap needs two")
    return step_cap(steps, miss)


def calibration_starts(
    params: Params, run: str, rows: list[dict], val: list, chains: list[int], workers: int, device: str
) -> dict:
    """Chain -> its start of SFT run `run` (`sft_start`, to the run's target on `val`), each chain
    trained from `rows` in the seed workers."""
    run_cfg, tok = params.sft_run(run), Tokenizer()
    data = (*encode_sft(rows, tok), encode_sft(rows, tok, field="answer"))
    args = (run_cfg, run_cfg.model or params.model, data, val, device)
    with diverged_at(f"sft.{run}"), seed_results(sft_start, chains, args, workers, device) as out:
        return dict(zip(chains, out, strict=True))


def calibrate_grpo(params: Params, plan: dict, workers: int, device: str, progress: bool) -> dict:
    spec = plan["grpo_end"]
    base = params.variant(spec["variant"])
    run_cfg = params.sft_run(base.sft)
    task = params.task(base.task)
    train_split, _, val_split = split(base.task, task.heldout, params.seed, task.validation)
    val = problems_of(problem_rows(val_split), base.task)
    rows = sft_rows(train_split, run_cfg.noise, run_cfg.repeats, params.seed)
    starts = calibration_starts(params, base.sft, rows, val, spec["chains"], workers, device)
    if progress:
        print(f"calibrate: {len(starts)} calibration starts of sft.{base.sft}", flush=True)
    grid = spec["grid"]
    settings = [
        {"lr": lr, "prompts_per_step": p} for lr, p in itertools.product(grid["lr"], grid["prompts_per_step"])
    ]
    cfgs = [
        grpo_setting(base, s["lr"], s["prompts_per_step"], spec["budget_prompts"], spec["target"])
        for s in settings
    ]
    units = [(c, i, cfgs[i]) for i in range(len(settings)) for c in spec["chains"]]
    train = problems_of(rows, base.task)
    with (
        diverged_at(f"variants.{spec['variant']}"),
        seed_results(
            grpo_run,
            list(range(len(units))),
            (units, starts, train, val, task.max_new_tokens),
            workers,
            device,
        ) as out,
    ):
        runs = list(out)
    choice = choose_setting(settings, runs, spec["kl_max_nats"])
    chosen = choice["chosen"]
    at = settings.index({"lr": chosen["lr"], "prompts_per_step": chosen["prompts_per_step"]})
    return {
        "declared": spec,
        "starts": {
            c: {k: v for k, v in s.items() if k not in ("state", "model_cfg")} for c, s in starts.items()
        },
        "runs": runs,
        **choice,
        "params": {
            "lr": chosen["lr"],
            "prompts_per_step": chosen["prompts_per_step"],
            "steps": end_cap(runs, at, spec["end_cap_miss"]),
            "matrix_steps": spec["matrix_prompts"] // chosen["prompts_per_step"],
        },
    }


def multi_digit_share(
    index: int, units: list[tuple], starts: dict, prompts: list[Problem], spec: dict
) -> float:
    """The share of the SFT start's sampled responses that hold two or more digits at one
    temperature: units[index] = (chain, T), `spec["samples"]` responses a prompt, the hack's cap."""
    from rlvr.model import TinyLM

    chain, temperature, max_new = units[index]
    tok = Tokenizer()
    model = TinyLM(starts[chain]["model_cfg"], len(tok))
    model.load_state_dict(starts[chain]["state"])
    model.eval()
    gen = torch.Generator().manual_seed(stream_seed(chain, "hack-temperature", 0))
    with torch.no_grad():
        roll, _ = sample_scored(model, prompts, spec["samples"], Sampling(tok, max_new, temperature), gen)
    total, _ = digit_counts(roll.response, tok)  # (P*n,)
    return float((total >= 2).double().mean())


def calibrate_hack(params: Params, plan: dict, workers: int, device: str, progress: bool) -> dict:
    spec = plan["hack_temperature"]
    run_cfg = params.sft_run(spec["sft"])
    task = params.task(run_cfg.task)
    train_split, _, _ = split(run_cfg.task, task.heldout, params.seed, task.validation)
    rows = sft_rows(train_split, run_cfg.noise, run_cfg.repeats, params.seed)
    prompts = problems_of(rows, run_cfg.task)  # chapter A has no split: its 55 prompts are its validation
    starts = calibration_starts(params, spec["sft"], rows, prompts, spec["chains"], workers, device)
    units = [(c, t, params.hack.max_new_tokens) for t in spec["grid"] for c in spec["chains"]]
    with seed_results(
        multi_digit_share, list(range(len(units))), (units, starts, prompts, spec), workers, device
    ) as out:
        shares = list(out)
    by_t = {t: statistics.fmean(s for (_, tu, _), s in zip(units, shares) if tu == t) for t in spec["grid"]}
    enough = [t for t in spec["grid"] if by_t[t] >= spec["min_multi_digit"]]
    if progress:
        print(f"calibrate: hack temperature, chain-mean multi-digit share {by_t}", flush=True)
    return {
        "declared": spec,
        "starts": {
            c: {k: v for k, v in s.items() if k not in ("state", "model_cfg")} for c, s in starts.items()
        },
        "per_chain": [
            {"chain": c, "temperature": t, "multi_digit_share": s} for (c, t, _), s in zip(units, shares)
        ],
        "chain_mean": {str(t): v for t, v in by_t.items()},
        "chosen": min(enough) if enough else None,
    }


def run_calibrate(
    params: Params, which: tuple[str, ...], plan_path: Path = PLAN, out: Path = OUT, progress: bool = True
) -> dict[str, Any]:
    """Run the declared calibrations named in `which` ("grpo_end", "hack_temperature"), write each
    record (reports/calibration/<name>.json) and its figure, and return what each chose."""
    from rlvr.report import plots
    from rlvr.tools.starts import made

    plan = load_plan(plan_path)
    check_device(params.device)
    workers, device = thread_budget(params.threads), params.device
    jobs = {"grpo_end": calibrate_grpo, "hack_temperature": calibrate_hack}
    chosen = {}
    for name in which:
        record = {
            "made": made().replace("`rlvr starts`", "`rlvr calibrate`"),
            **jobs[name](params, plan, workers, device, progress),
        }
        write_json(out / f"{name}.json", record)
        if name == "grpo_end":
            plots.calibration_paths(record, out / "grpo-end.png")
        chosen[name] = record.get("params", record.get("chosen"))
    return chosen
