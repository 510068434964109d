"""The package is a stack: maths <- I/O <- report <- pipeline <- tools <- CLI and benchmarks.

`a <- b`: b may import a, never the reverse. The maths is `rlvr/*.py` (the top-level modules), the
I/O floor `rlvr/io/` (files, git), the report `rlvr/report/`, the pipeline `rlvr/pipeline/` (its
stages too: what DVC runs), the tools `rlvr/tools/` (what a person runs), the top the CLI
(`rlvr/cli.py`, `rlvr/__main__.py`) and the benchmarks (`rlvr/bench/`). Every import of `rlvr...`
is read from the source with `ast`, inside functions too (a lazy import is still an import). No
modules import each other in a loop either, counting the imports inside functions. The maths and
the report start no process and open no store: neither imports `subprocess`, `mlflow` or `dvc`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from conftest import ROOT

STACK = ("maths", "I/O", "report", "pipeline", "tools", "cli and benchmarks")  # bottom first
MACHINERY = ("subprocess", "mlflow", "dvc")  # what the maths and the report never import
PACKAGES = ("rlvr",)


def layer(module: str) -> int:
    """The floor of the stack a dotted name stands on (a module, or a name inside one)."""

    def within(pkg: str) -> bool:
        return module == pkg or module.startswith(pkg + ".")

    if within("rlvr.bench") or within("rlvr.cli") or within("rlvr.__main__"):
        return 5
    if within("rlvr.tools"):
        return 4
    if within("rlvr.pipeline"):
        return 3
    if within("rlvr.report"):
        return 2
    if within("rlvr.io"):
        return 1
    return 0


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    source: str  # its file, repository-relative
    line: int
    text: str  # the statement as written
    target: str  # the module imported (or the package, when the name is not a module of its own)
    local: bool  # inside a function


def module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def modules(root: Path) -> dict[str, Path]:
    """Every module of the two packages under `root`: {dotted name: file}."""
    files = [p for pkg in PACKAGES if (root / pkg).is_dir() for p in sorted((root / pkg).rglob("*.py"))]
    return {module_name(p, root): p for p in files}


def imports(path: Path, module: str, known: dict[str, Path], root: Path) -> list[Import]:
    """The imports of `rlvr...` in one file, at module level and inside functions."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    source = path.relative_to(root).as_posix()
    found = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: from . import x, from ..pipeline import y
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(parts + ([child.module] if child.module else []))
                # `from rlvr.pipeline import paths` imports the module rlvr.pipeline.paths
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in child.names]
            for target in dict.fromkeys(targets):
                if target.split(".")[0] in PACKAGES:
                    found.append(Import(module, source, child.lineno, ast.unparse(child), target, inside))
            visit(child, inside)

    visit(tree, False)
    return found


def all_imports(root: Path) -> list[Import]:
    known = modules(root)
    return [i for name, path in known.items() for i in imports(path, name, known, root)]


def against_the_stack(root: Path) -> list[str]:
    """One line per import from a lower floor of the stack to a higher one, naming file and import."""
    out = []
    for i in all_imports(root):
        src, dst = layer(i.module), layer(i.target)
        if dst > src:
            where = " (inside a function)" if i.local else ""
            out.append(f"{i.source}:{i.line}: `{i.text}`{where}: {STACK[src]} imports {STACK[dst]}")
    return out


def cycles(root: Path) -> list[str]:
    """Every set of modules that import each other in a loop: its files, and the shortest loop through
    the first, `a.py:LINE -> b.py:LINE -> a.py`, each arrow at the import that makes it."""
    known = modules(root)
    edges: dict[str, dict[str, Import]] = {m: {} for m in known}
    for i in all_imports(root):
        if i.target in known and i.target != i.module:
            edges[i.module].setdefault(i.target, i)
    return sorted(
        f"{', '.join(known[m].relative_to(root).as_posix() for m in sorted(c))}: {_loop(min(c), edges, c)}"
        for c in _strongly_connected(edges)
    )


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[set[str]]:
    """Tarjan's components of more than one module (an import of itself is no module loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def _loop(start: str, edges: dict[str, dict[str, Import]], component: set[str]) -> str:
    """A shortest loop from `start` back to it inside `component`, as text."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges[v]):
                if w == start:
                    path = paths[v] + [start]
                    hops = [f"{edges[a][b].source}:{edges[a][b].line}" for a, b in zip(path, path[1:])]
                    return " -> ".join([*hops, edges[start][path[1]].source])
                if w in component and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no loop through {start}")  # a component always holds one


def machinery_imports(root: Path) -> list[str]:
    """One line per import of `MACHINERY` (subprocess, mlflow, dvc) in the maths or the report, at
    module level or inside a function, naming file and line."""
    out = []
    for name, path in modules(root).items():
        if layer(name) not in (0, 2):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for n in names:
                if n.split(".")[0] in MACHINERY:
                    rel = path.relative_to(root).as_posix()
                    out.append(
                        f"{rel}:{node.lineno}: `{ast.unparse(node)}`: {STACK[layer(name)]} imports {n}"
                    )
    return out


def test_the_maths_and_the_report_start_no_process_and_open_no_store():
    found = machinery_imports(ROOT)
    assert not found, "\n".join(
        [f"{len(found)} import(s) of {', '.join(MACHINERY)} below the pipeline:", *found]
    )


