"""Stage `data@{run}`: the task's train/held-out split and the SFT rows with their noisy labels."""

from __future__ import annotations

from rlvr.noise import author_solve_rates, sft_rows
from rlvr.pipeline.config import Params
from rlvr.pipeline.files import write_json, write_jsonl
from rlvr.pipeline.paths import DataPaths
from rlvr.pipeline.seeds import tracked
from rlvr.tasks import problem_rows, split


def run(params: Params, name: str, paths: DataPaths, progress: bool = True) -> dict:  # noqa: ARG001
    cfg = params.sft_run(name)
    with tracked("data", name, params, {"task": cfg.task, "sft_run": name}) as mlrun:
        train, held = split(cfg.task, params.task(cfg.task).heldout, params.seed)
        rows = sft_rows(train, cfg.noise, cfg.repeats, params.seed)
        write_jsonl(paths.rows, rows)
        write_json(paths.heldout, {"task": cfg.task, "problems": problem_rows(held)})
        author = author_solve_rates(held or train, cfg.noise, params.seed)  # what a perfect fit would score
        summary = {
            "rows": len(rows),
            "train_problems": len(train),
            "heldout_problems": len(held),
            "noised_fraction": sum(r["noised"] for r in rows) / len(rows),
            "author_pass_at_1": sum(author) / len(author),
            "author_pass_at_64": sum(1 - (1 - a) ** 64 for a in author) / len(author),
            "author_never_solved_expected_of_64": sum((1 - a) ** 64 for a in author),
        }
        mlrun.log_metrics(summary)
    return summary
