"""Stage `report`: every claim of experiments/claims.yaml beside our value and a verdict, the
figures with captions and provenance, the GRPO learning curves, the variant table, the reward-hacking
samples, the reruns in a fresh clone and the benchmarks.

Each figure, PNG and the SVG beside it, is copied into `reports/report-figures/` with its provenance
(stage, params from dvc.lock, input hashes, MLflow run ids, and the commit that ran the stage with
where and when, from its run record) written into the PNG's text chunks and the SVG's metadata, so a
figure taken out of the page still says where it came from; a figure this stage draws names this
stage's own run, and the page embeds the PNG and links the SVG. The learning-curve figures and
chapter B's paired view are drawn here, from the curves and metrics the GRPO and passk stages wrote,
because each overlays every variant of a chapter.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path

from rlvr.determinism import thread_budget
from rlvr.fields import ConfigError
from rlvr.io.files import atomic_write, svg_beside, write_text
from rlvr.io.gitinfo import differs_from_commit, git_commit, short_commit
from rlvr.io.system import cpu_model
from rlvr.pipeline.committed import against_committed, changed_code
from rlvr.pipeline.paths import GRPO_CURVES, ReportPaths
from rlvr.pipeline.provenance import (
    code_line,
    embedded_provenance,
    explain,
    footer,
    load_lock,
    metadata_texts,
    short_line,
    svg_with_provenance,
)
from rlvr.pipeline.records import write_metrics
from rlvr.pipeline.seeds import tracked
from rlvr.pipeline.stageparams import StageParams
from rlvr.report import narrowing, plots, trainplots
from rlvr.report.benchtables import fair_bench
from rlvr.report.chains import end_survival
from rlvr.report.claims import load_claims, read_looks
from rlvr.report.compare import paired_view, variants_by_chain
from rlvr.report.evidence import class_counts, judge_all, verdict_record
from rlvr.report.inputs import checked, read_counts, read_metrics_dir
from rlvr.report.labels import sft_mechanism
from rlvr.report.layout import ReportData, render

CHAPTER_TASKS = {"A": "single_digit", "B": "two_digit"}
# What DVC shows of it (`dvc exp show`), in the headline vocabulary (records.NAMES): claims per verdict
HEADLINE = {v: f"counts.{v}" for v in ("reproduced", "differs", "inconclusive")}


def figure_with_metadata(src: Path, dst: Path, info: dict, svg: bool = True) -> Path:
    """Copy a PNG and the SVG beside it, writing the figure's provenance into the PNG's tEXt chunks
    and the SVG's <metadata> (`rlvr.pipeline.provenance.metadata_texts`: readable with any PNG or XML
    tool, and by `embedded_provenance`). svg=False: a figure made without one (copied alone)."""
    from PIL import Image, PngImagePlugin  # pillow ships with matplotlib

    texts = metadata_texts(info)
    meta = PngImagePlugin.PngInfo()
    for key, text in texts.items():
        meta.add_text(key, text)
    with Image.open(src) as im:
        atomic_write(dst, lambda tmp: im.save(tmp, format="PNG", pnginfo=meta))
    if svg:
        if not svg_beside(src).is_file():
            raise ConfigError(f"{svg_beside(src)}: no SVG beside {src.name}; rerun the stage that draws it")
        write_text(svg_beside(dst), svg_with_provenance(svg_beside(src).read_text(), texts))
    return dst


def figure_entry(name: str, png: Path, text: str, provenance: str, **more) -> dict:
    """A figure entry of the report: its PNG's bytes, caption, provenance in one line (`short_line`
    of what the PNG carries) and the names, in the report's figure folder, of the SVG beside it (None
    without one) and of its full record, written here: `<stem>.provenance.json`, the PNG's
    provenance whole with `provenance` (what it was drawn from, in words) as its `drawn_from`."""
    svg = svg_beside(png)
    texts = embedded_provenance(png)
    record = png.with_name(png.stem + ".provenance.json")
    full = {k.removeprefix("rlvr:"): _decoded(v) for k, v in texts.items()}
    write_text(
        record,
        json.dumps({"figure": name, "drawn_from": provenance, **full}, indent=1, sort_keys=True) + "\n",
    )
    return {
        "name": name,
        "png": png.read_bytes(),
        "svg": svg.name if svg.is_file() else None,
        "record": record.name,
        "caption": text,
        "provenance": short_line(texts),
        **more,
    }


def _decoded(text: str):
    """A metadata text as the value it was written from (`metadata_texts` JSON-encodes all but strings)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def merged_info(infos: list[dict], made: dict) -> dict:
    """One provenance record for a figure this stage draws from several stages' outputs (the learning
    curves, the paired view): their params, inputs and runs; the code that drew it (`made`: this
    stage's run)."""
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
    captions = {**plots.CAPTIONS, **narrowing.CAPTIONS}
    if name not in captions:
        raise ConfigError(f"figure {name}: no caption; add it to rlvr/report/plots.py CAPTIONS")
    return captions[name]


