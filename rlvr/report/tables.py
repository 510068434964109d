"""The report's result tables: each GRPO variant's final values, the start it trains from beside
what GRPO made of it, the variants that end alike and why, the per-problem picture of chapter B, and
`rlvr starts`' candidate starts. Each function takes parsed result files and returns table rows
(lists of cells) or notes; the layout (rlvr.report.layout) places them.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

from rlvr.passk import crossings_text

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

    def entry(d: dict, key: str) -> str:
        return cell((d.get(key), d.get("ci95", {}).get(key)))

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
                entry(sft, f"sampled_acc_{where}"),
                entry(sft, f"greedy_acc_{where}"),
                *[entry(m, k) for k, _ in START_KEYS],
            ]
        )
    return rows


SAMPLED_KEYS = (
    "eval_acc_final",
    "train_acc_final",
    "reward_final",
    "response_len_final",
)  # counts of samples


CHAIN_KEYS = ("seeds", "grpo_seeds")  # which chains a variant runs, not how one chain trains
SAME_GRADIENT = (
    "with `inner_epochs: 1` the policy being updated is the one that sampled, so every importance "
    "ratio is exactly 1 when the gradient is taken; a sequence ratio, exp(mean of its response's token "
    "log-ratios), then has the gradient of the response's mean token log-probability, spread over its "
    "tokens, and every aggregation weighs the tokens of one response alike, so the token ratio gives "
    "the same gradient. The two part only by float rounding; a sequence ratio changes training only "
    "with `inner_epochs` > 1"
)


def same_gradient_reason(a: dict, b: dict) -> str | None:
    """Why two variants train every chain alike, when their settings prove it (None otherwise): the
    one case known here is the sequence ratio (GSPO) against the token ratio at one gradient step
    per batch (mu = 1), every other setting equal but the chains they run. a, b: each variant's
    settings as its stage ran them."""
    differ = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} - set(CHAIN_KEYS)
    if (
        differ == {"ratio"}
        and {a["ratio"], b["ratio"]} == {"token", "sequence"}
        and a.get("inner_epochs") == 1
    ):
        return SAME_GRADIENT
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


def _settings_note(a: str, b: str, ca: dict, cb: dict, why: str) -> str:
    """Two variants whose settings prove they train alike: what they differ in, and why it cannot
    change a chain's training."""
    chains = [k for k in CHAIN_KEYS if ca.get(k) != cb.get(k)]
    runs = f", and in the chains they run ({', '.join(f'`{k}`' for k in chains)})" if chains else ""
    return (
        f"`{a}` and `{b}` train every chain alike: they differ only in `ratio` "
        f"({ca['ratio']} vs {cb['ratio']}){runs}, and {why}."
    )


def _measured_note(a: str, b: str, ma: dict, mb: dict, ca: dict, cb: dict) -> str:
    """Two variants whose sampled numbers came out identical on every chain, and their settings apart."""
    differ = ", ".join(
        f"`{k}`: {ca.get(k)} vs {cb.get(k)}"
        for k in sorted(ca.keys() | cb.keys())
        if ca.get(k) != cb.get(k) and k != "task"
    )
    return (
        f"`{a}` and `{b}` end with the same accuracy, reward and response length on every seed, "
        f"and their other per-seed numbers (KL, entropy...) agree within a relative "
        f"{_largest_gap(ma['per_seed'], mb['per_seed']):.1g} (they differ in {differ or 'nothing recorded'})."
    )


