"""`rlvr summary`: the results of this workspace in one terminal screen.

The verdict counts and the claims that differ or are inconclusive (reports/report.json), then one
line per SFT start that a variant trains from (the baseline: its sampled accuracy), then one per
GRPO variant (reports/metrics): final held-out accuracy with its 95% half-width over chains, pass@1 /
pass@64 / never-solved from the pass@k stage, final KL and seconds per step. For comparing DVC
experiments instead, see docs/comparing.md.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from rlvr.fields import ConfigError
from rlvr.report.inputs import read_metrics_dir, read_records_dir, read_verdicts

COLUMNS = (
    ("variant", 13),
    ("task", 13),
    ("seeds", 5),
    ("accuracy", 16),
    ("pass@1", 7),
    ("pass@64", 7),
    ("never", 6),
    ("KL", 6),
    ("s/step", 6),
)


def _pm(mean, ci) -> str:
    if mean is None:
        return "–"
    if ci and ci[0] is not None:
        return f"{mean:.3f} ± {(ci[1] - ci[0]) / 2:.3f}"
    return f"{mean:.3f}"


def _num(x, fmt: str = ".3f") -> str:
    return "–" if x is None else format(x, fmt)


def start_lines(metrics: dict) -> list[list[str]]:
    """One line per SFT run some variant starts from: the accuracy GRPO is measured against (held-out
    when the task has a held-out split, else the training prompts, as the variants are evaluated)."""
    passk = metrics.get("passk.json", {})
    variants = {m["variant"]: m for k, m in metrics.items() if k.startswith("grpo-")}
    starts = sorted({m["sft"] for m in variants.values() if "sft" in m})
    scored = {variants[v].get("sft") for v in passk.get("variants", {}) if v in variants}  # pass@k's start
    lines = []
    for run in starts:
        m = metrics.get(f"sft-{run}.json")
        if m is None:
            continue
        key = "sampled_acc_heldout" if m.get("sampled_acc_heldout") is not None else "sampled_acc_train"
        pk = passk.get("sft", {}) if run in scored else {}
        lines.append(
            [
                f"sft:{run}",
                m["task"],
                str(len(m["seeds"])),
                _pm(m.get(key), m.get("ci95", {}).get(key)),
                _num(pk.get("pass_at_1")),
                _num(pk.get("pass_at_n")),
                _num(pk.get("never_solved"), ".2f"),
                "–",
                "–",
            ]
        )
    return lines


def variant_lines(metrics: dict, records: dict | None = None) -> list[list[str]]:
    """One line per GRPO variant; its s/step from the stage's run record (timings are not results)."""
    passk = metrics.get("passk.json", {}).get("variants", {})
    records = records or {}
    lines = []
    for name in sorted(k for k in metrics if k.startswith("grpo-")):
        m = metrics[name]
        pk = passk.get(m["variant"], {})
        ci = m.get("ci95", {})
        lines.append(
            [
                m["variant"],
                m["task"],
                str(len(m["seeds"])),
                _pm(m.get("eval_acc_final"), ci.get("eval_acc_final")),
                _num(pk.get("pass_at_1_rl")),
                _num(pk.get("pass_at_n_rl")),
                _num(pk.get("never_solved_rl"), ".2f"),
                _num(m.get("kl_exact_nats_final"), ".2f"),
                _num(records.get(name, {}).get("step_seconds_median"), ".3f"),
            ]
        )
    return lines


def summary(reports: Path) -> str:
    """The text `rlvr summary` prints (fits 100 columns)."""
    verdicts_path = reports / "report.json"
    if not verdicts_path.is_file():
        raise ConfigError(f"{verdicts_path}: not found; run `dvc repro` first")
    verdicts = read_verdicts(verdicts_path)
    counts = verdicts["counts"]
    if "by_class" in verdicts:  # measured claims first, as the report leads
        from rlvr.report.claimtext import counts_line

        head = counts_line(verdicts["by_class"], bold=False)
    else:
        head = "claims: " + ", ".join(
            f"{counts[v]} {v if v != 'differs' else 'differ'}"
            for v in ("reproduced", "differs", "inconclusive", "cited")
            if counts.get(v)
        )
    out = [*textwrap.wrap(head, 100), f"  ({verdicts_path})"]
    for v in ("differs", "inconclusive", "missing"):
        ids = sorted(k for k, c in verdicts["claims"].items() if c["verdict"] == v)
        if ids:
            out += textwrap.wrap(
                f"{v}: " + ", ".join(ids), 100, initial_indent="  ", subsequent_indent="    "
            )
    out.append("")
    metrics = read_metrics_dir(reports / "metrics")
    records = read_records_dir(reports / "runs")
    lines = start_lines(metrics) + variant_lines(metrics, records)
    widths = [
        max([w, *(len(line[0]) + 1 for line in lines)]) if i == 0 else w for i, (_, w) in enumerate(COLUMNS)
    ]
    out.append(" ".join(f"{h:<{w}}" for (h, _), w in zip(COLUMNS, widths)))
    for line in lines:
        out.append(" ".join(f"{c:<{w}}" for c, w in zip(line, widths)))
    out += [
        "accuracy: final held-out accuracy, chain mean ± 95% half-width over chains; sft:<run>: the",
        "  start the variants train from (sampled accuracy; chapter A's task scores its training prompts)",
        "pass@1, pass@64, never (never solved in 64 samples, chain mean): stage passk, chapter B only",
        "KL: exact KL to the reference at the end (nats); s/step: median seconds per GRPO step",
    ]
    return "\n".join(out)


def power_table(metrics: dict, claims_path: Path, plan_path: Path | None = None) -> str:
    """`rlvr plan`: every measured claim's precision on the given results, read as a pilot: its
    estimand, chains, half-width (at 95%, or at a second look's level where `plan_path` declares
    one), the declared target and the chains that would meet it at this spread (what a
    confirmatory plan declares before it runs)."""
    from rlvr.report.claims import load_claims, read_looks
    from rlvr.report.evidence import judge_all
    from rlvr.report.verdict import MAX_CHAINS, num, precision, precision_target

    head = (
        f"{'claim':<18} {'estimand':<9} {'verdict':<15} {'chains':>6} {'half-width':>10} "
        f"{'target':>8} {'needed':>7}"
    )
    out = [head]
    looks = read_looks(plan_path) if plan_path is not None else None
    for r in judge_all(load_claims(claims_path), metrics, looks):
        if r.claim.category != "measured":
            continue
        p = precision(r)
        if p is None:
            target = precision_target(r.claim)
            out.append(
                f"{r.claim.id:<18} {r.claim.estimand:<9} {r.verdict:<15} {'-':>6} {'-':>10} "
                f"{num(target) if target else 'none':>8} {'-':>7}"
            )
            continue
        n = p["chains_needed"]
        need = "-" if n is None else (str(n) if n <= MAX_CHAINS else f">{MAX_CHAINS}")
        out.append(
            f"{r.claim.id:<18} {r.claim.estimand:<9} {r.verdict:<15} {p['chains']:>6} "
            f"{num(p['half_width']):>10} {num(p['target']):>8} {need:>7}"
        )
    return "\n".join(out)
