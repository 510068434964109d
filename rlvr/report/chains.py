"""What the chains are made of: the controlled starts, and where the spread of a result lives.

Two tables the verdicts rest on. *Controlled starts*: every SFT run that stops at a target gives,
per chain, the steps it took, its validation value at the stop (exact: no sampling noise) and the
test-side value measured afterwards (held-out, or chapter A's own prompts again); a chain whose
cap came first is listed as missed (censored: counted where it stopped). *Where the
variance lives*: for each measured claim whose metric carries variance components, the SD one
chain's value owes to its start, to its GRPO seeds and to the evaluation, beside the half-width of
the interval that decided the claim, so a reader sees which source keeps an undecided claim
undecided. Pure: reads the metrics the report already holds.
"""

from __future__ import annotations

from typing import Any

from rlvr.report.verdict import Judged, num

SOURCES = ("starts", "grpo", "evaluation")
WITHIN = 0.03  # a start counts as on target within this of it (the decidable-claims bar)

# Where each SFT run's test-side value is measured: (metrics file, dotted key of its per-chain list)
TEST_SIDE = {
    "two_digit": ("passk.json", "sft.per_seed.pass_at_1", "held-out pass@1 (256 samples)"),
    "two_digit_uniform": ("passk.json", "contrast.per_seed.pass_at_1", "held-out pass@1 (64 samples)"),
}


