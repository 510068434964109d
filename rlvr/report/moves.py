"""What moved between the committed results and a rerun's, said in one of three words.

The rule a rerun on another CPU (or with its starts perturbed) is held to:
- **identical**: every metric file is bit-equal to the committed one (durations and run ids aside);
- **statistically the same**: no claim moved between reproduced and differs; each move is listed:
  a verdict to or from inconclusive (allowed: an inconclusive interval touches its bound) and every
  value outside the committed 95% interval (or, for a value decided alone, its tolerance);
- **moved**: some claim flipped between reproduced and differs.
`rlvr verify` (the workspace against HEAD, or `--rerun`: a fresh clone against its commit) and the
`report` stage (its verdict table against HEAD's) all use it.
"""

from __future__ import annotations

from pathlib import Path

from rlvr.io.files import read_json
from rlvr.report.evidence import judge_all, summary_counts, verdict_record
from rlvr.report.inputs import read_metrics_dir

REPORT_JSON = "reports/report.json"
WORDS = ("identical", "statistically the same", "moved")
VOLATILE = ("seconds", "per_second", "mlflow")  # metric keys that name a run or a duration


def verdict_moves(committed: dict, rerun: dict) -> dict:
    """Two report.json verdict tables: `flips` are claims that moved between reproduced and differs
    (none may); `moves` are claims that moved in any other way (to or from inconclusive or not
    comparable), each with both intervals."""
    flips, moves = [], []
    for cid, old in committed["claims"].items():
        new = rerun["claims"].get(cid, {"verdict": None, "interval": None})
        if new["verdict"] == old["verdict"]:
            continue
        row = {
            "claim": cid,
            "committed": old["verdict"],
            "rerun": new["verdict"],
            "committed_interval": _decided_on(old),
            "rerun_interval": _decided_on(new),
            "committed_value": old.get("ours"),
            "rerun_value": new.get("ours"),
        }
        flip = {old["verdict"], new["verdict"]} == {"reproduced", "differs"}
        (flips if flip else moves).append(row)
    return {"flips": flips, "moves": moves}


def numbers_outside(committed: dict, rerun: dict) -> list[dict]:
    """Claims whose verdict held but whose value left the committed 95% interval (or, for a claim
    decided on a single value, its tolerance of the committed value), or became (un)defined."""
    drifts = []
    for cid, old in committed["claims"].items():
        new = rerun["claims"].get(cid)
        if new is None or new["verdict"] != old["verdict"]:
            continue  # a verdict move is listed as one
        a, b = old.get("ours"), new.get("ours")
        if a is None or b is None:
            if (a is None) != (b is None):
                drifts.append({"claim": cid, "committed": a, "rerun": b})
            continue
        tol = old.get("tolerance") or 0
        lo, hi = old["interval"] if old.get("interval") else (a - tol, a + tol)
        if not lo - 1e-12 <= b <= hi + 1e-12:
            drifts.append({"claim": cid, "committed": a, "rerun": b, "allowed": [lo, hi]})
    return drifts


def _decided_on(record: dict) -> list | None:
    """The interval a report.json record's verdict was decided on: `decided_on`, else (a record
    without that key) `tested_interval` for a claim against another metric, else `interval`."""
    return record.get("decided_on") or record.get("tested_interval") or record.get("interval")


def compare_tables(committed: dict, rerun: dict) -> dict:
    """Two verdict tables ({"claims": {id: report.json record}}): flips, moves, numbers outside."""
    return {**verdict_moves(committed, rerun), "numbers_outside": numbers_outside(committed, rerun)}


def word(comparison: dict) -> str:
    """The comparison in one of WORDS. Identical needs the metrics recorded as bit-equal
    (`metrics_differing` empty); a comparison of verdict tables alone is at best the same statistically."""
    if comparison["flips"]:
        return "moved"
    if (
        comparison.get("metrics_differing") == []
        and not comparison["moves"]
        and not comparison["numbers_outside"]
    ):
        return "identical"
    return "statistically the same"


