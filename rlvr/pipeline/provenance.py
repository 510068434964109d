"""Provenance: which stage, params, inputs and MLflow runs produced a figure or a metrics file.

Everything comes from what DVC recorded (dvc.lock: the stage, its exact param values, dep and out
hashes) and from the stage's own run record (the MLflow run ids it wrote, and where, when and with
which commit it ran), so the chain dvc.lock -> run record -> MLflow run can be followed from any
output, and a clone without the MLflow store still says where a result was made. The stages upstream of it
are found through dvc.lock too (a dep of one stage is an out of another, or a folder holding outs),
so a figure made from checkpoints also names the settings those checkpoints were trained with.
Git says whether the file and the code differ from what was committed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from rlvr.fields import UserError
from rlvr.io.dvcinfo import stage_status
from rlvr.io.files import bounded_text, check_expansion, md5
from rlvr.io.gitinfo import code_version, differs_from_commit, git_commit, ignored


class ProvenanceError(UserError):
    """A path the pipeline did not produce (one line, listing what it can explain)."""


def load_lock(root: Path) -> dict:
    lock = root / "dvc.lock"
    if not lock.is_file():
        raise ProvenanceError(f"{lock}: not found; run `dvc repro` first")
    try:
        data = yaml.load(
            bounded_text(lock, "DVC lock file"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        )
        check_expansion(data, lock, "DVC lock file")
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = (str(exc).splitlines() or ["not YAML"])[0]
        raise ProvenanceError(
            f"{lock}: not a lock file DVC can read ({first}); restore it (git checkout dvc.lock) "
            "or rerun dvc repro"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("stages"), dict):
        raise ProvenanceError(
            f"{lock}: no `stages` mapping: not a DVC lock file; restore it (git checkout dvc.lock)"
        )
    return data["stages"]


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
    raise ProvenanceError(
        f"{path}: not an output of any stage in dvc.lock; it can explain: "
        + ", ".join(near[:12])
        + (f" ... ({len(known)} outputs in all)" if len(known) > 12 else "")
    )


def _within(inner: str, outer: str) -> bool:
    """`inner` is `outer` or a path inside the folder `outer`."""
    inner, outer = inner.rstrip("/"), outer.rstrip("/")
    return inner == outer or inner.startswith(outer + "/")


def produced_paths(lock: dict) -> set[str]:
    """Every stage output dvc.lock records."""
    return {o["path"] for s in lock.values() for o in _entries(s)}


ABSENT = ("deleted", "not in cache")  # what a clone without the DVC cache reports for a cached file


def _overlaps(path: str, others: set[str]) -> bool:
    return any(path == o or path.startswith(o + "/") or o.startswith(path + "/") for o in others)


def stale_problems(status: dict, produced: set[str]) -> list[str]:
    """`dvc status --json` less what a clone without the DVC cache lacks: outputs it never fetched,
    and deps that are (or hold) other stages' outputs (`produced`, from dvc.lock), which are current
    when their own stage is. What is left is a stage the committed code would rerun: the one
    definition of "stale" (`rlvr verify`, `rlvr provenance`)."""
    problems = []
    for stage, changes in status.items():
        for change in changes:
            if change == "always changed":  # the guard stage, by design: it runs on every repro
                continue
            if isinstance(change, str):  # "changed command"
                problems.append(f"{stage}: {change}")
                continue
            for kind, files in change.items():
                if kind == "changed deps":
                    problems += [
                        f"{stage}: dep {p} {how}"
                        for p, how in files.items()
                        if how not in ABSENT and not _overlaps(p, produced)
                    ]
                elif kind == "changed outs":
                    problems += [f"{stage}: out {p} {how}" for p, how in files.items() if how not in ABSENT]
    return problems


def staleness(root: Path, name: str, lock: dict) -> tuple[bool | None, list[str]]:
    """(is stage `name` stale, why in lines): `stale_problems` of its `dvc status`, so a clone that
    lacks the DVC-cached files (never pulled) is not called stale for that; what it lacks is said.
    None when DVC could not answer."""
    status = stage_status(root, name)
    if isinstance(status, str):
        return None, [status]
    problems = stale_problems(status, produced_paths(lock))
    if problems:
        return True, problems
    absent = [
        p
        for changes in status.values()
        for c in changes
        if isinstance(c, dict)
        for f in c.values()
        for p in f
    ]
    if absent:
        return False, [
            f"its DVC-cached files are not in this workspace ({_some(absent)}): dvc pull or dvc repro"
        ]
    return False, []


def producers(lock: dict, dep: str) -> list[str]:
    """Stages with an out that is `dep`, holds it (a file inside a folder out) or lies inside it (a
    folder dep such as data/grpo over the outs data/grpo/<variant> of every grpo@ stage)."""
    return [
        name
        for name, stage in lock.items()
        if any(_within(dep, o["path"]) or _within(o["path"], dep) for o in _entries(stage))
    ]


def upstream(lock: dict, name: str) -> dict[str, dict]:
    """Every stage `name` depends on, directly or through others, nearest first, each with the params
    dvc.lock recorded for it: {stage: {params file: {key: value}}}. Code deps (rlvr/*.py) are
    outputs of no stage, so they end the walk."""
    found: dict[str, dict] = {}
    frontier = [name]
    while frontier:
        nxt = []
        for stage in frontier:
            for dep in lock[stage].get("deps", []):
                for up in producers(lock, dep["path"]):
                    if up != name and up not in found:
                        found[up] = dict(lock[up].get("params") or {})
                        nxt.append(up)
        frontier = nxt
    return found


def file_dirty(root: Path, path: str, out: dict) -> bool | None:
    """Does `path` differ from its committed version? Git-tracked files: `git status` (untracked or
    deleted counts as differing). DVC-cached files (git-ignored): their md5 against dvc.lock's.
    None when it cannot be told here: outside git, a file of a DVC-cached folder (its listing is
    in the DVC cache; `stale` covers it), or a path that resolves outside the repository (a link,
    or a hand-edited dvc.lock): nothing outside it is read."""
    p = root / path
    if not p.resolve().is_relative_to(root.resolve()):
        return None
    if not ignored(root, path):
        return differs_from_commit(root, path)
    if not p.exists():
        return True
    if p.is_file() and out["path"].rstrip("/") == path and out.get("hash", "md5") == "md5" and out.get("md5"):
        return md5(p) != out["md5"]
    return None


def dirty_flags(root: Path, path: str, out: dict) -> dict[str, Any]:
    """{"file": does the output differ from its committed version, "code": does the code differ from
    HEAD (gitinfo.code_version, the one definition), "code_changes": the paths that do}; None: unknown."""
    code = code_version(root)
    return {"file": file_dirty(root, path, out), "code": code["dirty"], "code_changes": code["changed"]}


def _json_outs(root: Path, stage: dict) -> list[dict]:
    """The stage's JSON outputs that hold a table (its results, run record, headline)."""
    found = []
    for out in _entries(stage):
        p = root / out["path"]
        if p.suffix == ".json" and p.is_file():
            try:
                data = json.loads(p.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                continue  # a damaged output holds no table to read; `rlvr verify` names it
            if isinstance(data, dict):
                found.append(data)
    return found


def mlflow_run_ids(root: Path, stage: dict) -> dict[str, str]:
    """MLflow run ids the stage wrote into its run record."""
    ids: dict[str, str] = {}
    for data in _json_outs(root, stage):
        if "mlflow_run_id" in data:
            ids["stage"] = data["mlflow_run_id"]
        for seed, rid in (data.get("mlflow_seed_run_ids") or {}).items():
            ids[seed if str(seed).startswith("seed") else f"seed{seed}"] = rid  # seed3, seed3-g1
    return ids


def made_by(root: Path, stage: dict) -> dict | None:
    """Where, when and with which code the stage last ran, as its run record says (`made`: git_commit,
    git_dirty, host, tracking_uri, started_utc); None for a stage whose record does not say."""
    return next((d["made"] for d in _json_outs(root, stage) if isinstance(d.get("made"), dict)), None)


def copied_from(lock: dict, path: str) -> str | None:
    """The figure that `path` is the report's copy of, or None: stage `report` copies every figure
    another stage drew (reports/figures/<name>) into its own folder (reports/report-figures/<name>),
    adding that figure's provenance to the copy's PNG metadata; the figures it draws itself are no
    copies. A copy's provenance is its original's: the stage that drew it."""
    from rlvr.pipeline.paths import FIGURES, report

    p = Path(path)
    if p.parent != report().figure_copies:
        return None
    original = (FIGURES / p.name).as_posix()
    try:
        name, _, _ = find_stage(lock, original)
    except ProvenanceError:
        return None
    return original if name != "report" else None


def explain(
    root: Path, path: str, check_stale: bool = True, mlflow_uri: str | None = None, lock: dict | None = None
) -> dict[str, Any]:
    """Everything that produced `path`: stage, cmd, params, dep/out hashes, the stages upstream with
    their params, run ids, commit, whether the file or the code differ from it, staleness.

    Keys: path, stage, cmd, params, deps, out, upstream, mlflow_runs, made (the run record's, or
    None), git_commit and git_dirty (the code that ran the stage, from `made`; without one, the last
    commit to touch dvc.lock and None), commit_from ("run record" or "dvc.lock"), dirty (the file
    and the code now); with `mlflow_uri` (the tracking store to look the runs up in) mlflow_status
    (when there are runs), with check_stale stale and stale_why (`staleness`)."""
    lock = lock if lock is not None else load_lock(root)  # parsed once by callers that explain many files
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(root.resolve())
        except ValueError:
            raise ProvenanceError(f"{path}: outside the repository {root}") from None
    original = copied_from(lock, p.as_posix())
    if original is not None:  # the report's copy: what drew it is what drew the original
        info = explain(root, original, check_stale, mlflow_uri, lock)
        copier, _, copy_out = find_stage(lock, p.as_posix())
        return {**info, "path": path, "copy": {"of": original, "by": copier, "out": copy_out.get("md5")}}
    name, stage, out = find_stage(lock, p.as_posix())
    made = made_by(root, stage)
    drawn = drawn_from(root / p, lock) if name == "report" else []
    info: dict[str, Any] = {
        "path": path,
        "stage": name,
        "cmd": stage.get("cmd"),
        "params": {f: v for f, v in (stage.get("params") or {}).items()},
        "deps": {d["path"]: d.get("md5") for d in stage.get("deps", [])},
        "out": {"path": out["path"], "md5": out.get("md5")},
        "upstream": narrowed(lock, drawn) if drawn else upstream(lock, name),
        "drawn_from": drawn,
        "mlflow_runs": mlflow_run_ids(root, stage),
        "made": made,
        "git_commit": made["git_commit"] if made else git_commit(root, "dvc.lock"),
        "git_dirty": made.get("git_dirty") if made else None,
        "commit_from": "run record" if made else "dvc.lock",
        "dirty": dirty_flags(root, p.as_posix(), out),
        "changed_in": None if ignored(root, p.as_posix()) else git_commit(root, p.as_posix()),
    }
    if mlflow_uri is not None and info["mlflow_runs"]:
        info["mlflow_status"] = _mlflow_status(mlflow_uri, info["mlflow_runs"])
    if check_stale:
        info["stale"], info["stale_why"] = staleness(root, name, lock)
    return info


def drawn_from(path: Path, lock: dict) -> list[str]:
    """The stages whose outputs a figure the report draws itself was drawn from, as the figure's own
    metadata names them ("report, from grpo@dapo, grpo@grpo"); [] for any other file."""
    if path.suffix not in (".png", ".svg") or not path.is_file():
        return []
    try:
        stage = embedded_provenance(path).get("rlvr:stage", "")
    except (OSError, ValueError, SyntaxError):  # a figure PIL or the XML parser cannot read
        return []
    _, _, sources = stage.partition(", from ")
    return [s for s in sources.split(", ") if s in lock]


def narrowed(lock: dict, stages: list[str]) -> dict[str, dict]:
    """`stages` and every stage upstream of them, nearest first, each with its dvc.lock params."""
    found = {s: dict(lock[s].get("params") or {}) for s in stages}
    for s in stages:
        found.update((k, v) for k, v in upstream(lock, s).items() if k not in found)
    return found


def _mlflow_status(uri: str, ids: dict[str, str]) -> dict[str, str]:
    """Look the runs up in the tracking store at `uri` (FINISHED, FAILED...), 'missing' if absent. A
    local SQLite store that does not exist (a fresh clone) is not made by looking."""
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        return {k: "missing" for k in ids}
    from mlflow.tracking import MlflowClient

    from rlvr.pipeline.store import client_uri

    client = MlflowClient(client_uri(uri))
    out = {}
    for k, rid in ids.items():
        try:
            out[k] = client.get_run(rid).info.status
        except Exception:  # a store without that run (e.g. results pulled from another machine)
            out[k] = "missing"
    return out


def _some(files: list[str], shown: int = 3) -> str:
    """The first `shown` files, and how many more (the run record lists them all)."""
    more = f" and {len(files) - shown} more" if len(files) > shown else ""
    return ", ".join(files[:shown]) + more


def code_line(info: dict) -> str:
    """The code that made it, in words: `git 2b521db0ab (uncommitted changes), made on host at
    time`, or the last commit to touch dvc.lock where no run record names the code that ran."""
    made = info.get("made")
    if not made:
        return f"git {info['git_commit'][:10]} (last to touch dvc.lock; no run record names the code)"
    if "git_commit" not in made:  # a figure of a command outside the pipeline (`rlvr starts`)
        return str(made.get("by"))
    dirty = {True: " (uncommitted changes)", False: "", None: " (outside git)"}[made.get("git_dirty")]
    if made.get("git_dirty") and made.get("git_changed"):
        changed = made["git_changed"]
        deps = [f for f in changed if any(_within(f, d) for d in info.get("deps") or {})]
        dirty = f" (uncommitted changes to {_some(changed)}; " + (
            f"deps of this stage: {_some(deps)})"
            if deps
            else "none a dep of this stage: its code is the commit's)"
        )
    return f"git {made['git_commit'][:10]}{dirty}, made on {made.get('host')} at {made.get('started_utc')}"


def footer(info: dict) -> str:
    """One-paragraph provenance line for a figure in the report."""
    params = "; ".join(
        f"{k}={json.dumps(v, sort_keys=True)}" for f in info["params"].values() for k, v in f.items()
    )
    deps = ", ".join(f"{p}@{(h or '')[:8]}" for p, h in info["deps"].items())
    runs = ", ".join(f"{k}={v}" for k, v in info["mlflow_runs"].items()) or "none"
    return (
        f"stage `{info['stage']}` (`{info['cmd']}`) · params: {params} · inputs: {deps} · "
        f"MLflow runs: {runs} · code: {code_line(info)}"
    )


def short_line(texts: dict[str, str]) -> str:
    """A figure's provenance in one line, from the texts its file carries (`metadata_texts`): the
    stage (or how many it was drawn from), the code that made it, and its MLflow runs' count."""
    stage = texts["rlvr:stage"]
    head, _, sources = stage.partition(", from ")
    if sources.count(",") >= 3:  # a figure drawn from many stages' outputs: the record lists them
        stage = f"{head}, from {sources.count(',') + 1} stages"
    made = json.loads(texts["rlvr:made"] or "null")
    info = {"made": made, "git_commit": texts["rlvr:git_commit"], "deps": json.loads(texts["rlvr:deps"])}
    runs = len(json.loads(texts["rlvr:mlflow_runs"]))
    return f"stage `{stage}` · code: {code_line(info)}" + (f" · {runs} MLflow run(s)" if runs else "")


def unexplained(info: dict) -> str | None:
    """Why `info` cannot say where its result was made (its stage's run record names no code, host
    or time), or None when it can. `rlvr verify` fails on it; `rlvr provenance` prints it."""
    if info.get("made"):
        return None
    return f"stage {info['stage']}: its run record does not say which code ran it, where or when (rerun it)"


# --------------------------------------------------------------------------------------------
# Text


def _value(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


def _shown_before(seen: dict[tuple[str, str], Any], file: str, key: str, value: Any) -> bool:
    """Was this value already printed, under the same key or inside a parent key's value
    (`variants.grpo` inside `variants`)?"""
    parts = key.split(".")
    for i in range(1, len(parts) + 1):
        if (file, ".".join(parts[:i])) in seen:
            v = seen[(file, ".".join(parts[:i]))]
            for part in parts[i:]:
                v = v.get(part) if isinstance(v, dict) else None
            if v == value:
                return True
    return False


def _param_items(params: dict, seen: dict) -> tuple[list[str], list[str]]:
    """(key=value texts for values not printed yet, keys whose values were), marking the new ones seen."""
    new, repeated = [], []
    for file, values in params.items():
        prefix = "" if file == "params.yaml" else f"{file}:"
        for key, value in (values or {}).items():
            if _shown_before(seen, file, key, value):
                repeated.append(prefix + key)
            else:
                new.append(f"{prefix}{key}={_value(value)}")
                seen[(file, key)] = value
    return new, repeated


def _flag(value: bool | None, yes: str, no: str) -> str:
    return "unknown" if value is None else (yes if value else no)


def format_explain(info: dict[str, Any]) -> str:
    """`rlvr provenance` for people: a line per fact, params as key=value (values as JSON); an
    upstream param identical to one printed above is named, not repeated."""
    dirty = info["dirty"]
    changes = dirty["code_changes"]
    code = _flag(
        dirty["code"],
        f"{len(changes)} uncommitted change(s): "
        + ", ".join(changes[:6])
        + (" ..." if len(changes) > 6 else ""),
        "clean",
    )
    copy = info.get("copy")
    lines = [
        f"path      {info['path']}",
        *(
            [
                f"copy      of {copy['of']}, by stage {copy['by']} (folder md5 {(copy['out'] or '-')[:8]}); "
                "what follows is the original's"
            ]
            if copy
            else []
        ),
        f"stage     {info['stage']}   cmd: {info['cmd']}",
        f"out       {info['out']['path']} md5 {(info['out']['md5'] or '-')[:8]}",
        f"made by   {code_line(info)}",
        *(
            [
                f"committed git {info['changed_in'][:10]}: the last commit that changed these bytes (a rerun "
                "that leaves them the same changes nothing for git)"
            ]
            if info.get("changed_in") and info["changed_in"] not in ("unknown", "uncommitted")
            else []
        ),
        f"now       file: {_flag(dirty['file'], 'MODIFIED since its commit', 'as committed')}   code: {code}",
    ]
    if "stale" in info:
        why = info["stale_why"]
        head = {True: "YES: dvc repro would rerun it;", False: "no", None: "unknown:"}[info["stale"]]
        lines += [f"stale     {head}" + (f" {why[0]}" if why else ""), *(f"          {w}" for w in why[1:])]
    else:
        lines.append("stale     not checked")
    seen: dict = {}
    new, _ = _param_items(info["params"], seen)
    lines += ["params    " + (new[0] if new else "none"), *(f"          {item}" for item in new[1:])]
    drawn = info.get("drawn_from") or []
    if drawn:
        lines.append(f"drawn     from {len(drawn)} stage(s)' outputs: {', '.join(drawn)}")
    lines.append(
        (
            f"upstream  {len(info['upstream'])} stage(s)"
            + (": those and theirs" if drawn else "")
            + ", nearest first"
        )
        if info["upstream"]
        else "upstream  none"
    )
    for name, params in info["upstream"].items():
        new, repeated = _param_items(params, seen)
        same = [f"as above: {', '.join(repeated)}"] if repeated else []
        lines.append(f"  {name}: " + ("; ".join(new + same) or "no params"))
    inputs = ", ".join(f"{p}@{(h or '-')[:8]}" for p, h in info["deps"].items())
    lines.append(f"inputs    {inputs or 'none'}")
    status = info.get("mlflow_status", {})
    runs = ", ".join(
        f"{k}={v}" + (f" ({status[k]})" if status.get(k, "missing") != "missing" else "")
        for k, v in info["mlflow_runs"].items()
    )
    lines.append(f"mlflow    {runs or 'no runs recorded'}")
    absent = [k for k in info["mlflow_runs"] if status.get(k) == "missing"]
    if absent:
        made = info.get("made") or {}
        where = f"; they were logged to {made['tracking_uri']}" if made.get("tracking_uri") else ""
        lines.append(f"          not in this tracking store: {', '.join(absent)}{where}")
    if unexplained(info):
        lines.append(f"          {unexplained(info)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Provenance carried inside a figure file

METADATA_KEYS = ("stage", "params", "deps", "mlflow_runs", "git_commit", "git_dirty", "made")
SVG_NS = "urn:rlvr-repro:provenance"  # the namespace of the rlvr:* elements in an SVG's <metadata>
_SVG_BLOCK = re.compile(r"<rlvr:provenance\b.*?</rlvr:provenance>", re.S)


def metadata_texts(info: dict) -> dict[str, str]:
    """{"rlvr:stage": ..., "rlvr:params": JSON, ...}: a figure's provenance (`explain`'s stage,
    params, deps, MLflow runs and commit) as the texts its PNG chunks and SVG elements hold."""
    return {
        f"rlvr:{k}": info[k] if isinstance(info.get(k), str) else json.dumps(info.get(k), sort_keys=True)
        for k in METADATA_KEYS
    }


def svg_with_provenance(svg: str, texts: dict[str, str]) -> str:
    """The SVG text with `texts` as <rlvr:*> elements inside its <metadata> (any it held before
    replaced), so the figure says where it came from in any XML tool, as the PNG does in its chunks."""
    from xml.sax.saxutils import escape

    inner = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in texts.items())
    block = f'<rlvr:provenance xmlns:rlvr="{SVG_NS}">{inner}</rlvr:provenance>'
    svg = _SVG_BLOCK.sub("", svg)
    if "</metadata>" in svg:
        return svg.replace("</metadata>", block + "</metadata>", 1)
    opening = re.search(r"<svg\b[^>]*>", svg)
    if opening is None:
        raise ProvenanceError("not an SVG: no <svg> element")
    return svg[: opening.end()] + f"<metadata>{block}</metadata>" + svg[opening.end() :]


def embedded_provenance(path: str | Path) -> dict[str, str]:
    """The rlvr:* provenance a figure file carries: a PNG's text chunks or an SVG's metadata
    elements ({} when it has none)."""
    path = Path(path)
    if path.suffix == ".svg":
        import xml.etree.ElementTree as ET

        found = ET.parse(path).getroot().find(f".//{{{SVG_NS}}}provenance")
        if found is None:
            return {}
        return {f"rlvr:{child.tag.split('}')[1]}": child.text or "" for child in found}
    from PIL import Image

    with Image.open(path) as im:
        return {k: v for k, v in getattr(im, "text", {}).items() if k.startswith("rlvr:")}
