"""Stage `passk`: n samples per held-out problem from every chain of the SFT start (and of its
contrast) and from every seed of every variant trained from it; per-problem correct counts, pass@k
curves and the comparison with SFT, each variant seed against its own chain's SFT policy.

A problem's count of right samples out of n is drawn from its exact law, Binomial(n, p), with p the
chance one sample is right (`rlvr.rollout.binomial_counts`): the same distribution as sampling n
responses and checking each, for one forward pass per model. Models are scored side by side in the
stage's seed workers (`common.seed_results`), each at one torch thread, so a model's counts never
depend on how many workers ran.

Every model is scored at the first of `passk.temperatures`, the claims' own; the SFT start and the
headline variants also at the others and with one greedy sample per problem. Each temperature's
draws start from the same seed, so adding a temperature leaves the others' counts as they were."""

from __future__ import annotations

from tqdm import tqdm

from rlvr.chain import correct_out_of
from rlvr.determinism import thread_budget
from rlvr.io.files import svg_beside, write_json, write_tsv
from rlvr.narrowing import greedy_summary, temperature_key
from rlvr.passk import unit_key
from rlvr.passk_summary import summarise_counts
from rlvr.pipeline import checkpoint
from rlvr.pipeline.paths import PassKPaths, unit_name
from rlvr.pipeline.records import write_metrics
from rlvr.pipeline.rundata import read_run_data
from rlvr.pipeline.seeds import run_name, tracked
from rlvr.pipeline.stageparams import StageParams
from rlvr.pipeline.workers import seed_results
from rlvr.report import narrowing, passkplots
from rlvr.report.labels import sft_run_label
from rlvr.rollout import Sampling, correct_counts
from rlvr.tasks import Problem, problems_of
from rlvr.tokenizer import Tokenizer

# What DVC shows of it (`dvc exp show`), in the headline vocabulary (records.NAMES): pass@1 and pass@k
# at the largest k of the SFT start and of `{end}`, the first scored variant of passk.headline
# (chapter B's controlled end); every variant's numbers stay in the results
HEADLINE = {
    "acc_start": "sft.pass_at_1",
    "passk_start": "sft.pass_at_n",
    "acc_end": "variants.{end}.pass_at_1_rl",
    "passk_end": "variants.{end}.pass_at_n_rl",
}


def score(
    index: int,
    models: list[tuple],
    problems: list[Problem],
    max_new_tokens: int,
    temperatures: list[float],
    seed: int,
    device: str,
) -> dict:
    """Correct samples out of n per problem for models[index] (name, checkpoint (its carried bytes),
    run, hash, n, every temperature or the first only), drawn on `device` from their exact law:
    {"counts": at the first temperature} and, for a model scored at every one, {"by_temperature":
    {key: counts}, "greedy": 0/1 per problem}. Each temperature's generator starts at the pipeline's seed."""
    _, path, ckpt_run, ckpt_hash, n, every = models[index]
    tok = Tokenizer()
    model = checkpoint.load(path, tok, ckpt_run, ckpt_hash, device)

    def at(t: float) -> list[int]:
        return correct_out_of(model, problems, n, Sampling(tok, max_new_tokens, t), seed)

    out: dict = {"counts": at(temperatures[0])}
    if every:
        out["by_temperature"] = {temperature_key(t): at(t) for t in temperatures[1:]}
        out["greedy"] = correct_counts(model, problems, 1, Sampling(tok, max_new_tokens, 0.0), None).tolist()
    return out


TEMPERATURE_KEYS = {
    "start": ("pass_at_1", "pass_at_n", "never_solved", "ci95", "per_seed", "seeds"),
    "variant": (
        "pass_at_1_rl",
        "pass_at_n_rl",
        "never_solved_rl",
        "per_seed",
        "seeds",
        "crossover_k",
        "crossover_k_ci95",
        "crossover_per_chain",
        "chains",
        "chains_crossing",
    ),
}  # what passk.json keeps of each extra temperature's summary: the table's and the figure's numbers


