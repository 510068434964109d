"""The report: every chapter claim beside our measured value, a verdict, and where it came from.

Verdicts are computed from the metrics alone (experiments/claims.yaml says which file and key);
nothing here trains, samples or reads a file: the `report` stage loads the claims, the metrics
({file name: parsed JSON}), the figures and their provenance, and this module finds each claim's
evidence in the metrics, decides it by the rule of rlvr.report.verdict, and writes the Markdown
and HTML pages.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import replace
from itertools import combinations
from typing import Any

from rlvr.fields import ConfigError
from rlvr.passk import crossings_text
from rlvr.report.chains import chain_rows, controlled_rows, variance_rows
from rlvr.report.document import Bullets, Contents, Details, Figure, Heading, Para, Table, html_page, markdown
from rlvr.report.verdict import Evidence, consistency, decide, is_missing, num, reason  # the rule
from rlvr.stats import mean_ci

KINDS = ("exact", "range", "greater", "less", "close", "cited")
VERDICTS = ("reproduced", "differs", "inconclusive", "cited", "missing")
CLASSES = {  # what kind of claim, in the order the summary gives them
    "measured": "measured (training and evaluation outcomes)",
    "calibrated": "calibrated starts (inputs chosen so the start matches the chapter's; not findings)",
    "closed-form": "closed-form and worked examples (arithmetic, autograd, exact expectations)",
    "cited": "cited facts (outside a CPU's reach; no verdict)",
}


def claim_class(c: dict) -> str:
    """measured, calibrated, closed-form or cited. A claim on the worked examples' file is closed-form;
    one marked `calibrated: true` is a start whose inputs were chosen to match it (docs/calibration.md)."""
    if c["kind"] == "cited":
        return "cited"
    if c.get("calibrated"):
        return "calibrated"
    return "closed-form" if c["metric"][0] == "worked.json" else "measured"


def _is_sentence(text: Any) -> bool:
    return (
        isinstance(text, str)
        and text[:1].isupper()
        and text.rstrip().endswith((".", "?"))
        and len(text.split()) >= 6
    )


def check_claims(claims: Any, path: str) -> list[dict]:
    """Check the parsed claims.yaml: unique ids, known kinds, the fields each kind needs."""
    if not isinstance(claims, list):
        raise ConfigError(f"{path}: must be a list of claims")
    seen = set()
    for i, c in enumerate(claims):
        where = f"{path}[{i}] ({c.get('id')})"
        if c.get("id") in seen or "id" not in c:
            raise ConfigError(f"{where}: id missing or repeated")
        seen.add(c["id"])
        if c.get("kind") not in KINDS:
            raise ConfigError(f"{where}.kind = {c.get('kind')!r}: must be one of {', '.join(KINDS)}")
        need = {
            "exact": ("metric", "tol"),
            "range": ("metric", "lo", "hi"),
            "close": ("metric", "other", "tol"),
            "greater": ("metric",),
            "less": ("metric",),
            "cited": (),
        }[c["kind"]]
        for key in (*need, "chapter", "quote", "text", "book", "why"):
            if key not in c:
                raise ConfigError(
                    f"{where}.{key}: missing (kind {c['kind']} needs {', '.join(need) or 'no metric'})"
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
        if not isinstance(c.get("calibrated", False), bool):
            raise ConfigError(f"{where}.calibrated = {c['calibrated']!r}: must be true or false")
        feasible = c.get("feasible")
        if feasible is not None and not (
            isinstance(feasible, list) and len(feasible) == 2 and feasible[0] < feasible[1]
        ):
            raise ConfigError(
                f"{where}.feasible = {feasible!r}: must be [lo, hi] with lo < hi (the values the "
                "metric can take)"
            )
    return claims


def lookup(metrics: dict[str, Any], ref: list) -> Any:
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


def _sibling(metrics: dict[str, Any], ref: list, name: str) -> Any:
    """The value at `ref` with its last key replaced by `name` (None if absent)."""
    head, _, last = str(ref[1]).rpartition(".")
    try:
        return lookup(metrics, [ref[0], f"{head}.{name}" if head else name])
    except (KeyError, IndexError, ValueError):
        return None


def clip(ev: Evidence, feasible: list | None) -> Evidence:
    """The interval cut to the values the metric can take (a count is never below 0, a rate never
    above 1): a t-interval over four spread-out chains would otherwise leave that range."""
    if feasible is None or ev.lo is None:
        return ev
    lo, hi = float(feasible[0]), float(feasible[1])
    return replace(ev, lo=min(max(ev.lo, lo), hi), hi=max(min(ev.hi, hi), lo))


def _span(feasible: list | None) -> list | None:
    """The values a difference of two such metrics can take: [lo - hi, hi - lo]."""
    return None if feasible is None else [feasible[0] - feasible[1], feasible[1] - feasible[0]]


def evidence(metrics: dict[str, Any], ref: list, feasible: list | None = None) -> Evidence:
    """What the metrics say about [file, key]: its value, per-seed values and interval (cut to
    `feasible`, the values the metric can take, when given)."""
    return clip(_evidence(metrics, ref), feasible)


def _evidence(metrics: dict[str, Any], ref: list) -> Evidence:
    value = lookup(metrics, ref)
    last = str(ref[1]).rpartition(".")[2]
    per_seed = (_sibling(metrics, ref, "per_seed") or {}).get(last)
    seeds = _sibling(metrics, ref, "seeds")
    variance = (_sibling(metrics, ref, "variance") or {}).get(last)  # {"starts"|"grpo"|"evaluation": SD}
    variance = variance if isinstance(variance, dict) else None
    if isinstance(per_seed, list) and len(per_seed) >= 2:
        defined = [float(v) for v in per_seed if not is_missing(v)]
        if len(defined) < len(per_seed):  # e.g. a seed whose curves never cross: no crossover k
            mean = float(statistics.fmean(defined)) if defined else None
            return Evidence(
                mean,
                None,
                None,
                f"{len(per_seed)} chains, {len(per_seed) - len(defined)} undefined",
                per_seed,
                seeds,
                variance,
            )
        mean, lo, hi = mean_ci(defined)
        return Evidence(mean, lo, hi, f"{len(per_seed)} chains", per_seed, seeds, variance)
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
        return Evidence(mean, lo, hi, f"{len(diffs)} chains, paired", diffs, a.seeds)
    if a.lo is None or b.lo is None:
        return Evidence(a.value - b.value, None, None, "undefined in some seeds")
    return Evidence(a.value - b.value, a.lo - b.hi, a.hi - b.lo, f"{a.source} vs {b.source}")


def verdict(claim: dict, metrics: dict[str, Any]) -> dict:
    """Our evidence, the interval the claim is decided on (`tested`: ours, or the paired difference
    ours - other), the verdict and the consistency of the book's value with one more chain of ours."""
    if claim["kind"] == "cited":
        return {"ours": None, "verdict": "cited", "evidence": None, "consistency": None}
    try:
        feasible = claim.get("feasible")
        ours = evidence(metrics, claim["metric"], feasible)
        other = evidence(metrics, claim["other"], feasible) if "other" in claim else None
    except (KeyError, IndexError, ValueError) as exc:
        return {"ours": None, "verdict": "missing", "evidence": None, "error": str(exc), "consistency": None}
    if ours.value is None and not ours.per_seed:
        return {
            "ours": None,
            "verdict": "missing",
            "evidence": ours,
            "error": "metric is null",
            "consistency": None,
        }
    cut = _span(feasible) if other is not None else feasible  # what the tested quantity can take
    tested = clip(difference(ours, other), cut) if other is not None else ours
    return {
        "ours": ours.value,
        "evidence": ours,
        "other_evidence": other,
        "tested": tested,
        "verdict": decide(tested, claim),
        "consistency": consistency(tested, claim, cut),
    }


