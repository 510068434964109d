"""The claims registry, experiments/claims.yaml, read once into typed claims.

Each entry is one chapter claim: what the chapter says (`quote`), the claim in our words (`text`),
the book's value, the metric that measures it (`[file under reports/metrics, dotted key]`), the
region of values it allows (its `kind` and that kind's fields) and why that tolerance. `load_claims`
reads the file and `check_claims` turns its entries into `Claim`s, refusing anything a verdict could
not rest on (a missing field, an unknown one, a fragment for a sentence) in one line naming the entry
and the field. Nothing here looks at a metric: that is rlvr.report.evidence's job.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from rlvr.fields import ConfigError
from rlvr.io.files import bounded_text, check_expansion

KINDS = ("exact", "range", "greater", "less", "close", "cited")
ESTIMANDS = {  # claims.yaml `estimand`: what an interval over chains is of
    "mean": "the chain mean, its Student-t interval",
    "log_mean": "the geometric mean run (the mean of log values), its t-interval, checked by a BCa bootstrap",
    "share": "the share of runs, its exact (Clopper-Pearson) interval",
}
NEEDS = {  # the fields each kind's region is made of
    "exact": ("metric", "tol"),
    "range": ("metric", "lo", "hi"),
    "close": ("metric", "other", "tol"),
    "greater": ("metric",),
    "less": ("metric",),
    "cited": (),
}
PROSE = ("chapter", "quote", "text", "book", "why")  # what every claim says, whatever its kind
CATEGORIES = {  # what kind of claim, in the order the summary gives them
    "measured": "measured (training and evaluation outcomes)",
    "calibrated": "calibrated (a start or end stopped at the chapter's value, or a quantity matched by a "
    "choice; not findings)",
    "closed-form": "closed-form and worked examples (arithmetic, autograd, exact expectations)",
    "cited": "cited facts (outside a CPU's reach; no verdict)",
}
WORKED = "worked.json"  # the worked examples' metrics file: a claim on it is closed-form
LEVEL = 0.95  # the confidence level a claim is decided at, unless a second look of the plan says

Ref = tuple[str, str]  # (metrics file under reports/metrics, dotted key)


@dataclass(frozen=True)
class Claim:
    """One entry of claims.yaml. Numbers stay as the file writes them (126, not 126.0), so what the
    report prints of them is what the registry says."""

    id: str
    kind: str  # KINDS: the region of values the claim allows
    chapter: str = ""  # "A" or "B"
    quote: str = ""  # the chapter's own words, short
    text: str = ""  # the claim as one full sentence in our words
    book: Any = None  # the book's value: a number, or text for a cited fact
    why: str = ""  # why this tolerance
    metric: Ref | None = None  # what measures it
    other: Ref | None = None  # greater / less / close: the metric it is compared with, paired by chain
    other_value: float | None = None  # greater / less: a constant to compare with instead
    margin: float | None = None  # greater / less: by how much
    tol: float | None = None  # exact / close: the half-width of the band
    lo: float | None = None  # range
    hi: float | None = None
    feasible: tuple[float, float] | None = None  # the values the metric can take: intervals are cut to it
    calibrated: bool = False  # a start whose inputs were chosen to match it: matched, never reproduced
    estimand: str = "mean"  # ESTIMANDS: how the chains' values become the deciding interval
    precision: float | None = None  # the declared 95% half-width target (default: half the tolerance)
    sesoi: float | None = None  # greater / less: the smallest effect of interest (their precision target)
    endpoint: str | None = None  # measured at this variant's controlled end: chains that missed it left out
    headline: bool = False  # in the report's summary table
    note: str | None = None  # what explains a claim that differs or is inconclusive

    def __post_init__(self) -> None:  # lists from YAML (or a test) held as tuples: a claim never changes
        for name in ("metric", "other", "feasible"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def category(self) -> str:
        """measured, calibrated, closed-form or cited (CATEGORIES). A claim on the worked examples'
        file is closed-form; one marked `calibrated` is a start whose inputs were chosen to match it
        (docs/calibration.md)."""
        if self.kind == "cited":
            return "cited"
        if self.calibrated:
            return "calibrated"
        return "closed-form" if self.metric is not None and self.metric[0] == WORKED else "measured"

    @property
    def refs(self) -> list[Ref]:
        """The metrics the claim reads: its own, and the one it is compared with."""
        return [r for r in (self.metric, self.other) if r is not None]


FIELDS = tuple(f.name for f in fields(Claim))


def _is_sentence(text: Any) -> bool:
    return (
        isinstance(text, str)
        and text[:1].isupper()
        and text.rstrip().endswith((".", "?"))
        and len(text.split()) >= 6
    )


def _check(c: dict, where: str) -> None:
    """One entry's fields: its kind's, the prose every claim carries, and well-formed values."""
    if c.get("kind") not in KINDS:
        raise ConfigError(f"{where}.kind = {c.get('kind')!r}: must be one of {', '.join(KINDS)}")
    need = NEEDS[c["kind"]]
    for key in (*need, *PROSE):
        if key not in c:
            raise ConfigError(
                f"{where}.{key}: missing (kind {c['kind']} needs {', '.join(need) or 'no metric'})"
            )
    unknown = [k for k in c if k not in FIELDS]
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]}: unknown field (a value with a comma or colon wants quotes); "
            f"known: {', '.join(FIELDS)}"
        )
    if c["kind"] in ("greater", "less") and "other" not in c and "other_value" not in c:
        raise ConfigError(f"{where}: kind {c['kind']} needs `other` (a metric) or `other_value`")
    if not _is_sentence(c["text"]):
        raise ConfigError(
            f"{where}.text = {c['text']!r}: must be a full sentence a reader understands alone "
            "(capitalised, six words or more, ending with a full stop)"
        )
    if "note" in c and not _is_sentence(c["note"]):
        raise ConfigError(f"{where}.note: must be full sentences (what explains it, what was checked)")
    if c.get("estimand", "mean") not in ESTIMANDS:
        raise ConfigError(f"{where}.estimand = {c['estimand']!r}: must be one of {', '.join(ESTIMANDS)}")
    for key in ("precision", "sesoi"):
        if key in c and not (isinstance(c[key], (int, float)) and c[key] > 0):
            raise ConfigError(f"{where}.{key} = {c[key]!r}: must be a positive number (a 95% half-width)")
    if not isinstance(c.get("calibrated", False), bool):
        raise ConfigError(f"{where}.calibrated = {c['calibrated']!r}: must be true or false")
    feasible = c.get("feasible")
    if feasible is not None and not (
        isinstance(feasible, list) and len(feasible) == 2 and feasible[0] < feasible[1]
    ):
        raise ConfigError(
            f"{where}.feasible = {feasible!r}: must be [lo, hi] with lo < hi (the values the metric can take)"
        )


def check_claims(entries: Any, path: str) -> list[Claim]:
    """The parsed claims.yaml as claims: unique ids, known kinds, the fields each kind needs."""
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: must be a list of claims")
    seen: set = set()
    claims = []
    for i, c in enumerate(entries):
        if not isinstance(c, dict):
            raise ConfigError(f"{path}[{i}]: must be a mapping of a claim's fields")
        where = f"{path}[{i}] ({c.get('id')})"
        if c.get("id") in seen or "id" not in c:
            raise ConfigError(f"{where}: id missing or repeated")
        seen.add(c["id"])
        _check(c, where)
        claims.append(Claim(**c))
    return claims


@dataclass(frozen=True)
class Look:
    """A second look of the confirmatory plan (experiments/plan.yaml `looks`): chains added to an
    SFT run's after its first results were seen. Every claim whose chains include one of them is
    decided at `level` (Pocock's bound for two looks: both looks at that level keep the overall
    error at 5%); a claim resting on the first look's chains alone was looked at once."""

    run: str  # the SFT run whose chains grew
    level: float  # e.g. 0.972
    first: tuple[int, ...]  # the chains of the first look
    second: tuple[int, ...]  # the chains the second look added


