"""The verdict rule: when a claim is reproduced, differs, is inconclusive or not comparable.

1. The deciding interval is the claim's tested interval over chains, by its declared estimand
   (claims.yaml `estimand`), at 95% (at a second look of the plan, for a claim resting on chains
   it added, at the plan's higher level): the Student-t interval of the chain mean (`mean`), of the mean log
   (`log_mean`, the geometric mean run, for a skewed positive metric; a BCa bootstrap interval over
   chains is its declared check), or the exact (Clopper-Pearson) interval of a share of runs
   (`share`); for a claim against another metric, of the paired per-chain differences. It is cut to
   the values the metric can take (`feasible`). A closed-form number is a point [v, v].
2. The claim's region is the set of values it allows: book ± tol (`exact`), [lo, hi] (`range`),
   the open half-line beyond the bound (`greater`, `less`), ±tol around the other metric (`close`).
3. **reproduced** only when the deciding interval lies wholly inside the region.
4. **differs** only when it lies wholly outside the region *and* one run like the book's (one
   start, one GRPO seed, the chapter's evaluation) could not have shown the book's value: the
   book's value (for `exact`), or any value of the region (for the other kinds), lies outside our
   prediction interval for one such run, at the claim's own level (95%, or a second look's).
   The book's value is one run: a band missed by our
   mean is not a difference while the book's single run could have been a lucky one of ours.
5. **inconclusive** otherwise, with its reason; and always when fewer than two chains give a value,
   when any chain gives none (a chain without a value never decides a claim either way), or when a
   declared check (BCa) would decide otherwise than the interval.
6. **not comparable**: a claim measured at a controlled end (`endpoint`) that fewer than two chains
   reached. The chapter's model was never there: no verdict, and no "inconclusive" either. Short of
   that, every chain counts: a run that missed its end by the cap (or whose start missed its target)
   is censored, counted where it stopped; the same claim judged without such chains is shown beside
   the verdict as a sensitivity analysis, never deciding it.
7. Consistency, shown beside the verdict and never counted: "consistent" when the book's value lies
   in that prediction interval for one run like the book's.

Precision is shown beside every measured claim (never part of the verdict): the deciding
interval's half-width against the declared target (half the tolerance, or a directional claim's
smallest effect of interest, `sesoi`), "powered" or by how much it misses, and how many chains
would meet it at this spread. Finding the evidence in the metrics files is rlvr.report.evidence's
job; the claims are rlvr.report.claims's `Claim`s.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from rlvr.report.claims import LEVEL, Claim
from rlvr.stats import t_quantile


@dataclass(frozen=True)
class Evidence:
    """A measured value and the interval a verdict is decided on.

    Training metrics come with one value per chain: the interval is over chains, by the claim's
    estimand. Single-run metrics with a sampling interval beside them (`<key>_ci95`) use that;
    anything else is a point (lo = hi = value).
    """

    value: float | None  # the estimate over chains (mean, geometric mean or share), or the single value
    lo: float | None
    hi: float | None
    source: str  # "8 chains", "sampling (95% over problems)", "single value"
    per_seed: list | None = None  # one value per chain (None entries: undefined for that chain)
    seeds: list | None = None  # which chains, where the file says
    variance: dict | None = None  # SD of one chain's value by source: "starts", "grpo", "evaluation"
    reps: list | None = None  # per chain, its GRPO seeds' values (nested runs), where the file has them
    check: tuple[float, float] | None = None  # a declared check's interval (BCa), decided on too
    one_run: tuple[float, float] | None = None  # prediction interval (at `level`) for one run like the book's
    level: float = 0.95  # the confidence level of [lo, hi] (and of the check): a second look's is higher


@dataclass(frozen=True)
class Judged:
    """A claim with its evidence and verdict: what the report prints a row of."""

    claim: Claim
    verdict: str  # reproduced, differs, inconclusive, not comparable, cited or missing
    evidence: Evidence | None = None  # ours
    other: Evidence | None = None  # the metric it is compared with, for a claim against one
    tested: Evidence | None = None  # the deciding interval: ours, or ours - other paired by chain
    consistency: dict | None = None  # rule 7: {"verdict", "interval"}, or None where it does not apply
    error: str | None = None  # why a claim is missing or not comparable
    sensitivity: Judged | None = None  # the claim without its censored chains: shown, never deciding

    @property
    def ours(self) -> float | None:
        return None if self.evidence is None else self.evidence.value


def is_missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x: Any) -> str:
    """A number as the report writes it: four significant digits, tiny ones in e-notation."""
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"
    return str(x)


def level_words(level: float) -> str:
    """What an interval's source adds about its level: "" at 95%; "; 97.2% interval, the plan's
    second look" at a second look's."""
    return "" if level == LEVEL else f"; {level:.1%} interval, the plan's second look"