def rule_text(claim: dict, res: dict) -> str:
    kind = claim["kind"]
    fmt = num
    if kind == "exact":
        return f"|ours - {fmt(claim['book'])}| <= {fmt(claim['tol'])}"
    if kind == "range":
        return f"{fmt(claim['lo'])} <= ours <= {fmt(claim['hi'])}"
    if kind in ("greater", "less"):
        other = res.get("other_evidence")
        what = (
            f"{claim['other'][1]} ({fmt(other.value if other else None)})"
            if "other" in claim
            else fmt(claim["other_value"])
        )
        sign = ">" if kind == "greater" else "<"
        pad = (
            f" {'+' if kind == 'greater' else '-'} {fmt(claim.get('margin', 0))}"
            if claim.get("margin")
            else ""
        )
        return f"ours {sign} {what}{pad}"
    if kind == "close":
        other = res.get("other_evidence")
        return f"|ours - {claim['other'][1]} ({fmt(other.value if other else None)})| <= {fmt(claim['tol'])}"
    return "cited, not measured"


def interval_text(ev: Evidence) -> str:
    """A value with its interval and where the interval comes from: "0.912 [0.90, 0.93] (3 chains)"."""
    if ev.value is None:
        return f"undefined ({ev.source})"
    if ev.lo is None and ev.per_seed:  # some chains undefined: show every chain, as figures do
        chains = ", ".join("none" if is_missing(v) else num(v) for v in ev.per_seed)
        return f"per chain {chains} ({ev.source})"
    if ev.lo is None or ev.lo == ev.hi:
        return f"{num(ev.value)} ({ev.source})"
    return f"{num(ev.value)} [{num(ev.lo)}, {num(ev.hi)}] ({ev.source})"


def ours_text(res: dict) -> str:
    """Our value with the interval its verdict was decided on: "0.912 [0.90, 0.93] (3 chains)"; for
    a claim against another metric, our value, then the paired difference the claim was decided on:
    "0.6 (3 chains); ours − start = 0.2 [0.18, 0.22] (3 chains, paired)"."""
    ev, tested = res.get("evidence"), res.get("tested")
    if ev is None:
        return "n/a"
    if res.get("other_evidence") is None or tested is None:
        return interval_text(ev)
    name = res["other"][1] if "other" in res else "other"
    ours = "undefined" if ev.value is None else num(ev.value)
    return f"{ours} ({ev.source}); ours − {name} = {interval_text(tested)}"


def consistency_text(row: dict) -> str:
    """The consistency check in words, for a claim's details ("" where it does not apply)."""
    c = row.get("consistency")
    if not c:
        return ""
    lo, hi = c["interval"]
    where = "inside" if c["verdict"] == "consistent" else "outside"
    return (
        f"book as one run: {c['verdict']} (the book's {num(row['book'])} lies {where} "
        f"[{num(lo)}, {num(hi)}], the 95% interval for one new chain of ours; not counted)"
    )


def evaluate_claims(claims: list[dict], metrics: dict[str, Any]) -> list[dict]:
    return [{**c, "class": claim_class(c), **verdict(c, metrics)} for c in claims]


def verdict_record(row: dict) -> dict:
    """One claim's line in report.json: verdict, book, our value and its interval, the interval
    decided on (`decided_on`; `tested_interval` too for a claim against another metric, where it
    is the paired difference), and the book's consistency with one more chain of ours."""
    ev = row.get("evidence")
    tested = row.get("tested")
    tolerance = row.get("tol", row.get("margin"))
    return {
        "verdict": row["verdict"],
        "class": row["class"],
        "book": row["book"],
        "ours": row["ours"],
        "tolerance": tolerance,
        "interval": None if ev is None or ev.lo is None else [ev.lo, ev.hi],
        "source": None if ev is None else ev.source,
        "tested_interval": None
        if tested is None or tested.lo is None or "other" not in row
        else [tested.lo, tested.hi],
        "decided_on": None if tested is None or tested.lo is None else [tested.lo, tested.hi],
        "consistency": row.get("consistency"),
    }


def summary_counts(rows: list[dict]) -> dict[str, int]:
    return {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}


def class_counts(rows: list[dict]) -> dict[str, dict[str, int]]:
    """summary_counts per claim class (measured, calibrated, closed-form, cited)."""
    return {cls: summary_counts([r for r in rows if r["class"] == cls]) for cls in CLASSES}


CALIBRATED_WORDS = {"reproduced": "matched", "differs": "not matched"}


def verdict_word(row: dict) -> str:
    """The verdict as the report prints it: a calibrated start is matched or not, never reproduced."""
    if row["class"] == "calibrated":
        return CALIBRATED_WORDS.get(row["verdict"], row["verdict"])
    return row["verdict"]


def counts_line(by_class: dict[str, dict[str, int]], bold: bool = True) -> str:
    """The report's first line: the measured claims first, then each other kind in its own terms."""
    b = (lambda t: f"**{t}**") if bold else (lambda t: t)

    def tally(c: dict, words: dict) -> str:
        total = sum(c.values())
        if c["reproduced"] == total:
            return f"all {total} {words.get('reproduced', 'reproduced')}"
        shown = [
            f"{c[v]} {words.get(v, v)}" for v in ("reproduced", "differs", "inconclusive", "missing") if c[v]
        ]
        return ", ".join(shown) + f" (of {total})"

    m, cal, cf = by_class["measured"], by_class["calibrated"], by_class["closed-form"]
    parts = [
        b(f"Measured claims: {tally(m, {'differs': 'differ'})}") + " (training and evaluation outcomes)",
        f"calibrated starts: {tally(cal, CALIBRATED_WORDS)} (inputs chosen so the start matches the "
        "chapter's: not findings)",
        f"closed-form and worked examples: {tally(cf, {'differs': 'differ'})}",
        f"cited facts: {by_class['cited']['cited']} (no verdict)",
    ]
    return "; ".join(parts) + "."


# ---------------------------------------------------------------------------------------------
# Figures and the variant table

VARIANT_KEYS = (
    ("reward_final", "reward"),
    ("eval_acc_final", "accuracy"),
    ("kl_exact_nats_final", "KL (exact, nats)"),
    ("entropy_nats_final", "entropy (nats)"),
)  # no timings: the report reads results only, so an identical rerun leaves it cached