def test_an_import_of_machinery_below_the_pipeline_is_named(tmp_path):
    root = _tree(
        tmp_path,
        {
            "rlvr/__init__.py": "",
            "rlvr/stats.py": "def f():\n    import subprocess\n",
            "rlvr/io/__init__.py": "",
            "rlvr/io/gitinfo.py": "import subprocess\n",  # the I/O floor may
            "rlvr/report/__init__.py": "",
            "rlvr/report/plots.py": "from mlflow.tracking import MlflowClient\n",
            "rlvr/pipeline/__init__.py": "",
            "rlvr/pipeline/tracking.py": "import mlflow\n",  # the pipeline may
        },
    )
    assert sorted(machinery_imports(root)) == [
        "rlvr/report/plots.py:1: `from mlflow.tracking import MlflowClient`: report imports mlflow.tracking",
        "rlvr/stats.py:2: `import subprocess`: maths imports subprocess",
    ]


def test_every_import_runs_down_the_stack():
    problems = against_the_stack(ROOT)
    head = f"{len(problems)} import(s) against the stack {' <- '.join(STACK)}:"
    assert not problems, "\n".join([head, *problems])


def test_no_modules_import_each_other_in_a_loop():
    loops = cycles(ROOT)
    assert not loops, "\n".join([f"{len(loops)} set(s) of modules that import each other:", *loops])


STAGES = "rlvr.pipeline.stages."


def stage_to_stage(root: Path) -> list[str]:
    """One line per import of one stage module by another: a stage is a room of its own (what two
    stages share lives below them, in the pipeline or the maths)."""
    return [
        f"{i.source}:{i.line}: `{i.text}`"
        for i in all_imports(root)
        if i.module.startswith(STAGES) and i.target.startswith(STAGES) and i.target != i.module
    ]


def test_no_stage_imports_another():
    found = stage_to_stage(ROOT)
    assert not found, "\n".join([f"{len(found)} stage(s) import another stage:", *found])


def test_a_stage_importing_another_is_named(tmp_path):
    root = _tree(
        tmp_path,
        {
            "rlvr/__init__.py": "",
            "rlvr/pipeline/__init__.py": "",
            "rlvr/pipeline/stages/__init__.py": "",
            "rlvr/pipeline/stages/warmup.py": "def perturbation():\n    return 0\n",
            "rlvr/pipeline/stages/sft.py": "from rlvr.pipeline.stages.warmup import perturbation\n",
        },
    )
    assert stage_to_stage(root) == [
        "rlvr/pipeline/stages/sft.py:1: `from rlvr.pipeline.stages.warmup import perturbation`"
    ]


def test_every_module_stands_on_one_floor():
    """Each module of rlvr/ is on the floor its folder says."""
    floors = {m: STACK[layer(m)] for m in modules(ROOT)}
    assert floors["rlvr.grpo"] == floors["rlvr"] == "maths"
    assert floors["rlvr.io.files"] == floors["rlvr.io.gitinfo"] == "I/O"
    assert floors["rlvr.report.claims"] == "report"
    assert floors["rlvr.pipeline.stages.grpo"] == floors["rlvr.pipeline.__main__"] == "pipeline"
    assert floors["rlvr.tools.verify"] == floors["rlvr.tools.starts"] == "tools"
    assert floors["rlvr.cli"] == floors["rlvr.__main__"] == floors["rlvr.bench.suite"] == "cli and benchmarks"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_an_import_up_the_stack_is_named_even_inside_a_function(tmp_path):
    root = _tree(
        tmp_path,
        {
            "rlvr/__init__.py": "",
            "rlvr/stats.py": "def f():\n    from rlvr.report import plots\n",
            "rlvr/report/__init__.py": "",
            "rlvr/report/plots.py": "from rlvr.pipeline.tracking import EXPERIMENT\n"
            "from rlvr import stats\n"
            "from ..pipeline import seeds\n",
            "rlvr/pipeline/__init__.py": "",
            "rlvr/pipeline/seeds.py": "",
            "rlvr/pipeline/tracking.py": "from ..report import plots\n",  # down the stack: allowed
        },
    )
    assert against_the_stack(root) == [
        "rlvr/report/plots.py:1: `from rlvr.pipeline.tracking import EXPERIMENT`: report imports pipeline",
        "rlvr/report/plots.py:3: `from ..pipeline import seeds`: report imports pipeline",
        "rlvr/stats.py:2: `from rlvr.report import plots` (inside a function): maths imports report",
    ]


def test_a_loop_through_a_function_level_import_is_named(tmp_path):
    root = _tree(
        tmp_path,
        {
            "rlvr/bench/__init__.py": "",
            "rlvr/bench/suite.py": "from rlvr.bench.floor import run\n",
            "rlvr/bench/floor.py": "def run():\n    from rlvr.bench import suite\n",
            "rlvr/bench/fair.py": "from rlvr.bench import floor\n",
        },
    )
    assert cycles(root) == [
        "rlvr/bench/floor.py, rlvr/bench/suite.py: "
        "rlvr/bench/floor.py:2 -> rlvr/bench/suite.py:1 -> rlvr/bench/floor.py"
    ]


def test_a_pipeline_module_importing_a_tool_is_named(tmp_path):
    """What DVC runs never reaches what a person runs: a stage would then rerun for a tool's edit."""
    root = _tree(
        tmp_path,
        {
            "rlvr/__init__.py": "",
            "rlvr/pipeline/__init__.py": "",
            "rlvr/pipeline/guard.py": "from rlvr.tools.verify import verify\n",
            "rlvr/tools/__init__.py": "",
            "rlvr/tools/verify.py": "from rlvr.pipeline import guard\n",
        },
    )
    assert against_the_stack(root) == [
        "rlvr/pipeline/guard.py:1: `from rlvr.tools.verify import verify`: pipeline imports tools"
    ]
