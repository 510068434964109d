"""`rlvr.chain` owns a chain: nothing else wires its training loops.

A chain's phases (its start, its GRPO runs, its pass@k counts) are `rlvr/chain.py`'s functions, and
its stop objects are built there. Every runner of a chain (the stages, `rlvr starts`, `rlvr
calibrate`, experiments/chain.py, the benchmarks) calls them; a runner that called a loop or built a
stop itself would be a second copy of the chain that could drift from the first. This reads every
runner's source with `ast` and names any such call. Two are declared, with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

# The loops and stop rules a chain is made of: called by rlvr/chain.py alone.
PRIMITIVES = ("warm_up", "fit_noisy", "train_grpo", "accuracy_stop", "binomial_counts", "StopAtTarget")
DEFINERS = ("rlvr/chain.py", "rlvr/sft.py", "rlvr/grpo_loop.py", "rlvr/controlled.py", "rlvr/rollout.py")
DECLARED = {
    # GRPO against the hackable verifier: its own reward, sample tables and generator (a chapter A
    # exercise on the chain's start, not a phase of the chain)
    ("rlvr/pipeline/stages/hack.py", "train_grpo"),
    # micro-benchmarks that time one loop alone, not a chain
    ("rlvr/bench/seed_profile.py", "train_grpo"),
    ("rlvr/bench/passk.py", "binomial_counts"),
}


def calls(path: Path, root: Path) -> list[tuple[str, str, int]]:
    """(file, primitive, line) for every call of a primitive in one file, by bare or dotted name."""
    rel = path.relative_to(root).as_posix()
    out = []
    for node in ast.walk(ast.parse(path.read_text(), rel)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in PRIMITIVES:
                out.append((rel, name, node.lineno))
    return out


def rewired(root: Path) -> list[str]:
    files = [*sorted((root / "rlvr").rglob("*.py")), *sorted((root / "experiments").glob("*.py"))]
    return [
        f"{rel}:{line}: calls {name} (a chain's phase is rlvr.chain's: call it)"
        for path in files
        if path.relative_to(root).as_posix() not in DEFINERS
        for rel, name, line in calls(path, root)
        if (rel, name) not in DECLARED
    ]


def test_no_runner_wires_a_chain_itself():
    assert rewired(ROOT) == []


def test_every_declared_exception_is_still_there():
    found = {(rel, name) for path in (ROOT / "rlvr").rglob("*.py") for rel, name, _ in calls(path, ROOT)}
    assert DECLARED <= found, DECLARED - found


def test_a_runner_that_trains_grpo_itself_is_named(tmp_path):
    (tmp_path / "rlvr/tools").mkdir(parents=True)
    (tmp_path / "experiments").mkdir()
    (tmp_path / "rlvr/tools/starts.py").write_text(
        "from rlvr import grpo_loop\n\ndef f(p, c, d, g):\n    return grpo_loop.train_grpo(p, c, d, g)\n"
    )
    (tmp_path / "experiments/chain.py").write_text("def g(x):\n    return accuracy_stop(x)\n")
    assert rewired(tmp_path) == [
        "rlvr/tools/starts.py:4: calls train_grpo (a chain's phase is rlvr.chain's: call it)",
        "experiments/chain.py:2: calls accuracy_stop (a chain's phase is rlvr.chain's: call it)",
    ]
