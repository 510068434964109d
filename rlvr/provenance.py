"""Provenance: which stage, params, inputs and MLflow runs produced a figure or a metrics file.

Everything comes from what DVC recorded (dvc.lock: the stage, its exact param values, dep and out
hashes) and from the stage's own metrics JSON (the MLflow run ids it wrote), so the chain
dvc.lock -> metrics file -> MLflow run can be followed from any output.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from rlvr.config import UserError
from rlvr.gitinfo import git_commit


class ProvenanceError(UserError):
    """A path the pipeline did not produce (one line, listing what it can explain)."""


def load_lock(root: Path) -> dict:
    lock = root / "dvc.lock"
    if not lock.is_file():
        raise ProvenanceError(f"{lock}: not found; run `dvc repro` first")
    return yaml.load(lock.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["stages"]


def _entries(stage: dict) -> list[dict]:
    return [*stage.get("outs", [])]


def explainable(lock: dict) -> list[str]:
    """Every output path recorded in dvc.lock."""
    return sorted(o["path"] for s in lock.values() for o in _entries(s))


def find_stage(lock: dict, path: str) -> tuple[str, dict, dict]:
    """The stage whose recorded output is `path` or a folder holding it."""
    want = Path(path).as_posix()  # Path() already drops a leading "./"
    for name, stage in lock.items():
        for out in _entries(stage):
            p = out["path"].rstrip("/")
            if want == p or want.startswith(p + "/"):
                return name, stage, out
    known = explainable(lock)
    near = [k for k in known if Path(k).parent == Path(want).parent] or known  # same folder first
    raise ProvenanceError(f"{path}: not an output of any stage in dvc.lock; it can explain: "
                          + ", ".join(near[:12]) + (f" ... ({len(known)} outputs in all)" if len(known) > 12 else ""))


def mlflow_run_ids(root: Path, stage: dict) -> dict[str, str]:
    """MLflow run ids the stage wrote into its metrics JSON files."""
    ids: dict[str, str] = {}
    for out in _entries(stage):
        p = root / out["path"]
        if p.suffix == ".json" and p.is_file():
            try:
                data = json.loads(p.read_text())
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                if "mlflow_run_id" in data:
                    ids["stage"] = data["mlflow_run_id"]
                for seed, rid in (data.get("mlflow_seed_run_ids") or {}).items():
                    ids[f"seed{seed}"] = rid
    return ids


def explain(root: Path, path: str, check_stale: bool = True, check_mlflow: bool = True,
            lock: dict | None = None) -> dict[str, Any]:
    """Everything that produced `path`: stage, cmd, params, dep/out hashes, run ids, commit, staleness."""
    lock = lock if lock is not None else load_lock(root)  # parsed once by callers that explain many files
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(root.resolve())
        except ValueError:
            raise ProvenanceError(f"{path}: outside the repository {root}") from None
    name, stage, out = find_stage(lock, p.as_posix())
    info: dict[str, Any] = {
        "path": path,
        "stage": name,
        "cmd": stage.get("cmd"),
        "params": {f: v for f, v in (stage.get("params") or {}).items()},
        "deps": {d["path"]: d.get("md5") for d in stage.get("deps", [])},
        "out": {"path": out["path"], "md5": out.get("md5")},
        "mlflow_runs": mlflow_run_ids(root, stage),
        "git_commit": git_commit(root, "dvc.lock"),
    }
    if check_mlflow and info["mlflow_runs"]:
        info["mlflow_status"] = _mlflow_status(info["mlflow_runs"])
    if check_stale:
        st = subprocess.run(["dvc", "status", name], cwd=root, capture_output=True, text=True)
        info["stale"] = not ("up to date" in st.stdout or st.stdout.strip() == "")
        info["dvc_status"] = st.stdout.strip() or st.stderr.strip()
    return info


def _mlflow_status(ids: dict[str, str]) -> dict[str, str]:
    """Look the runs up in the tracking store (FINISHED, FAILED...), 'missing' if absent."""
    from mlflow.tracking import MlflowClient

    from rlvr.tracking import tracking_uri

    client = MlflowClient(tracking_uri())
    out = {}
    for k, rid in ids.items():
        try:
            out[k] = client.get_run(rid).info.status
        except Exception:  # a store without that run (e.g. results pulled from another machine)
            out[k] = "missing"
    return out


def footer(info: dict) -> str:
    """One-paragraph provenance line for a figure in the report."""
    params = "; ".join(f"{k}={json.dumps(v, sort_keys=True)}" for f in info["params"].values() for k, v in f.items())
    deps = ", ".join(f"{p}@{(h or '')[:8]}" for p, h in info["deps"].items())
    runs = ", ".join(f"{k}={v}" for k, v in info["mlflow_runs"].items()) or "none"
    return (f"stage `{info['stage']}` (`{info['cmd']}`) · params: {params} · inputs: {deps} · "
            f"MLflow runs: {runs} · code: git {info['git_commit'][:10]}")
