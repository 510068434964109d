"""The verdict rule: when a claim is reproduced, differs or is inconclusive (an equivalence test).

1. The deciding interval is the claim's tested interval: the 95% Student-t interval of our chain
   mean, or for a claim against another metric of the paired per-chain differences, cut to the
   values the metric can take (`feasible`); a metric's own sampling interval (`<key>_ci95`) where it
   has one; [v, v] for a point value.
2. The claim's region is the set of values it allows: book ± tol (`exact`), [lo, hi] (`range`),
   the open half-line beyond the bound (`greater`, `less`), ±tol around the other metric (`close`).
3. **reproduced** only when the deciding interval lies wholly inside the region.
4. **differs** when it lies wholly outside the region.
5. **inconclusive** otherwise: the interval lies across a bound of the region.
6. A chain that gives no value (a crossover that never happens) cannot hold the claim, so a claim
   with one is never reproduced: inconclusive when the other chains' mean lies inside the region,
   differs when it lies outside or when no chain gives a value.
7. Consistency, shown beside the verdict and never counted: for a claim with a numeric book value
   (`exact`, `range`) measured over two chains or more, every one defined, "consistent" when the
   book's value lies in the 95% prediction interval for one new chain of ours,
   mean ± t(n−1)·s·sqrt(1 + 1/n) (cut to `feasible`), else "not consistent". The book's value is
   one run: the wider our chains spread, the more book values are consistent, so it decides nothing.

An inconclusive claim's reason names what blocks it: the largest variance component of one chain
(starts, GRPO seeds, evaluation noise) where the metrics file gives them, else the spread between
chains. Finding the evidence in the metrics files is rlvr.report.evidence's job; the claims are
rlvr.report.claims's `Claim`s.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from rlvr.report.claims import Claim
from rlvr.stats import t_quantile


@dataclass(frozen=True)
class Evidence:
    """A measured value and the interval a verdict is decided on.

    Training metrics come with one value per seed: the interval is their 95% Student-t interval.
    Single-run metrics with a sampling interval beside them (`<key>_ci`, `<key>_ci95`: a bootstrap or
    t-interval over problems) use that; anything else is a point (lo = hi = value).
    """

    value: float | None  # the mean over seeds, or the single value (None: undefined)
    lo: float | None
    hi: float | None
    source: str  # "5 seeds", "sampling (95% over problems)", "single value"
    per_seed: list | None = None  # one value per seed (None entries: undefined for that seed)
    seeds: list | None = None  # which seeds, where the file says
    variance: dict | None = None  # SD of one chain's value by source: "starts", "grpo", "evaluation"


@dataclass(frozen=True)
class Judged:
    """A claim with its evidence and verdict: what the report prints a row of."""

    claim: Claim
    verdict: str  # reproduced, differs, inconclusive, cited or missing
    evidence: Evidence | None = None  # ours
    other: Evidence | None = None  # the metric it is compared with, for a claim against one
    tested: Evidence | None = None  # the deciding interval: ours, or ours - other paired by chain
    consistency: dict | None = None  # rule 7: {"verdict", "interval"}, or None where it does not apply
    error: str | None = None  # why a claim is missing

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


def decide(tested: Evidence, claim: Claim) -> str:
    """The verdict on the deciding interval `tested` (the module's rules 3 to 6); "missing" where
    there is no value at all."""
    if tested.value is None and tested.lo is None:
        return "differs" if tested.per_seed else "missing"  # every chain undefined, or no metric
    if tested.lo is None:  # some chains undefined: the claim cannot hold for them
        return "inconclusive" if _inside(tested.value, claim) else "differs"
    if _inside(tested.lo, claim) and _inside(tested.hi, claim):
        return "reproduced"
    return "differs" if _outside(tested.lo, tested.hi, claim) else "inconclusive"


def _defined_chains(ev: Evidence) -> list[float] | None:
    """The per-chain values when there are two or more and every one is defined, else None."""
    values = ev.per_seed or []
    if len(values) < 2 or any(is_missing(v) for v in values):
        return None
    return [float(v) for v in values]


def consistency(tested: Evidence, claim: Claim, feasible: tuple | list | None = None) -> dict | None:
    """Is the book's value what one more chain of ours could give (rule 7)? {"verdict":
    "consistent" or "not consistent", "interval": [lo, hi]}, the 95% prediction interval for one new
    chain cut to `feasible`; None where it does not apply. Never part of the verdict."""
    book = claim.book
    chains = _defined_chains(tested)
    if (
        claim.kind not in ("exact", "range")
        or isinstance(book, bool)
        or not isinstance(book, (int, float))
        or chains is None
    ):
        return None
    n, mean, sd = len(chains), statistics.fmean(chains), statistics.stdev(chains)
    half = t_quantile(n - 1) * sd * math.sqrt(1 + 1 / n)
    lo, hi = mean - half, mean + half
    if feasible is not None:
        lo, hi = min(max(lo, feasible[0]), feasible[1]), max(min(hi, feasible[1]), feasible[0])
    return {"verdict": "consistent" if lo <= book <= hi else "not consistent", "interval": [lo, hi]}


COMPONENTS = {
    "starts": "the spread of starts",
    "grpo": "the spread of GRPO seeds",
    "evaluation": "evaluation noise",
}


def blocker(row: Judged) -> str:
    """What keeps an inconclusive interval wide: the largest variance component of one chain where
    the metrics file gives them, else the spread between chains (for a claim against another
    metric, of the paired differences), else the metric's sampling interval."""
    tested, ev, paired = row.tested, row.evidence, row.claim.other is not None
    components = {
        k: float(v)
        for k, v in ((ev.variance if ev else None) or {}).items()
        if k in COMPONENTS and not is_missing(v)
    }
    if not paired and components:
        name = max(components, key=components.get)
        return f"blocked by {COMPONENTS[name]} (SD {num(components[name])} per chain)"
    chains = _defined_chains(tested)
    if chains is not None:
        what = (
            "the spread of the paired differences between chains" if paired else "the spread between chains"
        )
        return f"blocked by {what} (SD {num(statistics.stdev(chains))} per chain)"
    return f"blocked by the width of the interval ({tested.source})"