def variant_rows(metrics: dict[str, Any]) -> list[dict]:
    """One row per variant: mean and 95% CI over seeds, plus pass@1 / pass@64 from the passk stage."""
    passk = metrics.get("passk.json", {})
    rows = []
    for name in sorted(k for k in metrics if k.startswith("grpo-")):
        m = metrics[name]
        row = {"variant": m["variant"], "task": m["task"], "seeds": len(m["seeds"])}
        for key, label in VARIANT_KEYS:
            ci = m.get("ci95", {}).get(key, [None, None])
            row[label] = (m.get(key), ci)
        pk = passk.get("variants", {}).get(m["variant"])
        row["pass@1"] = (pk["pass_at_1_rl"], None) if pk else (None, None)
        row["pass@64"] = (pk["pass_at_n_rl"], None) if pk else (None, None)
        rows.append(row)
    return rows


START_KEYS = (
    ("eval_acc_final", "after GRPO"),
    ("eval_acc_gain", "gain"),
    ("kl_k3_nats_mean", "k3 KL per step (mean)"),
    ("kl_k3_nats_max", "k3 KL (max over a chain's steps)"),
)


def start_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """One row per variant: the SFT start it trains from (chain-mean sampled and greedy accuracy on the
    problems GRPO is evaluated on) beside what GRPO made of it, each ± the half-width of its 95%
    interval over chains. Two starts at the same sampled accuracy can differ in their greedy one, and
    so in what GRPO can do: sharpen a policy whose greedy answer is right, or teach one whose is not."""

    def cell(d: dict, key: str) -> str:
        return _cell((d.get(key), d.get("ci95", {}).get(key)))

    rows = []
    for name in sorted(k for k in metrics if k.startswith("grpo-")):
        m = metrics[name]
        sft = metrics.get(f"sft-{m['sft']}.json", {})
        where = "heldout" if "sampled_acc_heldout" in sft else "train"
        rows.append(
            [
                m["variant"],
                m["sft"],
                str(len(m["seeds"])),
                cell(sft, f"sampled_acc_{where}"),
                cell(sft, f"greedy_acc_{where}"),
                *[cell(m, k) for k, _ in START_KEYS],
            ]
        )
    return rows


SAMPLED_KEYS = (
    "eval_acc_final",
    "train_acc_final",
    "reward_final",
    "response_len_final",
)  # counts of samples


def _same_gradient_reason(a: dict, b: dict) -> str | None:
    """Why two variant configs train alike, when they provably do: the one case known here is GSPO's
    sequence ratio against the token ratio at one gradient step per batch."""
    differ = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    if (
        differ == {"ratio"}
        and {a["ratio"], b["ratio"]} == {"token", "sequence"}
        and a.get("inner_epochs") == 1
        and a.get("aggregation") == "seq_mean"
    ):
        return (
            "with `inner_epochs: 1` the policy being updated is the one that sampled, so every importance "
            "ratio is exactly 1 when the gradient is taken; the sequence ratio exp(mean of token log-ratios) "
            "then has the gradient of the mean token log-probability, which is also what token "
            "ratios averaged "
            "per sequence (`seq_mean`) give. Same gradient, so the two part only by float "
            "rounding; a sequence "
            "ratio changes training only with `inner_epochs` > 1"
        )
    return None


def _largest_gap(a: dict, b: dict) -> float:
    """The largest relative difference between two runs' per-seed numbers (timings left out)."""
    gaps = [
        abs(x - y) / max(abs(x), abs(y))
        for k in a.keys() & b.keys()
        if "seconds" not in k
        for x, y in zip(a[k], b[k])
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x != y
    ]
    return max(gaps, default=0.0)


def twin_notes(metrics: dict[str, Any], configs: dict[str, dict]) -> list[str]:
    """Pairs of variants (same task and seeds) whose sampled numbers are identical on every seed, with
    the settings they differ in and, where it is known, why they cannot differ. configs: each
    variant's settings as its stage ran them (grpo.defaults with the variant's overrides)."""
    runs = {m["variant"]: m for name, m in sorted(metrics.items()) if name.startswith("grpo-")}
    notes = []
    for a, b in combinations(sorted(runs), 2):
        ma, mb = runs[a], runs[b]
        if ma["task"] != mb["task"] or ma["seeds"] != mb["seeds"]:
            continue
        if any(ma["per_seed"].get(k) != mb["per_seed"].get(k) for k in SAMPLED_KEYS):
            continue
        ca, cb = configs.get(a, {}), configs.get(b, {})
        differ = ", ".join(
            f"`{k}`: {ca.get(k)} vs {cb.get(k)}"
            for k in sorted(ca.keys() | cb.keys())
            if ca.get(k) != cb.get(k) and k != "task"
        )
        why = _same_gradient_reason(ca, cb)
        notes.append(
            f"`{a}` and `{b}` end with the same accuracy, reward and response length on every seed, "
            f"and their other per-seed numbers (KL, entropy...) agree within a relative "
            f"{_largest_gap(ma['per_seed'], mb['per_seed']):.1g} (they differ in "
            f"{differ or 'nothing recorded'})" + (f": {why}." if why else ".")
        )
    return notes


def _cell(v: tuple) -> str:
    mean, ci = v
    if mean is None:
        return "–"
    if ci and ci[0] is not None:
        return f"{mean:.3g} ± {(ci[1] - ci[0]) / 2:.2g}"
    return f"{mean:.3g}"