def ended_caption(name: str, metrics: list[dict]) -> str:
    """The caption of a figure of runs with a controlled end, naming the target those runs recorded
    (their metrics files' `target`), not a number written into the caption."""
    targets = sorted({m["target"] for m in metrics})
    if not targets:
        raise ConfigError(f"figure {name}: no run with a controlled end to name the target of")
    return caption(name)[1].format(target=" / ".join(f"{t:g}" for t in targets))


def learning_curve_runs(metrics: dict[str, dict], task: str, ended: bool = False) -> dict[str, dict]:
    """variant -> {"train": [seed rows...], "eval": [seed rows...]} for the variants of `task` (their
    task and seeds as each variant's metrics file records them): those with a controlled end
    (`ended`) or those with a fixed budget, never the two in one figure (their step axes differ)."""
    runs = {}
    for m in (
        m
        for f, m in sorted(metrics.items())
        if f.startswith("grpo-") and m["task"] == task and (m.get("target") is not None) == ended
    ):
        folder = GRPO_CURVES / m["variant"]
        runs[m["variant"]] = {
            "train": [plots.read_tsv(folder / f"seed{s}.tsv") for s in m["seeds"]],
            "eval": [plots.read_tsv(folder / f"seed{s}-eval.tsv") for s in m["seeds"]],
        }
    return runs


BOOK_POINTS = {  # the chapter's two points on the pass@64-against-pass@1 plane, by claim id
    "SFT": ("B-sft-start", "B-sft-pass64"),
    "GRPO": ("B-grpo-end", "B-grpo-pass64"),
}


def ended_figures(
    root: Path, lock, metrics: dict, rows: list, paths: ReportPaths, made: dict, settings: dict
) -> list[dict]:
    """The figures of the runs with a controlled end (chapter B's headline): their learning curves
    and every chain's path in the (pass@1, pass@64) plane of the test problems, the chapter's two
    points on it (their values read from the claims)."""
    runs = learning_curve_runs(metrics, CHAPTER_TASKS["B"], ended=True)
    if not runs:
        return []
    book = {r.claim.id: r.claim.book for r in rows}
    out = []
    infos = [explain(root, (GRPO_CURVES / v).as_posix(), check_stale=False, lock=lock) for v in runs]
    footer_text = " | ".join(footer(i) for i in infos)
    starts, labels = curve_labels(metrics, runs, settings)
    name = "grpo-end-curves-chapter-b.png"
    png = trainplots.learning_curves(
        runs, f"Chapter B: GRPO to its controlled end, {starts}", paths.figure_copies / name, labels
    )
    figure_with_metadata(png, png, merged_info(infos, made))
    prov = f"drawn by stage `report` (code: {code_line(drawn_here(made))}) from `{GRPO_CURVES.as_posix()}`; "
    ended = [m for m in metrics.values() if m.get("variant") in runs and m.get("target") is not None]
    text = ended_caption(name, ended)
    out.append(figure_entry(name, png, text, prov + footer_text, chapter="B", kind="curves"))
    for variant in runs:
        m = metrics[f"grpo-{variant}.json"]
        chain_paths = {s: plots.read_tsv(GRPO_CURVES / variant / f"seed{s}-path.tsv") for s in m["seeds"]}
        chain_paths = {s: [{k: float(v) for k, v in r.items()} for r in p] for s, p in chain_paths.items()}
        points = {who: (book[a], book[b]) for who, (a, b) in BOOK_POINTS.items() if a in book and b in book}
        name = "grpo-end-paths.png"
        rule = f"{variant}: stopped at validation pass@1 {m['target']:g}, cap {m['steps_cap']} steps"
        stopped = frozenset(c for c, r in zip(m["seeds"], m["per_seed"].get("end_reached", [])) if r < 1)
        png = plots.endpoint_paths(
            chain_paths, points, 64, paths.figure_copies / name, rule, narrowed(metrics, variant), stopped
        )
        figure_with_metadata(png, png, merged_info(infos, made))
        out.append(figure_entry(name, png, caption(name)[1], prov + footer_text, chapter="B", kind="result"))
        km = end_survival(m)
        if km is not None:
            name = "end-survival.png"
            png = plots.end_survival(km, float(m["steps_cap"]), paths.figure_copies / name, rule)
            figure_with_metadata(png, png, merged_info(infos, made))
            out.append(
                figure_entry(name, png, caption(name)[1], prov + footer_text, chapter="B", kind="result")
            )
    return out


