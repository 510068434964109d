"""The variant matrix's decisions: each variant against `grpo`, per metric, "different",
"equivalent within +-margin" or "undecided", after Holm's adjustment over the whole table.

Each cell is a paired sample of per-chain differences (variant - grpo). Two tests are run on it:
the paired t-test of no difference (two-sided) and the two one-sided tests of equivalence (TOST:
the difference lies above -margin and below +margin). Every p-value of the table, both tests of
every cell, is one Holm family, so the chance of any wrong "different" or "equivalent" in the table
stays at most alpha. A cell neither test decides says how many chains would decide it at the
spread and mean observed (the plan's power question, answered on the data).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MARGIN = 0.02  # the equivalence margin in pass@1 and pass@64 (powered/experiments/plan.yaml `matrix.margin`)
ALPHA = 0.05
MAX_CHAINS = 10_000  # beyond this "would decide it" is reported as never at this spread and mean


def holm(pvalues: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (None stays None, not counted in it):
    the k-th smallest of m is multiplied by m - k + 1, then made non-decreasing, capped at 1."""
    ranked = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m, out, running = len(ranked), [None] * len(pvalues), 0.0
    for k, (p, i) in enumerate(ranked):
        running = max(running, min(1.0, (m - k) * p))
        out[i] = running
    return out


@dataclass(frozen=True)
class Cell:
    """One variant on one metric: the per-chain differences' mean, SD and count."""

    mean: float
    sd: float | None  # None with fewer than two chains
    n: int

    @classmethod
    def of(cls, differences) -> Cell:
        d = np.asarray(differences, dtype=float)  # (chains,)
        return cls(float(d.mean()), float(d.std(ddof=1)) if d.size > 1 else None, int(d.size))

    @property
    def se(self) -> float | None:
        return None if self.sd is None else self.sd / math.sqrt(self.n)

    def p_difference(self) -> float | None:
        """Two-sided paired t-test of a zero mean difference (`rlvr diff`'s test)."""
        from rlvr.report.compare import pvalue

        return pvalue(self.mean, self.se, None if self.se is None else self.n - 1)

    def p_equivalence(self, margin: float = MARGIN) -> float | None:
        """TOST: the larger p of the one-sided tests of mean <= -margin and mean >= +margin."""
        from scipy import stats

        if self.se is None:
            return None
        if self.se == 0:
            return 0.0 if abs(self.mean) < margin else 1.0
        below = stats.t.sf((self.mean + margin) / self.se, self.n - 1)  # H0: mean <= -margin
        above = stats.t.cdf((self.mean - margin) / self.se, self.n - 1)  # H0: mean >= +margin
        return float(max(below, above))


def chains_to_decide(cell: Cell, alpha: float, margin: float = MARGIN) -> int | None:
    """The fewest chains at which, were the mean and SD what this cell shows, one of its tests
    would pass at level `alpha` (Holm's worst case: alpha over the family's size); None when no
    count up to MAX_CHAINS would (a mean at the margin) or the cell has no spread to scale."""
    from scipy import stats

    if cell.sd is None or cell.sd == 0:
        return None
    for n in range(2, MAX_CHAINS + 1):
        se = cell.sd / math.sqrt(n)
        if abs(cell.mean) > stats.t.ppf(1 - alpha / 2, n - 1) * se:
            return n
        if abs(cell.mean) + stats.t.ppf(1 - alpha, n - 1) * se < margin:
            return n
    return None


def decide(cells: list[Cell], alpha: float = ALPHA, margin: float = MARGIN) -> list[str]:
    """Each cell's decision, Holm over both tests of every cell: "different", "equivalent within
    ±margin", both ("different, within ±margin": a real difference too small to matter), or
    "undecided (~N chains)"."""
    family = [p for c in cells for p in (c.p_difference(), c.p_equivalence(margin))]
    adjusted = holm(family)
    size = sum(p is not None for p in family)
    out = []
    for i, c in enumerate(cells):
        diff, equiv = adjusted[2 * i], adjusted[2 * i + 1]
        different, equivalent = (p is not None and p < alpha for p in (diff, equiv))
        if different:
            out.append("different" + (f", within ±{margin:g}" if equivalent else ""))
        elif equivalent:
            out.append(f"equivalent within ±{margin:g}")
        else:
            need = chains_to_decide(c, alpha / max(size, 1), margin)
            out.append("undecided" + (f" (~{need} chains)" if need else " (no count decides it)"))
    return out
