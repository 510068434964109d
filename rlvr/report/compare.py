"""`rlvr diff A B`: two GRPO variants side by side, with 95% intervals and a test made over seeds.

A variant's seeds are its replicates, each a whole chain: seed s starts from its SFT run's seed s,
so the interval includes the start's own variance. Its value on a metric is the mean over chains
with a Student-t 95% interval, and the difference B - A is estimated from the per-chain values as
well: paired by chain on the seeds both variants ran from the same SFT run (seed s of either
starts from the same SFT checkpoint and sees the same data order, so the pair shares most of its
luck), Welch's unequal-variance interval otherwise. Held-out problems are never counted as
replicates: 300 problems scored by 4 trained models say how 4 runs of a recipe did, not how 1200
independent runs did, so a test that pools seeds over problems reports p-values far smaller than
the seeds justify.

Intervals are t-intervals clipped to the metric's natural range ([0, 1] for accuracies and
fractions, >= 0 for KL, entropy, lengths, counts and times, and B - A within the range of differences
those allow). The true mean always lies inside that range, so clipping never drops it from an
interval and leaves coverage as it was; it only removes impossible values such as a negative KL.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from rlvr.fields import ConfigError
from rlvr.report.inputs import read_counts, read_metrics
from rlvr.stats import clip, metric_bounds, t_quantile, t_two_sided_p

# Metrics shown first, in this order; any other metric both variants have follows alphabetically.
DIFF_KEYS = (
    "eval_acc_start",
    "eval_acc_final",
    "eval_acc_gain",
    "reward_final",
    "kl_k3_nats_max",
    "kl_exact_nats_final",
    "entropy_nats_start",
    "entropy_nats_final",
    "clip_frac_max",
    "frac_reward_zero_std_mean",
    "frac_tokens_with_grad_mean",
    "samples_generated_total",
    "response_len_final",
)  # timings are not results: each stage's run record (rlvr.pipeline.records), and `rlvr summary`
PASSK_KS = (1, 8)  # and n, the samples drawn per problem
TEST_METRIC = "pass_at_1"
FALLBACK_TEST_METRIC = "eval_acc_final"  # tested instead when either variant has no pass@k counts


# --------------------------------------------------------------------------------------------
# Ranges and intervals (a metric's range: `rlvr.stats.metric_bounds`)


def delta_bounds(bounds: tuple[float, float]) -> tuple[float, float]:
    """The range of B - A when A and B each lie in `bounds`: [0, 1] -> [-1, 1], [0, inf) -> unbounded."""
    lo, hi = bounds
    return lo - hi, hi - lo


def _difference(a: np.ndarray, b: np.ndarray, paired: bool) -> tuple[float, float | None, float | None]:
    """Mean of B - A, its standard error and degrees of freedom (se/df None with too few seeds).

    paired: a and b are aligned by seed, and the seed-level differences b - a are the sample.
    Otherwise Welch: se^2 = var_a / n_a + var_b / n_b with Welch-Satterthwaite degrees of freedom."""
    if paired:
        d = b - a  # (S,)
        if d.size < 2:
            return float(d.mean()), None, None
        return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size)), float(d.size - 1)
    mean = float(b.mean() - a.mean())
    if a.size < 2 or b.size < 2:
        return mean, None, None
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size  # squared standard errors of each mean
    se2 = va + vb
    if se2 == 0:
        return mean, 0.0, float(a.size + b.size - 2)
    df = se2**2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return mean, float(math.sqrt(se2)), float(df)


def _interval(mean: float, se: float | None, df: float | None, bounds) -> list[float] | None:
    """mean +- t_{0.975, df} * se, clipped to `bounds` (None when se is unknown)."""
    if se is None:
        return None
    half = t_quantile(df) * se if se > 0 else 0.0
    return clip(mean - half, mean + half, bounds)


def pvalue(mean: float, se: float | None, df: float | None) -> float | None:
    """Two-sided t-test of mean = 0. With no spread at all (se = 0) any nonzero mean is certain: 0."""
    if se is None:
        return None
    if se == 0:
        return 1.0 if mean == 0 else 0.0
    return t_two_sided_p(mean / se, df)


def side(values: list[float], bounds: tuple[float, float]) -> dict[str, Any]:
    """One variant on one metric: seed mean, its clipped 95% t-interval, and the per-seed values."""
    v = np.asarray(values, dtype=float)  # (S,)
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else None
    mean = float(v.mean())
    return {"mean": mean, "ci95": _interval(mean, se, v.size - 1, bounds), "seeds": [float(x) for x in v]}


def delta(a: list[float], b: list[float], paired: bool, bounds: tuple[float, float]) -> dict[str, Any]:
    """B - A on one metric: mean, its clipped 95% interval (paired t or Welch), and which it was."""
    mean, se, df = _difference(np.asarray(a, dtype=float), np.asarray(b, dtype=float), paired)
    return {"mean": mean, "ci95": _interval(mean, se, df, delta_bounds(bounds)), "paired": paired}


# --------------------------------------------------------------------------------------------
# Inputs


def load_variant(metrics_dir: Path, variant: str) -> dict:
    """A variant's metrics file, checked, with seeds in ascending order (per-seed values reordered
    to match), so two variants that ran the same seeds line up value by value."""
    path = metrics_dir / f"grpo-{variant}.json"
    if not path.is_file():
        known = sorted(p.stem.removeprefix("grpo-") for p in metrics_dir.glob("grpo-*.json"))
        raise ConfigError(
            f"variant {variant!r}: no {path}; variants with results: {', '.join(known) or 'none'}"
        )
    return as_variant(read_metrics(path), variant, path)


def as_variant(m: Any, variant: str, path: Path) -> dict:
    """A variant's metrics as read from `path`, checked, seeds ascending (`load_variant`)."""
    missing = [k for k in ("task", "seeds", "per_seed") if not isinstance(m, dict) or k not in m]
    if missing:
        raise ConfigError(f"{path}: no {', '.join(missing)}; not a GRPO metrics file (rerun `rlvr grpo`)")
    order = np.argsort(m["seeds"], kind="stable")  # (S,)
    per_seed = {}
    for k, vals in m["per_seed"].items():
        if len(vals) != len(m["seeds"]):
            raise ConfigError(f"{path}: per_seed.{k} has {len(vals)} values for {len(m['seeds'])} seeds")
        per_seed[k] = [vals[i] for i in order]
    return {**m, "variant": variant, "seeds": sorted(m["seeds"]), "per_seed": per_seed}


