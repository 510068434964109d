"""How a judged claim is written: its rule, the book's value, ours with the interval it was decided
on, the verdict's word and the counts line the report opens with. Words only: the verdict itself is
rlvr.report.verdict's, the evidence rlvr.report.evidence's."""

from __future__ import annotations

from rlvr.report.claims import Claim
from rlvr.report.verdict import Evidence, Judged, is_missing, level_words, num

OURS_HEADER = "ours [interval decided on: 95% unless it says]"
ONE_RUN_HEADER = "book as one run"  # the consistency check: shown beside the verdict, never counted
CALIBRATED_WORDS = {"reproduced": "matched", "differs": "not matched"}


def rule_text(row: Judged) -> str:
    """The claim's rule with the numbers it is decided against: "|ours - 0.57| <= 0.05"."""
    c, kind, fmt = row.claim, row.claim.kind, num
    if kind == "exact":
        return f"|ours - {fmt(c.book)}| <= {fmt(c.tol)}"
    if kind == "range":
        return f"{fmt(c.lo)} <= ours <= {fmt(c.hi)}"
    if kind in ("greater", "less"):
        other = row.other
        what = (
            f"{c.other[1]} ({fmt(other.value if other else None)})"
            if c.other is not None
            else fmt(c.other_value)
        )
        sign = ">" if kind == "greater" else "<"
        pad = f" {'+' if kind == 'greater' else '-'} {fmt(c.margin or 0)}" if c.margin else ""
        return f"ours {sign} {what}{pad}"
    if kind == "close":
        other = row.other
        return f"|ours - {c.other[1]} ({fmt(other.value if other else None)})| <= {fmt(c.tol)}"
    return "cited, not measured"


def book_text(c: Claim) -> str:
    """What the book states: a number, a range, a bound, or "—" where it gives only a direction."""
    if c.kind == "range":
        return f"{num(c.lo)} – {num(c.hi)}"
    if c.kind in ("greater", "less", "close") and (c.book == 0 or c.other is not None):
        return "—"
    if c.kind == "greater":
        return f"> {num(c.book)}"
    if c.kind == "less":
        return f"< {num(c.book)}"
    return num(c.book)


def interval_text(ev: Evidence) -> str:
    """A value with its interval and where the interval comes from: "0.912 [0.90, 0.93] (3 chains)",
    its level named where it is not 95% ("(16 chains; 97.2% interval, the plan's second look)")."""
    if ev.value is None:
        return f"undefined ({ev.source})"
    if ev.lo is None and ev.per_seed:  # some chains undefined: show every chain, as figures do
        chains = ", ".join("none" if is_missing(v) else num(v) for v in ev.per_seed)
        return f"per chain {chains} ({ev.source})"
    if ev.lo is None or ev.lo == ev.hi:
        return f"{num(ev.value)} ({ev.source})"
    return f"{num(ev.value)} [{num(ev.lo)}, {num(ev.hi)}] ({ev.source}{level_words(ev.level)})"


def ours_text(row: Judged) -> str:
    """Our value with the interval its verdict was decided on: "0.912 [0.90, 0.93] (3 chains)"; for
    a claim against another metric, our value, then the paired difference the claim was decided on:
    "0.6 (3 chains); ours − start = 0.2 [0.18, 0.22] (3 chains, paired)"."""
    ev, tested = row.evidence, row.tested
    if ev is None:
        return "n/a"
    if row.other is None or tested is None:
        return interval_text(ev)
    name = row.claim.other[1] if row.claim.other is not None else "other"
    ours = "undefined" if ev.value is None else num(ev.value)
    return f"{ours} ({ev.source}); ours − {name} = {interval_text(tested)}"


def per_chain_text(row: Judged) -> str:
    """ " Per chain: 0.57, 0.87, ..." for a claim measured over chains (empty otherwise): the values
    the verdict was decided on, so for a claim against another metric the paired differences."""
    tested, ev = row.tested, row.evidence
    if row.claim.other is not None and tested is not None and tested.per_seed:
        values, what = tested.per_seed, f" of ours − {row.claim.other[1]}"
    elif ev is not None and ev.per_seed:
        values, what = ev.per_seed, ""
    else:
        return ""
    return f" Per chain{what}: " + ", ".join("none" if is_missing(v) else num(v) for v in values) + "."


