"""`rlvr verify`: the committed results are what the committed code produces.

Tests check behaviour on inputs they make; this checks the files a commit carries, on any clone
(checkpoints and raw samples may be absent: they live in the DVC cache):

- dvc.yaml is what `rlvr pipeline --write` writes, and lists every module each stage reaches;
- no stage is stale: every code and params dependency dvc.lock records is what the tree holds
  (`dvc status`, less the outputs a clone without the cache does not have);
- every claim names a metric a stage produces, and report.json's verdicts are the ones the claims'
  rules give on the committed metrics; every interval lies within the values its metric can take,
  and every claim that differs or is inconclusive carries a note on why;
- every figure copy in the report says where it came from (PNG metadata: stage, params, the commit
  that ran it, where and when), and provenance can explain the report's inputs, each stage's run
  record naming the code that ran it, where and when (what `rlvr provenance` prints, with or
  without the MLflow store);
- one commit answers "which code made this": the commit each stage's run record names holds the
  bytes dvc.lock hashed for every code dep, each figure's embedded record is its stage's run
  record, and (where this checkout's MLflow store holds the run) the run's `git.commit` tag agrees;
- reports/benchmarks.json names its machine;
- every params profile (a folder beside the pipeline with its own params.yaml and dvc.yaml, such
  as powered/: a second plan) passes the same checks in its folder, and its report shows the other
  plan's verdicts as they are now.

Each check returns its problems, one line each; none means it holds. Beside the checks, `rlvr
verify` compares the workspace's results with HEAD's in one word (rlvr.tools.rerun,
rlvr.report.moves): identical, statistically the same, or moved (a verdict flipped between
reproduced and differs: it fails).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import yaml

from rlvr.io.dvcinfo import status as dvc_status
from rlvr.pipeline.provenance import load_lock, produced_paths, stale_problems
from rlvr.report.inputs import read_metrics_dir, read_verdicts


def _up(root: Path) -> str:
    """The repository root as seen from `root` ("." for the repository, ".." for a profile)."""
    from rlvr.pipeline.dvcfile import ROOT

    return Path(os.path.relpath(ROOT, root.resolve())).as_posix()


def dvc_yaml_problems(root: Path) -> list[str]:
    from rlvr.pipeline import dvcfile

    committed = (root / "dvc.yaml").read_text()
    if committed != dvcfile.render(root / "params.yaml"):
        profile = "" if _up(root) == "." else f" --profile {root.name}"
        return [f"dvc.yaml is not what `rlvr pipeline --write{profile}` writes: run it and commit dvc.yaml"]
    return [
        f"dvc.yaml: stage {s} does not list {f}"
        for s, f in dvcfile.missing_code_deps(yaml.safe_load(committed), _up(root))
    ]


def claims_problems(root: Path) -> list[str]:
    """Every claim points at a metric a stage writes, and the committed verdicts are recomputed."""
    from rlvr.pipeline.paths import PLAN
    from rlvr.report.claims import load_claims, read_looks
    from rlvr.report.evidence import judge_all, lookup, verdict_record

    claims = load_claims(root / "experiments" / "claims.yaml")
    produced = produced_paths(load_lock(root))
    metrics = read_metrics_dir(root / "reports" / "metrics")
    problems = []
    for c in claims:
        for ref in c.refs:
            if f"reports/metrics/{ref[0]}" not in produced:
                problems.append(f"claim {c.id}: {ref[0]} is not a stage output")
                continue
            try:
                lookup(metrics, ref)
            except KeyError:
                problems.append(f"claim {c.id}: {'/'.join(map(str, ref))} is not in the committed metrics")
    if problems:
        return problems
    expected = {r.claim.id: verdict_record(r) for r in judge_all(claims, metrics, read_looks(root / PLAN))}
    committed = read_verdicts(root / "reports" / "report.json")["claims"]
    problems += feasible_problems(claims, committed) + note_problems(claims, expected)
    for cid in sorted(set(expected) | set(committed)):
        want, have = expected.get(cid), committed.get(cid)
        if want is None or have is None:
            problems.append(f"claim {cid}: in {'report.json' if want is None else 'claims.yaml'} only")
        elif json.dumps(want, sort_keys=True) != json.dumps(have, sort_keys=True):
            problems.append(
                f"claim {cid}: report.json says {have['verdict']}, the rule gives {want['verdict']}"
            )
    return problems


def feasible_problems(claims: list, records: dict[str, dict]) -> list[str]:
    """A measured or calibrated claim names the values its metric can take, and no interval in
    report.json leaves them. claims: rlvr.report.claims.Claim."""
    problems = []
    for c in claims:
        if c.category not in ("measured", "calibrated"):
            continue
        if c.feasible is None:
            problems.append(f"claim {c.id}: no `feasible` range for its metric")
            continue
        lo, hi = c.feasible
        interval = (records.get(c.id) or {}).get("interval")
        if interval and not (lo <= interval[0] <= interval[1] <= hi):
            problems.append(f"claim {c.id}: interval {interval} leaves the feasible [{lo}, {hi}]")
    return problems


def note_problems(claims: list, records: dict[str, dict]) -> list[str]:
    """Every claim that differs or is inconclusive says why, in a note in claims.yaml."""
    return [
        f"claim {c.id}: {records[c.id]['verdict']} but claims.yaml gives no `note` on why"
        for c in claims
        if c.id in records and records[c.id]["verdict"] in ("differs", "inconclusive") and not c.note
    ]


def figure_problems(root: Path) -> list[str]:
    from PIL import Image

    pngs = sorted((root / "reports" / "report-figures").glob("*.png"))
    if not pngs:
        return ["reports/report-figures holds no figure: run `dvc repro`"]
    problems = []
    for png in pngs:
        with Image.open(png) as im:
            text = getattr(im, "text", {})
            if not (text.get("rlvr:stage") and text.get("rlvr:git_commit") and text.get("rlvr:params")):
                problems.append(f"{png.relative_to(root)}: no provenance in its PNG metadata")
            elif json.loads(text.get("rlvr:made") or "null") is None:
                problems.append(f"{png.relative_to(root)}: its PNG metadata does not say where or when made")
    return problems


def provenance_problems(root: Path) -> list[str]:
    """Provenance explains every metrics file: its stage, params and input hashes, and (its run
    record) which code ran it, where and when: committed code, for every dep of its stage."""
    from rlvr.pipeline.provenance import ProvenanceError, explain, unexplained

    problems = []
    for f in sorted((root / "reports" / "metrics").glob("*.json")):
        try:
            info = explain(root, f.relative_to(root).as_posix(), check_stale=False)
        except ProvenanceError as exc:
            problems.append(str(exc))
            continue
        if not info["deps"]:
            problems.append(f"{f.relative_to(root)}: stage {info['stage']} records no inputs")
        if unexplained(info):
            problems.append(f"{f.relative_to(root)}: {unexplained(info)}")
        elif uncommitted_deps(info):
            problems.append(f"{f.relative_to(root)}: {uncommitted_deps(info)}")
    return problems


def uncommitted_deps(info: dict) -> str | None:
    """Why a result was not made by committed code: its run record says a dep of its stage differed
    from the commit it names (or that the tree differed, without saying which files); None when
    every dep was the commit's."""
    made = info["made"]
    if not made.get("git_dirty"):
        return None
    changed = made.get("git_changed")
    if changed is None:
        return f"stage {info['stage']} ran from uncommitted code its record does not name (rerun it)"
    deps = [c for c in changed if any(c == d or c.startswith(d.rstrip("/") + "/") for d in info["deps"])]
    return (
        f"stage {info['stage']} ran with uncommitted changes to its deps {', '.join(deps)}" if deps else None
    )


