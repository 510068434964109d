"""What moved between two report.json verdict tables: the committed results and a rerun's.

The rule a rerun on another CPU is held to: no claim moves between reproduced and differs (a flip);
a move to or from inconclusive is allowed, since an inconclusive interval touches its bound, but it
is listed; and every number is compared with the committed one's 95% interval (or, for a value
decided alone, its tolerance). `rlvr verify`, the `report` stage and `rlvr bench` all use it.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.gitinfo import CODE_PATHS, committed_text, short_commit, uncommitted

REPORT_JSON = "reports/report.json"


def compare_verdicts(committed: dict, fresh: dict) -> dict:
    """Two report.json files, compared as another CPU would be judged: every claim's verdict the same,
    and every number statistically the same: the fresh value inside the committed 95% interval, or,
    for a claim decided on a single value, within its tolerance of the committed value
    (`verdict_tolerance` in report.json). Returns the claims that fail either test."""
    flips, drifts = [], []
    for cid, old in committed["claims"].items():
        new = fresh["claims"].get(cid)
        if new is None or new["verdict"] != old["verdict"]:
            flips.append(
                {"claim": cid, "committed": old["verdict"], "fresh": None if new is None else new["verdict"]}
            )
            continue
        a, b = old.get("ours"), new.get("ours")
        if a is None or b is None:
            if (a is None) != (b is None):
                drifts.append({"claim": cid, "committed": a, "fresh": b})
            continue
        lo, hi = (
            old["interval"]
            if old.get("interval")
            else (a - (old.get("tolerance") or 0), a + (old.get("tolerance") or 0))
        )
        if not lo - 1e-12 <= b <= hi + 1e-12:
            drifts.append({"claim": cid, "committed": a, "fresh": b, "allowed": [lo, hi]})
    return {
        "verdicts_identical": not flips,
        "numbers_within_tolerance": not drifts,
        "verdict_flips": flips,
        "numbers_outside": drifts,
    }


def verdict_moves(committed: dict, perturbed: dict) -> dict:
    """Two report.json verdict tables compared as another CPU must be: `flips` are claims that moved
    between reproduced and differs (none may); `moves` are claims that moved to or from
    inconclusive, each with both intervals (allowed, since an inconclusive interval touches its bound,
    but every one is listed)."""
    flips, moves = [], []
    for cid, old in committed["claims"].items():
        new = perturbed["claims"].get(cid, {"verdict": None, "interval": None})
        if new["verdict"] == old["verdict"]:
            continue
        row = {
            "claim": cid,
            "committed": old["verdict"],
            "perturbed": new["verdict"],
            "committed_interval": _decided_on(old),
            "perturbed_interval": _decided_on(new),
            "committed_value": old.get("ours"),
            "perturbed_value": new.get("ours"),
        }
        (moves if "inconclusive" in (old["verdict"], new["verdict"]) else flips).append(row)
    return {"flips": flips, "moves": moves, "no_flips": not flips}


def _decided_on(record: dict) -> list | None:
    """The interval a report.json record's verdict was decided on: `decided_on`, else (a record
    without that key) `tested_interval` for a claim against another metric, else `interval`."""
    return record.get("decided_on") or record.get("tested_interval") or record.get("interval")


def committed_report(root: Path) -> tuple[str, dict] | None:
    """(HEAD's short commit, HEAD's report.json), or None outside git or where HEAD has none."""
    text = committed_text(root, REPORT_JSON)
    if text is None:
        return None
    try:
        return short_commit(root), json.loads(text)
    except json.JSONDecodeError:
        return None


def against_committed(root: Path, fresh: dict) -> dict | None:
    """`fresh` (a report.json table) against HEAD's: the commit, verdict flips and moves, and the
    numbers outside the committed intervals. None where there is nothing committed to compare with."""
    committed = committed_report(root)
    if committed is None:
        return None
    commit, old = committed
    moves = verdict_moves(old, fresh)
    return {
        "commit": commit,
        "flips": moves["flips"],
        "moves": moves["moves"],
        "numbers_outside": compare_verdicts(old, fresh)["numbers_outside"],
    }


def changed_code(root: Path) -> list[str] | None:
    """Code and params paths that differ from HEAD (uncommitted), or None outside git."""
    return uncommitted(root, CODE_PATHS)


def moved_lines(against: dict) -> list[str]:
    """One line per claim that moved, flips first: what `rlvr verify` prints and the report shows."""
    lines = [
        f"{f['claim']}: {f['committed']} -> {f.get('fresh', f.get('perturbed'))} (a flip)"
        for f in against["flips"]
    ]
    lines += [
        f"{m['claim']}: {m['committed']} -> {m['perturbed']}, "
        + (
            f"interval {_iv(m['committed_interval'])} -> {_iv(m['perturbed_interval'])}"
            if m["committed_interval"] or m["perturbed_interval"]
            else f"value {_n(m.get('committed_value'))} -> {_n(m.get('perturbed_value'))}"
        )
        for m in against["moves"]
    ]
    lines += [
        f"{d['claim']}: value {_n(d['committed'])} -> {_n(d['fresh'])}"
        + (f", outside the committed {_iv(d['allowed'])}" if "allowed" in d else "")
        for d in against["numbers_outside"]
        if d["claim"] not in {x["claim"] for x in against["flips"] + against["moves"]}
    ]
    return lines


def _n(x) -> str:
    return "n/a" if x is None else f"{x:.4g}" if isinstance(x, float) else str(x)


def _iv(iv) -> str:
    return "n/a" if not iv else f"[{_n(iv[0])}, {_n(iv[1])}]"