def _get(d: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def test_side(metrics: dict[str, Any], run: str) -> tuple[list | None, str]:
    """A run's per-chain test-side values and what they are: held-out pass@1 for chapter B's runs,
    the expected sampled accuracy on the train prompts for chapter A's (its own measure, exact)."""
    if run in TEST_SIDE:
        file, key, what = TEST_SIDE[run]
        return _get(metrics.get(file, {}), key), what
    m = metrics.get(f"sft-{run}.json", {})
    if _get(m, "per_seed.sampled_acc_heldout"):
        return _get(m, "per_seed.sampled_acc_heldout"), "held-out expected sampled accuracy, exact"
    return _get(m, "per_seed.sampled_acc_train"), "expected sampled accuracy, exact"


def _runs(metrics: dict[str, Any], targets: dict[str, float | None]):
    """(run, target, its metrics, its per-chain values) of every SFT run whose metrics record starts."""
    for run, target in targets.items():
        m = metrics.get(f"sft-{run}.json")
        if m and "start_val" in m.get("per_seed", {}):
            yield run, target, m, m["per_seed"]


def controlled_rows(metrics: dict[str, Any], targets: dict[str, float | None]) -> list[list[str]]:
    """One row per SFT run: its target (or "budget" for a run fitted to its budget, a contrast), how
    many chains reached it, the validation values at the stops (range, and how many lie within
    WITHIN of the target), the steps, and the test-side value (chain mean and range)."""
    rows = []
    for run, target, _, ps in _runs(metrics, targets):
        val, steps, reached = ps["start_val"], ps["start_steps"], ps.get("reached", [])
        redrawn = sum(1 for r in ps.get("redraws", []) if r)
        on = (
            ""
            if target is None
            else f" ({sum(abs(v - target) <= WITHIN for v in val)} of {len(val)} within ±{WITHIN})"
        )
        test, what = test_side(metrics, run)
        rows.append(
            [
                run,
                "budget" if target is None else num(target),
                "–"
                if target is None
                else f"{int(sum(reached))} of {len(val)}" + (f" ({redrawn} drawn again)" if redrawn else ""),
                f"{num(min(val))}–{num(max(val))}{on}",
                f"{int(min(steps))}–{int(max(steps))}",
                f"{num(sum(test) / len(test))} [{num(min(test))}–{num(max(test))}] ({what})" if test else "–",
            ]
        )
    return rows


def chain_rows(metrics: dict[str, Any], targets: dict[str, float | None]) -> list[list[str]]:
    """Every chain of every controlled run: steps, validation value at the stop, reached or missed,
    and its test-side value beside it."""
    rows = []
    for run, target, m, ps in _runs(metrics, targets):
        test, _ = test_side(metrics, run)
        for i, seed in enumerate(m["seeds"]):
            rows.append(
                [
                    run,
                    str(seed),
                    str(int(ps["start_steps"][i])),
                    num(ps["start_val"][i]),
                    "budget" if target is None else stop_words(ps, i),
                    num(test[i]) if test else "–",
                ]
            )
    return rows


def stop_words(ps: dict[str, list], i: int) -> str:
    """How chain i's controlled stop ended: "reached" or "missed (cap)", and how many times it was
    drawn again first ("reached after 1 redraw"; `sft.<run>.redraws`)."""
    n = int((ps.get("redraws") or [0] * (i + 1))[i])
    words = "reached" if ps["reached"][i] else "missed (cap)"
    return words if not n else f"{words} after {n} redraw{'s' if n > 1 else ''}"


def variance_rows(rows: list[Judged]) -> list[list[str]]:
    """For each measured or calibrated claim whose deciding evidence carries variance components:
    the SD one chain's value owes to each source, the largest named, and the half-width of the
    interval the claim was decided on. For a paired claim every one is of the paired difference
    (computed from the nested runs' differences), never of one arm."""
    out = []
    for r in rows:
        tested = r.tested
        if r.claim.category not in ("measured", "calibrated") or tested is None or not tested.variance:
            continue
        parts = {s: tested.variance[s] for s in SOURCES if tested.variance.get(s) is not None}
        if not parts:
            continue
        largest = max(parts, key=parts.get)
        half = "–" if tested is None or tested.lo is None else num((tested.hi - tested.lo) / 2)
        out.append(
            [
                r.claim.id,
                f"`{r.claim.metric[1]}`" + (f" − `{r.claim.other[1]}`" if r.claim.other else ""),
                *(num(parts[s]) if s in parts else "–" for s in SOURCES),
                largest,
                half,
                r.verdict,
            ]
        )
    return out


def _ends(metrics: dict[str, Any]):
    """(variant, its metrics, per_seed) of every GRPO variant with a controlled end."""
    for f, m in sorted(metrics.items()):
        if f.startswith("grpo-") and isinstance(m, dict) and m.get("target") is not None:
            yield m["variant"], m, m.get("per_seed") or {}


def end_survival(m: dict[str, Any]) -> dict | None:
    """Steps to a variant's controlled end over every run (rlvr.stats.survival): a run that reached
    it at its step, one the cap stopped censored at the cap. None without per-run steps."""
    from rlvr.stats import survival

    ps = m.get("per_seed") or {}
    reached, steps = ps.get("end_reached"), ps.get("end_steps")
    if not reached or not isinstance(steps, list) or len(steps) != len(reached):
        return None
    cap = float(m.get("steps_cap") or 0)
    return survival([s if r == 1 else cap for s, r in zip(steps, reached)], [r == 1 for r in reached])


def survival_text(km: dict | None) -> str:
    """ "193 [146, 311]; 2 of 16 censored at 800": the median steps, its interval ("not reached"
    where the curve never crosses one half), and the censored runs."""
    if km is None:
        return "–"

    def at(x):
        return "not reached" if x is None else str(int(x))

    lo, hi = km["median_ci"]
    censored = km["censored"]
    tail = f"; {len(censored)} of {km['runs']} censored at {int(censored[0])}" if censored else ""
    return f"{at(km['median'])} [{at(lo)}, {at(hi)}]{tail}"


def end_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """One row per variant with a controlled end: its target and cap, how many chains' runs reached
    it, the steps to it (the Kaplan-Meier median over every run, censored ones included, with its
    95% interval), the validation value at the stops and the held-out pass@1 there (exact)."""
    rows = []
    for variant, m, ps in _ends(metrics):
        reached = ps.get("end_reached", [])
        steps_text = survival_text(end_survival(m))
        val, test = ps.get("end_val", []), ps.get("eval_acc_final", [])
        rows.append(
            [
                variant,
                f"{num(m['target'])} (cap {m.get('steps_cap', '?')} steps)",
                f"{sum(1 for r in reached if r == 1)} of {len(reached)}",
                steps_text,
                f"{num(min(val))}–{num(max(val))}" if val else "–",
                f"{num(sum(test) / len(test))} [{num(min(test))}–{num(max(test))}]" if test else "–",
            ]
        )
    return rows


def end_chain_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """Every chain of every variant with a controlled end: reached or not, steps, validation value
    at the stop, held-out pass@1 there."""
    rows = []
    for variant, m, ps in _ends(metrics):
        for i, seed in enumerate(m["seeds"]):
            reached = ps["end_reached"][i] == 1
            rows.append(
                [
                    variant,
                    str(seed),
                    "reached" if reached else "censored (cap came first)",
                    str(int(ps["end_steps"][i])) if reached else f"> {m.get('steps_cap', '?')}",
                    num(ps["end_val"][i]),
                    num(ps["eval_acc_final"][i]),
                ]
            )
    return rows