def narrowed(metrics: dict, variant: str) -> tuple[int, int] | None:
    """(chains whose GRPO pass@n ends below their start's, chains) for `variant`, from passk.json:
    the numbers the claims are decided on; None where passk.json does not pair them."""
    passk = metrics.get("passk.json") or {}
    mine, start = (passk.get("variants") or {}).get(variant) or {}, passk.get("sft") or {}
    rl = mine.get("per_seed", {}).get("pass_at_n_rl")
    sft = start.get("per_seed", {}).get("pass_at_n")
    if not rl or not sft or mine.get("seeds") != start.get("seeds"):
        return None
    return sum(r < s for r, s in zip(rl, sft)), len(rl)


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
    return figure_entry(path.name, png, plots.SCALING_CAPTION, prov)


PAIRED_BASE = "grpo"  # chapter B's reference variant (the chapter's GRPO, on every chain) in the paired view


def paired_entry(root: Path, lock: dict, metrics: dict, paths: ReportPaths, made: dict) -> dict | None:
    """The paired view (every variant of the base's task minus PAIRED_BASE, chain by chain) as a
    figure entry of the report, with the provenance of every metrics file it reads; None when no
    variant pairs with the base."""
    variants = variants_by_chain(metrics, paths.metrics)
    panels = paired_view(variants, PAIRED_BASE)
    if not panels:
        return None
    task = variants[PAIRED_BASE]["task"]
    chapter = next(c for c, t in CHAPTER_TASKS.items() if t == task)
    name = f"grpo-paired-chapter-{chapter.lower()}.png"
    png = plots.paired_figure(
        panels,
        PAIRED_BASE,
        f"Chapter {chapter} ({task}): each variant minus {PAIRED_BASE} on the same chain, "
        "on the chains both ran",
        paths.figure_copies / name,
    )
    compared = sorted({PAIRED_BASE, *(r["variant"] for p in panels for r in p["rows"])})
    files = [f"grpo-{v}.json" for v in compared] + (["passk.json"] if "passk.json" in metrics else [])
    infos = [explain(root, (paths.metrics / f).as_posix(), check_stale=False, lock=lock) for f in files]
    figure_with_metadata(png, png, merged_info(infos, made))
    prov = (
        f"drawn by stage `report` (code: {code_line(drawn_here(made))}) from `{paths.metrics.as_posix()}/` "
        + ", ".join(f"`{f}`" for f in files)
        + "; "
        + " | ".join(footer(i) for i in infos)
    )
    return figure_entry(name, png, caption(name)[1], prov, chapter=chapter, kind="paired")


