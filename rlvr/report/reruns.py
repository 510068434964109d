"""The report's reruns section, from reports/rerun.json (`rlvr verify --rerun [--perturb]`, run on
demand, not by the pipeline): each rerun of the whole pipeline in a fresh clone, what it saw in one
word (rlvr.report.moves), its wall time and where the time went; then the verdicts that moved under
the perturbed rerun, each with the interval it was decided on in both runs. A record made before the
reruns moved out of `rlvr bench` names the command that made it and lacks what it did not measure.
"""

from __future__ import annotations

from rlvr.report.document import Heading, Para, Table
from rlvr.report.moves import word
from rlvr.report.verdict import num

KINDS = {"rerun": "the pipeline again", "perturbed": "every start perturbed"}  # in the order shown

RERUNS = (
    "`rlvr verify --rerun` runs the whole pipeline again (`dvc repro --force`, every stage) in a fresh "
    "clone of a commit and compares its results with the ones the commit holds: **identical** (every "
    "metric bit-equal, durations and run ids aside), **statistically the same** (no claim between "
    "reproduced and differs; every move listed) or **moved** (a claim flipped: the check fails). "
    "`--perturb` first multiplies every chain's initial weights by 1 + 1e-6·z (`RLVR_PERTURB`), "
    "changes the size of float32 rounding, which the chains amplify as another CPU's rounding would. "
    "Run on demand, not by the pipeline; recorded in `reports/rerun.json`."
)


def _seconds(value) -> str:
    return "–" if value is None else f"{value:,.0f} s" if value >= 100 else f"{value:.3g} s"


def rerun_rows(reruns: dict) -> list[list[str]]:
    """One row per recorded rerun: how it was made, its commit, wall (and the pipeline's budget),
    the stages' own work and the time between them, the word, and the claims that moved."""
    rows = []
    for kind in (k for k in KINDS if k in reruns):
        r = reruns[kind]
        profile = r.get("profile") or {}
        budget = f" (budget {_seconds(r['target_wall_seconds'])})" if r.get("target_wall_seconds") else ""
        outside = r.get("numbers_outside")
        rows.append(
            [
                f"{KINDS[kind]}: `{r['command']}`",
                r["commit"][:10],
                _seconds(r.get("wall_seconds")) + budget,
                _seconds(profile.get("stage_seconds_total")),
                _seconds(profile.get("gap_seconds_total")),
                word(r),
                str(len(r["flips"])),
                str(len(r["moves"])),
                "–" if outside is None else str(len(outside)),
            ]
        )
    return rows


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
            f"{counts(perturbed.get('rerun_counts'))}. "
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
                        m["rerun"] or "–",
                        iv(m["rerun_interval"]),
                    ]
                    for m in moved
                ],
                "perturbed",
            )
        )
    return blocks


def rerun_blocks(reruns: dict) -> list:
    """The reruns section; nothing when no rerun was recorded."""
    rows = rerun_rows(reruns)
    if not rows:
        return []
    blocks = [
        Heading("Reruns in a fresh clone", 2, "reruns"),
        Para(RERUNS),
        Table(
            [
                "rerun",
                "commit",
                "wall",
                "stages' own work",
                "between stages",
                "seen",
                "reproduced ↔ differs",
                "to or from inconclusive",
                "values outside the interval",
            ],
            rows,
            "reruns",
        ),
    ]
    if reruns.get("perturbed", {}).get("commit"):
        blocks += perturbed_blocks(reruns["perturbed"])
    return blocks
