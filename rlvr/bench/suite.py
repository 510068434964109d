"""`rlvr bench`: speed and memory benchmarks, one module per workload, written to
reports/benchmarks.json. Their targets are rlvr/bench/targets.yaml's.

Benchmarks are run on demand, never as timed tests. Each repeats its measurement several times
and reports the median with the min and max, so one noisy run cannot pass for a result. Reruns of
the whole pipeline (is it reproduced?) are not benchmarks: `rlvr verify --rerun [--perturb]`.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from collections.abc import Callable
from pathlib import Path

import torch

from rlvr.bench import (
    bootstrap,
    cluster,
    compiled,
    floor,
    grpo_step,
    passk,
    queue,
    sampling,
    scaling,
    seed_profile,
    sft,
)
from rlvr.bench import peer as peers
from rlvr.determinism import set_determinism
from rlvr.io.files import write_json
from rlvr.io.params import Params
from rlvr.io.system import cpu_model

BENCHMARKS: dict[str, Callable[..., dict]] = {  # in the order they run
    "sampling": sampling.bench,
    "sft": sft.bench,
    "grpo_step": grpo_step.bench,
    "passk_model": passk.bench,
    "bootstrap": bootstrap.bench,
    "pipeline": floor.bench,
    "queue": queue.bench,
    "cluster": cluster.bench,
    "scaling": scaling.bench,
    "seed_profile": seed_profile.bench,
    "compiled": compiled.bench,
}
WITH_PEER = ("sampling", "grpo_step", "scaling")  # the benchmarks `--peer trl` adds TRL / HF figures to
PEERS = ("trl",)


RERUNS = {
    "fresh_clone": "rlvr verify --rerun",
    "perturbed": "rlvr verify --rerun --perturb",
}  # not benchmarks


def bench_all(
    params: Params,
    out: Path,
    only: list[str] | None = None,
    peer: str | None = None,
    against: str | None = None,
) -> dict:
    """Run the named benchmarks (default all) and merge their figures into `out`. With peer="trl",
    the sampling, GRPO-step and scaling benchmarks also measure TRL / HF `generate`, each side
    alone and at its best (`rlvr.bench.fair`). With `against` (a commit), the pipeline benchmark first
    measures that commit the same way, back to back."""
    from rlvr.fields import ConfigError

    names = only or list(BENCHMARKS)
    moved = [n for n in names if n in RERUNS]
    if moved:
        raise ConfigError(
            f"bench {moved[0]!r}: a rerun of the pipeline, not a benchmark: run `{RERUNS[moved[0]]}`"
        )
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise ConfigError(f"bench {unknown[0]!r}: unknown; known benchmarks: {', '.join(BENCHMARKS)}")
    if peer is not None and peer not in PEERS:
        raise ConfigError(f"--peer {peer!r}: unknown; known peers: {', '.join(PEERS)}")
    if peer is not None:
        peers.require()  # missing extra: one clear error before any benchmark runs
    if against is not None:
        against = _commit_of(against, "pipeline" in names)
    set_determinism(params.seed, params.threads)
    cpu, today = cpu_model(), datetime.date.today().isoformat()  # one machine for the whole run
    results = json.loads(out.read_text()) if out.is_file() else {}
    load_before = os.getloadavg()
    for name in sorted(
        names, key=list(BENCHMARKS).index
    ):  # one fixed order, whatever order they were named in
        kwargs = {"peer": peer is not None} if name in WITH_PEER else {}
        if name == "pipeline" and against is not None:
            kwargs["against"] = against
        before = os.getloadavg()[0]
        results[name] = {
            **BENCHMARKS[name](params, **kwargs),
            "load_average_1min": {"before": round(before, 2), "after": round(os.getloadavg()[0], 2)},
            "measured_on": {"cpu": cpu, "date": today},
        }
    results["machine"] = {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "threads": params.threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "load_average_1min": {"before": round(load_before[0], 2), "after": round(os.getloadavg()[0], 2)},
        "last_run": names,
    }
    write_json(out, results)
    return {name: results[name] for name in names}


def _commit_of(rev: str, pipeline_named: bool) -> str:
    """`--against REV` as a full commit id, or one clear error before any benchmark runs."""
    from rlvr.fields import ConfigError
    from rlvr.io.gitinfo import resolve
    from rlvr.pipeline.store import repo_root

    if not pipeline_named:
        raise ConfigError("--against compares the pipeline benchmark: add --only pipeline")
    commit = resolve(repo_root(), rev)
    if commit is None:
        raise ConfigError(f"--against {rev!r}: not a commit of this checkout (git rev-parse found none)")
    return commit
