"""What every stage does around its library calls: open its MLflow run, train once per seed.

Seeds are independent runs, so a multi-seed stage trains them side by side: one worker process per
core of the stage's thread budget (`determinism.thread_budget`: params.threads, or RLVR_THREADS), each
training one seed at a time with one torch thread. A seed's numbers therefore never depend on how
many workers ran: one thread, its own seed, its own generator. Workers are forked, so they start
with torch already imported (spawned ones spent ~3 s a stage importing it again); a worker runs
torch on one thread only, which is what makes a fork safe after the stage process used OpenMP
(the rule torch's own DataLoader workers follow). Workers compute and return; only the stage
process writes files and logs to MLflow, so a worker left behind by a killed stage never touches
the outputs. A seed's result carries the wall-clock start and end of its training, so that its
MLflow run, made afterwards, spans the training and not the logging. On a GPU (`device: cuda`)
there are no workers: CUDA does not survive a fork, so the seeds run one after the other in the
stage process.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from rlvr.fields import UserError
from rlvr.files import WriteError, errno_reason, file_failure, what_to_do, write_tsv
from rlvr.pipeline.curves import split_curve
from rlvr.pipeline.determinism import SEED_THREADS, set_determinism
from rlvr.pipeline.paths import unit_name
from rlvr.pipeline.records import stable_row
from rlvr.pipeline.stageparams import StageParams
from rlvr.pipeline.tracking import Run, stage_run, with_trl_names
from rlvr.seeding import draw_seed, stream_seed  # noqa: F401 (the stages' import of them)


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
    curve (where `paths` puts unit `key`'s) are written and logged to the seed's MLflow run `child`."""
    from rlvr.pipeline import checkpoint  # here, not at the top: stages without checkpoints never load torch

    model.load_state_dict(result.state)
    checkpoint.save(paths.checkpoint(*key), model, tok, unit, config_hash)
    written = [*write_curves(paths.curve(*key), paths.eval_curve(*key), result.curve), paths.checkpoint(*key)]
    if isinstance(result.extra, list) and result.extra:  # a controlled end's checks: its path
        written.append(write_tsv(paths.path_curve(*key), result.extra))
        child.log_steps({"val_acc": [(r["step"], r["value"]) for r in result.extra]})
    for path in written:
        child.log_artifact(path, "seed")


SFT_LOGGED = ("loss", "lr")  # what an SFT curve row logs to MLflow (its epoch and phase are in the TSV)


def log_row(run: Run, keys: tuple[str, ...] | None = None) -> Callable[[dict], None]:
    """A per-step callback that logs one curve row (its `step` as MLflow's step): the fields in
    `keys`, or every field but `step`, each also under TRL's name where it has one of its own."""
    return lambda row: run.log_step(
        row["step"],
        with_trl_names({k: v for k, v in row.items() if k != "step" and (keys is None or k in keys)}),
    )


def load_start(start, seed: int, run: str, config_hash: str, tok, device: str = "cpu"):
    """SFT seed `seed`'s checkpoint of run `run` (paths `start`, an SFTPaths), on `device`: the start
    of chain `seed`, refused if it is not that run's (its run name and params hash)."""
    from rlvr.pipeline import checkpoint  # here, not at the top: stages without checkpoints never load torch

    ckpt = start.checkpoint(seed)
    return checkpoint.load(ckpt, tok, f"{run_name('sft', run)}/seed{seed}", config_hash, device)


@dataclass
class SeedResult:
    """What one seed's training returns to the stage process."""

    summary: dict  # the seed's numbers (its metrics-file entries)
    curve: list[dict]  # one row per step
    state: dict  # the trained model's state dict
    extra: Any = None  # anything else the stage keeps (e.g. sample tables)
    started: float | None = None  # time.time() when the seed began (set by `seed_results`)
    ended: float | None = None  # and when it returned


R = TypeVar("R")  # what a seed function returns


def _seeded(fn: Callable[..., R], seed: int, args: tuple) -> R:
    started = time.time()
    set_determinism(seed, SEED_THREADS)
    result = fn(seed, *args)
    if isinstance(result, SeedResult):
        result.started, result.ended = started, time.time()
    return result


def _in_order(fn: Callable[..., R], seeds: list[int], args: tuple) -> Iterator[R]:
    """The seeds one after the other in this process, its thread count restored afterwards."""
    import torch  # here, not at the top: stages without seeds (check, data, report) never load torch

    threads = torch.get_num_threads()
    try:
        for seed in seeds:
            yield _seeded(fn, seed, args)
    finally:
        torch.set_num_threads(threads)


class WorkerDied(UserError):
    """A seed worker was killed before it returned (one line; the stage then fails)."""