def region(claim: Claim) -> tuple[float, bool, float, bool]:
    """The set of values that satisfy the claim, as (low, low open?, high, high open?). For a claim
    against another metric it is the set of differences ours - other."""
    kind, m = claim.kind, float(claim.margin or 0.0)
    c = float(claim.other_value or 0.0)
    if kind == "exact":
        book, tol = float(claim.book), float(claim.tol)
        return book - tol, False, book + tol, False
    if kind == "range":
        return float(claim.lo), False, float(claim.hi), False
    if kind == "close":
        return -float(claim.tol), False, float(claim.tol), False
    if kind == "greater":
        return c + m, True, math.inf, True
    return -math.inf, True, c - m, True  # less


def _inside(x: float, claim: Claim) -> bool:
    low, low_open, high, high_open = region(claim)
    return (x > low if low_open else x >= low) and (x < high if high_open else x <= high)


def _outside(lo: float, hi: float, claim: Claim) -> bool:
    """[lo, hi] shares no value with the claim's region."""
    low, low_open, high, high_open = region(claim)
    return hi < low or (low_open and hi <= low) or lo > high or (high_open and lo >= high)


def by_interval(lo: float, hi: float, claim: Claim) -> str:
    """Rules 3 to 5 on an interval alone: reproduced inside, differs outside, else inconclusive."""
    if _inside(lo, claim) and _inside(hi, claim):
        return "reproduced"
    return "differs" if _outside(lo, hi, claim) else "inconclusive"


def book_outside(one_run: tuple[float, float], claim: Claim) -> bool:
    """Rule 4's second half: one run like the book's could not have shown the book's value (for an
    exact claim the book's number; for the other kinds, any value the claim allows)."""
    lo, hi = one_run
    if claim.kind == "exact" and isinstance(claim.book, (int, float)) and not isinstance(claim.book, bool):
        return not lo <= float(claim.book) <= hi
    return _outside(lo, hi, claim)


def decide(tested: Evidence, claim: Claim) -> str:
    """The verdict on the deciding interval `tested` (the module's rules 3 to 5); "missing" where
    there is no value at all. A point (closed-form) is decided on the interval alone."""
    if tested.value is None and tested.lo is None:
        return "inconclusive" if tested.per_seed else "missing"  # every chain undefined, or no metric
    if tested.lo is None:  # under two chains with a value, or some chain without one
        return "inconclusive"
    verdict = by_interval(tested.lo, tested.hi, claim)
    if tested.check is not None and by_interval(*tested.check, claim) != verdict:
        return "inconclusive"  # the declared check would decide otherwise
    if verdict == "differs" and tested.per_seed is not None:
        if tested.one_run is None or not book_outside(tested.one_run, claim):
            return "inconclusive"  # the book's one run could have been one of ours
    return verdict


def _defined_chains(ev: Evidence) -> list[float] | None:
    """The per-chain values when there are two or more and every one is defined, else None."""
    values = ev.per_seed or []
    if len(values) < 2 or any(is_missing(v) for v in values):
        return None
    return [float(v) for v in values]


def consistency(tested: Evidence, claim: Claim) -> dict | None:
    """Is the book's value what one run like the book's could give (rule 7)? {"verdict":
    "consistent" or "not consistent", "interval": [lo, hi]}, our prediction interval for one
    such run at the claim's level; None where it does not apply. Never part of the verdict."""
    book = claim.book
    if (
        claim.kind not in ("exact", "range")
        or isinstance(book, bool)
        or not isinstance(book, (int, float))
        or tested.one_run is None
    ):
        return None
    lo, hi = tested.one_run
    return {"verdict": "consistent" if lo <= book <= hi else "not consistent", "interval": [lo, hi]}