def _read_plan(path: Path) -> dict:
    """A plan file, bounded and checked as every YAML input is; a bad one is one line naming it."""
    try:
        plan = yaml.safe_load(bounded_text(path, "plan")) or {}
        check_expansion(plan, path, "plan")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file (the confirmatory plan the verdicts follow)") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})".splitlines()[0]) from None
    return plan if isinstance(plan, dict) else {}


def read_beside(path: Path) -> str | None:
    """The other plan's report.json a profile's plan names (`beside`, from the plan's folder's
    parent: the stage's folder), or None."""
    other = _read_plan(path).get("beside")
    return None if other is None else str(other)


def read_looks(path: Path) -> dict[str, Look]:
    """The plan's second looks, by SFT run ({} where the plan declares none): each run's `level` in
    (0.95, 1) and its `first` and `second` chains, disjoint lists of seeds. A malformed entry is one
    line naming it."""
    plan = _read_plan(path)
    looks = plan.get("looks")
    if looks is None:
        return {}
    if not isinstance(looks, dict):
        raise ConfigError(f"{path}: looks must map an SFT run to its level, first and second chains")
    out = {}
    for run, look in looks.items():
        where = f"{path}: looks.{run}"
        if not isinstance(look, dict) or set(look) != {"level", "first", "second", "why"}:
            raise ConfigError(f"{where}: must give exactly level, first, second and why")
        level = look["level"]
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not LEVEL < level < 1:
            raise ConfigError(f"{where}.level = {level!r}: must lie between {LEVEL} and 1")
        for key in ("first", "second"):
            seeds = look[key]
            if not isinstance(seeds, list) or not seeds or not all(type(s) is int for s in seeds):
                raise ConfigError(f"{where}.{key}: must be a non-empty list of chain seeds")
        if set(look["first"]) & set(look["second"]):
            raise ConfigError(
                f"{where}: a second look's chains must be new (shared: "
                f"{sorted(set(look['first']) & set(look['second']))})"
            )
        out[run] = Look(str(run), float(level), tuple(look["first"]), tuple(look["second"]))
    return out


def load_claims(path: Path) -> list[Claim]:
    """experiments/claims.yaml (or another registry) as checked claims."""
    try:
        entries = yaml.safe_load(bounded_text(path, "claims registry"))
        check_expansion(entries, path, "claims registry")
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})".splitlines()[0]) from None
    return check_claims(entries, str(path))
