"""The executor seam: a stage's seeds run in this process, in the local pool or on a Ray cluster
(RAY_ADDRESS), each seeded alike, their shared arguments handed over once; a cluster that cannot
be used is one line. The real two-node cluster is tests/pipeline/test_cluster.py (slow tier)."""

import socket
import sys
from contextlib import contextmanager

import pytest

from rlvr.pipeline import cluster, workers
from rlvr.pipeline.cluster import ClusterError


def draw(seed: int, scale: float, unpicklable) -> tuple[int, float]:
    """A seeded draw (module level, as a stage's seed function is)."""
    import torch

    return seed, float(torch.rand(()) * scale)


def test_the_pool_and_this_process_give_each_seed_the_same_numbers(monkeypatch):
    """Each seed is seeded by its own number, whoever runs it. The shared arguments reach the
    forked workers without a pickle per seed: a lock in them (which no pickle takes) is fine."""
    import threading

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    args = (10.0, threading.Lock())
    runs = []
    for n in (1, 2):
        with workers.seed_results(draw, [3, 4, 5], args, n) as results:
            runs.append(list(results))
    assert runs[0] == runs[1] and [s for s, _ in runs[0]] == [3, 4, 5]
    assert len({v for _, v in runs[0]}) == 3
    assert workers._SHARED is None  # the pool's arguments are not kept past it


def nap(seed: int, seconds: float) -> int:
    import time

    time.sleep(seconds)
    return seed


def test_an_error_stops_the_pools_workers_and_no_other_child_of_the_stage(monkeypatch):
    """An error in the block ends the pool's workers (nobody collects their work), but a process
    the stage started for itself (a server, a helper) lives on."""
    import multiprocessing
    import time

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    helper = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
    helper.start()
    try:
        with pytest.raises(RuntimeError, match="stop"):
            with workers.seed_results(nap, [1, 2], (30.0,), 2):
                time.sleep(0.5)  # both workers busy with their 30 s seed
                raise RuntimeError("stop")
        assert helper.is_alive()
        assert multiprocessing.active_children() == [helper]
    finally:
        helper.terminate()
        helper.join()


def test_ray_address_sends_the_seeds_to_the_cluster(monkeypatch):
    """With RAY_ADDRESS set, `seed_results` hands every seed to the cluster executor, whatever the
    thread budget (the cluster is the budget)."""
    calls = []

    @contextmanager
    def fake(where, runner, fn, seeds, args, device):
        calls.append((where, runner, fn, seeds, args, device))
        yield iter([runner(fn, s, args) for s in seeds]), 0.0

    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.setattr(cluster, "cluster_results", fake)
    with workers.seed_results(draw, [7], (1.0, None), 1) as results:
        assert [s for s, _ in results] == [7]
    assert calls == [("10.0.0.1:6379", workers.run_seed, draw, [7], (1.0, None), "cpu")]


def test_an_empty_ray_address_is_no_cluster(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "")
    assert cluster.address() is None


def test_ray_address_without_ray_installed_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as where the extra is not installed
    with pytest.raises(ClusterError, match=r"RAY_ADDRESS is set but Ray is not installed here: pip install"):
        cluster.connect("127.0.0.1:6379")


def test_an_address_where_nothing_listens_is_refused_at_once():
    """Ray's own client would retry for minutes; a closed port on 127.0.0.1 is one line now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: a connection is refused
        where = f"ray://127.0.0.1:{port}"
        with pytest.raises(ClusterError, match=rf"RAY_ADDRESS={where}: no Ray cluster answers"):
            cluster._dial(where)
    cluster._dial("auto")  # Ray's own forms are Ray's to resolve
