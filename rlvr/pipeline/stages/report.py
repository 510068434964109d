"""Stage `report`: every claim of experiments/claims.yaml beside our value and a verdict, the
figures with captions and provenance, the GRPO learning curves, the variant table, the reward-hacking
samples, the reruns in a fresh clone and the benchmarks.

Each figure is copied into `reports/report-figures/` with its provenance (stage, params from
dvc.lock, input hashes, MLflow run ids, and the commit that ran the stage with where and when, from
its run record) written into PNG text chunks, so a figure taken out of the page still says where it
came from; a figure this stage draws names this stage's own run. The learning-curve figures are
drawn here, from the curves the GRPO stages wrote, because each overlays every variant of a chapter.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path

from rlvr.fields import ConfigError
from rlvr.files import atomic_write, write_text
from rlvr.gitinfo import short_commit
from rlvr.pipeline.config import Params
from rlvr.pipeline.determinism import cpu_model, thread_budget
from rlvr.pipeline.paths import GRPO_CURVES, ReportPaths
from rlvr.pipeline.records import write_metrics
from rlvr.pipeline.seeds import tracked
from rlvr.report import plots
from rlvr.report.benchtables import fair_bench
from rlvr.report.claims import load_claims
from rlvr.report.evidence import class_counts, judge_all, verdict_record
from rlvr.report.inputs import checked, read_counts, read_metrics_dir
from rlvr.report.layout import ReportData, render
from rlvr.report.moves import against_committed, changed_code
from rlvr.report.provenance import code_line, explain, footer, load_lock

CHAPTER_TASKS = {"A": "single_digit", "B": "two_digit"}


def figure_with_metadata(src: Path, dst: Path, info: dict) -> Path:
    """Copy a PNG, writing its provenance into tEXt chunks (readable with any PNG tool)."""
    from PIL import Image, PngImagePlugin  # pillow ships with matplotlib

    meta = PngImagePlugin.PngInfo()
    meta.add_text("rlvr:stage", info["stage"])
    meta.add_text("rlvr:params", json.dumps(info["params"], sort_keys=True))
    meta.add_text("rlvr:deps", json.dumps(info["deps"], sort_keys=True))
    meta.add_text("rlvr:mlflow_runs", json.dumps(info["mlflow_runs"], sort_keys=True))
    meta.add_text("rlvr:git_commit", info["git_commit"])
    meta.add_text("rlvr:git_dirty", json.dumps(info.get("git_dirty")))
    meta.add_text("rlvr:made", json.dumps(info.get("made"), sort_keys=True))
    with Image.open(src) as im:
        atomic_write(dst, lambda tmp: im.save(tmp, format="PNG", pnginfo=meta))
    return dst


def merged_info(infos: list[dict], made: dict) -> dict:
    """One provenance record for a figure this stage draws from several stages' outputs (the learning
    curves): their params, inputs and runs; the code that drew it (`made`: this stage's run)."""
    return {
        "stage": "report, from " + ", ".join(i["stage"] for i in infos),
        "params": {i["stage"]: i["params"] for i in infos},
        "deps": {p: h for i in infos for p, h in i["deps"].items()},
        "mlflow_runs": {f"{i['stage']}:{k}": v for i in infos for k, v in i["mlflow_runs"].items()},
        **drawn_here(made),
    }


def drawn_here(made: dict) -> dict:
    """The provenance fields of a figure this stage draws: its own run's code, host and time."""
    return {"made": made, "git_commit": made["git_commit"], "git_dirty": made["git_dirty"]}


def caption(name: str) -> tuple[str, str]:
    """(chapter, caption) of a figure; a figure without one is an error, not a bare image."""
    if name not in plots.CAPTIONS:
        raise ConfigError(f"figure {name}: no caption; add it to rlvr/report/plots.py CAPTIONS")
    return plots.CAPTIONS[name]


def learning_curve_runs(metrics: dict[str, dict], task: str) -> dict[str, dict]:
    """variant -> {"train": [seed rows...], "eval": [seed rows...]} for the variants of `task` (their
    task and seeds as each variant's metrics file records them)."""
    runs = {}
    for m in (m for f, m in sorted(metrics.items()) if f.startswith("grpo-") and m["task"] == task):
        folder = GRPO_CURVES / m["variant"]
        runs[m["variant"]] = {
            "train": [plots.read_tsv(folder / f"seed{s}.tsv") for s in m["seeds"]],
            "eval": [plots.read_tsv(folder / f"seed{s}-eval.tsv") for s in m["seeds"]],
        }
    return runs


def scaling_figure(bench: dict | None, path: Path, made: dict) -> dict | None:
    """The step-cost scaling figure from `rlvr bench --only scaling`'s record, when there is one."""
    scaling = (bench or {}).get("scaling")
    if not scaling:
        return None
    png = plots.bench_scaling(scaling, path)
    source = "reports/benchmarks.json"
    digest = hashlib.md5(json.dumps(scaling, sort_keys=True).encode()).hexdigest()
    settings = {k: scaling[k] for k in ("prompts", "beta", "base", "steps") if k in scaling}
    figure_with_metadata(
        png,
        png,
        {
            "stage": "report, from `rlvr bench --only scaling`",
            "params": {"rlvr bench --only scaling": settings},
            "deps": {f"{source}#scaling": digest},
            "mlflow_runs": {},
            **drawn_here(made),
        },
    )
    prov = (
        f"drawn by stage `report` (code: {code_line(drawn_here(made))}) from `{source}` "
        f"(`rlvr bench --only scaling`; TRL {scaling['trl']})"
    )
    return {"name": path.name, "png": png.read_bytes(), "caption": plots.SCALING_CAPTION, "provenance": prov}


def variant_configs(lock: dict) -> dict[str, dict]:
    """Each GRPO variant's settings as its stage ran them (dvc.lock): grpo.defaults with its overrides."""
    configs = {}
    for name, entry in lock.items():
        if name.startswith("grpo@"):
            variant = name.split("@", 1)[1]
            recorded = entry.get("params", {}).get("params.yaml", {})
            configs[variant] = {
                **recorded.get("grpo.defaults", {}),
                **recorded.get(f"variants.{variant}", {}),
            }
    return configs


def sft_targets(lock: dict) -> dict[str, float | None]:
    """Each SFT run's start target as its stage ran it (dvc.lock): None for a run trained to its budget."""
    return {
        name.split("@", 1)[1]: entry.get("params", {})
        .get("params.yaml", {})
        .get(f"sft.{name.split('@', 1)[1]}", {})
        .get("target")
        for name, entry in lock.items()
        if name.startswith("sft@")
    }


def run_info(root: Path, params: Params) -> dict:
    """What the report's header names: commit, uncommitted code, date, machine, versions. Read from
    package metadata, so the stage imports none of torch, DVC or MLflow to say which it ran with."""
    from importlib.metadata import PackageNotFoundError, version

    def ver(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return {
        "commit": short_commit(root),
        "changed": changed_code(root),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": thread_budget(params.threads),
        "torch": ver("torch"),
        "dvc": ver("dvc"),
        "mlflow": ver("mlflow"),
        "python": platform.python_version(),
    }


def run(params: Params, paths: ReportPaths, progress: bool = True) -> dict:  # noqa: ARG001
    root = Path.cwd()
    metrics = read_metrics_dir(paths.metrics)
    rows = judge_all(load_claims(paths.claims), metrics)
    lock = load_lock(root)
    with tracked("report", None, params, {}) as mlrun:
        figures = []
        for chapter, task in CHAPTER_TASKS.items():
            runs = learning_curve_runs(metrics, task)
            if not runs:
                continue
            name = f"grpo-curves-chapter-{chapter.lower()}.png"
            png = plots.learning_curves(
                runs, f"Chapter {chapter}: GRPO learning curves ({task})", paths.figure_copies / name
            )
            infos = [explain(root, (GRPO_CURVES / v).as_posix(), check_stale=False, lock=lock) for v in runs]
            prov = (
                f"drawn by stage `report` (code: {code_line(drawn_here(mlrun.made))}) from "
                f"`{GRPO_CURVES.as_posix()}/<variant>/seed<n>.tsv` and `seed<n>-eval.tsv`; "
                + " | ".join(footer(i) for i in infos)
            )
            figure_with_metadata(png, png, merged_info(infos, mlrun.made))
            figures.append(
                {
                    "name": name,
                    "png": png.read_bytes(),
                    "caption": caption(name)[1],
                    "provenance": prov,
                    "chapter": chapter,
                    "kind": "curves",
                }
            )
        for png in sorted(paths.figures.glob("*.png")):
            info = explain(root, png.as_posix(), check_stale=False, lock=lock)
            copy = figure_with_metadata(png, paths.figure_copies / png.name, info)
            chapter, text = caption(png.name)
            figures.append(
                {
                    "name": png.name,
                    "png": copy.read_bytes(),
                    "caption": text,
                    "provenance": footer(info),
                    "chapter": chapter,
                    "kind": "result",
                }
            )
        samples = checked(paths.samples, dict) if paths.samples.is_file() else None
        problems = read_counts(paths.counts) if paths.counts.is_file() else None
        bench = fair_bench(checked(paths.benchmarks, dict) if paths.benchmarks.is_file() else None)
        starts = checked(paths.starts, dict) if paths.starts.is_file() else None
        reruns = checked(paths.reruns, dict) if paths.reruns.is_file() else None
        starts_png = paths.starts.parent / "starts-passk.png"
        starts_figure = (
            None
            if starts is None or not starts_png.is_file()
            else {
                "name": "starts-passk.png",
                "png": starts_png.read_bytes(),
                "caption": caption("starts-passk.png")[1],
                "provenance": f"made by {starts.get('made', '`rlvr starts`')}, not a DVC stage",
            }
        )
        bench_figure = scaling_figure(bench, paths.figure_copies / "bench-scaling.png", mlrun.made)
        records = {r.claim.id: verdict_record(r) for r in rows}
        markdown, page, counts = render(
            ReportData(
                rows,
                figures,
                metrics,
                samples,
                bench,
                problems=problems,
                bench_figure=bench_figure,
                configs=variant_configs(lock),
                targets=sft_targets(lock),
                reruns=reruns,
                starts=starts,
                starts_figure=starts_figure,
                run=run_info(root, params),
                against=against_committed(root, {"claims": records}),
            )
        )
        write_text(paths.markdown, markdown)
        write_text(paths.html, page)
        write_metrics(
            paths.verdicts,
            {
                "counts": counts,
                "by_class": class_counts(rows),
                "claims": records,
                "mlflow_run_id": mlrun.run_id,
                "made": mlrun.made,
            },
            ("counts",),  # its headline: claims per verdict
        )
        mlrun.log_metrics({f"claims_{k}": v for k, v in counts.items()})
        for path in (paths.markdown, paths.html, paths.verdicts):
            mlrun.log_artifact(path)
    return counts