def starts_entry(starts: dict | None, paths: ReportPaths) -> dict | None:
    """`rlvr starts`' figure (made on demand, committed beside its JSON), copied into the report's
    figure folder with its provenance (where and when: what starts.json's `made` says); its SVG too
    where the command drew one."""
    png = paths.starts.parent / "starts-passk.png"
    if starts is None or not png.is_file():
        return None
    made = f"made by {starts.get('made', '`rlvr starts`')}, not a DVC stage"
    info = {
        "stage": made,
        "params": {},
        "deps": {paths.starts.as_posix(): hashlib.md5(paths.starts.read_bytes()).hexdigest()},
        "mlflow_runs": {},
        "git_commit": starts.get("git_commit", "unknown"),
        "made": {"by": starts.get("made", "`rlvr starts`")},
    }
    copy = figure_with_metadata(png, paths.figure_copies / png.name, info, svg=svg_beside(png).is_file())
    return figure_entry(png.name, copy, caption(png.name)[1], made)


def narrowing_figure(
    starts: dict | None, problems: dict | None, paths: ReportPaths, made: dict
) -> dict | None:
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
            **drawn_here(made),
        },
    )
    prov = (
        f"drawn by stage `report` (code: {code_line(drawn_here(made))}) from `{paths.starts.as_posix()}` "
        f"(made by {starts.get('made', '`rlvr starts`')}) and `{paths.counts.as_posix()}` (stage `passk`)"
    )
    return figure_entry(path.name, png, caption(path.name)[1], prov)


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


def sft_settings(lock: dict) -> dict[str, dict]:
    """Each SFT run's settings as its stage ran them (dvc.lock): its own over `sft_defaults`."""
    out = {}
    for name, entry in lock.items():
        if name.startswith("sft@"):
            ran = entry.get("params", {}).get("params.yaml", {})
            run = name.split("@", 1)[1]
            out[run] = {**(ran.get("sft_defaults") or {}), **(ran.get(f"sft.{run}") or {})}
    return out


def sft_targets(lock: dict) -> dict[str, float | None]:
    """Each SFT run's start target as its stage ran it (dvc.lock): None for a run trained to its budget."""
    return {run: settings.get("target") for run, settings in sft_settings(lock).items()}


def start_mechanism(run: str, settings: dict[str, dict]) -> str:
    """How an SFT run made its start (`rlvr.report.labels.sft_mechanism`), from the settings
    dvc.lock recorded for its stage."""
    s = settings.get(run)
    if not s or not {"noise", "epochs"} <= set(s):
        raise ConfigError(f"dvc.lock: no settings recorded for stage sft@{run}; run `dvc repro sft@{run}`")
    return sft_mechanism(s["noise"], s.get("target"), s["epochs"])


def curve_labels(
    metrics: dict[str, dict], runs: dict[str, dict], settings: dict[str, dict]
) -> tuple[str, dict[str, str]]:
    """(what the title adds, variant -> legend entry) for a chapter's learning curves: the start by
    its run and mechanism, in the title when every variant shares it, else beside each variant."""
    starts = {v: metrics[f"grpo-{v}.json"]["sft"] for v in runs}
    chains = {v: f"{len(c['train'])} chains" for v, c in runs.items()}
    if len(set(starts.values())) == 1:
        run = next(iter(starts.values()))
        return f"from SFT {run} ({start_mechanism(run, settings)})", {v: f"{v} ({chains[v]})" for v in runs}
    mechanisms = "; ".join(f"{run}: {start_mechanism(run, settings)}" for run in sorted(set(starts.values())))
    return f"from SFT starts {mechanisms}", {v: f"{v} from {starts[v]} ({chains[v]})" for v in runs}


def run_info(root: Path, params: StageParams, plan: Path) -> dict:
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
        "plan": plan_name(root, plan),
        "plan_commit": git_commit(root, plan.as_posix(), short=True),  # the confirmatory plan's last commit
        "plan_changed": differs_from_commit(root, plan.as_posix()),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": thread_budget(params.threads),
        "torch": ver("torch"),
        "dvc": ver("dvc"),
        "mlflow": ver("mlflow"),
        "python": platform.python_version(),
    }


def plan_name(root: Path, plan: Path) -> str:
    """The plan as the repository names it: experiments/plan.yaml, or a profile's
    (powered/experiments/plan.yaml), whichever folder the stage runs in."""
    top = Path(os.environ.get("DVC_ROOT") or root).resolve()
    return Path(os.path.relpath((root / plan).resolve(), top)).as_posix()