def load_counts(counts_path: Path) -> dict | None:
    """The pass@k stage's per-problem correct counts, or None before that stage has run."""
    if not counts_path.is_file():
        return None
    data = read_counts(counts_path)
    if not isinstance(data, dict) or not {"n", "counts"} <= set(data):
        raise ConfigError(f"{counts_path}: no n or counts; not a pass@k counts file (rerun `rlvr passk`)")
    return data


def _seed_counts(counts: dict, m: dict) -> list[list[np.ndarray]] | None:
    """Per chain, the correct counts [(P,) per GRPO seed] of a variant's runs from that chain (one
    run per chain, or `grpo_seeds` of them), None unless every run has them."""
    from rlvr.passk import unit_key

    reps = int(m.get("grpo_seeds", 1) or 1)
    rows = [[counts["counts"].get(unit_key(m["variant"], s, r)) for r in range(reps)] for s in m["seeds"]]
    if any(c is None for chain in rows for c in chain):
        return None
    return [[np.asarray(c) for c in chain] for chain in rows]


# --------------------------------------------------------------------------------------------
# The comparison


def _metric_keys(ma: dict, mb: dict) -> list[str]:
    common = set(ma["per_seed"]) & set(mb["per_seed"])
    return [k for k in DIFF_KEYS if k in common] + sorted(common - set(DIFF_KEYS))


def _finite(values: list) -> bool:
    return all(isinstance(x, (int, float)) and math.isfinite(x) for x in values)


def compare_metric(key: str, a: list[float], b: list[float], paired: bool) -> dict[str, Any]:
    """One row of the comparison: A, B and B - A on `key`, intervals within the metric's range."""
    bounds = metric_bounds(key)
    return {"metric": key, "a": side(a, bounds), "b": side(b, bounds), "delta": delta(a, b, paired, bounds)}


def passk_per_seed(chain_counts: list[list[np.ndarray]], n: int, k: int) -> list[float]:
    """pass@k averaged over problems, one value per chain: the mean over its runs (GRPO seeds), the
    pairing rule every per-chain metric follows."""
    from rlvr.passk import pass_at_k

    return [float(np.mean([pass_at_k(c, n, k).mean() for c in runs])) for runs in chain_counts]


