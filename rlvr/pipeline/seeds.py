"""What every stage does around its library calls: its MLflow run, and each seed's nested run,
curves and checkpoint, written by the stage process as the seeds' results arrive from its workers
(`rlvr.pipeline.workers`). Only the stage process writes files and logs to MLflow, so a worker left
behind by a killed stage never touches the outputs. A seed's result carries the wall-clock start and
end of its training, so that its MLflow run, made afterwards, spans the training and not the logging.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from rlvr.io.files import md5, write_tsv
from rlvr.pipeline.curves import split_curve
from rlvr.pipeline.paths import model_artifact, unit_name
from rlvr.pipeline.records import stable_row
from rlvr.pipeline.stageparams import StageParams
from rlvr.pipeline.tracking import Run, stage_run, trl_named
from rlvr.pipeline.workers import SeedResult


def run_name(stage: str, key: str | None) -> str:
    """`sft@two_digit`, or `passk` for a stage without instances (DVC's own stage names)."""
    return f"{stage}@{key}" if key is not None else stage


@contextmanager
def tracked(
    params: StageParams, tags: dict, extra: dict | None = None, start: float | None = None
) -> Iterator[Run]:
    """The stage's MLflow run. Its params: the settings it runs with (`params.logged`, and `extra`);
    its artifact `params.json` and tag `params.raw_hash`: the params.yaml keys DVC reruns it for,
    and their hash; its dataset inputs: the data files it reads (rows for training, held-out
    problems for evaluation). `start`: when its work began, if before the run opens
    (`Seeds.started`)."""
    logged = {**params.logged, **(extra or {})}
    with stage_run(params.run, logged, tags, params.hash, params.declared, start) as run:
        run.log_inputs([(d, role) for d, role in params.inputs if d.is_file()])
        yield run


def write_curves(curve_path, eval_path, curve: list[dict]) -> list:
    """A seed's curve as two tables with no empty cells: every training step, every evaluation."""
    train, evals = split_curve([stable_row(r) for r in curve])  # timings: MLflow only (records.py)
    return [write_tsv(curve_path, train), write_tsv(eval_path, evals)]


def keep_policy(child: Run, model, tok, result: SeedResult, paths, key: tuple, unit: str, config_hash: str):
    """A trained seed's policy kept: `model` takes its state, and its checkpoint, step curve and eval
    curve (where `paths` puts unit `key`'s) are written and logged to the seed's MLflow run `child`:
    the policy as its logged model (`log_policy`), the curves as artifacts."""
    from rlvr.pipeline import checkpoint  # here, not at the top: stages without checkpoints never load torch

    model.load_state_dict(result.state)
    log_policy(child, model, checkpoint.save(paths.checkpoint(*key), model, tok, unit, config_hash), unit)
    written = write_curves(paths.curve(*key), paths.eval_curve(*key), result.curve)
    if isinstance(result.extra, list) and result.extra:  # a controlled end's checks: its path
        written.append(write_tsv(paths.path_curve(*key), result.extra))
        child.log_steps({"val_acc": [(r["step"], r["value"]) for r in result.extra]})
    for path in written:
        child.log_artifact(path, "seed")


def log_policy(run: Run, model, saved: Path, unit: str) -> str:
    """`model`, just saved to checkpoint `saved` as `unit` (`grpo@dapo/seed3`), as an MLflow logged
    model of `run`, named after the unit and tagged with the DVC copy of the same weights: the
    checkpoint's path, its md5 (what DVC's folder listing records for it) and the DVC artifact
    (dvc.yaml's `artifacts:`) whose folder holds it, where one does."""
    stage, _, seed = unit.partition("/")
    tags = {"dvc.stage": stage, "dvc.path": saved.as_posix(), "checkpoint.md5": md5(saved)}
    if (artifact := model_artifact(stage)) is not None:
        tags["dvc.artifact"] = artifact
    return run.log_model(model.eval(), f"{stage.replace('@', '-')}-{seed}", tags)  # loads as `load` does


SFT_LOGGED = ("loss", "lr")  # what an SFT curve row logs to MLflow (its epoch and phase are in the TSV)


def log_row(run: Run, keys: tuple[str, ...] | None = None) -> Callable[[dict], None]:
    """A per-step callback that logs one curve row (its `step` as MLflow's step): the fields in
    `keys`, or every field but `step`, each under TRL's name where it has one (`trl_named`)."""
    return lambda row: run.log_step(
        row["step"],
        trl_named({k: v for k, v in row.items() if k != "step" and (keys is None or k in keys)}),
    )


def carry_starts(start, seeds: list[int], run: str, config_hash: str, tok) -> tuple[dict, object]:
    """Every chain's SFT checkpoint of run `run` (paths `start`, an SFTPaths) as the bytes its task
    carries (`rlvr.pipeline.checkpoint.carried`), each checked as its task will load it: a missing
    one, or one that is not that run's, is refused in one line before any training. Also returns a
    model of their shape, which the stage loads each trained policy into to save it."""
    from rlvr.pipeline import checkpoint  # here, not at the top: stages without checkpoints never load torch

    starts = {seed: checkpoint.carried(start.checkpoint(seed)) for seed in seeds}
    model = None
    for seed in seeds:
        model = load_start(starts[seed], seed, run, config_hash, tok)
    return starts, model


def load_start(start, seed: int, run: str, config_hash: str, tok, device: str = "cpu"):
    """Chain `seed`'s start, SFT run `run`'s checkpoint (`start`: its file or carried bytes), on
    `device`: refused if it is not that run's seed (its run name and params hash)."""
    from rlvr.pipeline import checkpoint  # here, not at the top: stages without checkpoints never load torch

    return checkpoint.load(start, tok, f"{run_name('sft', run)}/seed{seed}", config_hash, device)


def over_seeds(
    run: Run,
    seeds: list[int] | list[tuple[int, int]],
    results: Iterator[SeedResult],
    name: str,
    tags: dict,
    key_metrics: tuple[str, ...],
    progress: bool = True,
    logged: tuple[str, ...] | None = None,
) -> Iterator[tuple[int, SeedResult, Run]]:
    """Log every seed's result (`seed_results`, in seed order) to its own nested MLflow run, which
    carries the stage's params and tags and its seed, and spans the seed's training: its curve as
    per-step metrics (the fields in `logged`, or all), then the `key_metrics` of its summary. Yields
    (seed, result, the open child run: the stage logs the seed's files to it). A seed may be a GRPO
    unit, (chain, GRPO seed): its run is `{name}/seed3-g1`, tagged with both."""
    bar = tqdm(total=len(seeds), desc=name, unit="seed", disable=not progress)
    for seed, result in zip(seeds, results, strict=True):  # runs the pool to its end
        chain, rep = seed if isinstance(seed, tuple) else (seed, None)
        bar.set_postfix_str(latest(unit_name(chain, rep or 0), result.summary, key_metrics), refresh=False)
        bar.update(1)
        ids = {"seed": chain} if rep is None else {"seed": chain, "grpo_seed": rep}
        with run.child(
            f"{name}/{unit_name(chain, rep or 0)}",
            {**tags, **ids},
            {**run.params, **ids},
            start=result.started,
            end=result.ended,
        ) as child:
            log = log_row(child, logged)
            for row in result.curve:
                log(row)
            child.log_metrics(pick(result.summary, key_metrics))
            yield seed, result, child
    bar.close()


def latest(unit: str, summary: dict, keys: tuple[str, ...], shown: int = 3) -> str:
    """The progress bar's note on the seed just finished: its first few key metrics, e.g.
    "seed3: eval_acc_start 0.52, eval_acc_final 0.84, eval_acc_gain 0.32"."""
    numbers = [(k, v) for k, v in pick(summary, keys).items() if isinstance(v, int | float)][:shown]
    return f"{unit}: " + ", ".join(f"{k} {v:.3g}" for k, v in numbers)


def pick(metrics: dict, keys: tuple[str, ...]) -> dict:
    """The `keys` of a summary that it has (a GRPO run without KL logs no KL maximum)."""
    return {k: metrics[k] for k in keys if k in metrics}


def with_intervals(metrics: dict, keys: tuple[str, ...]) -> dict:
    """What a stage's MLflow run shows: the `keys` of its metrics (means over chains), each with its
    95% interval over chains from `ci95` as `<key>_ci95_lo` and `<key>_ci95_hi` (none for one chain)."""
    out = pick(metrics, keys)
    for k in list(out):
        lo, hi = (metrics.get("ci95") or {}).get(k) or (None, None)
        if lo is not None and hi is not None:
            out[f"{k}_ci95_lo"], out[f"{k}_ci95_hi"] = lo, hi
    return out