def beside_plan(root: Path, plan: Path) -> dict | None:
    """The other plan's verdicts a profile's plan names (its `beside`: that plan's report.json, from
    the stage's folder), with the file's md5 so `rlvr verify` can tell when it has moved since; None
    for a plan that names none."""
    from rlvr.io.files import md5
    from rlvr.report.claims import read_beside
    from rlvr.report.inputs import read_verdicts

    other = read_beside(root / plan)
    if other is None:
        return None
    path = root / other
    if not path.is_file():
        raise ConfigError(f"{plan}: `beside` names {other}, absent: run that plan's `dvc repro`")
    return {"path": str(other), "md5": md5(path), "claims": read_verdicts(path)["claims"]}


def run(params: StageParams, paths: ReportPaths, progress: bool = True) -> dict:  # noqa: ARG001
    root = Path.cwd()
    metrics = read_metrics_dir(paths.metrics)
    rows = judge_all(load_claims(paths.claims), metrics, read_looks(paths.plan))
    lock = load_lock(root)
    with tracked(params, {}) as mlrun:
        figures = []
        settings = sft_settings(lock)
        for chapter, task in CHAPTER_TASKS.items():
            runs = learning_curve_runs(metrics, task)
            if not runs:
                continue
            name = f"grpo-curves-chapter-{chapter.lower()}.png"
            starts, labels = curve_labels(metrics, runs, settings)
            png = trainplots.learning_curves(
                runs,
                f"Chapter {chapter}: GRPO learning curves on {task}, {starts}",
                paths.figure_copies / name,
                labels,
                reference=PAIRED_BASE,  # from trainplots.GRID_FROM variants on: each against it
            )
            infos = [explain(root, (GRPO_CURVES / v).as_posix(), check_stale=False, lock=lock) for v in runs]
            prov = (
                f"drawn by stage `report` (code: {code_line(drawn_here(mlrun.made))}) from "
                f"`{GRPO_CURVES.as_posix()}/<variant>/seed<n>.tsv` and `seed<n>-eval.tsv`; "
                + " | ".join(footer(i) for i in infos)
            )
            figure_with_metadata(png, png, merged_info(infos, mlrun.made))
            figures.append(figure_entry(name, png, caption(name)[1], prov, chapter=chapter, kind="curves"))
        figures += ended_figures(root, lock, metrics, rows, paths, mlrun.made, settings)
        paired = paired_entry(root, lock, metrics, paths, mlrun.made)
        figures += [paired] if paired else []
        for png in sorted(paths.figures.glob("*.png")):
            info = explain(root, png.as_posix(), check_stale=False, lock=lock)
            copy = figure_with_metadata(png, paths.figure_copies / png.name, info)
            chapter, text = caption(png.name)
            figures.append(figure_entry(png.name, copy, text, footer(info), chapter=chapter, kind="result"))
        samples = checked(paths.samples, dict) if paths.samples.is_file() else None
        problems = read_counts(paths.counts) if paths.counts.is_file() else None
        bench = fair_bench(checked(paths.benchmarks, dict) if paths.benchmarks.is_file() else None)
        starts = checked(paths.starts, dict) if paths.starts.is_file() else None
        reruns = checked(paths.reruns, dict) if paths.reruns.is_file() else None
        starts_figure = starts_entry(starts, paths)
        bench_figure = scaling_figure(bench, paths.figure_copies / "bench-scaling.png", mlrun.made)
        map_figure = narrowing_figure(starts, problems, paths, mlrun.made)
        records = {r.claim.id: verdict_record(r) for r in rows}
        beside = beside_plan(root, paths.plan)
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
                run=run_info(root, params, paths.plan),
                against=against_committed(root, {"claims": records}),
                beside=beside,
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
                **({"beside": {k: beside[k] for k in ("path", "md5")}} if beside else {}),
                "mlflow_run_id": mlrun.run_id,
                "made": mlrun.made,
            },
            HEADLINE,
        )
        mlrun.log_metrics({"claims_" + k.replace(" ", "_"): v for k, v in counts.items()})  # a name, no space
        for path in (paths.markdown, paths.html, paths.verdicts):
            mlrun.log_artifact(path)
    return counts
