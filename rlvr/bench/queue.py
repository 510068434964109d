"""`rlvr bench --only queue`: two experiments back to back against the same two queued and run two
at a time (`dvc queue start -j 2`, one core each)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from rlvr.fields import ConfigError
from rlvr.io.dvcinfo import must
from rlvr.io.dvcinfo import run as dvc
from rlvr.io.gitinfo import clone
from rlvr.io.params import Params
from rlvr.pipeline.store import repo_root

QUEUE_KEY = "variants.a_grpo.lr"  # reruns grpo@a_grpo (6 seeds), hack (hack.variant is a_grpo), passk, report


def _clone_with_results(root: Path, into: Path, env: dict) -> None:
    """A clone of HEAD whose DVC outputs come from this checkout's cache (nothing recomputed)."""
    clone(root, into)
    cache = must(root, "cache", "dir", env=env).strip()
    must(into, "config", "--local", "cache.dir", cache, env=env)
    must(into, "checkout", "--quiet", env=env)
    if dvc(into, "status", "--quiet", env=env).returncode != 0:
        raise ConfigError(
            "the queue benchmark needs this checkout's results in the DVC cache; run `dvc repro` first"
        )


def bench(params: Params) -> dict:
    """Two experiments (`dvc exp run -S variants.a_grpo.lr=...`) run back to back at `threads`, then two
    more queued and run by `dvc queue start -j 2` with RLVR_THREADS=1 (each job one core): the wall
    time of each way. Both start from a clone holding the committed results, so only the experiment's
    stages run. Values differ between the two ways so DVC's run-cache cannot answer for them."""
    root = repo_root()
    env = {
        k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT", "RLVR_THREADS")
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    with tempfile.TemporaryDirectory(prefix="rlvr-queue-") as tmp:
        clone_dir = Path(tmp) / "clone"
        _clone_with_results(root, clone_dir, env)
        env["PYTHONPATH"] = str(clone_dir)
        t0 = time.perf_counter()
        for lr in ("2e-3", "4e-3"):
            must(clone_dir, "exp", "run", "-S", f"{QUEUE_KEY}={lr}", env=env)
        back_to_back = time.perf_counter() - t0
        for lr in ("2.5e-3", "3.5e-3"):
            must(clone_dir, "exp", "run", "--queue", "-S", f"{QUEUE_KEY}={lr}", env=env)
        t0 = time.perf_counter()
        must(clone_dir, "queue", "start", "-j", "2", env={**env, "RLVR_THREADS": "1"})
        while True:
            status = dvc(clone_dir, "queue", "status", env=env).stdout
            if not any(word in status for word in ("Queued", "Running")):
                break
            time.sleep(2)
        queued = time.perf_counter() - t0
        dvc(clone_dir, "queue", "stop", env=env)
        failed = status.count("Failed")
    return {
        "experiment": f"dvc exp run -S {QUEUE_KEY}=<lr> (grpo@a_grpo, hack, passk, report)",
        "experiments": 2,
        "back_to_back_seconds": round(back_to_back, 1),
        "back_to_back_threads": params.threads,
        "queue_j2_seconds": round(queued, 1),
        "queue_threads_each": 1,
        "queue_failed": failed,
        "speedup": round(back_to_back / queued, 2),
    }