def stable_view(value):
    """A metrics JSON without the keys that legitimately change between runs (durations, run ids)."""
    if isinstance(value, dict):
        return {k: stable_view(v) for k, v in value.items() if not any(w in k for w in VOLATILE)}
    if isinstance(value, list):
        return [stable_view(v) for v in value]
    return value


RESULT_FILES = ("metrics", "passk-counts.json")  # under a reports folder: what a rerun is compared on


def differing_files(committed: Path, rerun: Path) -> list[str]:
    """The result files (metrics/*.json, passk-counts.json under two reports folders) whose stable
    content differs, or that only one side has."""
    names = sorted(
        {p.relative_to(d).as_posix() for d in (committed, rerun) for p in (d / "metrics").glob("*.json")}
        | (
            {"passk-counts.json"}
            if any((d / "passk-counts.json").is_file() for d in (committed, rerun))
            else set()
        )
    )
    differ = []
    for name in names:
        a, b = committed / name, rerun / name
        if not (a.is_file() and b.is_file()) or stable_view(read_json(a)) != stable_view(read_json(b)):
            differ.append(name)  # a damaged file is one InputError naming it (`read_json`)
    return differ


def verdict_table(reports: Path, claims: list, looks: dict | None = None) -> dict:
    """The verdicts the rule gives on a reports folder's metrics ({"claims", "counts"}), as in
    report.json: each side of a comparison judged by the same claims, plan looks and code."""
    rows = judge_all(claims, read_metrics_dir(reports / "metrics"), looks)
    return {"claims": {r.claim.id: verdict_record(r) for r in rows}, "counts": summary_counts(rows)}


def compare_results(committed: Path, rerun: Path, claims: list, looks: dict | None = None) -> dict:
    """Two reports folders (the committed results and a rerun's): the files that differ, the verdict
    counts of each side, flips, moves and numbers outside, and the word for all of it. `looks`: the
    plan's second looks (rlvr.report.claims.read_looks), the levels claims are decided at."""
    old, new = verdict_table(committed, claims, looks), verdict_table(rerun, claims, looks)
    comparison = {
        "metrics_differing": differing_files(committed, rerun),
        "committed_counts": old["counts"],
        "rerun_counts": new["counts"],
        **compare_tables(old, new),
        "committed_verdicts": {cid: r["verdict"] for cid, r in old["claims"].items()},
        "rerun_verdicts": {cid: r["verdict"] for cid, r in new["claims"].items()},
    }
    return {"word": word(comparison), **comparison}


def moved_lines(comparison: dict) -> list[str]:
    """One line per claim that moved, flips first: what `rlvr verify` prints and the report shows."""
    lines = [f"{f['claim']}: {f['committed']} -> {f['rerun']} (a flip)" for f in comparison["flips"]]
    lines += [
        f"{m['claim']}: {m['committed']} -> {m['rerun']}, "
        + (
            f"interval {_iv(m['committed_interval'])} -> {_iv(m['rerun_interval'])}"
            if m["committed_interval"] or m["rerun_interval"]
            else f"value {_n(m.get('committed_value'))} -> {_n(m.get('rerun_value'))}"
        )
        for m in comparison["moves"]
    ]
    lines += [
        f"{d['claim']}: value {_n(d['committed'])} -> {_n(d['rerun'])}"
        + (f", outside the committed {_iv(d['allowed'])}" if "allowed" in d else "")
        for d in comparison["numbers_outside"]
    ]
    return lines


def said(comparison: dict, what: str) -> list[str]:
    """A comparison as `rlvr verify` prints it: its word and what was compared on one line, then
    one indented line per move."""
    moved = moved_lines(comparison)
    counts = (
        f": {len(comparison['flips'])} flip(s), {len(comparison['moves'])} move(s) to or from inconclusive, "
        f"{len(comparison['numbers_outside'])} value(s) outside the committed interval"
        if moved
        else ""
    )
    return [f"{comparison['word']:<23} {what}{counts}", *(f"  {line}" for line in moved)]


def _n(x) -> str:
    return "n/a" if x is None else f"{x:.4g}" if isinstance(x, float) else str(x)


def _iv(iv) -> str:
    return "n/a" if not iv else f"[{_n(iv[0])}, {_n(iv[1])}]"
