"""`rlvr summary`: the results of this workspace in one terminal screen.

The verdict counts and the claims that differ or are inconclusive (reports/report.json), then one
line per GRPO variant (reports/metrics): final held-out accuracy with its 95% half-width over chains,
pass@1 / pass@64 / never-solved from the pass@k stage, final KL and seconds per step. For comparing
DVC experiments instead, see docs/comparing.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.fields import ConfigError
from rlvr.pipeline.files import read_json_dir

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


def variant_lines(metrics: dict) -> list[list[str]]:
    passk = metrics.get("passk.json", {}).get("variants", {})
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
                _num(m.get("step_seconds_median"), ".3f"),
            ]
        )
    return lines


def summary(reports: Path) -> str:
    """The text `rlvr summary` prints (fits 100 columns)."""
    verdicts_path = reports / "report.json"
    if not verdicts_path.is_file():
        raise ConfigError(f"{verdicts_path}: not found; run `dvc repro` first")
    try:
        verdicts = json.loads(verdicts_path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{verdicts_path}: not valid JSON ({exc.msg}); rerun `dvc repro -f -s report`"
        ) from None
    counts = verdicts["counts"]
    out = [
        "claims: "
        + ", ".join(
            f"{counts[v]} {v if v != 'differs' else 'differ'}"
            for v in ("reproduced", "differs", "inconclusive", "cited")
            if counts.get(v)
        )
        + f"  ({verdicts_path})"
    ]
    for v in ("differs", "inconclusive", "missing"):
        ids = sorted(k for k, c in verdicts["claims"].items() if c["verdict"] == v)
        if ids:
            out.append(f"  {v}: " + ", ".join(ids))
    out.append("")
    out.append(" ".join(f"{h:<{w}}" for h, w in COLUMNS))
    for line in variant_lines(read_json_dir(reports / "metrics")):
        out.append(" ".join(f"{c:<{w}}" for c, (_, w) in zip(line, COLUMNS)))
    out += [
        "accuracy: final held-out accuracy, chain mean ± 95% half-width over chains",
        "pass@1, pass@64, never (never solved in 64 samples, chain mean): stage passk, chapter B only",
        "KL: exact KL to the reference at the end (nats); s/step: median seconds per GRPO step",
    ]
    return "\n".join(out)