def single_run_clause(row: Judged) -> str:
    """For an exact claim whose chains spread more than its tolerance allows one run to: how closely a
    single run (the book's) can be pinned, 1.96 x the SD of our chains; empty otherwise."""
    chains = _defined_chains(row.tested)
    if row.claim.kind != "exact" or row.claim.other is not None or chains is None:
        return ""
    error = 1.96 * statistics.stdev(chains)
    if error <= float(row.claim.tol):
        return ""
    return f"; a single book run cannot be pinned closer than ±{num(error)} (1.96 × the SD of our chains)"


MAX_CHAINS = 100_000  # beyond this, "more than": the mean sits on a bound for any practical purpose


def chains_to_decide(chains: list[float], claim: Claim) -> int | None:
    """How many chains would decide a claim if more chains kept this mean and spread: the smallest
    n with t(n-1) * sd / sqrt(n) below the distance from the mean to the region's nearest bound,
    so the interval would lie wholly on the mean's side (reproduced inside, differs outside).
    MAX_CHAINS + 1 for more than MAX_CHAINS; None without a spread or a bound to measure from."""
    mean, sd = statistics.fmean(chains), statistics.stdev(chains)
    low, _, high, _ = region(claim)
    gap = min(abs(mean - b) for b in (low, high) if math.isfinite(b))
    if sd == 0 or gap == 0:
        return None if sd == 0 else MAX_CHAINS + 1
    if t_quantile(MAX_CHAINS - 1) * sd / math.sqrt(MAX_CHAINS) >= gap:
        return MAX_CHAINS + 1
    lo, hi = 2, MAX_CHAINS  # half-width falls with n: bisect for the first n below the gap
    while lo < hi:
        n = (lo + hi) // 2
        lo, hi = (lo, n) if t_quantile(n - 1) * sd / math.sqrt(n) < gap else (n + 1, hi)
    return lo


def chains_clause(row: Judged) -> str:
    """For an inconclusive claim over chains: about how many chains would decide it, at its mean
    and spread (a projection, not a promise: more chains move the mean too)."""
    chains = _defined_chains(row.tested)
    n = None if chains is None else chains_to_decide(chains, row.claim)
    if n is None:
        return ""
    if n > MAX_CHAINS:
        return f"; the mean lies too near the bound: more than {MAX_CHAINS:,} chains would be needed"
    return f"; at this mean and spread about {n} chains would decide it (we ran {len(chains)})"


def reason(row: Judged) -> str:
    """One mechanical line on why a claim differs or is inconclusive: where its deciding interval
    lies against the region the claim allows and, for an inconclusive one, what blocks it."""
    tested, ev = row.tested, row.evidence
    if row.verdict == "missing":
        return f"No value: {row.error or 'metric missing'}"
    if tested is None or tested.value is None:
        return f"Undefined ({ev.source if ev else 'no evidence'})"
    if tested.lo is None:
        undefined = sum(is_missing(v) for v in (tested.per_seed or ev.per_seed or []))
        return f"{undefined} chain(s) give no value; the other chains' mean {num(tested.value)}" + (
            " satisfies the claim" if row.verdict == "inconclusive" else " does not satisfy it"
        )
    low, _, high, _ = region(row.claim)
    what = f"Ours − {row.claim.other[1]}" if row.claim.other is not None else "Our interval"
    span = f"{what} [{num(tested.lo)}, {num(tested.hi)}] ({tested.source})"
    if row.verdict == "differs":
        side = f"below {num(low)}" if tested.hi <= low else f"above {num(high)}"
        return f"{span} lies wholly {side}"
    if tested.lo < low and tested.hi > high:
        where = f"covers the whole region [{num(low)}, {num(high)}]"
    else:
        where = f"straddles the bound {num(low if tested.lo < low <= tested.hi else high)}"
    return f"{span} {where}: {blocker(row)}{single_run_clause(row)}{chains_clause(row)}"
