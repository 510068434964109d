"""Stage `data`: each task's train/held-out split and every SFT run's rows with their noisy labels.

Beside each run's two files it records their sha256 (`rlvr.pipeline.rundata`), which every later
stage checks before it reads them.

One process writes every run's files (a second's work each). A run whose rows come out
byte-identical leaves its warm-up and SFT stages cached, so changing one run's noise reruns only
that run downstream. One MLflow run, with a child run per SFT run holding its summary.
"""

from __future__ import annotations

from rlvr.io.files import write_json, write_jsonl
from rlvr.noise import author_solve_rates, sft_rows
from rlvr.pipeline.paths import AllDataPaths, DataPaths
from rlvr.pipeline.rundata import record_digests
from rlvr.pipeline.seeds import pick, tracked
from rlvr.pipeline.stageparams import StageParams, data_run_settings
from rlvr.tasks import problem_rows, split

KEY_METRICS = ("noised_fraction", "author_pass_at_1", "author_pass_at_64")  # each run's, in MLflow


def write_run(params: StageParams, name: str, paths: DataPaths) -> dict:
    """SFT run `name`'s rows and its task's held-out problems; returns their summary."""
    cfg = params.sft_run(name)
    task = params.task(cfg.task)
    train, held, val = split(cfg.task, task.heldout, params.seed, task.validation)
    rows = sft_rows(train, cfg.noise, cfg.repeats, params.seed)
    write_jsonl(paths.rows, rows)
    write_json(
        paths.heldout, {"task": cfg.task, "problems": problem_rows(held), "validation": problem_rows(val)}
    )
    record_digests(paths)  # what every later stage checks before it reads them
    author = author_solve_rates(held or train, cfg.noise, params.seed)  # what a perfect fit would score
    return {
        "rows": len(rows),
        "train_problems": len(train),
        "heldout_problems": len(held),
        "validation_problems": len(val),
        "noised_fraction": sum(r["noised"] for r in rows) / len(rows),
        "author_pass_at_1": sum(author) / len(author),
        "author_pass_at_64": sum(1 - (1 - a) ** 64 for a in author) / len(author),
        "author_never_solved_expected_of_64": sum((1 - a) ** 64 for a in author),
    }


def run(params: StageParams, paths: AllDataPaths, progress: bool = True) -> dict:  # noqa: ARG001
    summary = {}
    with tracked(params, {}) as mlrun:
        for name, run_paths in paths.runs.items():
            summary[name] = write_run(params, name, run_paths)
            tags = {"task": params.sft_run(name).task, "sft_run": name}
            with mlrun.child(name, tags, data_run_settings(name, params)) as child:
                child.log_metrics(pick(summary[name], KEY_METRICS))
    return summary