COMPONENTS = {
    "starts": "the spread of starts",
    "grpo": "the spread of GRPO seeds",
    "evaluation": "evaluation noise",
}


def blocker(row: Judged) -> str:
    """What keeps an inconclusive interval wide: the largest variance component of one chain where
    the metrics give them (for a claim against another metric, those of the paired differences),
    else the spread between chains, else the metric's sampling interval. A claim decided on the log
    scale (`log_mean`) names the spread of the log values, the scale of its interval."""
    tested = row.tested
    chains = _defined_chains(tested)
    if row.claim.estimand == "log_mean" and chains is not None and min(chains) > 0:
        sd = statistics.stdev(math.log(v) for v in chains)  # the interval's own scale
        factor = f"a factor of {math.exp(sd):.2g}"
        return f"blocked by the spread between chains (SD {num(sd)} of the log per chain, {factor})"
    components = {
        k: float(v)
        for k, v in ((tested.variance if tested else None) or {}).items()
        if k in COMPONENTS and not is_missing(v)
    }
    if components:
        name = max(components, key=components.get)
        what = "of the paired differences " if row.claim.other is not None else ""
        return f"blocked by {COMPONENTS[name]} {what}(SD {num(components[name])} per chain)"
    if chains is not None:
        what = (
            "the spread of the paired differences between chains"
            if row.claim.other
            else "the spread between chains"
        )
        return f"blocked by {what} (SD {num(statistics.stdev(chains))} per chain)"
    return f"blocked by the width of the interval ({tested.source})"


MAX_CHAINS = 100_000  # beyond this, "more than": the target is out of any practical reach


def precision_target(claim: Claim) -> float | None:
    """The declared half-width a measured claim's deciding interval should reach: `precision` where
    claims.yaml gives it, else half the tolerance (`exact`, `close`), a quarter of the band (`range`)
    or the smallest effect of interest (`greater`, `less`: `sesoi`); None where none is declared."""
    if claim.precision is not None:
        return float(claim.precision)
    if claim.kind in ("exact", "close"):
        return float(claim.tol) / 2
    if claim.kind == "range":
        return (float(claim.hi) - float(claim.lo)) / 4
    return None if claim.sesoi is None else float(claim.sesoi)


def half_width(tested: Evidence | None) -> float | None:
    if tested is None or tested.lo is None or tested.hi is None:
        return None
    return (tested.hi - tested.lo) / 2


def t_half_width(sd: float, n: int, level: float = 0.95) -> float:
    return t_quantile(n - 1, 0.5 + level / 2) * sd / math.sqrt(n)


def chains_for(target: float, half_at) -> int | None:
    """The smallest chain count n >= 2 with half_at(n) <= target (half_at falls with n): what a
    confirmatory run needs at a pilot's spread. MAX_CHAINS + 1 beyond reach; None if no spread."""
    if half_at(MAX_CHAINS) > target:
        return MAX_CHAINS + 1
    lo, hi = 2, MAX_CHAINS
    while lo < hi:
        n = (lo + hi) // 2
        lo, hi = (lo, n) if half_at(n) <= target else (n + 1, hi)
    return lo


def chains_needed(tested: Evidence, claim: Claim) -> int | None:
    """At this spread, the chains a deciding interval needs to reach its precision target (the
    estimand's scale: the mean log for `log_mean`, a share's exact interval at this share)."""
    target = precision_target(claim)
    chains = _defined_chains(tested)
    if target is None or chains is None:
        return None
    level = tested.level
    if claim.estimand == "share":
        from rlvr.stats import share_interval

        p = statistics.fmean(chains)
        return chains_for(
            target, lambda n: (lambda lo, hi: (hi - lo) / 2)(*share_interval(round(p * n), n, level))
        )
    if claim.estimand == "log_mean":
        logs = [math.log(v) for v in chains]
        m, s = statistics.fmean(logs), statistics.stdev(logs)
        return chains_for(
            target,
            lambda n: (math.exp(m + t_half_width(s, n, level)) - math.exp(m - t_half_width(s, n, level))) / 2,
        )
    sd = statistics.stdev(chains)
    return None if sd == 0 else chains_for(target, lambda n: t_half_width(sd, n, level))


