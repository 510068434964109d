"""A claim's evidence in the metrics, and its verdict by the rule of rlvr.report.verdict.

The metrics are {file name: parsed JSON} of reports/metrics; a claim names [file, dotted key]. A
metric written over chains carries its per-chain values beside it (`per_seed`, `seeds`, and the SD
each source of variance contributes, `variance`), so its evidence is the chain mean with its
Student-t interval; a single value may carry a sampling interval (`<key>_ci95`). `judge` finds a
claim's evidence (and, for a claim against another metric, the paired per-chain difference), cuts it
to the values the metric can take and hands it to `verdict.decide`; nothing here decides.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from rlvr.report.claims import CATEGORIES, Claim
from rlvr.report.verdict import Evidence, Judged, consistency, decide, is_missing
from rlvr.stats import mean_ci

VERDICTS = ("reproduced", "differs", "inconclusive", "cited", "missing")


def lookup(metrics: dict[str, Any], ref) -> Any:
    """[file, "a.b.0"] -> the value at that dotted key (dict keys or list indices) of that file's JSON."""
    if ref[0] not in metrics:
        raise KeyError(f"{ref[0]} does not exist")
    value: Any = metrics[ref[0]]
    for part in str(ref[1]).split("."):
        if isinstance(value, list):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(f"{ref[0]}: no key {ref[1]!r} (stopped at {part!r})")
    return value


def _sibling(metrics: dict[str, Any], ref, name: str) -> Any:
    """The value at `ref` with its last key replaced by `name` (None if absent)."""
    head, _, last = str(ref[1]).rpartition(".")
    try:
        return lookup(metrics, [ref[0], f"{head}.{name}" if head else name])
    except (KeyError, IndexError, ValueError):
        return None


def clip(ev: Evidence, feasible) -> Evidence:
    """The interval cut to the values the metric can take (a count is never below 0, a rate never
    above 1): a t-interval over four spread-out chains would otherwise leave that range."""
    if feasible is None or ev.lo is None:
        return ev
    lo, hi = float(feasible[0]), float(feasible[1])
    return replace(ev, lo=min(max(ev.lo, lo), hi), hi=max(min(ev.hi, hi), lo))


def _span(feasible) -> list | None:
    """The values a difference of two such metrics can take: [lo - hi, hi - lo]."""
    return None if feasible is None else [feasible[0] - feasible[1], feasible[1] - feasible[0]]


def evidence(metrics: dict[str, Any], ref, feasible=None) -> Evidence:
    """What the metrics say about [file, key]: its value, per-seed values and interval (cut to
    `feasible`, the values the metric can take, when given)."""
    return clip(_evidence(metrics, ref), feasible)


def start_run(metrics: dict[str, Any], ref) -> str | None:
    """The SFT run whose chains [file, key] is measured over: the run itself (`sft-<run>.json`), the
    start a GRPO variant or the hack trains from (their `sft`), or the start pass@k scores (`sft.*`:
    `sft_run`; `contrast.*`: `contrast_run`; `variants.<v>.*`: that variant's start). None where the
    file does not say (closed-form numbers, older files)."""
    file, key = ref[0], str(ref[1])
    m = metrics.get(file)
    if not isinstance(m, dict):
        return None
    if file.startswith("sft-"):
        return file.removeprefix("sft-").removesuffix(".json")
    if file == "passk.json":
        head, _, rest = key.partition(".")
        if head == "variants":
            return start_run(metrics, [f"grpo-{rest.partition('.')[0]}.json", ""])
        return m.get({"sft": "sft_run", "contrast": "contrast_run"}.get(head, ""))
    return m.get("sft") if isinstance(m.get("sft"), str) else None


def missed_starts(metrics: dict[str, Any], ref) -> set[int]:
    """The chains (SFT seeds) of [file, key]'s start whose controlled stop never reached its target:
    the step cap came first (the SFT metrics file's per-chain `reached`, 0.0). A claim about GRPO
    *from a start of a given accuracy* is not about them, so they are left out of its interval, and
    its line names them (`rlvr.report.claimtext`); the controlled-starts table lists them too."""
    run = start_run(metrics, ref)
    sft = metrics.get(f"sft-{run}.json") if run else None
    if not isinstance(sft, dict):
        return set()
    reached = (sft.get("per_seed") or {}).get("reached")
    if not isinstance(reached, list) or len(reached) != len(sft.get("seeds", [])):
        return set()  # a run fitted to its budget has no target: every chain is its start
    return {s for s, r in zip(sft["seeds"], reached) if not r}


def _on_reached(per_seed: list, seeds, missed: set[int]) -> tuple[list, list, str]:
    """per_seed and seeds less the chains whose start missed its target, and the words for the
    chains that are left ("7 of 8 chains; left out, start missed its target: 4")."""
    if not isinstance(seeds, list) or len(seeds) != len(per_seed) or not missed & set(seeds):
        return per_seed, seeds, f"{len(per_seed)} chains"
    keep = [i for i, s in enumerate(seeds) if s not in missed]
    out = sorted(s for s in seeds if s in missed)
    words = f"{len(keep)} of {len(seeds)} chains; left out, start missed its target: "
    words += ", ".join(map(str, out))
    return [per_seed[i] for i in keep], [seeds[i] for i in keep], words


