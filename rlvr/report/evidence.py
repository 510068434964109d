"""A claim's evidence in the metrics, and its verdict by the rule of rlvr.report.verdict.

The metrics are {file name: parsed JSON} of reports/metrics; a claim names [file, dotted key]. A
metric written over chains carries its per-chain values beside it (`per_seed`, `seeds`, and the SD
each source of variance contributes, `variance`), so its evidence is the chain mean with its
Student-t interval; a single value may carry a sampling interval (`<key>_ci95`). `judge` finds a
claim's evidence (and, for a claim against another metric, the paired per-chain difference), cuts it
to the values the metric can take and hands it to `verdict.decide`; nothing here decides.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import Any

from rlvr.report.claims import CATEGORIES, LEVEL, Claim, Look
from rlvr.report.verdict import Evidence, Judged, consistency, decide, is_missing
from rlvr.stats import bca_interval, mean_ci, one_run_interval

VERDICTS = ("reproduced", "differs", "inconclusive", "not comparable", "cited", "missing")


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
    """The intervals cut to the values the metric can take (a count is never below 0, a rate never
    above 1): a t-interval over four spread-out chains would otherwise leave that range."""
    if feasible is None or ev.lo is None:
        return ev
    lo, hi = float(feasible[0]), float(feasible[1])
    cut = lambda iv: None if iv is None else (min(max(iv[0], lo), hi), max(min(iv[1], hi), lo))  # noqa: E731
    return replace(
        ev, lo=cut((ev.lo, ev.hi))[0], hi=cut((ev.lo, ev.hi))[1], check=cut(ev.check), one_run=cut(ev.one_run)
    )


def _span(feasible) -> list | None:
    """The values a difference of two such metrics can take: [lo - hi, hi - lo]."""
    return None if feasible is None else [feasible[0] - feasible[1], feasible[1] - feasible[0]]


def evidence(
    metrics: dict[str, Any],
    ref,
    feasible=None,
    estimand: str = "mean",
    endpoint=None,
    level: float = LEVEL,
    leave_out: bool = False,
) -> Evidence:
    """What the metrics say about [file, key]: its value, per-chain values and interval by the
    estimand at `level` (cut to `feasible`, the values the metric can take, when given), over every
    chain. A chain whose start missed its target, or (for a claim at a controlled end, `endpoint`)
    whose run missed that end, is censored: it counts where it stopped, and the words name it;
    `leave_out` drops those chains instead (the sensitivity analysis shown beside the verdict)."""
    return clip(_evidence(metrics, ref, estimand, endpoint, level, leave_out), feasible)


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


def missed_ends(metrics: dict[str, Any], variant: str | None) -> set[int] | None:
    """The chains whose runs of `variant` did not all reach its controlled end (the GRPO metrics
    file's per-chain `end_reached`, below 1.0): a claim measured at that end is not about them.
    None where the variant has no controlled end (or no metrics file)."""
    m = metrics.get(f"grpo-{variant}.json") if variant else None
    reached = ((m or {}).get("per_seed") or {}).get("end_reached") if isinstance(m, dict) else None
    if not isinstance(reached, list) or len(reached) != len(m.get("seeds", [])):
        return None
    return {s for s, r in zip(m["seeds"], reached) if r < 1}


def censored(metrics: dict[str, Any], ref, endpoint: str | None) -> dict[str, set[int]]:
    """Why -> the chains of [file, key] that did not get where the claim is measured: a start that
    missed its target by its step cap, a run that missed its controlled end by its cap. Each is a
    result, never an exclusion: the claim counts it where it stopped."""
    missed = {"start missed its target": missed_starts(metrics, ref)}
    ends = missed_ends(metrics, endpoint)
    if ends:
        missed[f"missed {endpoint}'s end by its cap"] = ends
    return {why: chains for why, chains in missed.items() if chains}


def _counted(per_seed: list, seeds, missed: dict[str, set[int]]) -> str:
    """The words for every chain counted, censored ones named ("16 chains; censored (counted where
    they stopped), missed grpo_end's end by its cap: 110, 114")."""
    words = f"{len(per_seed)} chains"
    if not isinstance(seeds, list) or len(seeds) != len(per_seed):
        return words
    for why, chains in missed.items():
        named = sorted(s for s in seeds if s in chains)
        if named:
            words += f"; censored (counted where they stopped), {why}: " + ", ".join(map(str, named))
    return words


def _left_out(per_seed: list, seeds, reps, missed: dict[str, set[int]]) -> tuple[list, list, list, str]:
    """per_seed, seeds and reps less the censored chains (missed: why -> chains), and the words for
    the chains that are left ("7 of 8 chains; left out, start missed its target: 4")."""
    out = set().union(*missed.values()) if missed else set()
    if not isinstance(seeds, list) or len(seeds) != len(per_seed) or not out & set(seeds):
        return per_seed, seeds, reps, f"{len(per_seed)} chains"
    keep = [i for i, s in enumerate(seeds) if s not in out]
    words = f"{len(keep)} of {len(seeds)} chains"
    for why, chains in missed.items():
        named = sorted(s for s in seeds if s in chains)
        if named:
            words += f"; left out, {why}: " + ", ".join(map(str, named))
    kept_reps = [reps[i] for i in keep] if isinstance(reps, list) and len(reps) == len(seeds) else None
    return [per_seed[i] for i in keep], [seeds[i] for i in keep], kept_reps, words


def interval(
    values: list[float], estimand: str, reps: list | None = None, level: float = LEVEL
) -> tuple[float, float, float]:
    """The estimate over chains and its interval at `level`, by the claim's estimand
    (claims.ESTIMANDS)."""
    from rlvr.stats import share_interval

    if estimand == "share":  # every run counted once: the nested runs where the file has them
        runs = [float(x) for r in reps for x in r] if reps else values
        lo, hi = share_interval(round(sum(runs)), len(runs), level)
        return statistics.fmean(runs), lo, hi
    if estimand == "log_mean":
        mean, lo, hi = mean_ci([math.log(v) for v in values], level)
        return math.exp(mean), math.exp(lo), math.exp(hi)
    return mean_ci(values, level)


def share_one_run(lo: float, hi: float, level: float) -> tuple[float, float]:
    """The `level` prediction interval for one run of a share (it reaches, 1, or does not, 0), from
    the share's interval [lo, hi]: 0 is in it where the chance of a miss can be as high as the
    tails' (1 - lo >= (1 - level) / 2), 1 where the chance of a reach can (hi >= (1 - level) / 2)."""
    tail = (1 - level) / 2
    return (0.0 if 1 - lo >= tail else 1.0), (1.0 if hi >= tail else 0.0)


def _positive(values: list[float], estimand: str, ref) -> None:
    if estimand == "log_mean" and any(v <= 0 for v in values):
        raise ValueError(f"{ref[0]}: {ref[1]} has a value <= 0; its estimand log_mean needs positive values")


def _evidence(
    metrics: dict[str, Any],
    ref,
    estimand: str = "mean",
    endpoint: str | None = None,
    level: float = LEVEL,
    leave_out: bool = False,
) -> Evidence:
    value = lookup(metrics, ref)
    last = str(ref[1]).rpartition(".")[2]
    per_seed = (_sibling(metrics, ref, "per_seed") or {}).get(last)
    seeds = _sibling(metrics, ref, "seeds")
    reps = (_sibling(metrics, ref, "per_rep") or {}).get(last)
    variance = (_sibling(metrics, ref, "variance") or {}).get(last)  # {"starts"|"grpo"|"evaluation": SD}
    variance = variance if isinstance(variance, dict) else None
    if isinstance(per_seed, list) and per_seed:  # a value per chain: the chains decide, never a point
        missed = censored(metrics, ref, endpoint)
        if leave_out:
            per_seed, seeds, reps, chains = _left_out(per_seed, seeds, reps, missed)
        else:
            chains = _counted(per_seed, seeds, missed)
        defined = [float(v) for v in per_seed if not is_missing(v)]
        if len(defined) < len(per_seed) or len(defined) < 2:  # a chain with no value, or under two
            gone = len(per_seed) - len(defined)
            mean = float(statistics.fmean(defined)) if defined else None
            words = f"{chains}, {gone} undefined" if gone else chains
            return Evidence(mean, None, None, words, per_seed, seeds, variance, reps, level=level)
        _positive(defined, estimand, ref)
        mean, lo, hi = interval(defined, estimand, reps, level)
        check = one_run = None
        if estimand == "log_mean":
            logs = [math.log(v) for v in defined]
            check = tuple(math.exp(x) for x in bca_interval(logs, level=level))
            one_run = tuple(math.exp(x) for x in one_run_interval(logs, level=level))
        elif estimand == "share":
            one_run = share_one_run(lo, hi, level)
        else:
            book_sd = _sibling(metrics, ref, f"chapter_sd_{last}")  # the book's own evaluation noise
            one_run = one_run_interval(
                defined, reps, float(book_sd) if isinstance(book_sd, (int, float)) else 0.0, level
            )
        return Evidence(mean, lo, hi, chains, per_seed, seeds, variance, reps, check, one_run, level)
    if is_missing(value):
        return Evidence(None, None, None, "undefined")
    value = float(value)
    ci = _sibling(metrics, ref, f"{last}_ci95") or _sibling(metrics, ref, f"{last}_ci")
    if isinstance(ci, list) and len(ci) == 2 and not any(is_missing(c) for c in ci):
        return Evidence(
            value, min(float(ci[0]), value), max(float(ci[1]), value), "sampling (95% over problems)"
        )
    return Evidence(value, value, value, "single value")


def _rep_differences(a: Evidence, b: Evidence) -> list[list[float]] | None:
    """Per chain, the paired differences of its nested runs (GRPO seed r against GRPO seed r: the
    same streams in every variant; against a start, every run against its chain's start)."""
    if not (isinstance(a.reps, list) and len(a.reps) == len(a.per_seed)):
        return None
    if isinstance(b.reps, list) and len(b.reps) == len(b.per_seed):
        if any(len(x) != len(y) for x, y in zip(a.reps, b.reps)):
            return None
        return [[float(u) - float(v) for u, v in zip(x, y)] for x, y in zip(a.reps, b.reps)]
    return [[float(u) - float(y) for u in x] for x, y in zip(a.reps, b.per_seed)]


def difference(a: Evidence, b: Evidence) -> Evidence:
    """a - b. Paired by chain when both have values for the same chains (the chain fixes the start
    and the draws, so the difference is the effect): its interval (at a's level), the variance
    components and the prediction interval for one run are those of the differences. Otherwise the
    conservative interval [lo_a - hi_b, hi_a - lo_b]."""
    from rlvr.stats import variance_components

    if a.value is None or b.value is None:
        return Evidence(None, None, None, "undefined")
    if a.per_seed and b.per_seed and a.seeds and a.seeds == b.seeds and a.lo is not None and b.lo is not None:
        diffs = [float(x) - float(y) for x, y in zip(a.per_seed, b.per_seed)]
        mean, lo, hi = mean_ci(diffs, a.level)
        named = a.source.partition("; ")[2]  # chains censored or left out, where any
        source = f"{len(diffs)} chains, paired" + (f"; {named}" if named else "")
        reps = _rep_differences(a, b)
        variance = variance_components(reps) if reps else None
        return Evidence(
            mean,
            lo,
            hi,
            source,
            diffs,
            a.seeds,
            variance,
            reps,
            None,
            one_run_interval(diffs, reps, level=a.level),
            a.level,
        )
    if a.lo is None or b.lo is None:
        return Evidence(a.value - b.value, None, None, "undefined in some chains")
    return Evidence(a.value - b.value, a.lo - b.hi, a.hi - b.lo, f"{a.source} vs {b.source}", level=a.level)


def not_reached(claim: Claim, metrics: dict[str, Any]) -> str | None:
    """Why a claim measured at a controlled end is not comparable (fewer than two chains reached
    it), or None: it is measured where the chapter's model was, or has no such end."""
    if claim.endpoint is None:
        return None
    missed = missed_ends(metrics, claim.endpoint)
    m = metrics.get(f"grpo-{claim.endpoint}.json") or {}
    seeds = m.get("seeds") or []
    if missed is None:
        return f"variant {claim.endpoint} has no controlled end in its metrics"
    reached = len(seeds) - len(missed)
    if reached >= 2:
        return None
    return (
        f"{reached} of {len(seeds)} chains reached {claim.endpoint}'s controlled end (validation pass@1 "
        f"{m.get('target', '?')} within its step cap); the chapter's model is measured there, ours never was"
    )


def claim_level(claim: Claim, metrics: dict[str, Any], looks: dict[str, Look] | None) -> float:
    """The confidence level a claim is decided at: a second look's (rlvr.report.claims.Look) where
    the claim's chains are those of the look's SFT run and include a chain that look added, else
    95%."""
    if not looks or claim.metric is None:
        return LEVEL
    look = looks.get(start_run(metrics, claim.metric) or "")
    seeds = _sibling(metrics, claim.metric, "seeds")
    if look is None or not isinstance(seeds, list) or not set(seeds) & set(look.second):
        return LEVEL
    return look.level


def judge(
    claim: Claim, metrics: dict[str, Any], looks: dict[str, Look] | None = None, leave_out: bool = False
) -> Judged:
    """Our evidence, the interval the claim is decided on (`tested`: ours, or the paired difference
    ours - other) at its level (`claim_level`: the plan's `looks`), the verdict and the consistency
    of the book's value with one run like the book's. Every chain counts, censored ones where they
    stopped; where the claim has any, `sensitivity` is the same claim judged without them
    (`leave_out`), shown beside the verdict and never deciding it."""
    if claim.kind == "cited":
        return Judged(claim, "cited")
    try:
        far = not_reached(claim, metrics)
        if far is not None:
            return Judged(claim, "not comparable", error=far)
        level = claim_level(claim, metrics, looks)
        ours, other = (
            None
            if ref is None
            else evidence(metrics, ref, claim.feasible, claim.estimand, claim.endpoint, level, leave_out)
            for ref in (claim.metric, claim.other)
        )
        some = claim.metric is not None and censored(metrics, claim.metric, claim.endpoint)
    except (KeyError, IndexError, ValueError) as exc:
        return Judged(claim, "missing", error=str(exc))
    if ours.value is None and not ours.per_seed:
        return Judged(claim, "missing", ours, error="metric is null")
    cut = _span(claim.feasible) if other is not None else claim.feasible  # what the tested quantity can take
    tested = clip(difference(ours, other), cut) if other is not None else ours
    aside = judge(claim, metrics, looks, leave_out=True) if some and not leave_out else None
    return Judged(
        claim, decide(tested, claim), ours, other, tested, consistency(tested, claim), sensitivity=aside
    )


def judge_all(
    claims: list[Claim], metrics: dict[str, Any], looks: dict[str, Look] | None = None
) -> list[Judged]:
    return [judge(c, metrics, looks) for c in claims]


def verdict_record(row: Judged) -> dict:
    """One claim's line in report.json: verdict, book, our value and its interval, the interval
    decided on (`decided_on`, at `level`; `tested_interval` too for a claim against another metric,
    where it is the paired difference), and the book's consistency with one more chain of ours."""
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
        "level": None if tested is None or tested.lo is None else tested.level,  # of decided_on
        "consistency": row.consistency,
        "sensitivity": None if row.sensitivity is None else _sensitivity_record(row.sensitivity),
    }


def _sensitivity_record(row: Judged) -> dict:
    """The sensitivity analysis's line in report.json: the claim judged without its censored chains."""
    tested = row.tested
    return {
        "verdict": row.verdict,
        "ours": row.ours,
        "source": None if row.evidence is None else row.evidence.source,
        "decided_on": None if tested is None or tested.lo is None else [tested.lo, tested.hi],
    }


def summary_counts(rows: list[Judged]) -> dict[str, int]:
    return {v: sum(r.verdict == v for r in rows) for v in VERDICTS}


def class_counts(rows: list[Judged]) -> dict[str, dict[str, int]]:
    """summary_counts per claim category (measured, calibrated, closed-form, cited)."""
    return {cat: summary_counts([r for r in rows if r.claim.category == cat]) for cat in CATEGORIES}
