"""Stage `report`: every claim of experiments/claims.yaml beside our value and a verdict, the
figures with captions and provenance, the GRPO learning curves, the variant table, the reward-hacking
samples, the reruns in a fresh clone and the benchmarks.

Each figure is copied into `reports/report-figures/` with its provenance (stage, params from
dvc.lock, input hashes, MLflow run ids, git commit) written into PNG text chunks, so a figure taken
out of the page still says where it came from. The learning-curve figures are drawn here, from the
curves the GRPO stages wrote, because each overlays every variant of a chapter.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path

from rlvr.fields import ConfigError
from rlvr.files import atomic_write, read_json_dir, write_text
from rlvr.gitinfo import git_commit, short_commit
from rlvr.pipeline.config import Params
from rlvr.pipeline.determinism import cpu_model, thread_budget
from rlvr.pipeline.paths import GRPO_CURVES, ReportPaths
from rlvr.pipeline.records import write_metrics
from rlvr.pipeline.seeds import tracked
from rlvr.report import narrowing, plots
from rlvr.report.benchtables import fair_bench
from rlvr.report.claims import load_claims
from rlvr.report.evidence import class_counts, judge_all, verdict_record
from rlvr.report.layout import ReportData, render
from rlvr.report.moves import against_committed, changed_code
from rlvr.report.provenance import explain, footer, load_lock

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
    with Image.open(src) as im:
        atomic_write(dst, lambda tmp: im.save(tmp, format="PNG", pnginfo=meta))
    return dst


def merged_info(infos: list[dict]) -> dict:
    """One provenance record for a figure drawn from several stages' outputs (the learning curves)."""
    return {
        "stage": "report, from " + ", ".join(i["stage"] for i in infos),
        "params": {i["stage"]: i["params"] for i in infos},
        "deps": {p: h for i in infos for p, h in i["deps"].items()},
        "mlflow_runs": {f"{i['stage']}:{k}": v for i in infos for k, v in i["mlflow_runs"].items()},
        "git_commit": infos[0]["git_commit"],
    }


def caption(name: str) -> tuple[str, str]:
    """(chapter, caption) of a figure; a figure without one is an error, not a bare image."""
    captions = {**plots.CAPTIONS, **narrowing.CAPTIONS}
    if name not in captions:
        raise ConfigError(f"figure {name}: no caption; add it to rlvr/report/plots.py CAPTIONS")
    return captions[name]


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


def scaling_figure(bench: dict | None, path: Path) -> dict | None:
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
            "git_commit": git_commit(Path.cwd()),
        },
    )
    prov = f"drawn by stage `report` from `{source}` (`rlvr bench --only scaling`; TRL {scaling['trl']})"
    return {"name": path.name, "png": png.read_bytes(), "caption": plots.SCALING_CAPTION, "provenance": prov}


def narrowing_figure(starts: dict | None, problems: dict | None, paths: ReportPaths) -> dict | None:
    """The narrowing map, drawn from `rlvr starts`' counts (and `passk_adv` against `grpo` from the
    pass@k stage's), when the starts record has temperatures; its provenance names both files."""
    cells = narrowing.narrowing_map(starts)
    if cells is None:
        return None
    path = paths.figure_copies / "narrowing-map.png"
    png = narrowing.narrowing_map_figure(cells, narrowing.advantage_against_base(problems), path)
    sources = [p for p in (paths.starts, paths.counts) if p.is_file()]
    figure_with_metadata(
        png,
        png,
        {
            "stage": "report, from `rlvr starts` and stage passk",
            "params": {"rlvr starts": {k: starts[k] for k in ("n", "temperatures", "candidates")}},
            "deps": {p.as_posix(): hashlib.md5(p.read_bytes()).hexdigest() for p in sources},
            "mlflow_runs": {},
            "git_commit": git_commit(Path.cwd()),
        },
    )
    made = starts.get("made", "`rlvr starts`")
    prov = (
        f"drawn by stage `report` from `{paths.starts.as_posix()}` (made by {made}) "
        f"and `{paths.counts.as_posix()}` (stage `passk`)"
    )
    return {"name": path.name, "png": png.read_bytes(), "caption": caption(path.name)[1], "provenance": prov}


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
    metrics = read_json_dir(paths.metrics)
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
                f"drawn by stage `report` from `{GRPO_CURVES.as_posix()}/<variant>/seed<n>.tsv` and "
                f"`seed<n>-eval.tsv`; " + " | ".join(footer(i) for i in infos)
            )
            figure_with_metadata(png, png, merged_info(infos))
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
        samples = json.loads(paths.samples.read_text()) if paths.samples.is_file() else None
        problems = json.loads(paths.counts.read_text()) if paths.counts.is_file() else None
        bench = fair_bench(json.loads(paths.benchmarks.read_text()) if paths.benchmarks.is_file() else None)
        starts = json.loads(paths.starts.read_text()) if paths.starts.is_file() else None
        reruns = json.loads(paths.reruns.read_text()) if paths.reruns.is_file() else None
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
        bench_figure = scaling_figure(bench, paths.figure_copies / "bench-scaling.png")
        map_figure = narrowing_figure(starts, problems, paths)
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
                narrowing_figure=map_figure,
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
            },
        )
        mlrun.log_metrics({f"claims_{k}": v for k, v in counts.items()})
        for path in (paths.markdown, paths.html, paths.verdicts):
            mlrun.log_artifact(path)
    return counts
