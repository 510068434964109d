"""The report's layout: which sections, in which order, built from judged claims and the results.

`build` turns a `ReportData` (everything the report stage read) into blocks of rlvr.report.document,
section by section: the counts and the header, the summary, the controlled starts and where the
variance lives, the verdicts by chapter, the GRPO variants (and each against `grpo`), the figures,
the per-problem picture, where RL narrows by temperature (rlvr.report.narrowing), the candidate
starts, the reward-hacking samples, the reruns in a fresh clone and the benchmarks.
`render` writes them as Markdown and as one HTML page. The words of a claim come from
rlvr.report.claimtext, the tables from rlvr.report.tables, benchtables and reruns; the sections
past the verdicts are rlvr.report.sections'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rlvr.report.benchtables import bench_blocks
from rlvr.report.chains import chain_rows, controlled_rows, end_chain_rows, end_rows, variance_rows
from rlvr.report.claims import CATEGORIES
from rlvr.report.claimtext import (
    ONE_RUN_HEADER,
    OURS_HEADER,
    book_text,
    consistency_text,
    counts_line,
    one_run_word,
    ours_text,
    per_chain_text,
    precision_text,
    rule_text,
    sensitivity_text,
    verdict_word,
)
from rlvr.report.document import (
    Bullets,
    Contents,
    Details,
    Heading,
    Para,
    Table,
    html_page,
    markdown,
    sections,
)
from rlvr.report.evidence import class_counts, summary_counts, verdict_record
from rlvr.report.narrowing import narrowing_blocks
from rlvr.report.reruns import rerun_blocks
from rlvr.report.sections import figure_blocks, problem_blocks, sample_blocks, starts_blocks, variant_blocks
from rlvr.report.verdict import Judged, num, reason

CHAPTERS = {"A": "Chapter A: reasoning RL, RLVR and GRPO", "B": "Chapter B: RLVR and GRPO"}
VERDICT_ORDER = ("differs", "inconclusive", "not comparable", "missing", "reproduced", "cited")


@dataclass(frozen=True)
class ReportData:
    """Everything the report shows. figures: [{"name", "png": bytes, "caption", "provenance",
    "chapter": "A"/"B", "kind": "curves"/"result"}] in display order; the optional parts are None
    where their file is absent."""

    rows: list[Judged]  # every claim, judged (rlvr.report.evidence.judge_all)
    figures: list[dict]
    metrics: dict[str, Any]  # reports/metrics: {file name: parsed JSON}
    samples: dict | None = None  # the hack stage's sample tables
    bench: dict | None = None  # reports/benchmarks.json
    problems: dict | None = None  # reports/passk-counts.json
    bench_figure: dict | None = None  # the scaling figure drawn from `bench` (a figure dict as above)
    configs: dict[str, dict] = field(default_factory=dict)  # each GRPO variant's settings (`twin_notes`)
    reruns: dict | None = None  # reports/rerun.json: `rlvr verify --rerun [--perturb]`'s records
    starts: dict | None = None  # `rlvr starts`' results
    starts_figure: dict | None = None
    narrowing_figure: dict | None = None  # the narrowing map, drawn from `starts` (None: not measured)
    run: dict | None = None  # where and with what it was made (`header_line`)
    against: dict | None = None  # the comparison with the committed results (rlvr.report.moves)
    beside: dict | None = None  # another plan's verdicts a profile's plan names: {"path", "md5", "claims"}
    targets: dict[str, float | None] = field(default_factory=dict)  # each SFT run's start target


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
    plan = run.get("plan_commit")
    plan_text = (
        ""
        if not plan
        else f"The confirmatory plan these results test is `{run.get('plan') or 'experiments/plan.yaml'}` "
        f"as committed at `{plan}`"
        + (" (the working copy differs from it)" if run.get("plan_changed") else "")
        + ": chain counts, estimands, precision targets and the controlled end, declared before the run. "
    )
    return (
        f"Made by stage `report` on {run['date']} from code at commit `{run['commit']}` ({state}); "
        f"machine: {run['cpu']}, {run['cores']} cores, stages at {run['threads']} threads; "
        f"torch {run['torch']}, DVC {run['dvc']}, MLflow {run['mlflow']}, Python {run['python']}. "
        "Stages DVC found cached ran earlier: `rlvr provenance <file>` names each one's MLflow run. "
        + plan_text
    ).rstrip()


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


def _anchor(claim_id: str) -> str:
    return "claim-" + re.sub(r"[^\w-]", "-", claim_id)


def claim_table(rows: list[Judged], cls: str) -> Table:
    """The claims of one chapter, each row a link target (the summary links to it), its details the
    chapter's words, the rule, why that tolerance and the metric."""
    return Table(
        ["id", "claim", "kind", "book", OURS_HEADER, "verdict", ONE_RUN_HEADER],
        [
            [
                r.claim.id,
                r.claim.text,
                r.claim.category,
                book_text(r.claim),
                ours_text(r),
                verdict_word(r),
                one_run_word(r),
            ]
            for r in rows
        ],
        cls,
        [r.verdict for r in rows],
        [_details(r) for r in rows],
        "rule, source",  # the fold's handle: the chapter's words, the rule, why that tolerance, the metric
        [_anchor(r.claim.id) for r in rows],
    )


