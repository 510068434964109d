"""dvc.yaml, written from `rlvr.pipeline.specs`, each stage's code dependencies found by following imports.

A stage depends on the source of every `rlvr` module its stage module reaches, directly or through
other modules, function-local imports included (read from the source, so a lazy import counts too),
and on the dispatcher that runs it (`python -m rlvr.pipeline`). A package `__init__.py` that holds
nothing but a docstring is left out. `rlvr pipeline --write` regenerates dvc.yaml; a test fails when the
committed file differs from what this module writes, naming the command.
"""

from __future__ import annotations

import ast
import os
from functools import cache
from pathlib import Path

import yaml

from rlvr.fields import ConfigError
from rlvr.io.params import Params, parse_params, read_yaml
from rlvr.pipeline.specs import STAGES, model_artifacts, plot_views, template

ROOT = Path(__file__).resolve().parents[2]  # the repository: rlvr/ is ROOT / "rlvr"
DISPATCHER = "rlvr.pipeline.__main__"  # `python -m rlvr.pipeline <stage>`

HEADER = """\
# The pipeline. Written by `rlvr pipeline --write` from rlvr/pipeline/specs.py (params, data in and out)
# and from each stage module's imports (code deps): edit those, not this file. `dvc dag` draws it.
# foreach over `sft` / `warmups` / `variants` in params.yaml: adding an entry there adds its stages; rerun
# `rlvr pipeline --write` then, so that the `plots:` views (`dvc plots show`) name its curves too.
"""


def module_file(module: str) -> Path | None:
    """rlvr.a.b -> rlvr/a/b.py or rlvr/a/b/__init__.py (None if it is not part of the package)."""
    rel = Path(*module.split("."))
    for candidate in (ROOT / rel.with_suffix(".py"), ROOT / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path, module: str) -> set[str]:
    """Every rlvr module that `path` (module name `module`) imports, anywhere in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            found.add(base)
            found |= {
                f"{base}.{a.name}" for a in node.names
            }  # `from rlvr.pipeline import paths` imports rlvr.pipeline.paths
    return {m for m in found if m.split(".")[0] == "rlvr" and module_file(m) is not None}


def _with_parents(module: str) -> set[str]:
    """Importing rlvr.a.b runs rlvr/__init__.py and rlvr/a/__init__.py first."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def _trivial(path: Path) -> bool:
    """A file with nothing but a docstring: importing it changes nothing."""
    body = ast.parse(path.read_text()).body
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)


@cache
def reached(module: str) -> tuple[str, ...]:
    """Source files (repo-relative, sorted) of every rlvr module `module` reaches."""
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        for name in _with_parents(m) - seen:
            seen.add(name)
            path = module_file(name)
            if path is not None:
                todo += sorted(_imports(path, name) - seen)
    files = {module_file(m) for m in seen} - {None}
    return tuple(sorted(p.relative_to(ROOT).as_posix() for p in files if not _trivial(p)))


def code_deps(stage: str) -> list[str]:
    """The source files stage `stage` runs: its module's reach and the dispatcher's."""
    return sorted(set(reached(f"rlvr.pipeline.stages.{stage}")) | set(reached(DISPATCHER)))


def _posix(path) -> str:
    return Path(str(path)).as_posix()


def stage_entry(name: str, params: Params, up: str = ".") -> dict:
    """dvc.yaml's entry for one stage (the `do:` body for a foreach stage). `up`: the repository
    root as seen from the dvc.yaml's folder ("." for the root pipeline, ".." for a profile), which
    DVC runs the stage in: its data paths are the folder's own, its code the repository's."""
    s = STAGES[name]
    _, f = template(name, params)
    code = [d if up == "." else f"{up}/{d}" for d in code_deps(name)]
    body: dict = {
        "desc": s.desc,
        "cmd": f"python -m rlvr.pipeline {name}" + (" ${key}" if s.foreach else ""),
        "deps": [_posix(d) for d in f["deps"]] + code,
    }
    if f["params"]:
        body["params"] = list(f["params"])
    outs = []
    for path, props in f["outs"].items():
        outs.append({_posix(path): dict(props)} if props else _posix(path))
    body["outs"] = outs
    if f["metrics"]:
        body["metrics"] = [{_posix(m): {"cache": False}} for m in f["metrics"]]
    if s.always_changed:
        body["always_changed"] = True
    return {"foreach": "${" + s.foreach + "}", "do": body} if s.foreach else body