def samples_of(counts: dict, m: dict) -> int:
    """Samples per problem a variant was scored with (the counts file's `n_by_model`, else its `n`)."""
    by_model = counts.get("n_by_model") or {}
    return int(by_model.get(f"{m['variant']}/seed{m['seeds'][0]}", counts["n"]))


def compare_passk(counts: dict, ma: dict, mb: dict, paired: bool) -> list[dict[str, Any]]:
    """pass@k at k = 1, 8, n for both variants and B - A, over seeds ([] without counts for both)."""
    ca, cb = _seed_counts(counts, ma), _seed_counts(counts, mb)
    if ca is None or cb is None:
        return []
    na, nb = samples_of(counts, ma), samples_of(counts, mb)
    top = int(counts.get("k_max", min(na, nb)))
    rows = []
    for k in sorted({k for k in (*PASSK_KS, top) if k <= top}):
        row = compare_metric(f"pass_at_{k}", passk_per_seed(ca, na, k), passk_per_seed(cb, nb, k), paired)
        rows.append({"k": k, **{s: row[s] for s in ("a", "b", "delta")}})
    return rows


def seed_test(metric: str, a: list[float], b: list[float], paired: bool) -> dict[str, Any]:
    """Is B different from A on `metric`? A two-sided t-test on per-seed values: paired by seed
    (a one-sample t-test of the seed differences) or Welch's. It is the test whose 95% interval is
    the delta's, so p < 0.05 exactly when that interval excludes 0."""
    mean, se, df = _difference(np.asarray(a, dtype=float), np.asarray(b, dtype=float), paired)
    kind = "paired t-test" if paired else "Welch t-test"
    return {
        "name": f"{kind} on per-seed {metric} (two-sided)",
        "metric": metric,
        "pvalue": pvalue(mean, se, df),
        "seeds": len(a) if paired else len(a) + len(b),  # pairs / all
        "t": None if not se else mean / se,
        "df": df,
    }


def _seed_list(seeds: list[int]) -> str:
    return ", ".join(map(str, seeds))


def paired_chains(ma: dict, mb: dict) -> list[int]:
    """The chains two variants can be paired on: the seeds both ran from the same SFT run of the
    same task (chain s of either starts from the same checkpoint), when there are at least two of
    them; [] when the comparison has to be unpaired."""
    if ma["task"] != mb["task"] or ma.get("sft") != mb.get("sft"):
        return []
    common = sorted(set(ma["seeds"]) & set(mb["seeds"]))
    return common if len(common) >= 2 else []


def on_chains(m: dict, seeds: list[int]) -> dict:
    """A variant's metrics restricted to `seeds` (a subset of its own, ascending)."""
    keep = [m["seeds"].index(s) for s in seeds]
    per_seed = {k: [vals[i] for i in keep] for k, vals in m["per_seed"].items()}
    return {**m, "seeds": list(seeds), "per_seed": per_seed}


def check_warnings(ma: dict, mb: dict, paired: list[int]) -> list[str]:
    """What makes the comparison weaker than "same problems, same starts, same seeds"; `paired` is
    the chains the deltas are paired on ([] for unpaired)."""
    out = []
    if ma["task"] != mb["task"]:
        out.append(
            f"tasks differ ({ma['variant']}: {ma['task']}, {mb['variant']}: {mb['task']}): "
            "different problems, not only different algorithms"
        )
    elif ma.get("sft") != mb.get("sft"):
        out.append(
            f"SFT starts differ ({ma.get('sft')} vs {mb.get('sft')}): chain s of either starts from "
            "another checkpoint, so a pair shares only its seed"
        )
    if ma["seeds"] != mb["seeds"]:
        how = (
            f"paired on the {len(paired)} chains both ran ({_seed_list(paired)}), the others left out"
            if paired
            else "deltas are unpaired (Welch)"
        )
        out.append(
            f"seeds differ ({ma['variant']}: {_seed_list(ma['seeds'])}; {mb['variant']}: "
            f"{_seed_list(mb['seeds'])}): {how}"
        )
    if min(len(ma["seeds"]), len(mb["seeds"])) < 2:
        out.append("a variant has fewer than two seeds: no intervals and no test")
    return out


