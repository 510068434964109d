"""Stage `data@{run}`: the task's train/held-out split and the SFT rows with their noisy labels."""

from __future__ import annotations

from rlvr.config import Params
from rlvr.paths import DataPaths
from rlvr.runtime import write_jsonl
from rlvr.sft import noisy_rows
from rlvr.tasks import problem_rows, split


def run(params: Params, name: str, paths: DataPaths, progress: bool = True) -> dict:  # noqa: ARG001
    cfg = params.sft_run(name)
    train, held = split(cfg.task, params.task(cfg.task).heldout, params.seed)
    rows = noisy_rows(train, cfg.noise_rate, cfg.repeats, params.seed)
    write_jsonl(paths.rows, rows)
    write_jsonl(paths.heldout, problem_rows(held))
    return {"rows": len(rows), "train_problems": len(train), "heldout_problems": len(held),
            "noised_fraction": sum(r["noised"] for r in rows) / len(rows)}