def temperature_results(
    scored: dict[str, dict], chains: dict, samples: dict, reps: dict, cfg, k_max: int, seed: int
) -> tuple[dict, dict, dict]:
    """The SFT start's and the headline variants' numbers at every temperature after the first, and
    greedy: (metrics by temperature key, curves by temperature key, greedy pass@1 by model). scored:
    model key -> `score`'s result; chains, samples, reps: as for `summarise_counts`."""
    names = [m for m in chains if cfg.every_temperature(m)]
    metrics, curves = {}, {}
    for t in cfg.temperatures[1:]:
        key = temperature_key(t)
        counts = {u: r["by_temperature"][key] for u, r in scored.items() if "by_temperature" in r}
        m, c = summarise_counts(
            counts, {v: chains[v] for v in names}, samples, cfg.ks, cfg.bootstrap, seed, None, reps, k_max
        )
        metrics[key] = {
            "temperature": t,
            "sft": {k: m["sft"][k] for k in TEMPERATURE_KEYS["start"]},
            "variants": {v: {k: e[k] for k in TEMPERATURE_KEYS["variant"]} for v, e in m["variants"].items()},
        }
        curves[key] = c
    greedy = {u: r["greedy"] for u, r in scored.items() if "greedy" in r}
    return metrics, curves, {v: greedy_summary(greedy, v, chains[v], reps.get(v, 1)) for v in names}


def key_metrics(metrics: dict, contrast: str | None, n: int) -> dict[str, dict]:
    """Model -> the numbers its MLflow run shows (chain means), each with its 95% interval over
    chains as `<name>_ci95_lo` / `_hi`: pass@1, pass@n (`pass_at_64`), problems never solved in n and,
    for a variant, the k where SFT catches up (its interval: the bootstrap's)."""
    from rlvr.stats import mean_ci

    names = {"pass_at_1": "pass_at_1", "pass_at_n": f"pass_at_{n}", "never_solved": "never_solved"}
    out = {}
    starts = [("sft", metrics["sft"])] + ([] if contrast is None else [(contrast, metrics["contrast"])])
    for model, m in starts:
        out[model] = {}
        for key, name in names.items():
            out[model][name] = m[key]
            lo, hi = m["ci95"].get(key) or (None, None)
            out[model] |= {} if lo is None else {f"{name}_ci95_lo": lo, f"{name}_ci95_hi": hi}
    for v, m in metrics["variants"].items():
        out[v] = {}
        for key, name in names.items():
            _, lo, hi = mean_ci(m["per_seed"][f"{key}_rl"])  # over chains, as the report does
            out[v][name] = m[f"{key}_rl"]
            out[v] |= {} if lo is None else {f"{name}_ci95_lo": lo, f"{name}_ci95_hi": hi}
        out[v]["crossover_k"] = m["crossover_k"]  # of the chain-mean curves (k_max + 1: none)
        lo, hi = m.get("crossover_k_ci95") or (None, None)
        out[v] |= {} if lo is None else {"crossover_k_ci95_lo": lo, "crossover_k_ci95_hi": hi}
    return out


def headline_names(end: str | None) -> dict[str, str]:
    """HEADLINE with its controlled-end variant `end` filled in (None: the start's numbers only)."""
    return {k: v.format(end=end) for k, v in HEADLINE.items() if end is not None or "{end}" not in v}