def machine_warning(a: str, b: str, machines: dict[str, str | None] | None) -> str | None:
    """A warning when the two variants' stages ran on different CPUs ({variant: CPU or None}, from
    their run records): the floats of a whole chain differ between CPUs, so B - A then mixes the
    change with the machine's drift. None when both ran on one CPU, or nothing is known."""
    if not machines:
        return None
    ca, cb = machines.get(a), machines.get(b)
    if ca and cb and ca != cb:
        return (
            f"made on different CPUs ({a}: {ca}; {b}: {cb}): the difference includes the machines' "
            "float drift; rerun both on one machine (docs/comparing.md: a baseline first)"
        )
    if a != b and (ca or cb) and not (ca and cb):
        unknown = a if not ca else b
        return f"{unknown}'s run record does not name its CPU: whether both ran on one machine is unknown"
    return None


def config_differences(configs: dict[str, dict] | None, a: str, b: str) -> list[dict] | None:
    """The settings in which two variants' runs differ, as their stages ran them ({variant:
    settings}, from dvc.lock): [{"key", "a", "b"}], keys sorted; None where either is unknown."""
    if not configs or a not in configs or b not in configs:
        return None
    ca, cb = configs[a], configs[b]
    return [
        {"key": k, "a": ca.get(k), "b": cb.get(k)}
        for k in sorted(set(ca) | set(cb))
        if ca.get(k) != cb.get(k)
    ]


HEADLINE_DIFFS = ("eval_acc_final", "pass@1", "pass@{n}")  # what `format_diff` ends with a verdict on


def difference_word(delta: dict) -> str:
    """A difference B - A in words, by its 95% interval: "higher" or "lower" where the interval
    excludes 0, "no difference shown" where it holds 0, "no interval" without one."""
    ci = delta.get("ci95")
    if ci is None or ci[0] is None:
        return "no interval (too few chains)"
    if ci[0] > 0:
        return "higher"
    if ci[1] < 0:
        return "lower"
    return "no difference shown at 95%"


def headline_verdicts(d: dict) -> list[str]:
    """One line per headline metric: B - A, its interval, and the word for it."""
    rows = {r["metric"]: r for r in d["metrics"]}
    rows.update({f"pass@{r['k']}": r for r in d["passk"]})
    top = max((r["k"] for r in d["passk"]), default=None)
    out = []
    for name in HEADLINE_DIFFS:
        name = name.format(n=top) if top else name
        if name not in rows:
            continue
        delta = rows[name]["delta"]
        word = difference_word(delta)
        subject = f"{d['b']} is {word} than {d['a']}" if word in ("higher", "lower") else word
        out.append(f"verdict {name}: {subject} ({d['b']} - {d['a']} = {_cell(delta, True)})")
    return out