def _details(r: Judged) -> str:
    c = r.claim
    return (
        f"the chapter: “{c.quote}” · rule: {rule_text(r)} · why: {c.why} · source: "
        + (f"`{c.metric[0]}` `{c.metric[1]}`" if c.metric is not None else "the chapter")
        + (f" · {consistency_text(r)}" if r.consistency else "")
        + (f" · {sensitivity_text(r)}" if r.sensitivity else "")
        + (f" · note: {c.note}" if c.note else "")
    )


SUMMARY_RULE = (
    "The chapters' headline results. Training and evaluation claims are decided on the 95% "
    "interval over chains (chain s: SFT seed s, stopped at its start's target on validation "
    "problems, then every variant trained from it, then its pass@k counts; on 97.2% where the "
    "claim rests on chains a second look of the plan added, so that two looks keep 5% overall), "
    "by each claim's declared "
    "estimand (the chain mean; the geometric-mean run for a skewed metric, checked by a BCa "
    "bootstrap; the share of runs); a claim against another metric is decided on the interval of "
    "the per-chain differences. **reproduced**: the whole interval lies inside what the claim allows "
    "(the book's value ± its tolerance, its range or its bound); **differs**: the whole interval lies "
    "outside it **and** the book's value lies outside our prediction interval for one run like "
    "the book's (one start, one GRPO seed; at the claim's level), so the book's single run could "
    "not have been a lucky "
    "one of ours; **inconclusive**: otherwise, and always on fewer than two chains or a chain with no "
    "value; **not comparable**: measured at a controlled end our runs did not reach. No chain is left "
    "out: a run that missed its controlled end by the step cap is censored, counted where it stopped, "
    "and the claim judged without such runs is shown beside its verdict (“without censored”), never "
    "deciding it. “Precision” is "
    "the interval's half-width against the target declared with the plan (half the tolerance, or a "
    "directional claim's smallest effect of interest): **powered** where it is met; where it is "
    "not, the chains that would meet it at this spread. Beside the verdict and never counted, “book "
    "as one run” says whether the book's number lies in that prediction interval: **consistent** or "
    "**not consistent**."
)


def summary_blocks(rows: list[Judged]) -> list:
    """The headline claims, then one line per claim that differs or is undecided, with its reason."""
    headline = sorted(
        (r for r in rows if r.claim.headline), key=lambda r: list(CATEGORIES).index(r.claim.category)
    )
    blocks: list = [
        Heading("Summary", 2, "summary"),
        Para(SUMMARY_RULE),
        Table(
            ["claim", "kind", "book", OURS_HEADER, "verdict", "precision", ONE_RUN_HEADER],
            [
                [
                    f"**{r.claim.id}** {r.claim.text}",
                    r.claim.category,
                    book_text(r.claim),
                    ours_text(r),
                    verdict_word(r),
                    precision_text(r),
                    one_run_word(r),
                ]
                for r in headline
            ],
            "headline",
            [r.verdict for r in headline],
        ),
    ]
    off = sorted(
        (r for r in rows if r.verdict in ("differs", "inconclusive", "not comparable", "missing")),
        key=lambda r: (VERDICT_ORDER.index(r.verdict), r.claim.id),
    )
    if off:
        blocks += [
            Para("**Where we differ, or cannot tell:**"),
            Bullets(
                [
                    f"[{r.claim.id}](#{_anchor(r.claim.id)}) ({r.claim.category}, {verdict_word(r)}): "
                    f"{r.claim.text} {reason(r)}.{per_chain_text(r)}"
                    + (f" **Why:** {r.claim.note}" if r.claim.note else "")
                    for r in off
                ]
            ),
        ]
    return blocks