def _get(d, *keys):
    """d[k1][k2]..., or None where a key is missing (a benchmark not run)."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


NOT_ALONE = "not measured alone: rerun `rlvr bench --peer trl`"  # a peer figure from an older method


def _peer_ratio_specs(
    bench: dict, name: str, keys: tuple[str, ...], note_key: str, label: str, target
) -> list[tuple]:
    """bench_rows specs for one workload's peer ratios, one per prompt form (`label` has a {form}
    slot), from its fair comparisons at bench[name][*keys]; when there are none, one row saying
    why: the peer's note ("not installed", "not run ..."), or NOT_ALONE for figures measured any
    other way (inside a peer's loop, say), which are never shown."""
    if _get(bench, name) is None:
        return []
    records = _get(bench, name, *keys)
    if isinstance(records, dict) and records:
        return [
            (label.format(form=f", {form} prompts"), r["ratio"], "x", target, ">=")
            for form, r in records.items()
        ]
    note = _get(bench, name, note_key)
    return [(label.format(form=""), note if isinstance(note, str) else NOT_ALONE, "", None, ">=")]


def fair_bench(bench: dict | None) -> dict | None:
    """reports/benchmarks.json as the report shows it: a scaling record's TRL seconds only when they
    were measured alone (its `peer_method` names how), else dropped and the note says NOT_ALONE."""
    scaling = (bench or {}).get("scaling")
    if not scaling or "peer_method" in scaling or not any(r.get("trl_seconds") for r in scaling["rows"]):
        return bench
    rows = [{**r, "trl_seconds": None} for r in scaling["rows"]]
    return {**bench, "scaling": {**scaling, "rows": rows, "trl": NOT_ALONE}}


def bench_rows(bench: dict) -> list[list]:
    """`rlvr bench` figures as table rows: benchmark, measured, target, whether the target is met.
    Benchmarks not in the file are left out; a target of None means none was set. A peer ratio
    (TRL, HF generate) comes only from a fair comparison (`peer_rows`: each side alone, at its best);
    one that was not measured so says why ("not installed", "not run ...", "not measured alone")."""
    get = lambda *keys: _get(bench, *keys)  # noqa: E731
    specs = [  # label, measured, unit, target, "<=" or ">="
        (
            "whole pipeline: `dvc repro --force` in a fresh clone, wall",
            get("fresh_clone", "wall_seconds"),
            "s",
            get("fresh_clone", "target_wall_seconds"),
            "<=",
        ),
        (
            "perturbed rerun (`rlvr bench --only perturbed`): claims between reproduced and differs",
            None if get("perturbed", "flips") is None else len(get("perturbed", "flips")),
            "",
            0,
            "<=",
        ),
        (
            "perturbed rerun: claims to or from inconclusive (listed below)",
            None if get("perturbed", "moves") is None else len(get("perturbed", "moves")),
            "",
            None,
            "<=",
        ),
        (
            "the compute floor: every stage in one warm process, no start-up, no DVC",
            get("pipeline", "floor_seconds"),
            "s",
            None,
            "<=",
        ),
        (
            "fresh clone's `dvc repro --force` over the floor (`rlvr bench --only pipeline`)",
            get("pipeline", "ratio"),
            "x",
            get("pipeline", "target_ratio"),
            "<=",
        ),
        (
            "fresh clone: the stages' own work (MLflow runs)",
            get("fresh_clone", "profile", "stage_seconds_total"),
            "s",
            None,
            "<=",
        ),
        (
            "fresh clone: between stages (start-up, imports, DVC)",
            get("fresh_clone", "profile", "gap_seconds_total"),
            "s",
            None,
            "<=",
        ),
        (
            "GRPO matrix (all variants x seeds), wall",
            get("pipeline", "by_kind", "grpo", "wall_seconds"),
            "s",
            get("pipeline", "target_grpo_seconds"),
            "<=",
        ),
        (
            "sampling, 300 prompts x 64",
            get("sampling", "completions_per_second", "median"),
            "completions/s",
            get("sampling", "target_completions_per_second"),
            ">=",
        ),
        *_peer_ratio_specs(
            bench,
            "sampling",
            ("vs_hf_generate",),
            "hf_generate",
            "sampling{form}: ours / HF `generate` at its best, measured alone",
            get("sampling", "target_speedup_vs_hf_generate"),
        ),
        (
            "sampling: share of the fp32 GEMM limit",
            get("sampling", "share_of_gemm_limit"),
            "",
            get("sampling", "target_share_of_gemm_limit"),
            ">=",
        ),
        (
            "peak RSS while sampling",
            get("sampling", "peak_rss_mb"),
            "MB",
            get("sampling", "target_peak_rss_mb"),
            "<=",
        ),
    ]
    for beta in ("0.0", "0.04"):
        shown = "0" if beta == "0.0" else beta
        specs += [
            (
                f"GRPO step, beta = {shown}",
                get("grpo_step", f"beta_{beta}", "step_seconds", "median"),
                "s",
                get("grpo_step", "target_step_seconds", f"beta_{beta}"),
                "<=",
            ),
            *_peer_ratio_specs(
                bench,
                "grpo_step",
                (f"beta_{beta}", "vs_trl"),
                "trl",
                f"GRPO step, beta = {shown}{{form}}: TRL at its best / ours, measured alone",
                get("grpo_step", "target_speedup_vs_trl"),
            ),
            (
                f"GRPO step, beta = {shown}: share of the fp32 GEMM limit",
                get("grpo_step", f"beta_{beta}", "share_of_gemm_limit"),
                "",
                get("grpo_step", "target_share_of_gemm_limit"),
                ">=",
            ),
        ]
    for workload, name in (("grpo_step", "GRPO step, beta = 0"), ("sampling", "sampling")):
        specs += [
            (
                f"{name}, {variant} (`rlvr bench --only compiled`): share of the fp32 GEMM limit",
                get("compiled", workload, key, "share_of_gemm_limit"),
                "",
                get("compiled", workload, "target_share_of_gemm_limit"),
                ">=",
            )
            for key, variant in (("eager", "eager"), ("compiled, warm cache", "torch.compile, warm cache"))
        ] + [
            (
                f"{name} with torch.compile: first call, compiling into an empty cache",
                get("compiled", workload, "compiled, empty cache", "first_call_seconds"),
                "s",
                None,
                "<=",
            ),
        ]
    specs += [
        (
            "pass@k, one model (300 x 64)",
            get("passk_model", "seconds_per_model", "median"),
            "s",
            get("passk_model", "target_seconds"),
            "<=",
        ),
        ("SFT throughput", get("sft", "tokens_per_second", "median"), "tokens/s", None, ">="),
        (
            "two experiments back to back (`dvc exp run`, threads from params)",
            get("queue", "back_to_back_seconds"),
            "s",
            None,
            "<=",
        ),
        (
            "the same two queued, `dvc queue start -j 2`, RLVR_THREADS=1",
            get("queue", "queue_j2_seconds"),
            "s",
            get("queue", "back_to_back_seconds"),
            "<=",
        ),
    ]
    fmt = lambda v: f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"  # noqa: E731
    rows = []
    for label, value, unit, target, op in specs:
        if value is None:
            continue
        if isinstance(value, str):  # a peer that was not measured, and why
            rows.append([label, value, "–", "–"])
            continue
        met = (
            "–"
            if target is None
            else ("yes" if (value <= target if op == "<=" else value >= target) else "no")
        )
        rows.append(
            [
                label,
                f"{fmt(value)} {unit}".strip(),
                "–" if target is None else f"{op} {fmt(target)} {unit}".strip(),
                met,
            ]
        )
    return rows


PEERS = ("HF `generate`", "TRL GRPOTrainer")
KNOBS = {"prompts_per_call": "{} prompts a call", "generation_batch": "generation batch {}"}


def _peer_comparisons(bench: dict) -> list[tuple[str, str, dict]]:
    """(workload, peer, fair comparison) for every comparison `rlvr bench --peer trl` recorded
    (`bench.fair.compare`), in the order the report lists them."""
    out = [
        (f"sampling, {_get(bench, 'sampling', 'completions'):,} completions, 4 tokens", PEERS[0], r)
        for r in (_get(bench, "sampling", "vs_hf_generate") or {}).values()
    ]
    step = _get(bench, "grpo_step") or {}
    for beta in ("0.0", "0.04"):
        workload = (
            f"GRPO step, {step.get('prompts')} prompts x G {step.get('group_size')}, "
            f"{step.get('response_tokens')} tokens, beta = {'0' if beta == '0.0' else beta}"
        )
        out += [(workload, PEERS[1], r) for r in (_get(step, f"beta_{beta}", "vs_trl") or {}).values()]
    return out


def _peer_figure(record: dict) -> str:
    """One side's figure in a comparison: a rate where the record has one, else seconds."""
    if "per_second" in record:
        return f"{record['per_second']:,}/s"
    return f"{record['seconds']['median']:.3g} s"


def peer_rows(bench: dict) -> list[list]:
    """The fair peer comparisons as table rows: workload, prompt form, ours, the peer at its best
    setting, every setting it was swept over, and how many times faster ours is."""
    rows = []
    for workload, peer, r in _peer_comparisons(bench):
        knob = KNOBS.get(r["knob"], r["knob"] + " {}")
        best = r["best"]
        rows.append(
            [
                workload,
                r["prompts"],
                _peer_figure(r["ours"]),
                f"{peer} {_peer_figure(best)} at {knob.format(best[r['knob']])}",
                " · ".join(f"{s[r['knob']]}: {_peer_figure(s)}" for s in r["sweep"]),
                f"{r['ratio']:.3g} x",
            ]
        )
    return rows


def peer_blocks(bench: dict) -> list:
    """The peers at their best, measured alone: how (one sentence, as recorded with the figures)
    and the comparisons; nothing when `rlvr bench --peer trl` recorded none."""
    comparisons = _peer_comparisons(bench)
    if not comparisons:
        return []
    return [
        Heading("Peers at their best, measured alone", 3, "peers"),
        Para(
            comparisons[0][2]["method"] + " Ours runs as the pipeline does (deterministic ops); "
            "chat prompts are the pipeline's template, bare ones the question alone (`37+48=`)."
        ),
        Table(
            ["workload", "prompts", "ours", "peer at its best", "peer's sweep", "ours faster by"],
            peer_rows(bench),
            "peers",
        ),
    ]


FLOOR_KINDS = {  # stage kind -> how the floor table names it, in pipeline order
    "check": "check (the guard)",
    "data": "data",
    "warmup": "SFT warm-ups",
    "sft": "SFT",
    "grpo": "GRPO, every variant",
    "passk": "pass@k",
    "hack": "hack",
    "worked": "worked examples",
    "report": "report",
}


def floor_rows(pipeline: dict) -> list[list]:
    """`rlvr bench --only pipeline` by stage kind, then in total: stages, wall, floor, their ratio."""
    ratio = lambda w, f: f"{w / f:.2f}" if f else "–"  # noqa: E731
    rows = [
        [
            FLOOR_KINDS.get(kind, kind),
            k["stages"],
            f"{k['wall_seconds']:.1f}",
            f"{k['floor_seconds']:.1f}",
            ratio(k["wall_seconds"], k["floor_seconds"]),
        ]
        for kind, k in sorted(
            pipeline["by_kind"].items(),
            key=lambda kv: list(FLOOR_KINDS).index(kv[0]) if kv[0] in FLOOR_KINDS else 99,
        )
    ]
    total = [
        "total",
        sum(k["stages"] for k in pipeline["by_kind"].values()),
        f"{pipeline['wall_seconds']:.1f}",
        f"{pipeline['floor_seconds']:.1f}",
        ratio(pipeline["wall_seconds"], pipeline["floor_seconds"]),
    ]
    return rows + [total]


def floor_blocks(bench: dict) -> list:
    """The pipeline against its compute floor, by stage kind; nothing when it was not measured."""
    pipeline = bench.get("pipeline") or {}
    if "by_kind" not in pipeline:
        return []
    return [
        Heading("The pipeline against its compute floor", 3, "floor"),
        Para(
            f"{pipeline['method']} Commit {pipeline['commit'][:10]}; target: wall / floor <= "
            f"{pipeline['target_ratio']} in total. Per stage: `reports/benchmarks.json` (`pipeline.stages`)."
        ),
        Table(["stages", "count", "wall, s", "floor, s", "wall / floor"], floor_rows(pipeline), "floor"),
    ]


def machine_line(bench: dict) -> str:
    """Where the benchmarks ran: CPU, cores, torch threads, load average around the run."""
    m = bench.get("machine", {})
    load = m.get("load_average_1min", {})
    parts = [
        m.get("cpu") or m.get("processor"),
        f"{m['cpu_count']} cores" if "cpu_count" in m else None,
        f"{m['threads']} torch threads" if "threads" in m else None,
        f"torch {m['torch']}" if "torch" in m else None,
        f"1-minute load {load['before']} before, {load['after']} after" if load else None,
    ]
    return "Measured on " + ", ".join(p for p in parts if p) + "." if any(parts) else ""


def problem_tables(problems: dict, passk: dict) -> tuple[list[list], dict[str, list[list]]]:
    """The per-problem picture: for every variant, how many held-out problems only SFT ever solves
    (c > 0 in some SFT chain, c = 0 in every seed of the variant) and only the variant solves (the
    reverse); and, for each variant, those problems with every SFT chain's count and every seed's.
    Where the variant was scored with fewer samples than SFT, SFT's counts are thinned to as many
    (a random subset of its samples), so "solved" means the same on both sides.
    problems: passk-counts.json (keys "{model}/seed{s}"); passk: passk.json."""
    import numpy as np

    from rlvr.passk import one_sided_problems, thin

    counts, prompts = problems["counts"], problems["problems"]
    by_model = problems.get("n_by_model") or {}
    n = lambda name: by_model.get(f"{name}/seed0", problems["n"])  # noqa: E731  samples a model was scored with
    of = lambda name: [c for k, c in counts.items() if k.startswith(f"{name}/seed")]  # noqa: E731
    summary, lists = [], {}
    for v, m in passk.get("variants", {}).items():
        seeds = of(v)
        base = [thin(np.asarray(c), n("sft"), min(n("sft"), n(v)), i) for i, c in enumerate(of("sft"))]
        sides = one_sided_problems(base, seeds, prompts)
        summary.append(
            [v, len(seeds), m.get("never_solved_rl"), len(sides["sft_only"]), len(sides["rl_only"])]
        )
        lists[v] = [
            [
                side,
                r["prompt"],
                " ".join(str(c) for c in r["c_sft"]) + f" (of {min(n('sft'), n(v))})",
                " ".join(str(c) for c in r["c_seeds"]) + f" (of {n(v)})",
            ]
            for side, key in (("SFT only", "sft_only"), (f"{v} only", "rl_only"))
            for r in sides[key]
        ]
    return summary, lists


# ---------------------------------------------------------------------------------------------
# The page: summary first, then the verdicts by chapter, the variants, the figures, the details

CHAPTERS = {"A": "Chapter A: reasoning RL, RLVR and GRPO", "B": "Chapter B: RLVR and GRPO"}
VERDICT_ORDER = ("differs", "inconclusive", "missing", "reproduced", "cited")


def book_text(claim: dict) -> str:
    """What the book states: a number, a range, a bound, or "—" where it gives only a direction."""
    kind, book = claim["kind"], claim["book"]
    if kind == "range":
        return f"{num(claim['lo'])} – {num(claim['hi'])}"
    if kind in ("greater", "less", "close") and (book == 0 or "other" in claim):
        return "—"
    if kind == "greater":
        return f"> {num(book)}"
    if kind == "less":
        return f"< {num(book)}"
    return num(book)


def header_line(run: dict) -> str:
    """Which run this report is: the code's commit and whether the workspace differs from it, when,
    on what machine, with which library versions."""
    changed = run.get("changed")
    state = (
        "unknown state (not a git checkout)"
        if changed is None
        else "as committed"
        if not changed
        else f"with uncommitted changes to {', '.join(changed[:4])}" + (" ..." if len(changed) > 4 else "")
    )
    return (
        f"Made by stage `report` on {run['date']} from code at commit `{run['commit']}` ({state}); "
        f"machine: {run['cpu']}, {run['cores']} cores, stages at {run['threads']} threads; "
        f"torch {run['torch']}, DVC {run['dvc']}, MLflow {run['mlflow']}, Python {run['python']}. "
        "Stages DVC found cached ran earlier: `rlvr provenance <file>` names each one's MLflow run."
    )


def moved_blocks(against: dict) -> list:
    """The comparison with the committed results: which claims moved, by the rule a rerun on
    another CPU is held to (rlvr.report.moves)."""
    from rlvr.report.moves import moved_lines

    lines = moved_lines(against)
    head = (
        f"**Against the results committed at `{against['commit']}`:** "
        f"{len(against['flips'])} verdict(s) flipped between reproduced and differs (none may), "
        f"{len(against['moves'])} moved to or from inconclusive, "
        f"{len(against['numbers_outside'])} value(s) outside the committed interval or tolerance."
    )
    if not lines:
        return [Para(head + " Nothing moved.")]
    return [Para(head), Bullets(lines)]


def per_chain_text(row: dict) -> str:
    """ " Per chain: 0.57, 0.87, ..." for a claim measured over chains (empty otherwise): the values
    the verdict was decided on, so for a claim against another metric the paired differences."""
    tested, ev = row.get("tested"), row.get("evidence")
    if "other" in row and tested is not None and tested.per_seed:
        values, what = tested.per_seed, f" of ours − {row['other'][1]}"
    elif ev is not None and ev.per_seed:
        values, what = ev.per_seed, ""
    else:
        return ""
    return f" Per chain{what}: " + ", ".join("none" if is_missing(v) else num(v) for v in values) + "."


OURS_HEADER = "ours [95% interval decided on]"
ONE_RUN_HEADER = "book as one run"  # the consistency check: shown beside the verdict, never counted


def one_run_word(row: dict) -> str:
    """The consistency check's word for a table cell: consistent, not consistent, or "–"."""
    return (row.get("consistency") or {}).get("verdict", "–")


def _claim_table(rows: list[dict], cls: str) -> Table:
    return Table(
        ["id", "claim", "kind", "book", OURS_HEADER, "verdict", ONE_RUN_HEADER],
        [
            [r["id"], r["text"], r["class"], book_text(r), ours_text(r), verdict_word(r), one_run_word(r)]
            for r in rows
        ],
        cls,
        [r["verdict"] for r in rows],
        [
            f"the chapter: “{r['quote']}” · rule: {rule_text(r, r)} · why: {r['why']} · source: "
            + (f"`{r['metric'][0]}` `{r['metric'][1]}`" if "metric" in r else "the chapter")
            + (f" · {consistency_text(r)}" if r.get("consistency") else "")
            + (f" · note: {r['note']}" if r.get("note") else "")
            for r in rows
        ],
        "the chapter's words, rule, why, source",
    )


def _figure_blocks(figures: list[dict]) -> list:
    return [
        Figure(f["name"], f["png"], f["caption"], f["provenance"], f["name"].removesuffix(".png"))
        for f in figures
    ]


def build(
    rows: list[dict],
    figures: list[dict],
    metrics: dict[str, Any],
    samples: dict | None,
    bench: dict | None,
    problems: dict | None = None,
    bench_figure: dict | None = None,
    configs: dict[str, dict] | None = None,
    starts: dict | None = None,
    starts_figure: dict | None = None,
    run: dict | None = None,
    against: dict | None = None,
    targets: dict[str, float | None] | None = None,
) -> list:
    """The report as blocks (rlvr.report.document).

    rows: `evaluate_claims`' output; figures: [{"name", "png": bytes, "caption", "provenance",
    "chapter": "A"/"B", "kind": "curves"/"result"}] in display order; samples: the hack stage's
    sample tables (or None); bench: reports/benchmarks.json (or None); problems:
    reports/passk-counts.json (or None); bench_figure: the scaling figure drawn from `bench` (a
    figure dict as above, or None); configs: each GRPO variant's settings (`twin_notes`); run: where
    and with what it was made (`header_line`); against: the comparison with the committed results
    (`rlvr.report.moves.against_committed`, None where there is nothing to compare with); targets:
    each SFT run's start target (None: trained to its budget), for the controlled-starts table.
    """
    blocks: list = [
        Heading("rlvr-repro report", 1),
        Para(counts_line(class_counts(rows)), "counts"),
        Para(
            f"Every number of the two chapters that a program can compute or measure ({len(rows)} "
            "claims), beside our value and a verdict. " + (header_line(run) if run else "")
        ),
        *(moved_blocks(against) if against is not None else []),
        Contents(3),  # a compact, three-column list
        Heading("Summary", 2, "summary"),
    ]
    headline = [r for r in rows if r.get("headline")]
    blocks += [
        Para(
            "The chapters' headline results. Training and evaluation claims are decided on the 95% "
            "interval over chains (chain s: SFT seed s, stopped at its start's target on validation "
            "problems, then every variant trained from it, then its pass@k counts), so the interval "
            "includes what is left of the start's variance; a claim against another "
            "metric is decided on the interval of the per-chain differences. **reproduced**: the whole "
            "interval lies inside what the claim allows (the book's value ± its tolerance, its range or "
            "its bound); **differs**: the whole interval lies outside it; **inconclusive**: it lies across "
            "a bound (a claim with a chain that gives no value is never reproduced). Beside the verdict "
            "and never counted, “book as one run” says whether the book's number lies in the 95% "
            "interval for one new chain of ours "
            "(mean ± t·s·√(1 + 1/n)): **consistent** or **not consistent**. The book's number is one "
            "run, and the more our chains spread the more numbers are consistent, so it decides nothing."
        ),
        Table(
            ["claim", "kind", "book", OURS_HEADER, "verdict", ONE_RUN_HEADER],
            [
                [
                    f"**{r['id']}** {r['text']}",
                    r["class"],
                    book_text(r),
                    ours_text(r),
                    verdict_word(r),
                    one_run_word(r),
                ]
                for r in sorted(headline, key=lambda r: list(CLASSES).index(r["class"]))
            ],
            "headline",
            [r["verdict"] for r in sorted(headline, key=lambda r: list(CLASSES).index(r["class"]))],
        ),
    ]
    off = sorted(
        (r for r in rows if r["verdict"] in ("differs", "inconclusive", "missing")),
        key=lambda r: (VERDICT_ORDER.index(r["verdict"]), r["id"]),
    )
    if off:
        blocks += [
            Para("**Where we differ, or cannot tell:**"),
            Bullets(
                [
                    f"[{r['id']}](#{_anchor(r['id'])}) ({r['class']}, {verdict_word(r)}): {r['text']} "
                    f"{reason(r)}.{per_chain_text(r)}" + (f" **Why:** {r['note']}" if r.get("note") else "")
                    for r in off
                ]
            ),
        ]
    blocks += chain_blocks(rows, metrics, targets or {})
    blocks += [
        Heading("Verdicts", 2, "verdicts"),
        Para(
            "Grouped by chapter, the claims that differ first. Open a row's details for the rule it was "
            "decided by, why that tolerance, and the metrics file and key (`rlvr provenance <file>` says "
            "which stage, params and MLflow runs produced it)."
        ),
    ]
    for chapter, title in CHAPTERS.items():
        mine = sorted(
            (r for r in rows if r["chapter"] == chapter), key=lambda r: VERDICT_ORDER.index(r["verdict"])
        )
        blocks += [
            Heading(title, 3, f"verdicts-{chapter.lower()}"),
            Para(
                "; ".join(
                    f"{cls}: " + ", ".join(f"{n} {v}" for v, n in c.items() if n)
                    for cls, c in class_counts(mine).items()
                    if any(c.values())
                )
            ),
            _anchored_claims(mine, f"verdicts {chapter.lower()}"),
        ]
    blocks += _variant_blocks(metrics, figures, configs or {})
    for chapter, title in CHAPTERS.items():
        result = [f for f in figures if f["chapter"] == chapter and f["kind"] == "result"]
        if result:
            blocks += [Heading(f"Figures: {title}", 2, f"figures-{chapter.lower()}"), *_figure_blocks(result)]
    if problems:
        blocks += _problem_blocks(problems, metrics.get("passk.json", {}))
    if starts:
        blocks += starts_blocks(starts, starts_figure)
    if samples:
        blocks += _sample_blocks(samples)
    btable = bench_rows(bench) if bench else []
    if btable:
        blocks += [
            Heading("Benchmarks", 2, "benchmarks"),
            Para(
                "`rlvr bench` figures from `reports/benchmarks.json` (measured on demand, not by "
                "the pipeline; "
                "`rlvr bench --peer trl` adds TRL and HF `generate` on the same workloads, each "
                "measured alone). " + machine_line(bench)
            ),
            Table(["benchmark", "measured", "target", "met"], btable, "benchmarks"),
            *peer_blocks(bench),
            *floor_blocks(bench),
        ]
        if bench_figure is not None:
            blocks += _figure_blocks([bench_figure])
        if _get(bench, "scaling", "rows"):
            blocks += [
                Table(
                    ["axis", "G", "response tokens", "d_model", "ours, s/step", "TRL, s/step"],
                    [
                        [
                            r["axis"],
                            r["group_size"],
                            r["response_tokens"],
                            r["d_model"],
                            f"{r['seconds']:.3g}",
                            f"{r['trl_seconds']:.3g}" if r.get("trl_seconds") else "–",
                        ]
                        for r in bench["scaling"]["rows"]
                    ],
                    "scaling",
                )
            ]
        if _get(bench, "perturbed", "commit"):
            blocks += perturbed_blocks(bench["perturbed"])
        if _get(bench, "seed_profile", "phases"):
            blocks += seed_profile_blocks(bench["seed_profile"])
    return blocks


def chain_blocks(rows: list[dict], metrics: dict[str, Any], targets: dict[str, float | None]) -> list:
    """The controlled starts (every chain's stop, its validation and test-side values) and where the
    variance of each claim's metric lives."""
    blocks: list = []
    starts = controlled_rows(metrics, targets)
    if starts:
        blocks += [
            Heading("Controlled starts", 2, "controlled-starts"),
            Para(
                "Each chain's SFT keeps its run's recipe (under-training on true answers, or fitting noisy "
                "labels) and stops where its validation value reaches the run's target: the expected "
                "sampled accuracy at T = 1, computed exactly from the model's answer probabilities "
                "(no sampling noise), on validation problems disjoint from training and from the 300 "
                "test problems (chapter A: on its 55 prompts, the chapter's own measure). Of the check "
                "that reaches the target and the one before it, the nearer is the start. The test-side "
                "value beside it is measured afterwards with fresh samples. A chain whose step cap came "
                "first is listed as missed, never dropped."
            ),
            Table(
                ["run", "target", "reached", "validation at the stop", "SFT steps", "test side"],
                starts,
                "starts",
            ),
            Details(
                "every chain",
                [
                    Table(
                        ["run", "chain", "steps", "validation", "stop", "test side"],
                        chain_rows(metrics, targets),
                        "chains",
                    )
                ],
            ),
        ]
    spread = variance_rows(rows)
    if spread:
        blocks += [
            Heading("Where the variance lives", 2, "variance"),
            Para(
                "For each measured claim, the SD that one chain's value owes to each source: the spread "
                "of the SFT starts (what is left between chains after the rest), the GRPO seeds of one "
                "start (from the headline variants' two seeds per chain) and the evaluation (the model's "
                "own samples redrawn). The last column is the half-width of the 95% interval the claim "
                "was decided on: more chains shrink it by the square root of their number, more samples "
                "only its evaluation share."
            ),
            Table(
                ["claim", "metric", "starts", "GRPO", "evaluation", "largest", "interval ±", "verdict"],
                spread,
                "variance",
            ),
        ]
    return blocks


def starts_rows(starts: dict) -> list[list[str]]:
    """One row per candidate start: SFT-side facts (chain means), then GRPO's from its chains, the
    crossover k of each chain and the problems only one side ever solves (means over chains)."""
    rows = []
    for name in starts["candidates"]:
        c = starts["starts"][name]
        sft, grpo = c["sft"], c["grpo"]
        cross = crossings_text(c["crossover_k_per_chain"])
        rows.append(
            [
                name + (" (chosen)" if name == starts["sft_side_choice"] else ""),
                str(len(sft["seeds"])),
                f"{sft['pass_at_1']:.3f} → {grpo['pass_at_1_rl']:.3f}",
                f"{sft['pass_at_n']:.3f} → {grpo['pass_at_n_rl']:.3f}",
                f"{sft['never_solved']:.2f} → {grpo['never_solved_rl']:.2f}",
                cross,
                f"{grpo['solved_by_base_only']:.2f} / {grpo['solved_by_rl_only']:.2f}",
            ]
        )
    return rows


def starts_blocks(starts: dict, figure: dict | None) -> list:
    """Chapter B's candidate starts (`rlvr starts`): which start the pipeline uses and why (the SFT
    side only), and what GRPO made of each."""
    t = starts["targets"]
    agree = starts["sft_side_choice"] == starts["pipeline_start"]
    blocks = [
        Heading("Chapter B: candidate starts", 2, "starts-b"),
        Para(
            f"Made by {starts.get('made', '`rlvr starts`, run on demand')}: every candidate start "
            "over its chains, "
            f"{starts['problems']} held-out problems, n = {starts['n']}. The start: {starts['rule']} (the "
            f"chapter: never solved {num(t['never_solved'])}, pass@64 {num(t['pass_at_n'])}). Chosen: "
            f"`{starts['sft_side_choice']}`; the pipeline's start "
            f"(`passk.sft`) is `{starts['pipeline_start']}`"
            + (", the same." if agree else ": they differ.")
            + f" Then `{starts['variant']}` was trained from every chain of every candidate."
        ),
        Table(
            [
                "start",
                "chains",
                "pass@1 SFT → GRPO",
                "pass@64 SFT → GRPO",
                "never solved SFT → GRPO",
                "crossover k per chain",
                "solved only by SFT / only by GRPO",
            ],
            starts_rows(starts),
            "starts-b",
        ),
    ]
    if figure is not None:
        blocks += _figure_blocks([figure])
    return blocks


def perturbed_blocks(perturbed: dict) -> list:
    """The verdict-stability check: the pipeline rerun with every chain's start perturbed, and each
    claim whose verdict moved, with the interval it was decided on in both runs."""
    iv = lambda x: "–" if not x else f"[{num(x[0])}, {num(x[1])}]"  # noqa: E731
    moved = perturbed["flips"] + perturbed["moves"]
    counts = lambda c: ", ".join(f"{v} {k}" for k, v in (c or {}).items() if v)  # noqa: E731
    blocks = [
        Heading("Verdicts under a perturbed rerun", 3, "perturbed"),
        Para(
            f"The whole pipeline rerun in a fresh clone of {perturbed['commit'][:10]} with "
            f"`{perturbed['perturbation']}`: every chain's initial weights changed by amounts the size of "
            "float32 rounding, which the chains amplify as another CPU's rounding would. Committed: "
            f"{counts(perturbed.get('committed_counts'))}; perturbed: "
            f"{counts(perturbed.get('perturbed_counts'))}. "
            f"Claims between reproduced and differs: {len(perturbed['flips'])} (required: none); to or from "
            f"inconclusive: {len(perturbed['moves'])}."
        ),
    ]
    if moved:
        blocks.append(
            Table(
                ["claim", "committed", "interval", "perturbed", "interval"],
                [
                    [
                        m["claim"],
                        m["committed"],
                        iv(m["committed_interval"]),
                        m["perturbed"] or "–",
                        iv(m["perturbed_interval"]),
                    ]
                    for m in moved
                ],
                "perturbed",
            )
        )
    return blocks


def seed_profile_blocks(profile: dict) -> list:
    """`rlvr bench --only seed_profile`: where one GRPO seed's time goes, by phase of the loop and by
    class of torch op."""
    wall = profile["seconds"]
    threads = "one torch thread" if profile["threads"] == 1 else f"{profile['threads']} torch threads"
    return [
        Heading("Where a GRPO seed's time goes", 3, "seed-profile"),
        Para(
            f"`rlvr bench --only seed_profile`: variant `{profile['variant']}`, {profile['steps']} steps "
            f"evaluated every {profile['eval_every']}, {threads} as in a seed worker, from "
            f"`{profile['start']}`: "
            f"{wall:.1f} s. "
            f"Torch ops took {profile['op_share_of_wall']:.0%} of a profiled run's wall "
            f"({profile['profiled_steps']} "
            "steps); the rest is Python and dispatch."
        ),
        Table(
            ["phase", "seconds", "share"],
            [[r["phase"], f"{r['seconds']:.2f}", f"{r['share']:.0%}"] for r in profile["phases"]],
            "seed-phases",
        ),
        Table(
            ["torch op class", "share of op time"],
            [[r["class"], f"{r['share']:.0%}"] for r in profile["op_classes"]],
            "seed-ops",
        ),
    ]


def _anchor(claim_id: str) -> str:
    return "claim-" + re.sub(r"[^\w-]", "-", claim_id)


def _anchored_claims(rows: list[dict], cls: str) -> Table:
    """The claims table, each row a link target (the summary links to it)."""
    t = _claim_table(rows, cls)
    return Table(
        t.header, t.rows, t.cls, t.row_classes, t.details, t.details_label, [_anchor(r["id"]) for r in rows]
    )


def _variant_blocks(metrics: dict[str, Any], figures: list[dict], configs: dict[str, dict]) -> list:
    vrows = variant_rows(metrics)
    vheader = ["variant", "task", "seeds", *[label for _, label in VARIANT_KEYS], "pass@1", "pass@64"]
    blocks = [
        Heading("GRPO variants", 2, "variants"),
        Para(
            "Final values, seed mean ± the half-width of the 95% t-interval over seeds; pass@1 and pass@64 "
            "from the `passk` stage (chapter B's held-out problems, seed mean). `rlvr diff A B` compares two."
        ),
        Table(
            vheader,
            [[v["variant"], v["task"], str(v["seeds"]), *[_cell(v[h]) for h in vheader[3:]]] for v in vrows],
            "variants",
        ),
    ]
    blocks += [
        Heading("Starts and lifts", 3, "starts"),
        Para(
            "Each variant beside the SFT start it trains from: the start's sampled (T = 1) and greedy "
            "accuracy, mean over its chains, then GRPO's accuracy, its gain over the start and its k3 KL "
            "to the reference, each ± the half-width of the 95% interval over chains (chain s is SFT seed "
            "s, then GRPO seed s). Chapter A's two starts have about the same sampled accuracy but not the "
            "same greedy one: `single_digit` is under-trained on true answers (the chapter's way), "
            "`single_digit_noisy` fits corrupted labels to convergence; GRPO teaches the first and only "
            "sharpens the second."
        ),
        Table(
            [
                "variant",
                "start",
                "chains",
                "start: sampled acc",
                "start: greedy acc",
                *[label for _, label in START_KEYS],
            ],
            start_rows(metrics),
            "starts",
        ),
    ]
    twins = twin_notes(metrics, configs)
    if twins:
        blocks += [Para("**Variants that end alike.**"), Bullets(twins)]
    curves = [f for f in figures if f["kind"] == "curves"]
    if curves:
        blocks += [Heading("Learning curves", 3, "learning-curves"), *_figure_blocks(curves)]
    return blocks


def _problem_blocks(problems: dict, passk: dict) -> list:
    pp_summary, pp_lists = problem_tables(problems, passk)
    blocks = [
        Heading("Per-problem picture (chapter B)", 2, "problems"),
        Para(
            f"Held-out problems, {problems['n']} samples each for SFT and the headline variants, "
            f"{min((problems.get('n_by_model') or {'': problems['n']}).values())} for the others (SFT "
            'thinned to as many beside them). "Never" means no correct sample in any chain or seed.'
        ),
        Table(
            [
                "variant",
                "seeds",
                "never solved (seed mean)",
                "solved by SFT, never by the variant",
                "solved by the variant, never by SFT",
            ],
            [[str(c) for c in r] for r in pp_summary],
            "problems",
        ),
    ]
    if pp_lists.get("grpo"):
        blocks.append(
            Details(
                "grpo: the problems only one side solves",
                [
                    Table(
                        ["solved by", "problem", "SFT correct of n", "grpo correct, per seed"],
                        pp_lists["grpo"],
                        "problem-list",
                    )
                ],
            )
        )
    return blocks


def _sample_blocks(samples: dict) -> list:
    seed = next(iter(samples["samples"]))
    inner = []
    for step, rows_s in samples["samples"][seed].items():
        inner += [
            Para(f"**step {step}**"),
            Table(
                ["prompt", "answer", "response", "substring reward", "exact"],
                [
                    [
                        s["prompt"],
                        s["answer"],
                        repr(s["response"]),
                        str(s["substring_reward"]),
                        str(s["exact"]),
                    ]
                    for s in rows_s
                ],
                "samples",
            ),
        ]
    return [
        Heading("Reward hacking: sampled responses", 2, "hack-samples"),
        Details(f"seed {seed}: responses at the start and the end of training", inner),
    ]


def render(
    rows: list[dict],
    figures: list[dict],
    metrics: dict[str, Any],
    samples: dict | None,
    bench: dict | None,
    **extra,
) -> tuple[str, str, dict]:
    """(Markdown, self-contained HTML, verdict counts) of the report: `build`'s blocks written out;
    `extra` are build's optional inputs, by name."""
    blocks = build(rows, figures, metrics, samples, bench, **extra)
    return markdown(blocks, "report-figures"), html_page(blocks, "rlvr-repro report"), summary_counts(rows)