def check_plot_templates(views: list[dict], template_dir: Path = ROOT / ".dvc" / "plots") -> None:
    """Every view names a template `dvc plots show` finds: a file in .dvc/plots/ or one of DVC's own
    (otherwise DVC fails only when the plots are drawn, naming no view)."""
    from dvc_render.vega_templates import TEMPLATES

    ours = sorted(p.stem for p in template_dir.glob("*.json"))
    known = set(ours) | {t.DEFAULT_NAME for t in TEMPLATES}
    for view in views:
        for name, props in view.items():
            t = props.get("template", "linear")
            if t not in known:
                raise ConfigError(
                    f"plots view {name!r}: no template {t!r} in {template_dir} "
                    f"({', '.join(ours) or 'no templates there'}) nor among DVC's own"
                )


def profile_folder(name: str | None) -> Path:
    """A params profile's folder: the repository itself for None, else `<name>/` in it, which holds
    the profile's own params.yaml, dvc.yaml, data/, reports/ and experiments/plan.yaml (a second
    plan of the same pipeline: `dvc repro <name>/dvc.yaml` runs it, its stages in that folder)."""
    if name is None:
        return ROOT
    folder = ROOT / name
    if not (folder / "params.yaml").is_file():
        raise ConfigError(f"profile {name!r}: no {name}/params.yaml in {ROOT}")
    return folder


def render(params_path: Path = ROOT / "params.yaml") -> str:
    """The text of dvc.yaml for the params file `params_path` (the root pipeline's, or a profile's
    in its own folder). Its `plots:` name files per variant, so they are read from params.yaml:
    after adding a variant, `rlvr pipeline --write` (the dvc.yaml test says so)."""
    params = parse_params(read_yaml(params_path))
    views = plot_views(params)
    check_plot_templates(views, ROOT / ".dvc" / "plots")
    up = Path(os.path.relpath(ROOT, params_path.resolve().parent)).as_posix()
    doc = {
        "stages": {name: stage_entry(name, params, up) for name in STAGES},
        "plots": views,
        "artifacts": model_artifacts(params),
    }
    return HEADER + yaml.safe_dump(doc, sort_keys=False, width=110, default_flow_style=False)


def write(folder: Path = ROOT) -> Path:
    """Write `folder`'s dvc.yaml from its params.yaml (the root pipeline's, or a profile's)."""
    from rlvr.io.files import write_text

    return write_text(folder / "dvc.yaml", render(folder / "params.yaml"))


def missing_code_deps(dvc_yaml: dict, up: str = ".") -> list[tuple[str, str]]:
    """(stage, source file) for every module a stage reaches that its dvc.yaml deps do not list
    (`up`: the repository root from the dvc.yaml's folder, as `stage_entry` writes it)."""
    missing = []
    for name, entry in dvc_yaml["stages"].items():
        if name not in STAGES:
            continue
        deps = set((entry.get("do") or entry).get("deps", []))
        missing += [(name, f) for f in code_deps(name) if (f if up == "." else f"{up}/{f}") not in deps]
    return missing


def params_feeding(stage: str, lock: dict) -> set[str]:
    """The params.yaml keys (as stages declare them: `variants.grpo`, `sft.two_digit.epochs`) that
    `stage` of a dvc.lock reads, itself or through any stage whose outputs it depends on: the keys
    whose change can change its results."""
    stages = lock.get("stages") or {}
    made_by = {o["path"]: name for name, s in stages.items() for o in s.get("outs") or []}

    def makers(dep: str) -> list[str]:  # a dep is an output, inside one, or a folder holding one
        inside = lambda a, b: a == b or a.startswith(b + "/")  # noqa: E731
        return [m for out, m in made_by.items() if inside(dep, out) or inside(out, dep)]

    keys: set[str] = set()
    todo, seen = [stage], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in stages:
            continue
        seen.add(name)
        keys |= set((stages[name].get("params") or {}).get("params.yaml") or {})
        todo += [m for d in stages[name].get("deps") or [] for m in makers(d["path"])]
    return keys