def diff_variants(
    metrics_dir: Path,
    counts_path: Path,
    a: str,
    b: str,
    configs: dict[str, dict] | None = None,
    machines: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """Compare variant B with variant A (B - A) from their metrics files and the pass@k counts.

    Returns a dict whose keys never depend on the variant names:
    {"a", "b", "task": {"a", "b"}, "seed_ids": {"a", "b"}, "warnings": [...],
     "metrics": [{"metric", "a": {"mean", "ci95", "seeds"}, "b": {...}, "delta": {"mean", "ci95", "paired"}}],
     "passk": [{"k", "a", "b", "delta"}] ([] without counts for both),
     "test": {"name", "metric", "pvalue", "seeds", "t", "df"},
     "settings": [{"key", "a", "b"}] (the settings the two runs differ in; None without `configs`),
     "verdicts": [one line per headline metric]}.
    `machines` ({variant: CPU}, from the run records) adds a first warning when they differ.
    `seeds` under a and b holds the per-seed values in ascending seed order (ids in `seed_ids`). Two
    variants from the same SFT run are paired on the chains both ran (a variant trained on chains 0-3
    against one on 0-7 is compared on 0-3); otherwise the deltas are Welch's. The
    test is on per-seed pass@1, or on eval_acc_final when either variant has no pass@k counts."""
    ma, mb = load_variant(metrics_dir, a), load_variant(metrics_dir, b)
    chains = paired_chains(ma, mb)
    warnings = check_warnings(ma, mb, chains)
    paired = bool(chains)
    if paired:
        ma, mb = on_chains(ma, chains), on_chains(mb, chains)
    if a == b:
        warnings.insert(0, f"both sides are {a}: every difference is 0 by construction; name two variants")
    machine = machine_warning(a, b, machines)
    if machine:
        warnings.insert(0, machine)
    rows, skipped = [], []
    for k in _metric_keys(ma, mb):
        va, vb = ma["per_seed"][k], mb["per_seed"][k]
        if _finite(va) and _finite(vb):
            rows.append(compare_metric(k, va, vb, paired))
        else:
            skipped.append(k)
    if skipped:
        warnings.append(f"not compared (a seed's value is missing or not finite): {', '.join(skipped)}")
    counts = load_counts(counts_path)
    passk = compare_passk(counts, ma, mb, paired) if counts else []
    if not passk:
        lacking = [m["variant"] for m in (ma, mb) if not counts or _seed_counts(counts, m) is None]
        warnings.append(
            f"no pass@k counts for {' or '.join(lacking)} in {counts_path} (chapter-B variants "
            f"only); the test is on {FALLBACK_TEST_METRIC}"
        )
    test = None
    if passk:
        test = seed_test(TEST_METRIC, passk[0]["a"]["seeds"], passk[0]["b"]["seeds"], paired)
    elif FALLBACK_TEST_METRIC in ma["per_seed"] and FALLBACK_TEST_METRIC in mb["per_seed"]:
        test = seed_test(
            FALLBACK_TEST_METRIC,
            ma["per_seed"][FALLBACK_TEST_METRIC],
            mb["per_seed"][FALLBACK_TEST_METRIC],
            paired,
        )
    out = {
        "a": a,
        "b": b,
        "task": {"a": ma["task"], "b": mb["task"]},
        "seed_ids": {"a": ma["seeds"], "b": mb["seeds"]},
        "warnings": warnings,
        "metrics": rows,
        "passk": passk,
        "test": test,
        "settings": config_differences(configs, a, b),
    }
    out["verdicts"] = headline_verdicts(out)
    return out


# --------------------------------------------------------------------------------------------
# Every variant against one, chain by chain (the report's paired view)

# The view's panels: the metrics tried in order (the first both variants have), what it measures,
# its unit. pass@1 and pass@n are the passk stage's (chain means over a chain's GRPO seeds).
PAIRED_PANELS = (
    (("pass_at_1", "eval_acc_final"), "pass@1 (held-out accuracy)", "share of problems"),
    (("pass_at_n",), "pass@{n}", "share of problems"),
    (("eval_kl_exact_nats_final",), "KL to the reference at the end (exact)", "nats"),
    (("entropy_nats_final",), "policy entropy at the end", "nats per token"),
)


def variants_by_chain(metrics: dict[str, Any], metrics_dir: Path) -> dict[str, dict]:
    """Every GRPO variant in `metrics` (a metrics folder read whole: {"grpo-<v>.json": ...}) as
    `load_variant` gives it, with each chain's pass@1 and pass@n (`pass_at_n`; n, passk.json's
    `k_max`, as `passk_n`) added where the passk stage scored the variant on its chains."""
    passk = metrics.get("passk.json") or {}
    out = {}
    for name in sorted(f for f in metrics if f.startswith("grpo-") and f.endswith(".json")):
        m = as_variant(metrics[name], name.removeprefix("grpo-").removesuffix(".json"), metrics_dir / name)
        scored = (passk.get("variants") or {}).get(m["variant"])
        if scored and sorted(scored["seeds"]) == m["seeds"]:
            by_seed = {
                k: dict(zip(scored["seeds"], scored["per_seed"][f"{k}_rl"]))
                for k in ("pass_at_1", "pass_at_n")
            }
            m["per_seed"] |= {k: [v[s] for s in m["seeds"]] for k, v in by_seed.items()}
            m["passk_n"] = passk["k_max"]
        out[m["variant"]] = m
    return out


def paired_to(base: dict, other: dict, key: str) -> dict | None:
    """`other` minus `base` on `key`, chain by chain on the chains both ran (`paired_chains`): each
    chain's difference, their mean and its 95% t-interval over chains, clipped to the range a
    difference can take. None when the two cannot be paired or a chain's value is missing."""
    chains = paired_chains(base, other)
    if not chains or key not in base["per_seed"] or key not in other["per_seed"]:
        return None
    a, b = (on_chains(m, chains)["per_seed"][key] for m in (base, other))
    if not (_finite(a) and _finite(b)):
        return None
    d = delta(a, b, True, metric_bounds(key))
    diffs = [float(y - x) for x, y in zip(a, b)]
    return {
        "variant": other["variant"],
        "chains": chains,
        "diffs": diffs,
        "mean": d["mean"],
        "ci95": d["ci95"],
    }


def paired_view(variants: dict[str, dict], base: str) -> list[dict]:
    """The paired view's panels: for each of PAIRED_PANELS that `base` has, every other variant of
    its task at a fixed budget minus `base` (`paired_to`). [{"metric", "title", "unit", "rows":
    [paired_to's, ...]}];
    a panel no variant can be paired on is left out, and [] without `base`."""
    if base not in variants:
        return []
    b = variants[base]
    others = [  # a run to a controlled end is not at base's recipe and steps: not in the view
        m for v, m in variants.items() if v != base and m["task"] == b["task"] and m.get("target") is None
    ]
    panels = []
    for keys, title, unit in PAIRED_PANELS:
        key = next((k for k in keys if k in b["per_seed"]), None)
        rows = [r for m in others if key and (r := paired_to(b, m, key)) is not None]
        if rows:
            panels.append(
                {"metric": key, "title": title.format(n=b.get("passk_n")), "unit": unit, "rows": rows}
            )
    return panels


# --------------------------------------------------------------------------------------------
# Text


def _num(x: float | None, sign: bool = False) -> str:
    """Three significant digits; whole numbers from 1000 up without an exponent; a sign if asked."""
    if x is None:
        return "n/a"
    if x == 0:
        return "0"
    spec = ("+" if sign else "") + (".0f" if 1000 <= abs(x) < 1e7 else ".3g")
    return format(x, spec)


def _cell(entry: dict, sign: bool = False, interval: bool = True) -> str:
    """ "mean [lo, hi]" (the mean signed for a delta; the bounds' signs speak for themselves); just the
    mean where the interval is a point or is left out."""
    ci = entry["ci95"]
    mean = _num(entry["mean"], sign)
    if not interval or ci is None or ci[0] == ci[1] == entry["mean"]:
        return mean
    return f"{mean} [{_num(ci[0])}, {_num(ci[1])}]"


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    """One line per row: the first column left-aligned at the longest name's width (names are never
    cut or wrapped), the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        f"{r[0]:<{widths[0]}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(r[1:], widths[1:])) for r in rows
    ]


def _test_line(d: dict) -> str | None:
    t = d["test"]
    if t is None:
        return None
    p = "n/a" if t["pvalue"] is None else f"{t['pvalue']:.3g}"
    na, nb = len(d["seed_ids"]["a"]), len(d["seed_ids"]["b"])
    seeds = f"{na} seed pairs" if t["name"].startswith("paired") else f"{na} + {nb} seeds"
    return f"{t['name']}, {seeds}: p = {p}"


def format_diff(d: dict, width: int = 100) -> str:
    """Warnings first, then one line per metric and per pass@k: mean [95% interval] of A, of B and of
    B - A; then the test and its p-value. Where that is wider than `width` columns, A's and B's
    intervals are left out (the delta keeps its own), so every row stays on one line."""
    head = ("metric", d["a"], d["b"], f"{d['b']} - {d['a']}")
    named = [(r["metric"], r) for r in d["metrics"]] + [(f"pass@{r['k']}", r) for r in d["passk"]]

    def rows(interval: bool) -> list[str]:
        body = [
            (
                name,
                _cell(r["a"], interval=interval),
                _cell(r["b"], interval=interval),
                _cell(r["delta"], True),
            )
            for name, r in named
        ]
        return _table([head, *body])

    table, note = rows(True), ""
    if max(map(len, table)) > width:
        table, note = (
            rows(False),
            f"{d['a']} and {d['b']} as means only, to fit {width} columns (--json has all)",
        )
    paired = d["seed_ids"]["a"] == d["seed_ids"]["b"]
    lines = [f"warning: {w}" for w in d["warnings"]]
    settings = d.get("settings")
    if settings is not None:
        lines.append(
            "settings that differ: "
            + ("; ".join(f"{s['key']} {s['a']!r} -> {s['b']!r}" for s in settings) or "none")
        )
    lines += [table[0], "-" * max(map(len, table)), *table[1:]]
    lines.append(
        "mean over seeds [95% t-interval, clipped to the metric's range]; "
        + ("deltas paired by seed" if paired else "deltas unpaired (Welch)")
    )
    lines += [note] if note else []
    test = _test_line(d)
    return "\n".join(lines + ([test] if test else []) + d.get("verdicts", []))