CONTROLLED_STARTS = (
    "Each chain's SFT keeps its run's recipe (under-training on true answers, or fitting noisy "
    "labels) and stops where its validation value reaches the run's target: the expected "
    "sampled accuracy at T = 1, computed exactly from the model's answer probabilities "
    "(no sampling noise), on validation problems disjoint from training and from the 300 "
    "test problems (chapter A: on its 55 prompts, the chapter's own measure). Of the check "
    "that reaches the target and the one before it, the nearer is the start. The test-side "
    "value beside it is measured afterwards (chapter B: held-out pass@1; chapter A, which has "
    "no split: its 55 prompts again, exactly). A chain whose step cap comes first (stuck on a "
    "plateau) is drawn again, from a fresh initialisation and data order, up to the run's "
    "`redraws` times, declared in params.yaml before any run; one whose last draw misses too is "
    "listed as missed: censored, it counts where it stopped in every claim about that start and "
    "GRPO from it, each such claim's line names it, and the claim without it is shown beside."
)
CONTROLLED_ENDS = (
    "Chapter B's claims after GRPO are about a model whose pass@1 GRPO had lifted from 0.53 to 0.83. "
    "So its headline runs end the way starts do: each stops at the first check where its validation "
    "pass@1 (exact, from the answer probabilities) reaches the target, the nearer of that check and "
    "the one before being its end, within a step cap declared with its recipe (docs/calibration.md). "
    "The cap is set from calibration so that one more run misses it with probability 0.05 "
    "(experiments/calibration.yaml `end_cap_miss`). A run the cap stops first is censored and never "
    "drawn again: that is a result. Claims measured at the end count it where it stopped and name "
    "it, with the claim judged without such runs shown beside (a sensitivity analysis); with fewer "
    "than two runs at the end, they are not comparable. Steps to the end are a Kaplan-Meier estimate "
    "over every run, censored ones included (`end-survival.png`): its median and 95% interval, "
    "never a mean over the runs that got there. The held-out pass@1 beside it is measured afterwards."
)
VARIANCE = (
    "For each measured claim, the SD that one chain's value owes to each source: the spread "
    "of the SFT starts (what is left between chains after the rest), the GRPO seeds of one "
    "start (from the headline variants' two seeds per chain) and the evaluation (the model's "
    "own samples redrawn). The last column is the half-width of the 95% interval the claim "
    "was decided on: more chains shrink it by the square root of their number, more samples "
    "only its evaluation share."
)


START_COLUMNS = ["run", "target", "reached", "validation at the stop", "SFT steps", "test side"]
START_CHAIN_COLUMNS = ["run", "chain", "steps", "validation", "stop", "test side"]
END_COLUMNS = [
    "variant",
    "target (validation pass@1)",
    "reached",
    "steps to it (Kaplan-Meier median, 95%)",
    "validation at the stop",
    "held-out pass@1 at the stop",
]
END_CHAIN_COLUMNS = ["variant", "chain", "end", "steps", "validation", "held-out pass@1"]


def _table_and_chains(section: tuple[str, str, str], table: Table, chains: Table) -> list:
    """A section (its heading, anchor and words), its table, and every chain's rows folded below."""
    heading, anchor, text = section
    return [Heading(heading, 2, anchor), Para(text), table, Details("every chain", [chains])]


def chain_blocks(rows: list[Judged], metrics: dict[str, Any], targets: dict[str, float | None]) -> list:
    """The controlled starts (every chain's stop, its validation and test-side values) and where the
    variance of each claim's metric lives."""
    blocks: list = []
    starts = controlled_rows(metrics, targets)
    if starts:
        blocks += _table_and_chains(
            ("Controlled starts", "controlled-starts", CONTROLLED_STARTS),
            Table(START_COLUMNS, starts, "starts"),
            Table(START_CHAIN_COLUMNS, chain_rows(metrics, targets), "chains"),
        )
    ends = end_rows(metrics)
    if ends:
        blocks += _table_and_chains(
            ("Controlled ends", "controlled-ends", CONTROLLED_ENDS),
            Table(END_COLUMNS, ends, "ends"),
            Table(END_CHAIN_COLUMNS, end_chain_rows(metrics), "end-chains"),
        )
    spread = variance_rows(rows)
    if spread:
        blocks += [
            Heading("Where the variance lives", 2, "variance"),
            Para(VARIANCE),
            Table(
                ["claim", "metric", "starts", "GRPO", "evaluation", "largest", "interval ±", "verdict"],
                spread,
                "variance",
            ),
        ]
    return blocks


