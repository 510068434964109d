"""The report's sections past the verdicts, each built from the results it shows: the GRPO variants
(and each against `grpo`), the per-problem picture, the candidate starts and the reward-hacking
samples. `rlvr.report.layout.build` puts them in order with the rest.
"""

from __future__ import annotations

from typing import Any

from rlvr.report.document import Bullets, Details, Figure, Heading, Para, Table
from rlvr.report.matrix import MARGIN
from rlvr.report.tables import (
    START_KEYS,
    VARIANT_KEYS,
    against_rows,
    cell,
    problem_tables,
    start_rows,
    starts_rows,
    twin_notes,
    variant_rows,
)
from rlvr.report.verdict import num


def figure_blocks(figures: list[dict]) -> list:
    return [
        Figure(
            f["name"],
            f["png"],
            f["caption"],
            f["provenance"],
            f["name"].removesuffix(".png"),
            f.get("svg"),
            f.get("record"),
        )
        for f in figures
    ]


VARIANTS = (
    "Final values, seed mean ± the half-width of the 95% t-interval over seeds; pass@1 and pass@64 "
    "from the `passk` stage (chapter B's held-out problems, seed mean). `rlvr diff A B` compares two."
)
STARTS_AND_LIFTS = (
    "Each variant beside the SFT start it trains from: the start's sampled (T = 1) and greedy "
    "accuracy, mean over its chains, then GRPO's accuracy, its gain over the start and its k3 KL "
    "to the reference, each ± the half-width of the 95% interval over chains (chain s is SFT seed "
    "s, then GRPO seed s)."
)


AGAINST = (
    "Each variant trained from `grpo`'s start minus `grpo`, paired by chain on the chains both ran "
    "(as `rlvr diff grpo <variant>`), every variant at `grpo`'s recipe and step count: mean and "
    "95% t-interval over chains of the held-out accuracy after GRPO and of pass@1 and pass@{k} from "
    "the `passk` counts (each interval unadjusted). The last two columns decide pass@1 and pass@{k}: "
    "**different** where the paired t-test says so, **equivalent within ±{margin:g}** where the two "
    "one-sided tests put the difference inside that margin, Holm's adjustment taken over every test "
    "of the table at once; **undecided** otherwise, with the chains that would decide it were the "
    "spread and mean what these chains show."
)


def decided_line(against: list[list[str]]) -> str:
    """How much of the matrix is decided: rows with both metrics decided, and which are not."""
    open_rows = [r[0] for r in against if any(d.startswith("undecided") or d == "–" for d in r[5:])]
    text = f"Decided on both metrics: {len(against) - len(open_rows)} of {len(against)} variants."
    return text + (f" Not yet: {', '.join(open_rows)}." if open_rows else "")


def variant_blocks(
    metrics: dict[str, Any], figures: list[dict], configs: dict[str, dict], problems: dict | None = None
) -> list:
    """The variant table, each variant against `grpo` (paired by chain), each beside its start, the
    variants that end alike, the learning curves and the paired view (each variant minus grpo,
    chain by chain)."""
    vheader = ["variant", "task", "seeds", *[label for _, label in VARIANT_KEYS], "pass@1", "pass@64"]
    blocks = [
        Heading("GRPO variants", 2, "variants"),
        Para(VARIANTS),
        Table(
            vheader,
            [
                [v["variant"], v["task"], str(v["seeds"]), *[cell(v[h]) for h in vheader[3:]]]
                for v in variant_rows(metrics)
            ],
            "variants",
        ),
    ]
    against = against_rows(metrics, problems)
    if against:
        k = (problems or {}).get("k_max", 64)
        blocks += [
            Heading("Against grpo, paired by chain", 3, "against-grpo"),
            Para(AGAINST.format(k=k, margin=MARGIN)),
            Table(
                [
                    "variant",
                    "chains",
                    "accuracy − grpo [95%]",
                    "pass@1 − grpo [95%]",
                    f"pass@{k} − grpo [95%]",
                    "pass@1: decided (Holm)",
                    f"pass@{k}: decided (Holm)",
                ],
                against,
                "against",
            ),
            Para(decided_line(against)),
        ]
    blocks += [
        Heading("Starts and lifts", 3, "starts"),
        Para(STARTS_AND_LIFTS),
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
        blocks += [Heading("Learning curves", 3, "learning-curves"), *figure_blocks(curves)]
    paired = [f for f in figures if f["kind"] == "paired"]
    if paired:
        blocks += [Heading("Paired differences, chain by chain", 3, "paired"), *figure_blocks(paired)]
    return blocks


def problem_blocks(problems: dict, passk: dict) -> list:
    """Chapter B's per-problem picture: which held-out problems only SFT, or only a variant, solves."""
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


def starts_blocks(starts: dict, figure: dict | None) -> list:
    """Chapter B's candidate starts (`rlvr starts`): which start the pipeline uses and why (the SFT
    side only), and what GRPO made of each."""
    t = starts["targets"]
    choice, start = starts["sft_side_choice"], starts["pipeline_start"]
    recipe = starts.get("pipeline_recipe")  # the candidate whose recipe the pipeline's start trains
    if choice == start:
        verdict = ", the same."
    elif choice == recipe:
        verdict = f", trained on `{choice}`'s recipe on chains this choice did not use."
    else:
        verdict = (
            ": they differ. The committed results keep the pipeline's start; moving chapter B to the "
            "chosen one reruns every chapter B chain of both plans (docs/calibration.md)."
        )
    blocks = [
        Heading("Chapter B: candidate starts", 2, "starts-b"),
        Para(
            f"Made by {starts.get('made', '`rlvr starts`, run on demand')}: every candidate start "
            f"over its chains, {starts['problems']} validation problems (never the held-out test "
            f"problems), n = {starts['n']}. The start: {starts['rule']} (the "
            f"chapter: never solved {num(t['never_solved'])}, pass@64 {num(t['pass_at_n'])}). Chosen: "
            f"`{starts['sft_side_choice']}`; the pipeline's start "
            f"(`passk.sft`) is `{start}`"
            + verdict
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
        blocks += figure_blocks([figure])
    return blocks


def sample_blocks(samples: dict) -> list:
    """The reward-hacking samples of the first seed: its responses at the start and end of training."""
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
