"""Chains on a Ray cluster: the executor a stage uses when RAY_ADDRESS is set (Ray's own variable).

Each chain (a seed, or a GRPO unit) is one Ray task: one CPU, torch at one thread, the same
function the local pool runs (`rlvr.pipeline.workers`), so a chain's bytes do not depend on where
it ran. Its inputs travel by value: the stage's arguments (configs, problems, token tensors, start
checkpoints as bytes) are put into Ray's object store once and every task reads them from there;
the package itself travels as the job's `py_modules`, so every node runs the stage's own code. No
shared file system is assumed, and only the stage process writes files and logs to MLflow.

A task lost with its node is retried (Ray reruns it from its inputs: a seeded chain gives the same
bytes again); one lost past its retries, or a cluster that stops answering, ends the stage in one
line. `check` connects first (`check_cluster`): no Ray installed, no cluster at the address, or a
node that cannot import the stage code or runs another torch, stops `dvc repro` there, before DVC
removes any output. Ray is an optional extra (`pip install -e '.[cluster]'`): nothing here imports
it unless RAY_ADDRESS is set.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rlvr.fields import UserError

ADDRESS = "RAY_ADDRESS"  # Ray's convention: where `ray.init()` connects
RETRIES = 3  # a task lost with its worker or node is run again this many times (Ray's default)
PROBE_SECONDS = 120  # how long `check` waits for every node's probe task
DIAL_SECONDS = 5  # how long a first TCP connection to the head may take (Ray itself retries for minutes)
STAGE_MODULES = tuple(f"rlvr.pipeline.stages.{s}" for s in ("warmup", "sft", "grpo", "hack", "passk"))


class ClusterError(UserError):
    """A Ray cluster that cannot run the stage's chains: one line naming it and what to do."""


def address() -> str | None:
    """RAY_ADDRESS, when set and not empty: the cluster every stage's chains run on."""
    return os.environ.get(ADDRESS) or None


def _ray():
    try:
        import ray
    except ImportError:
        raise ClusterError(
            f"{ADDRESS} is set but Ray is not installed here: pip install -e '.[cluster]' "
            f"(or unset {ADDRESS} to run the chains on this machine)"
        ) from None
    return ray


def _dial(where: str) -> None:
    """A TCP connection to the head's address (host:port, or ray://host:port), made and closed: Ray's
    own client retries an address where nothing listens for minutes, printing as it goes. Addresses
    of another form ("auto") are left to Ray."""
    host, sep, port = where.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=DIAL_SECONDS).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ClusterError(
            f"{ADDRESS}={where}: no Ray cluster answers there ({reason}); start one (docs/team.md) "
            f"or unset {ADDRESS} to run the chains on this machine"
        ) from None


def connect(where: str):
    """The `ray` module, connected to the cluster at `where` with this checkout's package as the
    job's code; one ClusterError line when Ray is missing or no cluster answers there."""
    import rlvr

    ray = _ray()
    if ray.is_initialized():
        return ray
    _dial(where)
    try:
        ray.init(
            address=where,
            runtime_env={"py_modules": [rlvr], "env_vars": {"OMP_NUM_THREADS": "1"}},
            logging_level=logging.WARNING,
            log_to_driver=False,  # a task prints nothing worth a line; its errors come back raised
        )
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ClusterError(
            f"{ADDRESS}={where}: no Ray cluster answers there ({reason[:160]}); start one (docs/team.md) "
            f"or unset {ADDRESS} to run the chains on this machine"
        ) from None
    return ray


def _probe(modules: tuple[str, ...]) -> dict:
    """On a node: the stage modules import, and the versions the chains' floats depend on."""
    import importlib
    import platform

    for name in modules:
        importlib.import_module(name)
    import numpy
    import torch

    return {"torch": torch.__version__, "numpy": numpy.__version__, "python": platform.python_version()}