def _evidence(metrics: dict[str, Any], ref) -> Evidence:
    value = lookup(metrics, ref)
    last = str(ref[1]).rpartition(".")[2]
    per_seed = (_sibling(metrics, ref, "per_seed") or {}).get(last)
    seeds = _sibling(metrics, ref, "seeds")
    variance = (_sibling(metrics, ref, "variance") or {}).get(last)  # {"starts"|"grpo"|"evaluation": SD}
    variance = variance if isinstance(variance, dict) else None
    chains = "chains"
    if isinstance(per_seed, list) and len(per_seed) >= 2:
        per_seed, seeds, chains = _on_reached(per_seed, seeds, missed_starts(metrics, ref))
    if isinstance(per_seed, list) and len(per_seed) >= 2:
        defined = [float(v) for v in per_seed if not is_missing(v)]
        if len(defined) < len(per_seed):  # e.g. a seed whose curves never cross: no crossover k
            mean = float(statistics.fmean(defined)) if defined else None
            return Evidence(
                mean,
                None,
                None,
                f"{chains}, {len(per_seed) - len(defined)} undefined",
                per_seed,
                seeds,
                variance,
            )
        mean, lo, hi = mean_ci(defined)
        return Evidence(mean, lo, hi, chains, per_seed, seeds, variance)
    if is_missing(value):
        return Evidence(None, None, None, "undefined")
    value = float(value)
    ci = _sibling(metrics, ref, f"{last}_ci95") or _sibling(metrics, ref, f"{last}_ci")
    if isinstance(ci, list) and len(ci) == 2 and not any(is_missing(c) for c in ci):
        return Evidence(
            value, min(float(ci[0]), value), max(float(ci[1]), value), "sampling (95% over problems)"
        )
    return Evidence(value, value, value, "single value")


def difference(a: Evidence, b: Evidence) -> Evidence:
    """a - b. Paired by seed when both have values for the same seeds (the seed fixes the start and
    the draws, so the difference is the effect); otherwise the conservative interval [lo_a - hi_b,
    hi_a - lo_b]."""
    if a.value is None or b.value is None:
        return Evidence(None, None, None, "undefined")
    if a.per_seed and b.per_seed and a.seeds and a.seeds == b.seeds and a.lo is not None and b.lo is not None:
        diffs = [float(x) - float(y) for x, y in zip(a.per_seed, b.per_seed)]
        mean, lo, hi = mean_ci(diffs)
        left_out = a.source.partition("; ")[2]  # chains whose start missed its target, where any
        source = f"{len(diffs)} chains, paired" + (f"; {left_out}" if left_out else "")
        return Evidence(mean, lo, hi, source, diffs, a.seeds)
    if a.lo is None or b.lo is None:
        return Evidence(a.value - b.value, None, None, "undefined in some seeds")
    return Evidence(a.value - b.value, a.lo - b.hi, a.hi - b.lo, f"{a.source} vs {b.source}")


def judge(claim: Claim, metrics: dict[str, Any]) -> Judged:
    """Our evidence, the interval the claim is decided on (`tested`: ours, or the paired difference
    ours - other), the verdict and the consistency of the book's value with one more chain of ours."""
    if claim.kind == "cited":
        return Judged(claim, "cited")
    try:
        ours = evidence(metrics, claim.metric, claim.feasible)
        other = evidence(metrics, claim.other, claim.feasible) if claim.other is not None else None
    except (KeyError, IndexError, ValueError) as exc:
        return Judged(claim, "missing", error=str(exc))
    if ours.value is None and not ours.per_seed:
        return Judged(claim, "missing", ours, error="metric is null")
    cut = _span(claim.feasible) if other is not None else claim.feasible  # what the tested quantity can take
    tested = clip(difference(ours, other), cut) if other is not None else ours
    return Judged(claim, decide(tested, claim), ours, other, tested, consistency(tested, claim, cut))


def judge_all(claims: list[Claim], metrics: dict[str, Any]) -> list[Judged]:
    return [judge(c, metrics) for c in claims]


def verdict_record(row: Judged) -> dict:
    """One claim's line in report.json: verdict, book, our value and its interval, the interval
    decided on (`decided_on`; `tested_interval` too for a claim against another metric, where it
    is the paired difference), and the book's consistency with one more chain of ours."""
    c, ev, tested = row.claim, row.evidence, row.tested
    return {
        "verdict": row.verdict,
        "class": c.category,
        "book": c.book,
        "ours": row.ours,
        "tolerance": c.tol if c.tol is not None else c.margin,
        "interval": None if ev is None or ev.lo is None else [ev.lo, ev.hi],
        "source": None if ev is None else ev.source,
        "tested_interval": None
        if tested is None or tested.lo is None or c.other is None
        else [tested.lo, tested.hi],
        "decided_on": None if tested is None or tested.lo is None else [tested.lo, tested.hi],
        "consistency": row.consistency,
    }


def summary_counts(rows: list[Judged]) -> dict[str, int]:
    return {v: sum(r.verdict == v for r in rows) for v in VERDICTS}


def class_counts(rows: list[Judged]) -> dict[str, dict[str, int]]:
    """summary_counts per claim category (measured, calibrated, closed-form, cited)."""
    return {cat: summary_counts([r for r in rows if r.claim.category == cat]) for cat in CATEGORIES}