def twin_notes(metrics: dict[str, Any], configs: dict[str, dict]) -> list[str]:
    """Pairs of variants of one task that end alike, and why. A pair whose settings prove it (their
    gradients are equal: `same_gradient_reason`) is named whatever its numbers, so a run on another
    CPU, where rounding parts them, still says why they agree; with the same chains, the numbers
    measured here follow. A pair whose sampled numbers are identical on every chain for no known
    reason is named with the settings it differs in. configs: each variant's settings as its stage
    ran them (grpo.defaults with the variant's overrides)."""
    runs = {m["variant"]: m for name, m in sorted(metrics.items()) if name.startswith("grpo-")}
    notes = []
    for a, b in combinations(sorted(runs), 2):
        ma, mb = runs[a], runs[b]
        if ma["task"] != mb["task"]:
            continue
        ca, cb = configs.get(a, {}), configs.get(b, {})
        why = same_gradient_reason(ca, cb) if ca and cb else None
        same_chains = ma["seeds"] == mb["seeds"] and ma.get("grpo_seeds") == mb.get("grpo_seeds")
        alike = same_chains and all(ma["per_seed"].get(k) == mb["per_seed"].get(k) for k in SAMPLED_KEYS)
        if why is not None:
            notes.append(
                _settings_note(a, b, ca, cb, why)
                + (
                    f" Here they end with the same accuracy, reward and response length on every chain, "
                    f"the other numbers within a relative {_largest_gap(ma['per_seed'], mb['per_seed']):.1g}."
                    if alike
                    else ""
                )
            )
        elif alike:
            notes.append(_measured_note(a, b, ma, mb, ca, cb))
    return notes


def cell(v: tuple) -> str:
    """(mean, [lo, hi] or None) as a table cell: "0.52 ± 0.033", the half-width of the interval."""
    mean, ci = v
    if mean is None:
        return "–"
    if ci and ci[0] is not None:
        return f"{mean:.3g} ± {(ci[1] - ci[0]) / 2:.2g}"
    return f"{mean:.3g}"


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


def _delta_cell(d: dict | None) -> str:
    """A paired difference B - A: "+0.012 [-0.010, +0.034]" (the mean alone without an interval)."""
    if d is None:
        return "–"
    mean = f"{d['mean']:+.3f}"
    return mean if d["ci95"] is None else f"{mean} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"


def chains_text(chains: list[int]) -> str:
    """Chain numbers as a table cell: a consecutive run as "200-231", otherwise listed."""
    if len(chains) > 2 and list(chains) == list(range(chains[0], chains[0] + len(chains))):
        return f"{chains[0]}-{chains[-1]}"
    return ", ".join(map(str, chains))


def against_rows(metrics: dict[str, Any], problems: dict | None, base: str = "grpo") -> list[list[str]]:
    """Every variant from `base`'s start against `base`, paired by chain on the chains both ran
    (`rlvr diff base variant`'s deltas): the held-out accuracy after GRPO and, from the pass@k
    counts, pass@1 and pass@k_max, each the variant minus `base` with its unadjusted 95% interval
    (a variant with a controlled end is left out: it ran to its end, not for `base`'s steps); then
    the matrix's decision on pass@1 and on pass@k_max (rlvr.report.matrix: different, equivalent
    within the margin, or undecided with the chains that would decide it), Holm over every test of
    the table. One pairing rule for every column: each chain's value is the mean over its GRPO seeds."""
    from rlvr.report.compare import compare_metric, compare_passk, on_chains, paired_chains
    from rlvr.report.matrix import Cell, decide

    runs = {m["variant"]: m for name, m in sorted(metrics.items()) if name.startswith("grpo-")}
    if base not in runs:
        return []
    rows, cells = [], []
    for v, m in runs.items():
        ended = m.get("target") is not None  # a run to a controlled end: not at `base`'s steps
        chains = paired_chains(runs[base], m) if v != base and not ended else []
        if not chains:
            continue
        a, b = on_chains(runs[base], chains), on_chains(m, chains)
        key = "eval_acc_final"
        acc = compare_metric(key, a["per_seed"][key], b["per_seed"][key], True)
        passk = {r["k"]: r for r in compare_passk(problems, a, b, True)} if problems else {}
        top = max(passk, default=None)
        decided = [passk.get(1), passk.get(top)]
        for c in decided:
            if c is not None:
                cells.append(Cell.of(np.asarray(c["b"]["seeds"], float) - np.asarray(c["a"]["seeds"], float)))
        rows.append(
            [v, chains_text(chains), *(_delta_cell(c and c["delta"]) for c in (acc, *decided))]
            + [c is not None for c in decided]  # placeholders: the decisions, once the family is known
        )
    decisions = iter(decide(cells))
    return [row[:5] + [next(decisions) if has else "–" for has in row[5:]] for row in rows]