def check_cluster(where: str) -> dict:
    """Connect to the cluster and run a probe task on every node with a CPU: each imports the stage
    code and reports the torch, numpy and Python it runs, which must be this machine's. Returns the
    cluster's shape (nodes, CPUs); one ClusterError line on any failure."""
    ray = connect(where)
    try:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
        if not nodes:
            raise ClusterError(f"{ADDRESS}={where}: the cluster has no node with a CPU to run a chain on")
        probe = ray.remote(_probe)
        refs = {
            n["NodeManagerAddress"]: probe.options(
                num_cpus=1, scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            ).remote(STAGE_MODULES)
            for n in nodes
        }
        here = _probe(())
        for node, ref in refs.items():
            try:
                there = ray.get(ref, timeout=PROBE_SECONDS)
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause if exc.cause is not None else exc
                raise ClusterError(
                    f"{ADDRESS}={where}: node {node} cannot run the stage code ({type(cause).__name__}: "
                    f"{str(cause).splitlines()[0] if str(cause) else ''}); install the project there "
                    "(pip install -e '.[cluster]' at this commit, docs/team.md)"
                ) from None
            except (ray.exceptions.RayError, TimeoutError) as exc:
                raise ClusterError(
                    f"{ADDRESS}={where}: node {node} did not run a probe task within {PROBE_SECONDS} s "
                    f"({type(exc).__name__}); check the cluster (ray status)"
                ) from None
            if there != here:
                differ = ", ".join(f"{k} {there[k]} (here {here[k]})" for k in here if there[k] != here[k])
                raise ClusterError(
                    f"{ADDRESS}={where}: node {node} runs {differ}; install the project's pinned "
                    "dependencies there (pip install -e '.[cluster]', docs/team.md)"
                )
        cpus = int(sum(n["Resources"]["CPU"] for n in nodes))
        return {"address": where, "nodes": len(nodes), "cpus": cpus}
    finally:
        ray.shutdown()


def _task(shared: tuple[Callable[..., Any], Callable[..., Any], tuple], seed: int) -> Any:
    """A chain on a node: `runner(fn, seed, args)`, exactly as a pool worker runs it."""
    runner, fn, args = shared
    return runner(fn, seed, args)


def _gathered(ray, refs: list, seeds: list[int]) -> Iterator[Any]:
    """Each task's result in seed order; a chain that raised re-raises its own error (one line where
    it is ours), a chain lost past its retries is one ClusterError line."""
    for seed, ref in zip(seeds, refs):
        try:
            yield ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            raise (exc.cause if exc.cause is not None else exc) from None
        except ray.exceptions.RayError as exc:
            raise ClusterError(
                f"chain {seed}: its Ray task was lost ({type(exc).__name__}) after {RETRIES} retries; "
                "check the cluster (ray status) and rerun the stage (dvc repro)"
            ) from None


@contextmanager
def cluster_results(
    where: str, runner: Callable[..., Any], fn: Callable[..., Any], seeds: list[int], args: tuple, device: str
) -> Iterator[tuple[Iterator[Any], float]]:
    """runner(fn, seed, args) for every seed (`rlvr.pipeline.workers.run_seed`: fn(seed, *args),
    seeded) as a Ray task on the cluster at `where`: yields the results in seed order and when the
    tasks were submitted. All are submitted on entry; leaving the block early (an error, Ctrl-C)
    cancels those still running; the connection ends with the block."""
    ray = connect(where)
    try:
        shared = ray.put((runner, fn, args))  # once: every task on every node reads the same object
        task = ray.remote(_task).options(
            num_cpus=1, num_gpus=1 if device == "cuda" else 0, max_retries=RETRIES, retry_exceptions=False
        )
        started = time.time()
        refs = [task.remote(shared, seed) for seed in seeds]
        try:
            yield _gathered(ray, refs, seeds), started
        except BaseException:
            for ref in refs:
                ray.cancel(ref, force=True)
            raise
    finally:
        ray.shutdown()