def verdict_blocks(rows: list[Judged]) -> list:
    """Every claim, by chapter, the claims that differ first; a chapter's closed-form claims in a
    fold of their own (exact values: their tally says all there is unless one differs)."""
    blocks: list = [
        Heading("Verdicts", 2, "verdicts"),
        Para(
            "Grouped by chapter, the claims that differ first. Open a row's details for the rule it was "
            "decided by, why that tolerance, and the metrics file and key (`rlvr provenance <file>` says "
            "which stage, params and MLflow runs produced it)."
        ),
    ]
    for chapter, title in CHAPTERS.items():
        mine = sorted(
            (r for r in rows if r.claim.chapter == chapter), key=lambda r: VERDICT_ORDER.index(r.verdict)
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
        ]
        worked = [r for r in mine if r.claim.category == "closed-form"]
        rest = [r for r in mine if r.claim.category != "closed-form"]
        blocks += [claim_table(rest, f"verdicts {chapter.lower()}")] if rest else []
        if worked:  # exact numbers of the worked examples: one fold, its handle their tally
            tally = ", ".join(f"{n} {v}" for v, n in class_counts(worked)["closed-form"].items() if n)
            blocks.append(
                Details(
                    f"{len(worked)} closed-form claims (the worked examples, exact): {tally}",
                    [claim_table(worked, f"verdicts {chapter.lower()} closed-form")],
                )
            )
    return blocks


OPENED = ("summary", "verdicts")  # the sections the page opens on; every other one starts folded


BESIDE = (
    "This plan's verdicts beside those of the plan at `{path}`, claim by claim, for every claim a "
    "run measures (the closed-form and simulated numbers are the same code at the same settings in "
    "both). This plan decides each of them: it was declared before its run, on chains neither plan "
    "had run, with the chain counts its precision targets need; the other plan's verdict is shown, "
    "never counted."
)


def beside_blocks(rows: list[Judged], beside: dict) -> list:
    """Each measured or calibrated claim: this plan's value and verdict, the other plan's, and which
    decides it (this plan, as its plan.yaml `decides` declares)."""
    other = beside["claims"]

    def cell(record: dict | None) -> str:
        """The interval the verdict was decided on (a paired claim's: the difference's)."""
        if not record:
            return "–"
        tested = record.get("tested_interval") or record.get("interval")
        value = "–" if not tested else f"[{num(tested[0])}, {num(tested[1])}]"
        chains = (record.get("source") or "–").split(";")[0]
        return f"{value} ({chains}): {record.get('verdict')}"

    measured = [r for r in rows if r.claim.category in ("measured", "calibrated")]
    return [
        Heading("Beside the other plan", 2, "beside"),
        Para(BESIDE.format(path=beside["path"])),
        Table(
            ["claim", "this plan: interval decided on", "the other plan: interval decided on", "decided by"],
            [
                [f"**{r.claim.id}**", cell(verdict_record(r)), cell(other.get(r.claim.id)), "this plan"]
                for r in measured
            ],
            "beside",
        ),
    ]


def build(data: ReportData) -> list:
    """The report as blocks (rlvr.report.document), section by section: the summary and the verdicts
    first and open, then each section of detail behind its heading (`OPENED`)."""
    rows = data.rows
    blocks: list = [
        Heading("rlvr-repro report", 1),
        Para(counts_line(class_counts(rows)), "counts"),
        Para(
            f"Every number of the two chapters that a program can compute or measure ({len(rows)} "
            "claims), beside our value and a verdict. " + (header_line(data.run) if data.run else "")
        ),
        *(moved_blocks(data.against) if data.against is not None else []),
        Contents(3),  # a compact, three-column list
        *summary_blocks(rows),
        *(beside_blocks(rows, data.beside) if data.beside else []),
        *verdict_blocks(rows),
        *chain_blocks(rows, data.metrics, data.targets),
        *variant_blocks(data.metrics, data.figures, data.configs, data.problems),
    ]
    for chapter, title in CHAPTERS.items():
        result = [f for f in data.figures if f["chapter"] == chapter and f["kind"] == "result"]
        if result:
            blocks += [Heading(f"Figures: {title}", 2, f"figures-{chapter.lower()}"), *figure_blocks(result)]
    if data.problems:
        blocks += problem_blocks(data.problems, data.metrics.get("passk.json", {}))
    passk = data.metrics.get("passk.json", {})
    if passk.get("temperatures") or data.starts:
        maps = figure_blocks([data.narrowing_figure]) if data.narrowing_figure else []
        blocks += narrowing_blocks(passk, data.problems, data.starts, maps)
    if data.starts:
        blocks += starts_blocks(data.starts, data.starts_figure)
    if data.samples:
        blocks += sample_blocks(data.samples)
    if data.reruns:
        blocks += rerun_blocks(data.reruns)
    if data.bench:
        blocks += bench_blocks(data.bench, figure_blocks([data.bench_figure]) if data.bench_figure else [])
    return sections(blocks, OPENED)


def render(data: ReportData) -> tuple[str, str, dict]:
    """(Markdown, self-contained HTML, verdict counts) of the report: `build`'s blocks written out."""
    blocks = build(data)
    return (
        markdown(blocks, "report-figures"),
        html_page(blocks, "rlvr-repro report", "report-figures"),
        summary_counts(data.rows),
    )