def _git_path(root: Path, path: str) -> str:
    """`path` (relative to `root`) as `<commit>:<path>` names it from `root`: "./" or "../" makes git
    read it relative to `root`; a link (a profile's claims registry, say) is followed to the file it
    names, whose bytes are what DVC hashed."""
    if (root / path).is_symlink():
        path = os.path.relpath(os.path.realpath(root / path), root.resolve())
    return path if path.startswith("../") else f"./{path}"


def commit_problems(root: Path) -> list[str]:
    """One answer to "which code made this": for every stage, the commit its run record names holds,
    for every code dep, the bytes dvc.lock hashed (or the record names the file as changed, which
    `uncommitted_deps` judges); every figure's embedded record is its stage's run record; and where
    this checkout's MLflow store holds the stage's run, its `git.commit` tag is that commit too."""
    from rlvr.io.gitinfo import committed_md5s
    from rlvr.pipeline.provenance import ProvenanceError, made_by, mlflow_run_ids, producers

    try:
        lock = load_lock(root)
    except ProvenanceError as exc:
        return [str(exc)]
    problems, commits = [], {}
    for name, stage in lock.items():
        made = made_by(root, stage)
        if not made or not made.get("git_commit") or made["git_commit"] == "unknown":
            continue  # provenance_problems names a stage whose record cannot say
        commits[name] = made["git_commit"]
        code = {
            d["path"]: d["md5"]
            for d in stage.get("deps", [])
            if d.get("md5") and not d["md5"].endswith(".dir") and not producers(lock, d["path"])
        }
        here = {p: _git_path(root, p) for p in code}
        held = committed_md5s(root, made["git_commit"], [here[p] for p in sorted(code)])
        if held is None:
            problems.append(
                f"stage {name}: git cannot read commit {made['git_commit'][:10]} (a shallow clone?)"
            )
            continue
        changed = set(made.get("git_changed") or [])
        for path, md5 in sorted(code.items()):
            if held[here[path]] != md5 and path not in changed:
                at = "lacks it" if held[here[path]] is None else "holds other bytes"
                problems.append(
                    f"stage {name}: dvc.lock hashed {path}, but {made['git_commit'][:10]} (its run "
                    f"record's commit) {at}: rerun the stage from committed code"
                )
    problems += _figure_record_problems(root, lock, made_by)
    problems += _mlflow_commit_problems(root, lock, commits, mlflow_run_ids)
    return problems


