"""The executors: where a stage's chains (its seeds, or GRPO units) run.

A stage hands `seed_results` a module-level function, its seeds and the arguments every seed shares
(configs, problems, tensors, start checkpoints as bytes: inputs by value, never paths to read), and
gets each seed's result back in seed order. Three executors run them, each seed with its own seed
and one torch thread, so a seed's numbers never depend on which one ran it:

- a Ray cluster, when RAY_ADDRESS is set (`rlvr.pipeline.cluster`: one task per seed);
- the local pool (the default): one forked worker per core of the stage's thread budget
  (`determinism.thread_budget`: params.threads, or RLVR_THREADS), each training one seed at a time.
  Workers are forked, so they start with torch imported (spawned ones spent ~3 s a stage importing
  it again) and inherit the shared arguments instead of unpickling a copy per seed; one torch
  thread is what makes a fork safe after the stage process used OpenMP (the rule torch's own
  DataLoader workers follow);
- this process, one seed after the other: with one worker or one seed, and on a GPU (`device:
  cuda`), since CUDA does not survive a fork.

Executors compute and return; only the stage process writes files and logs (`rlvr.pipeline.seeds`).
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

from rlvr.determinism import SEED_THREADS, set_determinism
from rlvr.fields import UserError
from rlvr.io.files import WriteError, errno_reason, file_failure, what_to_do
from rlvr.pipeline import cluster


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


def run_seed(fn: Callable[..., R], seed: int, args: tuple) -> R:
    """fn(seed, *args) as every executor runs it: seeded, on one torch thread, its span recorded."""
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
            yield run_seed(fn, seed, args)
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
    "seed workers hand their tensors back through shared memory: {advice}, or set RLVR_THREADS=1 to "
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
    """Before any worker starts: a worker inherits its arguments through the fork, but hands its
    result back through shared memory, a file per tensor (torch's pickling between processes); a
    chain's result holds tensors the size of those it was handed (its weights), so the largest of
    `args`' tensors must fit one such file (made and dropped here) and /dev/shm hold them all.
    Raises the one line `handoff_error` gives."""
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
            f"{shm}: cannot be written ({free} bytes free, the workers' results take {sum(sizes)}): "
            + HANDOFF.format(advice="free some space")
        )


def _worker_signals(parent: int) -> None:
    """A forked worker inherits the stage's SIGTERM handler (raise KeyboardInterrupt, to mark the
    MLflow run KILLED); a worker has no run: SIGTERM (how the stage stops it) just ends it, and
    Ctrl-C or a closed terminal, which reach the whole process group, are the stage's to handle
    (it stops its workers; a worker's own KeyboardInterrupt would print a traceback). And a
    worker dies with its stage: a stage killed with SIGKILL cannot stop its workers, which would
    finish their seed and then wait forever for work, orphaned. A watch thread notices the new
    parent within half a second and ends the worker (Python has no public call for Linux's
    parent-death signal; `os._exit` is how a thread ends its process)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for sig in (signal.SIGINT, signal.SIGHUP):  # Ctrl-C, a closed terminal: the stage stops its workers
        signal.signal(sig, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:  # the stage lives (one that died already ends this at once)
        time.sleep(0.5)
    os._exit(1)


_SHARED: tuple | None = None  # the pool's (fn, args), set before its workers fork: they inherit it


def _pooled(seed: int):
    fn, args = _SHARED
    return run_seed(fn, seed, args)


@contextmanager
def seed_results(
    fn: Callable[..., R], seeds: list[int], args: tuple, workers: int, device: str = "cpu"
) -> Iterator[Seeds[R]]:
    """fn(seed, *args) for every seed (a module-level function, so that a Ray node can import it),
    yielded in seed order: on the Ray cluster RAY_ADDRESS names, else in this process as they are
    consumed, or in `workers` forked ones. Usually a seed's SeedResult; pass@k passes model indices
    and gets each model's counts.

    Work starts on entry: enter this before opening the stage's MLflow run, and the chains train
    while this process imports MLflow (~3 s a stage here). An error in the block stops every
    worker; leaving it normally waits for the seeds already running."""
    global _SHARED
    where = cluster.address()
    if where is not None:
        with cluster.cluster_results(where, run_seed, fn, seeds, args, device) as (results, started):
            yield Seeds(results, started)
        return
    # In this process, one seed after the other: with one worker or one seed; and on a GPU, whatever
    # the thread budget, since CUDA does not survive a fork: there the GPU is the parallelism.
    if workers <= 1 or len(seeds) == 1 or device == "cuda":
        yield Seeds(_in_order(fn, seeds, args), time.time())
        return
    check_handoff(args)
    _SHARED = (fn, args)  # before the pool forks its workers (all at once, on the first submit)
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(seeds)),
        mp_context=multiprocessing.get_context("fork"),
        initializer=_worker_signals,
        initargs=(os.getpid(),),
    )
    others = set(multiprocessing.active_children())  # the stage's other children, left alone
    started = time.time()
    try:
        results = pool.map(_pooled, seeds)  # submitted: the workers fork, holding fn and args
        yield Seeds(results, started)
    except BaseException:
        for proc in set(multiprocessing.active_children()) - others:  # the pool's: stop work nobody collects
            proc.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _SHARED = None
