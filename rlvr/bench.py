"""`rlvr bench`: speed and memory benchmarks, written to reports/benchmarks.json.

Benchmarks are run on demand, never as timed tests. Each repeats its measurement several times
and reports the median with the min and max, so one noisy run cannot pass for a result.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import torch

from rlvr.config import Params, SFTConfig
from rlvr.model import TinyLM, sample
from rlvr.rollout import prompt_tensor
from rlvr.runtime import set_determinism, write_json
from rlvr.sft import encode_sft, sft_loss, sft_rows
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def bench_sampling(params: Params, repeats: int = 5) -> dict:
    """300 held-out prompts x 64 samples, up to 4 response tokens, default-size model.

    An untrained model rarely emits <eos>, so every row runs the full 4 tokens: the worst case.
    """
    tok = Tokenizer()
    max_new_tokens = 4
    _, held = split("two_digit", 300, params.seed)
    prompts = prompt_tensor(held, tok)  # (300, Tp)
    model = TinyLM(params.model, len(tok)).eval()
    n = 64
    rates = []
    for r in range(repeats + 1):
        gen = torch.Generator().manual_seed(r)
        t0 = time.perf_counter()
        sample(model, prompts, n, max_new_tokens, tok.eos_id, tok.pad_id, 1.0, gen)
        if r:  # the first run warms up allocators and kernels
            rates.append(len(held) * n / (time.perf_counter() - t0))
    return {"completions_per_second": _spread(rates), "completions": len(held) * n,
            "max_new_tokens": max_new_tokens, "model_params": model.num_params(),
            "peak_rss_mb": round(_peak_rss_mb(), 1), "target_completions_per_second": 20000,
            "target_peak_rss_mb": 1536}


def bench_sft(params: Params, steps: int = 30) -> dict:
    """Training throughput of SFT on two_digit at the default batch size (tokens per second)."""
    tok = Tokenizer()
    cfg: SFTConfig = params.sft_run("two_digit")
    train, _ = split("two_digit", params.task("two_digit").heldout, params.seed)
    tokens, mask = encode_sft(sft_rows(train[: cfg.batch_size], cfg.noise, 1, params.seed), tok)
    model = TinyLM(params.model, len(tok))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    times = []
    for s in range(steps + 3):
        t0 = time.perf_counter()
        loss = sft_loss(model, tokens, mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if s >= 3:
            times.append(time.perf_counter() - t0)
    tps = [tokens.numel() / t for t in times]
    return {"step_seconds": _spread(times), "tokens_per_second": _spread(tps), "batch_size": cfg.batch_size,
            "tokens_per_step": tokens.numel()}


def bench_grpo_step(params: Params, steps: int = 30) -> dict:
    """One GRPO step (sample 16 prompts x G = 8, score, one update) on a default-size model with
    4-token answers, at beta = 0 (no reference forward) and beta = 0.04. Median seconds per step."""
    from rlvr.grpo import grpo_update, rollout_groups

    tok = Tokenizer()
    max_new_tokens = 4
    train, _ = split("two_digit", 300, params.seed)
    out = {}
    for beta in (0.0, 0.04):
        cfg = replace(params.variant("grpo"), prompts_per_step=16, group_size=8, beta=beta)
        torch.manual_seed(params.seed)
        policy = TinyLM(params.model, len(tok))
        ref = TinyLM(params.model, len(tok)).requires_grad_(False) if beta > 0 else None
        opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
        gen = torch.Generator().manual_seed(0)
        times = []
        for s in range(steps + 3):
            problems = [train[i] for i in torch.randint(len(train), (16,), generator=gen).tolist()]
            t0 = time.perf_counter()
            batch = rollout_groups(policy, problems, cfg, max_new_tokens, tok, gen)
            batch = replace(batch, rewards=torch.rand(batch.rewards.shape, generator=gen).round())  # mixed groups
            grpo_update(policy, ref, opt, batch, cfg, max_new_tokens)
            if s >= 3:
                times.append(time.perf_counter() - t0)
        out[f"beta_{beta}"] = {"step_seconds": _spread(times)}
    out.update({"prompts": 16, "group_size": 8, "response_tokens": 4,
                "target_step_seconds": {"beta_0.0": 0.045, "beta_0.04": 0.06},
                "trl_grpotrainer_step_seconds_here": {"beta_0.0": 0.094, "beta_0.04": 0.12}})
    return out


def bench_passk_model(params: Params, repeats: int = 3) -> dict:
    """One model's pass@k workload: 300 held-out prompts x 64 samples, sampled and scored.

    Uses the two_digit SFT checkpoint when `dvc repro` has made it (rows stop at <eos> as in the
    real stage), else an untrained model (every row runs to the cap: the worst case)."""
    from rlvr import checkpoint
    from rlvr.paths import sft
    from rlvr.rollout import correct_counts

    tok = Tokenizer()
    task = params.task("two_digit")
    _, held = split("two_digit", 300, params.seed)
    ckpt = sft("two_digit").checkpoint
    model = checkpoint.load(ckpt, tok) if ckpt.is_file() else TinyLM(params.model, len(tok)).eval()
    times = []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        correct_counts(model, held, 64, task.max_new_tokens, 1.0, tok, torch.Generator().manual_seed(r))
        if r:
            times.append(time.perf_counter() - t0)
    return {"seconds_per_model": _spread(times), "completions": len(held) * 64, "model": str(ckpt) if ckpt.is_file()
            else "untrained", "max_new_tokens": task.max_new_tokens, "target_seconds": 2.0}


def bench_pipeline(params: Params) -> dict:
    """Seconds each stage took in the execution that produced the committed outputs: the MLflow run
    named in the stage's metrics JSON (dvc.lock -> metrics -> run), start to end. Process start-up
    and imports (~3.5 s a process) are not included."""
    from mlflow.tracking import MlflowClient

    from rlvr.provenance import load_lock, mlflow_run_ids
    from rlvr.tracking import repo_root, tracking_uri

    root = repo_root()
    client = MlflowClient(tracking_uri())
    seconds = {}
    for name, stage in load_lock(root).items():
        rid = mlflow_run_ids(root, stage).get("stage")
        if rid:
            info = client.get_run(rid).info
            seconds[name] = round((info.end_time - info.start_time) / 1000, 1)
    grpo = sum(v for k, v in seconds.items() if k.startswith("grpo@"))
    return {"stage_seconds": dict(sorted(seconds.items())), "grpo_matrix_seconds": round(grpo, 1),
            "total_seconds": round(sum(seconds.values()), 1), "target_grpo_matrix_seconds": 360,
            "target_total_seconds": 600}


VOLATILE = ("seconds", "per_second", "mlflow")  # metric keys that name a run or a duration


def stable_view(value):
    """A metrics JSON without the keys that legitimately change between runs (durations, run ids)."""
    if isinstance(value, dict):
        return {k: stable_view(v) for k, v in value.items() if not any(w in k for w in VOLATILE)}
    if isinstance(value, list):
        return [stable_view(v) for v in value]
    return value


def compare_outputs(ours: Path, theirs: Path) -> list[str]:
    """Metric files (reports/metrics/*.json, reports/passk-counts.json) whose stable content differs."""
    names = sorted({p.relative_to(ours).as_posix() for p in (ours / "reports" / "metrics").glob("*.json")}
                   | {"reports/passk-counts.json"})
    differ = []
    for name in names:
        a, b = ours / name, theirs / name
        if not (a.is_file() and b.is_file()) or \
                stable_view(json.loads(a.read_text())) != stable_view(json.loads(b.read_text())):
            differ.append(name)
    return differ


def compare_verdicts(committed: dict, fresh: dict) -> dict:
    """Two report.json files, compared as another CPU would be judged: every claim's verdict the same,
    and every number statistically the same: the fresh value inside the committed 95% interval, or,
    for a claim decided on a single value, within its tolerance of the committed value
    (`verdict_tolerance` in report.json). Returns the claims that fail either test."""
    flips, drifts = [], []
    for cid, old in committed["claims"].items():
        new = fresh["claims"].get(cid)
        if new is None or new["verdict"] != old["verdict"]:
            flips.append({"claim": cid, "committed": old["verdict"], "fresh": None if new is None else new["verdict"]})
            continue
        a, b = old.get("ours"), new.get("ours")
        if a is None or b is None:
            if (a is None) != (b is None):
                drifts.append({"claim": cid, "committed": a, "fresh": b})
            continue
        lo, hi = old["interval"] if old.get("interval") else (a - (old.get("tolerance") or 0), a + (old.get("tolerance") or 0))
        if not lo - 1e-12 <= b <= hi + 1e-12:
            drifts.append({"claim": cid, "committed": a, "fresh": b, "allowed": [lo, hi]})
    return {"verdicts_identical": not flips, "numbers_within_tolerance": not drifts, "verdict_flips": flips,
            "numbers_outside": drifts}


def bench_fresh_clone(params: Params) -> dict:
    """Wall time of `dvc repro` in a fresh clone of HEAD: the whole default pipeline, every stage.

    The clone's own code runs (PYTHONPATH points at it) with this environment's packages; its MLflow
    store is its own. Afterwards its results are compared with the committed ones twice: bit for bit
    (durations and run ids aside), which holds on the machine that made them, and by verdicts and
    tolerances (`compare_verdicts`), which must hold on any CPU. Takes as long as the pipeline.
    """
    import subprocess
    import sys
    import tempfile

    from rlvr.gitinfo import git_commit
    from rlvr.tracking import repo_root

    root = repo_root()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                           capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="rlvr-fresh-") as tmp:
        fresh = Path(tmp) / "fresh"
        subprocess.run(["git", "clone", "--quiet", str(root), str(fresh)], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT")}
        env["PYTHONPATH"] = str(fresh)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        t0 = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=fresh, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if run.returncode != 0:
            raise RuntimeError(f"dvc repro failed in the fresh clone (exit {run.returncode}):\n{run.stderr[-2000:]}")
        stages = run.stdout.count("Running stage")
        differ = compare_outputs(root, fresh)
        report = Path("reports/report.json")
        verdicts = compare_verdicts(json.loads((root / report).read_text()), json.loads((fresh / report).read_text()))
    return {"wall_seconds": round(wall, 1), "target_wall_seconds": 600, "stages_run": stages,
            "commit": git_commit(root), "working_tree_differs_from_commit": bool(dirty),
            "metrics_identical_to_committed": not differ, "metrics_differing": differ, **verdicts}


QUEUE_KEY = "variants.a_grpo.lr"  # reruns grpo@a_grpo (6 seeds), hack (hack.variant is a_grpo), passk, report


def _clone_with_results(root: Path, into: Path, env: dict) -> None:
    """A clone of HEAD whose DVC outputs come from this checkout's cache (nothing recomputed)."""
    import subprocess
    import sys

    subprocess.run(["git", "clone", "--quiet", str(root), str(into)], check=True)
    cache = subprocess.run([sys.executable, "-m", "dvc", "cache", "dir"], cwd=root, env=env, capture_output=True,
                           text=True, check=True).stdout.strip()
    for cmd in (["config", "--local", "cache.dir", cache], ["checkout", "--quiet"]):
        subprocess.run([sys.executable, "-m", "dvc", *cmd], cwd=into, env=env, check=True, capture_output=True)
    status = subprocess.run([sys.executable, "-m", "dvc", "status", "--quiet"], cwd=into, env=env)
    if status.returncode != 0:
        from rlvr.config import ConfigError

        raise ConfigError("the queue benchmark needs this checkout's results in the DVC cache; run `dvc repro` first")


def bench_queue(params: Params) -> dict:
    """Two experiments (`dvc exp run -S variants.a_grpo.lr=...`) run back to back at `threads`, then two
    more queued and run by `dvc queue start -j 2` with RLVR_THREADS=1 (each job one core): the wall
    time of each way. Both start from a clone holding the committed results, so only the experiment's
    stages run. Values differ between the two ways so DVC's run-cache cannot answer for them."""
    import subprocess
    import sys
    import tempfile

    from rlvr.tracking import repo_root

    root = repo_root()
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT", "RLVR_THREADS")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    dvc = [sys.executable, "-m", "dvc"]
    with tempfile.TemporaryDirectory(prefix="rlvr-queue-") as tmp:
        clone = Path(tmp) / "clone"
        _clone_with_results(root, clone, env)
        env["PYTHONPATH"] = str(clone)
        t0 = time.perf_counter()
        for lr in ("2e-3", "4e-3"):
            subprocess.run([*dvc, "exp", "run", "-S", f"{QUEUE_KEY}={lr}"], cwd=clone, env=env, check=True,
                           capture_output=True)
        back_to_back = time.perf_counter() - t0
        for lr in ("2.5e-3", "3.5e-3"):
            subprocess.run([*dvc, "exp", "run", "--queue", "-S", f"{QUEUE_KEY}={lr}"], cwd=clone, env=env,
                           check=True, capture_output=True)
        t0 = time.perf_counter()
        subprocess.run([*dvc, "queue", "start", "-j", "2"], cwd=clone, env={**env, "RLVR_THREADS": "1"}, check=True,
                       capture_output=True)
        while True:
            status = subprocess.run([*dvc, "queue", "status"], cwd=clone, env=env, capture_output=True, text=True).stdout
            if not any(word in status for word in ("Queued", "Running")):
                break
            time.sleep(2)
        queued = time.perf_counter() - t0
        subprocess.run([*dvc, "queue", "stop"], cwd=clone, env=env, capture_output=True)
        failed = status.count("Failed")
    return {"experiment": f"dvc exp run -S {QUEUE_KEY}=<lr> (grpo@a_grpo, hack, passk, report)", "experiments": 2,
            "back_to_back_seconds": round(back_to_back, 1), "back_to_back_threads": params.threads,
            "queue_j2_seconds": round(queued, 1), "queue_threads_each": 1, "queue_failed": failed,
            "speedup": round(back_to_back / queued, 2)}


BENCHMARKS: dict[str, Callable[[Params], dict]] = {"sampling": bench_sampling, "sft": bench_sft,
                                                   "grpo_step": bench_grpo_step, "passk_model": bench_passk_model,
                                                   "pipeline": bench_pipeline, "fresh_clone": bench_fresh_clone,
                                                   "queue": bench_queue}


def bench_all(params: Params, out: Path, only: list[str] | None = None) -> dict:
    """Run the named benchmarks (default all) and merge their figures into `out`."""
    names = only or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        from rlvr.config import ConfigError

        raise ConfigError(f"bench {unknown[0]!r}: unknown; known benchmarks: {', '.join(BENCHMARKS)}")
    set_determinism(params.seed, params.threads)
    results = json.loads(out.read_text()) if out.is_file() else {}
    for name in names:
        results[name] = BENCHMARKS[name](params)
    results["machine"] = {"cpu_count": os.cpu_count(), "threads": params.threads, "torch": torch.__version__,
                          "python": platform.python_version(), "processor": platform.processor() or platform.machine()}
    write_json(out, results)
    return {name: results[name] for name in names}
