"""`rlvr bench --only queue`: two experiments back to back against the same two queued and run two
at a time (`dvc queue start -j 2`, one core each)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlvr.fields import ConfigError
from rlvr.pipeline.config import Params
from rlvr.pipeline.store import repo_root

QUEUE_KEY = "variants.a_grpo.lr"  # reruns grpo@a_grpo (6 seeds), hack (hack.variant is a_grpo), passk, report


def _clone_with_results(root: Path, into: Path, env: dict) -> None:
    """A clone of HEAD whose DVC outputs come from this checkout's cache (nothing recomputed)."""
    subprocess.run(["git", "clone", "--quiet", str(root), str(into)], check=True)
    cache = subprocess.run(
        [sys.executable, "-m", "dvc", "cache", "dir"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for cmd in (["config", "--local", "cache.dir", cache], ["checkout", "--quiet"]):
        subprocess.run(
            [sys.executable, "-m", "dvc", *cmd], cwd=into, env=env, check=True, capture_output=True
        )
    status = subprocess.run([sys.executable, "-m", "dvc", "status", "--quiet"], cwd=into, env=env)
    if status.returncode != 0:
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
    dvc = [sys.executable, "-m", "dvc"]
    with tempfile.TemporaryDirectory(prefix="rlvr-queue-") as tmp:
        clone = Path(tmp) / "clone"
        _clone_with_results(root, clone, env)
        env["PYTHONPATH"] = str(clone)
        t0 = time.perf_counter()
        for lr in ("2e-3", "4e-3"):
            subprocess.run(
                [*dvc, "exp", "run", "-S", f"{QUEUE_KEY}={lr}"],
                cwd=clone,
                env=env,
                check=True,
                capture_output=True,
            )
        back_to_back = time.perf_counter() - t0
        for lr in ("2.5e-3", "3.5e-3"):
            subprocess.run(
                [*dvc, "exp", "run", "--queue", "-S", f"{QUEUE_KEY}={lr}"],
                cwd=clone,
                env=env,
                check=True,
                capture_output=True,
            )
        t0 = time.perf_counter()
        subprocess.run(
            [*dvc, "queue", "start", "-j", "2"],
            cwd=clone,
            env={**env, "RLVR_THREADS": "1"},
            check=True,
            capture_output=True,
        )
        while True:
            status = subprocess.run(
                [*dvc, "queue", "status"], cwd=clone, env=env, capture_output=True, text=True
            ).stdout
            if not any(word in status for word in ("Queued", "Running")):
                break
            time.sleep(2)
        queued = time.perf_counter() - t0
        subprocess.run([*dvc, "queue", "stop"], cwd=clone, env=env, capture_output=True)
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