def run(params: StageParams, paths: PassKPaths, progress: bool = True) -> dict:
    cfg = params.passk
    variants = params.entries("variants")  # the variants it scores: chapter B's
    scored_starts = [("sft", cfg.sft, paths.start)]  # (model name, SFT run, its paths)
    if cfg.contrast is not None:
        scored_starts.append((cfg.contrast, cfg.contrast, paths.contrast))
    chains = {
        **{name: params.sft_run(run).seeds for name, run, _ in scored_starts},
        **{v: params.variant(v).seeds for v in variants},
    }
    reps = {v: params.variant(v).grpo_seeds for v in variants}
    samples = {name: cfg.samples(name) for name in chains}
    k_max = max(cfg.ks)
    task_name = params.sft_run(cfg.sft).task
    task = params.task(task_name)
    problems = problems_of(read_run_data(paths.start.data).heldout, task_name)
    models = [
        (
            unit_key(name, s),
            checkpoint.carried(start.checkpoint(s)),
            f"{run_name('sft', run)}/seed{s}",
            params.hash_of("sft", run),
            samples[name],
            cfg.every_temperature(name),
        )
        for name, run, start in scored_starts
        for s in chains[name]
    ]
    models += [
        (
            unit_key(v, s, r),
            checkpoint.carried(paths.variant_checkpoint(v, s, r)),
            f"{run_name('grpo', v)}/{unit_name(s, r)}",
            params.hash_of("grpo", v),
            samples[v],
            cfg.every_temperature(v),
        )
        for v in variants
        for s in chains[v]
        for r in range(reps[v])
    ]
    tok = Tokenizer()
    for _, path, ckpt_run, ckpt_hash, *_ in models:  # fail before any scoring if one is not the one
        checkpoint.load(path, tok, ckpt_run, ckpt_hash)
    args = (models, problems, task.max_new_tokens, cfg.temperatures, params.seed, params.device)
    workers = thread_budget(params.threads)
    with (
        seed_results(score, list(range(len(models))), args, workers, params.device) as results,
        tracked(params, {"task": task_name}, start=results.started) as mlrun,
    ):
        bar = tqdm(
            zip(models, results, strict=True),
            total=len(models),
            desc="passk",
            unit="model",
            disable=not progress,
        )
        scored = {name: r for (name, *_), r in bar}  # runs the workers to their end
        counts = {name: r["counts"] for name, r in scored.items()}
        metrics, curves = summarise_counts(
            counts, chains, samples, cfg.ks, cfg.bootstrap, params.seed, cfg.contrast, reps, k_max
        )
        by_t, curves_by_t, greedy = temperature_results(
            scored, chains, samples, reps, cfg, k_max, params.seed
        )
        metrics.update(temperatures=cfg.temperatures, by_temperature=by_t, greedy=greedy)
        metrics.update(sft_run=cfg.sft, contrast_run=cfg.contrast)  # the starts `sft`, `contrast` score
        metrics.update(mlflow_run_id=mlrun.run_id, made=mlrun.made, params_hash=params.hash)
        write_json(
            paths.counts,
            {
                "n": cfg.n,
                "n_by_model": {m[0]: m[4] for m in models},
                "k_max": k_max,
                "problems": [p.prompt for p in problems],
                "counts": counts,  # at temperatures[0], the claims' own
                "temperatures": cfg.temperatures,
                "by_temperature": {  # the other temperatures: the start and the headline variants
                    key: {u: r["by_temperature"][key] for u, r in scored.items() if "by_temperature" in r}
                    for key in by_t
                },
                "greedy": {u: r["greedy"] for u, r in scored.items() if "greedy" in r},  # 0/1 per problem
            },
        )
        end = next((v for v in cfg.headline if v in variants), None)
        write_metrics(paths.metrics, metrics, headline_names(end))
        for model, rows in curves.items():
            write_tsv(paths.curves / f"{model}.tsv", rows)
        labels = {name: sft_run_label(run, params.sft_run(run)) for name, run, _ in scored_starts}
        figures = [
            passkplots.passk_curves(
                curves,
                k_max,
                cfg.contrast,
                paths.figure_curves,
                {v: m["crossover_per_chain"] for v, m in metrics["variants"].items()},
                labels,
                problems=len(problems),
            ),
            passkplots.passk_scatter(counts, chains, samples, k_max, paths.figure_scatter, labels),
            passkplots.passk_solve_rates(
                counts, chains, samples, cfg.contrast, paths.figure_solve_rates, labels, k_max
            ),
            narrowing.passk_by_temperature(
                {
                    temperature_key(cfg.temperatures[0]): (curves, metrics),
                    **{key: (curves_by_t[key], by_t[key]) for key in by_t},
                },
                [v for v in variants if cfg.every_temperature(v)],
                k_max,
                paths.figure_temperatures,
            ),
        ]
        for model, numbers in key_metrics(metrics, cfg.contrast, k_max).items():
            variant = {"variant": model} if model in metrics["variants"] else {}
            tags = {"model": model, **variant}
            with mlrun.child(f"passk/{model}", tags, {**mlrun.params, "model": model, **variant}) as child:
                child.log_steps({"pass_at_k": [(r["k"], r["pass_at_k"]) for r in curves[model]]})
                child.log_metrics(numbers)
        for f in figures:
            mlrun.log_artifact(f)
            mlrun.log_artifact(svg_beside(f))
    return {"sft_pass_at_1": metrics["sft"]["pass_at_1"], "variants": len(variants)}