def precision(row: Judged) -> dict | None:
    """A measured claim's precision: {"half_width", "target", "powered", "chains_needed"}; None for
    a claim that is not measured over chains or declares no target."""
    target = precision_target(row.claim)
    half = half_width(row.tested)
    if row.claim.category != "measured" or target is None or half is None or not row.tested.per_seed:
        return None
    return {
        "half_width": half,
        "target": target,
        "powered": half <= target,
        "chains_needed": chains_needed(row.tested, row.claim),
        "chains": len(_defined_chains(row.tested) or []),
    }


def precision_clause(row: Judged) -> str:
    """The precision sentence of a measured claim's reason: whether its half-width met the target."""
    p = precision(row)
    if p is None:
        return ""
    words = f"; half-width {num(p['half_width'])} against a target of {num(p['target'])}"
    if p["powered"]:
        return (
            words
            + " (powered: the plan's precision is met, so what keeps it undecided is where the mean lies)"
        )
    n = p["chains_needed"]
    more = (
        ""
        if n is None
        else (
            f"; about {n} chains would meet it at this spread (we ran {p['chains']})"
            if n <= MAX_CHAINS
            else f"; more than {MAX_CHAINS:,} chains would be needed at this spread"
        )
    )
    return words + f" (misses by {num(p['half_width'] - p['target'])}){more}"


def reason(row: Judged) -> str:
    """One mechanical line on why a claim differs, is inconclusive or not comparable: where its
    deciding interval lies against the region the claim allows and, for an inconclusive one, what
    blocks it and how its precision compares with the declared target."""
    tested, ev = row.tested, row.evidence
    if row.verdict == "missing":
        return f"No value: {row.error or 'metric missing'}"
    if row.verdict == "not comparable":
        return f"Not comparable: {row.error}"
    if tested is None or tested.value is None:
        return f"Undefined ({ev.source if ev else 'no evidence'})"
    if tested.lo is None:
        undefined = sum(is_missing(v) for v in (tested.per_seed or []))
        if undefined:
            return (
                f"{undefined} chain(s) give no value, so no chain count decides it; the other chains' "
                f"estimate is {num(tested.value)}"
            )
        return f"Fewer than two chains give a value ({tested.source}): no verdict from one"
    low, _, high, _ = region(row.claim)
    what = f"Ours − {row.claim.other[1]}" if row.claim.other is not None else "Our interval"
    span = f"{what} [{num(tested.lo)}, {num(tested.hi)}] ({tested.source}{level_words(tested.level)})"
    if row.verdict == "differs":
        side = f"below {num(low)}" if tested.hi <= low else f"above {num(high)}"
        run = (
            ""
            if tested.one_run is None
            else (
                ", and one run like the book's would lie in "
                f"[{num(tested.one_run[0])}, {num(tested.one_run[1])}]"
            )
        )
        return f"{span} lies wholly {side}{run}"
    by = by_interval(tested.lo, tested.hi, row.claim)
    if by == "differs":
        return (
            f"{span} lies wholly outside [{num(low)}, {num(high)}], but one run like the book's could "
            f"have shown the book's value (its {tested.level:.1%} prediction interval "
            f"[{num(tested.one_run[0])}, "
            f"{num(tested.one_run[1])}])" + precision_clause(row)
            if tested.one_run is not None
            else f"{span} lies wholly outside the region, with no prediction interval for one run"
        )
    if by == "reproduced" and tested.check is not None:
        return (
            f"{span} lies inside the region, but the declared BCa check [{num(tested.check[0])}, "
            f"{num(tested.check[1])}] does not: the estimate leans on the chains' skew"
        )
    if tested.lo < low and tested.hi > high:
        where = f"covers the whole region [{num(low)}, {num(high)}]"
    else:
        where = f"straddles the bound {num(low if tested.lo < low <= tested.hi else high)}"
    return f"{span} {where}: {blocker(row)}{precision_clause(row)}"