class Seeds(Iterator[R]):
    """What `seed_results` yields: the seeds' results in seed order, and when their work began (the
    stage's MLflow run starts then, not when it was opened while the workers trained)."""

    def __init__(self, results: Iterator[R], started: float) -> None:
        self.started = started  # time.time() when the work was submitted
        self._results = results

    def __next__(self) -> R:
        try:
            return next(self._results)
        except BrokenProcessPool:  # a worker killed from outside (the OOM killer, kill -9)
            raise WorkerDied(
                "a seed worker died before returning its seed (killed from outside: out of memory? "
                "`dmesg` says); rerun the stage (dvc repro), or set RLVR_THREADS=1 to train the seeds "
                "in the stage process"
            ) from None
        except (RuntimeError, OSError) as exc:  # a worker's, re-raised here: one line if it is a handoff's
            handoff = handoff_error(exc)
            if handoff is None:
                raise
            raise handoff from None


HANDOFF = (
    "seed workers take their tensors through shared memory: {advice}, or set RLVR_THREADS=1 to "
    "train the seeds in the stage process"
)


def handoff_error(exc: BaseException) -> WriteError | None:
    """A failure to pass tensors to or from a seed worker (torch puts each in a shared-memory file,
    which a file-size limit or a full /dev/shm stops) as one line naming the file and what to do;
    None for any other error."""
    failure = file_failure(exc)
    if failure is None or not str(failure[0]).startswith("/dev/shm/"):
        return None
    name, code, text = failure
    advice = what_to_do(code) or "free some space in /dev/shm"
    return WriteError(
        f"{name}: cannot be written ({errno_reason(code, text)}): {HANDOFF.format(advice=advice)}"
    )


def _tensors(obj: Any) -> Iterator:
    """The tensors in a worker's arguments (inside tuples, lists and dicts)."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from _tensors(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)


def check_handoff(args: tuple) -> None:
    """Before any worker starts: the largest tensor the workers are handed fits a shared-memory file
    (made and dropped here, as torch makes one per tensor), and /dev/shm holds them all. Raises the
    one line `handoff_error` gives."""
    torch = sys.modules.get("torch")
    if torch is None:  # no tensor exists before torch is loaded: nothing to hand over
        return
    sizes = [t.untyped_storage().nbytes() for t in _tensors(args)]
    if not sizes:
        return
    try:
        torch.empty(max(sizes), dtype=torch.uint8).share_memory_()
    except (RuntimeError, OSError) as exc:
        raise handoff_error(exc) or exc from None
    shm = Path("/dev/shm")
    free = shutil.disk_usage(shm).free if shm.is_dir() else None
    if free is not None and free < sum(sizes):
        raise WriteError(
            f"{shm}: cannot be written ({free} bytes free, the workers' inputs take {sum(sizes)}): "
            + HANDOFF.format(advice="free some space")
        )


def _worker_signals(parent: int) -> None:
    """A forked worker inherits the stage's SIGTERM handler (raise KeyboardInterrupt, to mark the
    MLflow run KILLED); a worker has no run: SIGTERM (how the stage stops it) just ends it, and
    Ctrl-C or a closed terminal, which reach the whole process group, are the stage's to handle
    (it stops its workers; a worker's own KeyboardInterrupt would print a traceback). And a
    worker dies with its stage: a stage killed with SIGKILL cannot stop its workers, which would
    finish their seed and then wait forever for work, orphaned. The kernel kills the worker when its
    parent dies (Linux's parent-death signal); elsewhere a watchdog thread notices the new parent."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for sig in (signal.SIGINT, signal.SIGHUP):  # Ctrl-C, a closed terminal: the stage stops its workers
        signal.signal(sig, signal.SIG_IGN)
    if not _die_with_parent():
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # the stage died before the signal was armed
        os._exit(1)


def _die_with_parent() -> bool:
    """prctl(PR_SET_PDEATHSIG, SIGKILL); False where there is no such call."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


@contextmanager
def seed_results(
    fn: Callable[..., R], seeds: list[int], args: tuple, workers: int, device: str = "cpu"
) -> Iterator[Seeds[R]]:
    """fn(seed, *args) for every seed (a module-level function, so that workers can import it),
    yielded in seed order: in this process as they are consumed, or in `workers` forked ones.
    Usually a seed's SeedResult; pass@k passes model indices and gets each model's counts.

    Workers start on entry: enter this before opening the stage's MLflow run, and they import torch
    and train while this process imports MLflow (~3 s a stage here). An error in the block stops
    every worker; leaving it normally waits for the seeds already running."""
    # In this process, one seed after the other: with one worker or one seed; and on a GPU, whatever
    # the thread budget, since CUDA does not survive a fork: there the GPU is the parallelism.
    if workers <= 1 or len(seeds) == 1 or device == "cuda":
        yield Seeds(_in_order(fn, seeds, args), time.time())
        return
    check_handoff(args)
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(seeds)),
        mp_context=multiprocessing.get_context("fork"),
        initializer=_worker_signals,
        initargs=(os.getpid(),),
    )
    started = time.time()
    try:
        results = pool.map(_seeded, [fn] * len(seeds), seeds, [args] * len(seeds))  # submitted: workers start
        yield Seeds(results, started)
    except BaseException:
        for proc in list(getattr(pool, "_processes", {}).values()):  # stop work nobody will collect
            proc.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


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
        bar.update(1)
        chain, rep = seed if isinstance(seed, tuple) else (seed, None)
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
