"""`rlvr bench --only cluster`: chains per minute on the local pool against a Ray cluster.

The workload is a real stage's: the chains of `grpo@grpo` (chapter B, each 50 GRPO steps from its
SFT start, which must be in the workspace: `dvc repro` first), built by the stage's own
`units_of` and run through `seed_results`, the seam every stage uses. Two executors on the same
cores: the pool (one worker per core), and a local two-node Ray cluster (a head and a worker node,
one CPU each, on 127.0.0.1) that the benchmark starts and stops. Each way is timed from submission
to its last chain's result, Ray's connection, object store and worker start-up included: what Ray
costs, honestly. Both give the same results, which the benchmark checks.

Everything runs in network and PID namespaces of the benchmark's own (`unshare`, as root): only
loopback is up, so the cluster's ports stay on 127.0.0.1 and nothing leaves the machine, and
stopping the cluster stops its processes alone (any other Ray on the machine is left running).

    python -m rlvr.bench.cluster      # (in the namespace) both measurements, as one JSON line
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlvr.fields import ConfigError
from rlvr.io.params import Params

VARIANT = "grpo"  # chapter B's variant matrix baseline: 8 chains of 50 steps
REPEATS = 3
PORT = 6391


def _chains(params_file: str) -> tuple[list[int], tuple]:
    """`grpo@grpo`'s units and arguments, as its stage builds them."""
    from rlvr.io.params import load_params
    from rlvr.pipeline.specs import instance_paths
    from rlvr.pipeline.stageparams import stage_params
    from rlvr.pipeline.stages.grpo import units_of

    params = load_params(params_file)
    stage = stage_params("grpo", VARIANT, params)
    shared, _ = units_of(stage, instance_paths("grpo", VARIANT, params))
    return list(range(len(shared.units))), (stage.config, shared)


def _timed(seeds: list[int], args: tuple, workers: int) -> tuple[float, list]:
    """Seconds from submission to the last chain's result; each chain's result without its timings
    (`records.VOLATILE`: what the stage keeps out of its metrics), weights as lists."""
    from rlvr.pipeline.records import VOLATILE
    from rlvr.pipeline.stages.grpo import train_seed
    from rlvr.pipeline.workers import seed_results

    t0 = time.perf_counter()
    with seed_results(train_seed, seeds, args, workers) as results:
        out = [
            (
                {k: v for k, v in r.summary.items() if k not in VOLATILE},
                {k: v.tolist() for k, v in r.state.items()},
            )
            for r in results
        ]
    return time.perf_counter() - t0, out


def _ray(*args: str) -> None:
    ray = Path(sys.executable).parent / "ray"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run([str(ray), *args], check=True, capture_output=True, text=True, env=env)


def measure(params_file: str = "params.yaml") -> dict:
    """Both executors, REPEATS times each, alternating; their seconds and whether they agree."""
    seeds, args = _chains(params_file)
    os.environ.pop("RAY_ADDRESS", None)
    temp = tempfile.mkdtemp(prefix="rlvr-ray-", dir="/tmp")  # short: Ray's socket paths
    start = ["--node-ip-address=127.0.0.1", "--num-cpus=1", f"--temp-dir={temp}", "--disable-usage-stats"]
    pool, ray, same = [], [], True
    try:
        _ray("start", "--head", f"--port={PORT}", "--include-dashboard=false", *start)
        _ray("start", f"--address=127.0.0.1:{PORT}", *start)
        for _ in range(REPEATS):
            seconds, reference = _timed(seeds, args, 2)
            pool.append(seconds)
            os.environ["RAY_ADDRESS"] = f"127.0.0.1:{PORT}"
            seconds, out = _timed(seeds, args, 2)
            os.environ.pop("RAY_ADDRESS")
            ray.append(seconds)
            same = same and out == reference
    finally:
        _ray("stop", "--force")  # in the benchmark's own PID namespace: its cluster only
        shutil.rmtree(temp, ignore_errors=True)
    return {"chains": len(seeds), "pool_seconds": pool, "ray_seconds": ray, "identical": same}


def _per_minute(chains: int, seconds: list[float]) -> dict:
    return {
        "seconds_median": round(statistics.median(seconds), 2),
        "seconds_min": round(min(seconds), 2),
        "seconds_max": round(max(seconds), 2),
        "chains_per_minute": round(60 * chains / statistics.median(seconds), 1),
    }


NAMESPACES = ["unshare", "-n", "-p", "-f", "--mount-proc"]  # network (loopback only) and PID


def bench(params: Params) -> dict:  # noqa: ARG001 (the workspace's params.yaml is read in the namespace)
    """Both measurements, in network and PID namespaces of the benchmark's own."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("bench 'cluster' needs Ray: pip install -e '.[cluster]'") from None
    if os.geteuid() != 0 or subprocess.run([*NAMESPACES, "true"], capture_output=True).returncode:
        raise ConfigError("bench 'cluster' starts its cluster in namespaces of its own: run it as root")
    inner = f"ip link set lo up && exec {sys.executable} -m rlvr.bench.cluster"
    run = subprocess.run([*NAMESPACES, "bash", "-c", inner], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"the cluster benchmark failed (exit {run.returncode}):\n{run.stderr[-2000:]}")
    out = json.loads(run.stdout.strip().splitlines()[-1])
    if not out["identical"]:
        raise RuntimeError("the pool and the Ray cluster gave different results for the same chains")
    pool = _per_minute(out["chains"], out["pool_seconds"])
    ray = _per_minute(out["chains"], out["ray_seconds"])
    return {
        "workload": f"grpo@{VARIANT}: {out['chains']} chains of chapter B GRPO from their SFT starts",
        "pool": {"workers": 2, **pool},
        "ray": {"nodes": 2, "cpus_per_node": 1, "address": "127.0.0.1", **ray},
        "ray_over_pool": round(ray["seconds_median"] / pool["seconds_median"], 2),
        "identical_results": True,
        "repeats": REPEATS,
        "note": "same 2 cores; Ray's time includes connecting, its object store and starting its workers",
    }


if __name__ == "__main__":
    print(json.dumps(measure()))
