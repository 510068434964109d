"""Stage `report`: every claim of experiments/claims.yaml beside our value and a verdict, the
figures with their provenance, the variant table, the reward-hacking samples and the benchmarks.

Each figure is copied into `reports/report-figures/` with its provenance (stage, params from
dvc.lock, input hashes, MLflow run ids, git commit) written into PNG text chunks, so a figure taken
out of the page still says where it came from.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rlvr.config import Params
from rlvr.paths import ReportPaths
from rlvr.provenance import explain, footer, load_lock
from rlvr.report import check_claims, evaluate_claims, render, verdict_record
from rlvr.runtime import atomic_write, read_json_dir, write_json, write_text


def figure_with_metadata(src: Path, dst: Path, info: dict) -> Path:
    """Copy a PNG, writing its provenance into tEXt chunks (readable with any PNG tool)."""
    from PIL import Image, PngImagePlugin  # pillow ships with matplotlib

    meta = PngImagePlugin.PngInfo()
    meta.add_text("rlvr:stage", info["stage"])
    meta.add_text("rlvr:params", json.dumps(info["params"], sort_keys=True))
    meta.add_text("rlvr:deps", json.dumps(info["deps"], sort_keys=True))
    meta.add_text("rlvr:mlflow_runs", json.dumps(info["mlflow_runs"], sort_keys=True))
    meta.add_text("rlvr:git_commit", info["git_commit"])
    with Image.open(src) as im:
        atomic_write(dst, lambda tmp: im.save(tmp, format="PNG", pnginfo=meta))
    return dst


def run(params: Params, paths: ReportPaths, progress: bool = True) -> dict:  # noqa: ARG001
    root = Path.cwd()
    claims = check_claims(yaml.safe_load(paths.claims.read_text()), str(paths.claims))
    metrics = read_json_dir(paths.metrics)
    rows = evaluate_claims(claims, metrics)
    figures, lock = [], load_lock(root)
    for png in sorted(paths.figures.glob("*.png")):
        info = explain(root, png.as_posix(), check_stale=False, check_mlflow=False, lock=lock)
        copy = figure_with_metadata(png, paths.figure_copies / png.name, info)
        figures.append({"name": png.name, "footer": footer(info), "png": copy.read_bytes()})
    samples = json.loads(paths.samples.read_text()) if paths.samples.is_file() else None
    problems = json.loads(paths.counts.read_text()) if paths.counts.is_file() else None
    bench = json.loads(paths.benchmarks.read_text()) if paths.benchmarks.is_file() else None
    markdown, page, counts = render(rows, figures, metrics, samples, bench, problems)
    write_text(paths.markdown, markdown)
    write_text(paths.html, page)
    write_json(paths.verdicts, {"counts": counts, "claims": {r["id"]: verdict_record(r) for r in rows}})
    return counts