def _figure_record_problems(root: Path, lock: dict, made_by) -> list[str]:
    """Every figure whose metadata says where it was made says what the run record of the stage that
    drew it does: `rlvr:stage` names it ("passk"; "report, from grpo@...": the report drew it). A
    figure drawn by an on-demand command (`rlvr starts`) has its own record, not a stage's."""
    from PIL import Image

    problems = []
    for png in sorted((root / "reports").rglob("*.png")):
        with Image.open(png) as im:
            text = getattr(im, "text", {})
        embedded = json.loads(text.get("rlvr:made") or "null")
        drawn_by = (text.get("rlvr:stage") or "").split(",")[0]
        if embedded is None or drawn_by not in lock:
            continue  # figure_problems names a report figure without a record
        if embedded != made_by(root, lock[drawn_by]):
            rel = png.relative_to(root).as_posix()
            problems.append(f"{rel}: its embedded record is not stage {drawn_by}'s run record (rerun it)")
    return problems


def _mlflow_commit_problems(root: Path, lock: dict, commits: dict[str, str], run_ids) -> list[str]:
    """Where the MLflow store is this checkout's SQLite file and holds a stage's run, the run's
    `git.commit` tag is the run record's commit. A clone without the store has nothing to compare."""
    import os

    uri = os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"  # the checkout's own by default
    store = root / uri.removeprefix("sqlite:///") if uri.startswith("sqlite:///") else None
    if store is None or not store.is_file():  # a server is not this checkout's store
        return []
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client, problems = MlflowClient(f"sqlite:///{store}"), []
    for name, commit in sorted(commits.items()):
        run_id = run_ids(root, lock[name]).get("stage")
        try:
            tags = client.get_run(run_id).data.tags if run_id else None
        except MlflowException:
            continue  # logged to another store (the record says which): not this one's to judge
        if tags is not None and tags.get("git.commit") != commit:
            problems.append(
                f"stage {name}: MLflow run {run_id} says commit {str(tags.get('git.commit'))[:10]}, "
                f"its run record {commit[:10]}"
            )
    return problems


def benchmark_problems(root: Path) -> list[str]:
    try:
        data = json.loads((root / "reports" / "benchmarks.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return [f"reports/benchmarks.json: {exc}"]
    missing = {"cpu_count", "threads", "torch"} - set(data.get("machine", {}))
    return [f"reports/benchmarks.json: machine lacks {', '.join(sorted(missing))}"] if missing else []


CHECKS: dict[str, Callable[[Path], list[str]]] = {
    "dvc.yaml": dvc_yaml_problems,
    "no stale stage": lambda root: stale_problems(dvc_status(root), produced_paths(load_lock(root))),
    "claims and verdicts": claims_problems,
    "figure provenance": figure_problems,
    "metrics provenance": provenance_problems,
    "one commit": commit_problems,
    "benchmarks": benchmark_problems,
}


def beside_problems(folder: Path) -> list[str]:
    """A profile whose plan names another plan's report.json (`beside`) shows those verdicts as the
    file holds them now: its report.json records the md5 of the one it showed."""
    from rlvr.io.files import md5
    from rlvr.report.claims import read_beside

    other = read_beside(folder / "experiments" / "plan.yaml")
    if other is None:
        return []
    report = folder / "reports" / "report.json"
    if not report.is_file():
        return [f"{folder.name} has no report: `dvc repro {folder.name}/dvc.yaml`"]
    shown = read_verdicts(report).get("beside")
    if not shown or not (folder / other).is_file() or shown.get("md5") != md5(folder / other):
        return [
            f"{folder.name}/reports/report.json does not show {other} as it is now: "
            f"`dvc repro {folder.name}/dvc.yaml` reruns its report"
        ]
    return []


PROFILE_CHECKS = {**{k: v for k, v in CHECKS.items() if k != "benchmarks"}, "the other plan": beside_problems}


def profiles(root: Path) -> list[Path]:
    """The params profiles beside the pipeline: each folder of `root` holding a params.yaml and a
    dvc.yaml (a second plan of the same pipeline, run with `dvc repro <folder>/dvc.yaml`)."""
    found = (d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    return sorted(d for d in found if (d / "params.yaml").is_file() and (d / "dvc.yaml").is_file())


def verify(root: Path) -> dict[str, list[str]]:
    """Every check's problems, by name: the pipeline's, then each profile's ("powered: ...")."""
    results = {name: check(root) for name, check in CHECKS.items()}
    for folder in profiles(root):
        results |= {f"{folder.name}: {name}": check(folder) for name, check in PROFILE_CHECKS.items()}
    return results
