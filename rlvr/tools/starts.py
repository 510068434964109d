"""`rlvr starts` (a command, not a DVC stage): chapter B's candidate SFT starts side by side, the
SFT side first, then GRPO.

Chapter B's start can be made several ways that all reach about the chapter's pass@1: an
under-trained policy on true answers (the pipeline's start, by this comparison), labels with slips
on some addition facts, uniform label noise. They differ in how the per-problem solve rates spread,
so in pass@64 and in how many problems 64 samples never solve, and perhaps in whether RL narrows
them. This command trains every
candidate over its chains in-process (seed workers, one torch thread each, so a chain's numbers are
the pipeline's own for a run it shares), scores each chain's SFT policy on the validation problems,
names the candidate whose SFT-side facts come closest to the chapter's (never-solved count, then
pass@64) before any GRPO is run, then trains `starts.variant` from every chain and scores it. Every
chain stops at its run's target, as the SFT stage does, and every score is on the task's validation
split: nothing here looks at the held-out problems the claims are measured on. Every model is
scored at each of `passk.temperatures` (the first the claims' own), each from the same seed, so the
narrowing map (rlvr.report.narrowing) can be drawn from the record. Not a
DVC stage: it takes several minutes and decides an input, so it runs on demand; its results
(`reports/starts/`: a JSON file and a figure) are committed and the report shows them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rlvr.chain import correct_out_of, grpo_run, start
from rlvr.configs import GRPOConfig, SFTConfig, TaskConfig
from rlvr.determinism import check_device, thread_budget
from rlvr.io.files import write_json
from rlvr.io.params import Params
from rlvr.model import TinyLM
from rlvr.narrowing import temperature_key
from rlvr.noise import sft_rows
from rlvr.optim import diverged_at
from rlvr.passk import pass_at_k_curve
from rlvr.passk_summary import summarise_counts
from rlvr.pipeline.paths import STARTS
from rlvr.pipeline.workers import seed_results
from rlvr.report import passkplots
from rlvr.report.labels import sft_run_label
from rlvr.rollout import Sampling
from rlvr.sft import encode_sft
from rlvr.tasks import Problem, problem_rows, problems_of, split
from rlvr.tokenizer import Tokenizer

FIGURE = STARTS.parent / "starts-passk.png"


def candidate_config(params: Params, name: str) -> SFTConfig:
    """A candidate's SFT settings: a pipeline run's, or one of `starts.runs`."""
    return params.starts.runs[name] if name in params.starts.runs else params.sft_run(name)


def recipe_of(params: Params, run: str) -> str | None:
    """The candidate whose training recipe the SFT run `run` shares (every setting but its chains
    and warm-up name), or None: the pipeline's start may train a candidate's recipe on other chains."""
    key = lambda c: {k: v for k, v in asdict(c).items() if k not in ("seeds", "warmup")}  # noqa: E731
    mine = key(params.sft_run(run))
    return next((n for n in params.starts.candidates if key(candidate_config(params, n)) == mine), None)


def candidate_labels(params: Params, names) -> dict[str, str]:
    """Each candidate as the figure names it: its run and how that run makes its start (params')."""
    return {name: sft_run_label(name, candidate_config(params, name)) for name in names}


@dataclass(frozen=True)
class Scoring:
    """How every model of the comparison is scored: n samples of each `held` problem (the validation
    problems) at each temperature, each temperature's generator starting at `seed`."""

    held: list[Problem]
    n: int
    task: TaskConfig
    temperatures: list[float]
    seed: int

    def counts(self, model: TinyLM) -> dict:
        """The model's correct counts out of n, drawn from their exact law: {"counts": at the first
        temperature, "by_temperature": {key: counts} at the others}. Adding a temperature leaves the
        others' counts as they were."""
        tok = Tokenizer()

        def at(t: float) -> list[int]:
            how = Sampling(tok, self.task.max_new_tokens, t)
            return correct_out_of(model, self.held, self.n, how, self.seed)

        return {
            "counts": at(self.temperatures[0]),
            "by_temperature": {temperature_key(t): at(t) for t in self.temperatures[1:]},
        }


def train_chain(seed: int, cfg: SFTConfig, model_cfg, data: tuple, scoring: Scoring, device: str) -> dict:
    """Chain `seed` of one candidate on `device`: its start (`rlvr.chain.start`: the clean epochs
    then its epochs, from a model initialised under the seed on the CPU, stopped at its target on
    the validation problems, drawn again while its cap comes first), the SFT policy's correct counts
    (`scoring`), then the SFT weights (GRPO is trained from them in a second pass)."""
    model = start(seed, cfg, model_cfg, data, scoring.held, 0.0, device).model
    return {**scoring.counts(model), "state": model.state_dict(), "model_cfg": model_cfg}


def train_grpo_chain(
    seed: int, starts: dict, cfg: GRPOConfig, train: list[Problem], scoring: Scoring, device: str
) -> dict:
    """GRPO seed 0 of chain `seed` on `device` from its SFT weights (`starts`: seed -> the chain's
    result), `rlvr.chain.grpo_run` as the GRPO stage trains it; its correct counts (`scoring`)."""
    tok = Tokenizer()
    policy = TinyLM(starts[seed]["model_cfg"], len(tok))
    policy.load_state_dict(starts[seed]["state"])
    policy.to(device).eval()
    held = scoring.held  # validation problems: no test problem is seen
    grpo_run(policy, cfg, (train, held, held), scoring.task.max_new_tokens, seed, 0, device)
    return scoring.counts(policy)


def sft_side_choice(sft: dict[str, dict], never_target: float, pass_target: float) -> str:
    """The candidate whose chain-mean never-solved count comes closest to the chapter's, ties broken
    by pass@64: the only facts a start is chosen by (GRPO's outcome is never looked at)."""
    return min(
        sft,
        key=lambda c: (abs(sft[c]["never_solved"] - never_target), abs(sft[c]["pass_at_n"] - pass_target)),
    )


def run_starts(params: Params, out: Path = STARTS, figure: Path = FIGURE, progress: bool = True) -> dict:
    cfg = params.starts
    variant = params.variant(cfg.variant)
    task_name = variant.task
    task = params.task(task_name)
    n = params.passk.n_others  # the chapter's 64: the facts a start is chosen by are 64-sample ones
    temperatures = params.passk.temperatures  # the first decides the start; the map reads every one
    train_split, _, val_split = split(task_name, task.heldout, params.seed, task.validation)
    held = problems_of(problem_rows(val_split), task_name)  # validation: never the test problems
    check_device(params.device)  # a missing GPU is refused before any training
    workers, device = thread_budget(params.threads), params.device
    tok = Tokenizer()
    scoring = Scoring(held, n, task, temperatures, params.seed)
    results = {}
    for name in cfg.candidates:  # the SFT side of every candidate first
        c = candidate_config(params, name)
        rows = sft_rows(train_split, c.noise, c.repeats, params.seed)
        tokens, mask = encode_sft(rows, tok)
        data = (tokens, mask, encode_sft(rows, tok, field="answer"))  # noisy, then true answers
        args = (c, c.model or params.model, data, scoring, device)
        where = f"starts.runs.{name}" if name in dict.keys(cfg.runs) else f"sft.{name}"
        with diverged_at(where), seed_results(train_chain, c.seeds, args, workers, device) as chains:
            results[name] = {
                "seeds": c.seeds,
                "train": problems_of(rows, task_name),  # GRPO's prompts
                "chains": dict(zip(c.seeds, chains, strict=True)),
            }
        if progress:
            print(f"starts: {name} SFT chains done", flush=True)
    sft_side = {name: sft_summary(r, n, params) for name, r in results.items()}
    chosen = sft_side_choice(sft_side, cfg.target_never_solved, cfg.target_pass_at_n)
    for name, r in results.items():  # then GRPO from every chain of every candidate
        seeds = [s for s in cfg.chains if s in r["seeds"]]
        args = (r["chains"], variant, r["train"], scoring, device)
        with (
            diverged_at(f"variants.{cfg.variant}"),
            seed_results(train_grpo_chain, seeds, args, workers, device) as grpo,
        ):
            scored = dict(zip(seeds, grpo, strict=True))
        r["grpo"] = {s: g["counts"] for s, g in scored.items()}
        r["grpo_by_temperature"] = {s: g["by_temperature"] for s, g in scored.items()}
        if progress:
            print(f"starts: {name} GRPO seeds done", flush=True)
    summary = {
        "made": made(),
        "variant": cfg.variant,
        "n": n,
        "temperatures": temperatures,  # "counts" hold the first's; "counts_by_temperature" the others'
        "problems": len(held),
        "candidates": cfg.candidates,
        "targets": {"never_solved": cfg.target_never_solved, "pass_at_n": cfg.target_pass_at_n},
        "sft_side_choice": chosen,
        "pipeline_start": params.passk.sft,
        "pipeline_recipe": recipe_of(params, params.passk.sft),
        "rule": "the candidate whose chain-mean never-solved count (then pass@64) "
        "is closest to the chapter's, "
        "decided on the SFT side before any GRPO runs",
        "starts": {name: comparison(r, n, params) for name, r in results.items()},
    }
    write_json(out, summary)
    passkplots.starts_passk(
        {name: _curves(r, n) for name, r in results.items()},
        n,
        chosen,
        figure,
        candidate_labels(params, results),
        problems=len(held),
    )
    return {"sft_side_choice": chosen, "pipeline_start": params.passk.sft, "written": [str(out), str(figure)]}


def rescore_starts(params: Params, out: Path = STARTS, figure: Path = FIGURE) -> dict:
    """Recompute every summary of a written starts.json from the correct counts it stores (no
    training): for when a statistic's definition changes. The record keeps who made the counts and
    adds who rescored them."""
    from rlvr.fields import UserError

    if not out.is_file():
        raise UserError(f"{out}: not found; run `rlvr starts` first")
    old = json.loads(out.read_text())
    n = old["n"]
    results = {
        name: _from_counts(entry["counts"], entry.get("counts_by_temperature", {}))
        for name, entry in old["starts"].items()
    }
    summary = {
        **old,
        "made": old["made"].split("; rescored")[0]
        + "; rescored from its counts by "
        + made().replace("`rlvr starts`", "`rlvr starts --rescore`"),
        "pipeline_start": params.passk.sft,  # today's, as the report reads it
        "pipeline_recipe": recipe_of(params, params.passk.sft),
        "starts": {name: comparison(r, n, params) for name, r in results.items()},
    }
    write_json(out, summary)
    passkplots.starts_passk(
        {name: _curves(r, n) for name, r in results.items()},
        n,
        old["sft_side_choice"],
        figure,
        candidate_labels(params, results),
        problems=old["problems"],
    )
    return {"sft_side_choice": old["sft_side_choice"], "rescored": [str(out), str(figure)]}


def _from_counts(counts: dict[str, list[int]], by_temperature: dict[str, dict] | None = None) -> dict:
    """The inverse of `_counts` and `_counts_by_temperature`: "sft/seed{s}" and "grpo/seed{s}" back to
    chains and GRPO seeds (a record made before temperatures has none but the first's)."""
    seed = lambda key: int(key.rsplit("/seed", 1)[1])  # noqa: E731
    by_temperature = by_temperature or {}
    chains = {
        seed(k): {"counts": c, "by_temperature": {t: by_temperature[t][k] for t in by_temperature}}
        for k, c in counts.items()
        if k.startswith("sft/")
    }
    grpo = {seed(k): c for k, c in counts.items() if k.startswith("grpo/")}
    grpo_t = {
        seed(k): {t: by_temperature[t][k] for t in by_temperature} for k in counts if k.startswith("grpo/")
    }
    return {
        "seeds": sorted(chains),
        "chains": dict(sorted(chains.items())),
        "grpo": dict(sorted(grpo.items())),
        "grpo_by_temperature": dict(sorted(grpo_t.items())),
    }


def made() -> str:
    """Where and when: the command, commit, date and CPU, stated once beside the results."""
    import datetime

    from rlvr.io.gitinfo import code_version
    from rlvr.io.system import cpu_model

    code = code_version(Path.cwd())  # the one definition of "the code differs from its commit"
    changes = " with uncommitted changes" if code["dirty"] else ""
    return (
        f"`rlvr starts` at commit {code['commit'][:10]}{changes}, "
        f"{datetime.date.today().isoformat()}, {cpu_model()}"
    )


def _counts(r: dict, with_grpo: bool) -> tuple[dict, dict]:
    """A candidate's counts in `summarise_counts`' layout: sft/seed{s} (and grpo/seed{s})."""
    counts = {f"sft/seed{s}": ch["counts"] for s, ch in r["chains"].items()}
    chains = {"sft": r["seeds"]}
    if with_grpo:
        counts.update({f"grpo/seed{s}": c for s, c in r["grpo"].items()})
        chains["grpo"] = list(r["grpo"])
    return counts, chains


def _counts_by_temperature(r: dict) -> dict[str, dict]:
    """A candidate's counts at every temperature after the first, in `_counts`' layout, by key."""
    keys = sorted({t for ch in r["chains"].values() for t in ch.get("by_temperature", {})})
    return {
        t: {
            **{f"sft/seed{s}": ch["by_temperature"][t] for s, ch in r["chains"].items()},
            **{f"grpo/seed{s}": g[t] for s, g in r.get("grpo_by_temperature", {}).items()},
        }
        for t in keys
    }


def sft_summary(r: dict, n: int, params: Params) -> dict:
    counts, chains = _counts(r, with_grpo=False)
    metrics, _ = summarise_counts(counts, chains, n, params.passk.ks, params.passk.bootstrap, params.seed)
    return metrics["sft"]


def comparison(r: dict, n: int, params: Params) -> dict:
    """Per candidate: its SFT chains' pass@1, pass@64 and never-solved, GRPO's from them, the
    crossover k per chain, and the per-problem picture (solved only by SFT, only by GRPO)."""
    counts, chains = _counts(r, with_grpo=True)
    metrics, _ = summarise_counts(counts, chains, n, params.passk.ks, params.passk.bootstrap, params.seed)
    g = metrics["variants"]["grpo"]
    return {
        "sft": metrics["sft"],
        "grpo": {
            k: g[k]
            for k in (
                "pass_at_1_rl",
                "pass_at_n_rl",
                "never_solved_rl",
                "solved_by_base_only",
                "solved_by_rl_only",
            )
        },
        "crossover_k_per_chain": g["crossover_per_chain"],
        "seeds": g["seeds"],
        "per_seed": {k: g["per_seed"][k] for k in ("pass_at_1_rl", "pass_at_n_rl", "never_solved_rl")},
        "counts": counts,
        "counts_by_temperature": _counts_by_temperature(r),
    }


def _curves(r: dict, n: int) -> dict:
    """Chain-mean pass@k at k = 1..n, SFT and GRPO: {"sft": (n,), "grpo": (n,)}."""
    mean = lambda cs: np.mean([pass_at_k_curve(c, n)[1] for c in cs], axis=0)  # noqa: E731
    return {
        "sft": mean([ch["counts"] for ch in r["chains"].values()]),
        "grpo": mean(list(r["grpo"].values())),
    }
