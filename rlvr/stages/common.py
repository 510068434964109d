"""What every stage does around its library calls: open its MLflow run, train once per seed."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rlvr.config import Params
from rlvr.pipeline import config_hash, instance_params
from rlvr.runtime import set_determinism
from rlvr.tracking import Run, stage_run


def run_name(stage: str, key: str | None) -> str:
    """`sft@two_digit`, or `passk` for a stage without instances (DVC's own stage names)."""
    return f"{stage}@{key}" if key is not None else stage


@contextmanager
def tracked(stage: str, key: str | None, params: Params, tags: dict) -> Iterator[Run]:
    """The stage's MLflow run: its params are exactly the params.yaml keys DVC reruns it for."""
    with stage_run(run_name(stage, key), instance_params(stage, key, params), tags,
                   config_hash(stage, key, params)) as run:
        yield run


def log_row(run: Run) -> Callable[[dict], None]:
    """A per-step callback that logs one curve row (its `step` as MLflow's step)."""
    return lambda row: run.log_step(row["step"], {k: v for k, v in row.items() if k != "step"})


def over_seeds(run: Run, seeds: list[int], threads: int, name: str, tags: dict,
               train_one: Callable[[int, Run], dict]) -> tuple[dict[int, dict], dict[int, str]]:
    """`train_one(seed, child_run) -> summary` once per seed, each in its own nested MLflow run with
    the process re-seeded first. Returns ({seed: summary}, {seed: MLflow run id})."""
    per_seed, run_ids = {}, {}
    for seed in seeds:
        set_determinism(seed, threads)
        with run.child(f"{name}/seed{seed}", {**tags, "seed": seed}) as child:
            per_seed[seed] = train_one(seed, child)
            child.log_metrics(per_seed[seed])
            run_ids[seed] = child.run_id
    return per_seed, run_ids