def consistency_text(row: Judged) -> str:
    """The consistency check in words, for a claim's details ("" where it does not apply)."""
    c = row.consistency
    if not c:
        return ""
    lo, hi = c["interval"]
    where = "inside" if c["verdict"] == "consistent" else "outside"
    return (
        f"book as one run: {c['verdict']} (the book's {num(row.claim.book)} lies {where} "
        f"[{num(lo)}, {num(hi)}], our {row.tested.level:.1%} prediction interval for one run like the "
        "book's: one start, "
        "one GRPO seed; not counted)"
    )


def precision_text(row: Judged) -> str:
    """A measured claim's precision for a table cell: "0.012 ≤ 0.025 powered" or "0.03 > 0.0067
    (about 40 chains)"; "–" where it does not apply."""
    from rlvr.report.verdict import MAX_CHAINS, precision

    p = precision(row)
    if p is None:
        return "–"
    if p["powered"]:
        return f"{num(p['half_width'])} ≤ {num(p['target'])}: powered"
    n = p["chains_needed"]
    need = "" if n is None else (f" (~{n} chains)" if n <= MAX_CHAINS else f" (> {MAX_CHAINS:,} chains)")
    return f"{num(p['half_width'])} > {num(p['target'])}{need}"


def one_run_word(row: Judged) -> str:
    """The consistency check's word for a table cell: consistent, not consistent, or "–"."""
    return (row.consistency or {}).get("verdict", "–")


def verdict_word(row: Judged) -> str:
    """The verdict as the report prints it: a calibrated start is matched or not, never reproduced;
    where chains are censored, the sensitivity analysis's verdict beside it ("reproduced; without
    censored: inconclusive")."""
    word = (
        CALIBRATED_WORDS.get(row.verdict, row.verdict) if row.claim.category == "calibrated" else row.verdict
    )
    if row.sensitivity is None:
        return word
    aside = row.sensitivity
    other = (
        CALIBRATED_WORDS.get(aside.verdict, aside.verdict)
        if row.claim.category == "calibrated"
        else aside.verdict
    )
    return f"{word}; without censored: {other}"


def sensitivity_text(row: Judged) -> str:
    """The sensitivity analysis in words, for a claim's details ("" where no chain is censored)."""
    aside = row.sensitivity
    if aside is None or aside.tested is None:
        return ""
    return (
        f"sensitivity, without the censored chains: {interval_text(aside.tested)} → {aside.verdict} "
        "(shown, never deciding: a run that missed its end is a result)"
    )


def counts_line(by_class: dict[str, dict[str, int]], bold: bool = True) -> str:
    """The report's first line: the measured claims first, then each other kind in its own terms."""
    b = (lambda t: f"**{t}**") if bold else (lambda t: t)

    def tally(c: dict, words: dict) -> str:
        total = sum(c.values())
        c = {v: c.get(v, 0) for v in ("reproduced", "differs", "inconclusive", "not comparable", "missing")}
        if c["reproduced"] == total:
            return f"all {total} {words.get('reproduced', 'reproduced')}"
        shown = [
            f"{c[v]} {words.get(v, v)}"
            for v in ("reproduced", "differs", "inconclusive", "not comparable", "missing")
            if c[v]
        ]
        return ", ".join(shown) + f" (of {total})"

    m, cal, cf = by_class["measured"], by_class["calibrated"], by_class["closed-form"]
    parts = [
        b(f"Measured claims: {tally(m, {'differs': 'differ'})}") + " (training and evaluation outcomes)",
        f"calibrated: {tally(cal, CALIBRATED_WORDS)} (a start or an end stopped at the chapter's value, "
        "or a quantity matched by a choice: not findings)",
        f"closed-form and worked examples: {tally(cf, {'differs': 'differ'})}",
        f"cited facts: {by_class['cited']['cited']} (no verdict)",
    ]
    return "; ".join(parts) + "."
