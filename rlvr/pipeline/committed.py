"""What HEAD holds, beside what the workspace made: HEAD's report table, and the code that differs.

The git half of comparing results (the comparison itself is the report's, `rlvr.report.moves`): the
report stage says how its fresh table compares with the committed one, and names the code and
params that differ from HEAD.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.io.gitinfo import CODE_PATHS, committed_text, history, short_commit, uncommitted
from rlvr.report.moves import REPORT_JSON, compare_tables


def committed_report(root: Path) -> tuple[str, dict] | None:
    """(the results commit, HEAD's report.json in `root`: the repository's, or a profile's in its
    folder), or None outside git or where HEAD has none. The results commit is the last to change
    `root`'s dvc.lock (a rerun that moves no number leaves report.json as it was, never dvc.lock),
    not HEAD, which may be a later commit of code alone."""
    path = f"./{REPORT_JSON}"  # "./": relative to `root`, not the repository
    text = committed_text(root, path)
    if text is None:
        return None
    try:
        table = json.loads(text)
    except json.JSONDecodeError:
        return None
    made = history(root, "./dvc.lock", most=1)  # results are committed with their dvc.lock
    return (short_commit(root, made[0]) if made else "unknown"), table


def against_committed(root: Path, fresh: dict) -> dict | None:
    """`fresh` (a report.json table) against HEAD's: the commit that made HEAD's, verdict flips and
    moves, and the numbers outside the committed intervals. None where there is nothing committed to
    compare with."""
    committed = committed_report(root)
    if committed is None:
        return None
    commit, old = committed
    return {"commit": commit, **compare_tables(old, fresh)}


def changed_code(root: Path) -> list[str] | None:
    """Code and params paths that differ from HEAD (uncommitted), or None outside git."""
    return uncommitted(root, CODE_PATHS)
