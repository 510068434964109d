"""Every file a stage reads or writes, in one place.

Each function takes the names that pick a stage instance (an SFT run, a variant) and returns that
instance's paths, relative to the repository root. The same functions, given DVC's template
variables (`"${key}"`, `"${item.sft}"`), write dvc.yaml (`rlvr.pipeline.specs`), so the paths a stage
writes and the paths DVC tracks cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DATA = Path("data")
REPORTS = Path("reports")
METRICS = REPORTS / "metrics"
CURVES = REPORTS / "curves"
FIGURES = REPORTS / "figures"
CLAIMS = Path("experiments/claims.yaml")
PLAN = Path("experiments/plan.yaml")  # the confirmatory plan: chain counts, estimands, the controlled end
BENCHMARKS = REPORTS / "benchmarks.json"
RERUNS = REPORTS / "rerun.json"  # `rlvr verify --rerun [--perturb]`'s records (committed, as benchmarks are)
STARTS = REPORTS / "starts" / "starts.json"
PARAMS = Path("params.yaml")


@dataclass(frozen=True)
class CheckPaths:
    """`check`: params.yaml in, a marker out that every other stage depends on. The marker's bytes
    never change, so a valid edit reruns only the stages whose own params changed; an invalid one
    stops `dvc repro` here, before DVC removes any other stage's outputs."""

    params: Path
    marker: Path


CHECKED = DATA / "params.checked"


def check() -> CheckPaths:
    return CheckPaths(PARAMS, CHECKED)


@dataclass(frozen=True)
class DataPaths:
    """`data@{run}`: the noisy SFT rows and the held-out problems of the run's task, and the sha256
    of each (`rlvr.pipeline.rundata`)."""

    rows: Path  # JSONL, one labelled SFT row per line
    heldout: Path  # JSON {"task", "problems": [...], "validation": [...]}: test and validation problems
    digests: Path  # JSON {file name: sha256} of the two above, checked before a stage reads them


ROWS, HELDOUT, DIGESTS = "sft.jsonl", "heldout.json", "digests.json"


def data(run: str) -> DataPaths:
    return DataPaths(DATA / run / ROWS, DATA / run / HELDOUT, DATA / run / DIGESTS)


def data_role(path: Path) -> str | None:
    """What a stage uses a data file for, as MLflow's dataset context: an SFT run's rows "training",
    its task's held-out (and validation) problems "evaluation"; None for any other file."""
    if Path(path).parts[:1] != DATA.parts:
        return None
    return {ROWS: "training", HELDOUT: "evaluation"}.get(Path(path).name)


@dataclass(frozen=True)
class AllDataPaths:
    """`data`: every SFT run's rows and held-out problems, written by one stage (a second's work
    each: one process for all, and a run whose rows come out byte-identical reruns nothing)."""

    runs: dict[str, DataPaths]


def data_all(runs: list[str]) -> AllDataPaths:
    return AllDataPaths({run: data(run) for run in runs})


def seed_file(folder: Path, seed: int, suffix: str = ".pt") -> Path:
    """A chain's file in a per-seed folder: `folder/seed{n}.pt` (every per-seed output is named so)."""
    return folder / f"seed{seed}{suffix}"


def model_artifact(stage: str) -> str | None:
    """The DVC artifact (dvc.yaml's `artifacts:`) holding the policies a stage trains: `sft@two_digit`
    -> `sft-two_digit`, `grpo@dapo` -> `grpo-dapo`; None for a stage whose policies are not one."""
    family, _, key = stage.partition("@")
    return f"{family}-{key}" if family in ("sft", "grpo") and key else None


def unit_name(seed: int, rep: int = 0) -> str:
    """A GRPO run's name within its variant: chain `seed`'s GRPO seed `rep`, `seed3` for the first
    (every variant has one), `seed3-g1` for the next (the headline variants' second GRPO seed)."""
    return f"seed{seed}" if rep == 0 else f"seed{seed}-g{rep}"


def unit_file(folder: Path, seed: int, rep: int = 0, suffix: str = ".pt") -> Path:
    return folder / f"{unit_name(seed, rep)}{suffix}"


class ChainFiles:
    """What a stage that trains once per chain leaves for chain n: `checkpoints/seed{n}.pt` and its
    curve `curves/seed{n}.tsv` (a base of the paths dataclasses that declare those two folders)."""

    checkpoints: Path
    curves: Path

    def checkpoint(self, seed: int) -> Path:
        return seed_file(self.checkpoints, seed)

    def curve(self, seed: int) -> Path:
        return seed_file(self.curves, seed, ".tsv")


@dataclass(frozen=True)
class WarmupPaths:
    """`warmup@{name}`: its run's rows in; out, one state per chain after the clean epochs (model,
    optimiser, data order, curve so far) that every SFT run naming the warm-up continues from, and
    its metrics."""

    data: DataPaths
    states: Path  # folder: seed{n}.pt
    metrics: Path

    def state(self, seed: int) -> Path:
        return seed_file(self.states, seed)


WARMUPS = DATA / "warmup"


def warmup_states(name: str) -> Path:
    """The folder of warm-up `name`'s saved states (one per chain): written by `warmup@{name}`, read
    by every SFT run naming it."""
    return WARMUPS / name


def warmup(name: str, run: str) -> WarmupPaths:
    return WarmupPaths(data(run), warmup_states(name), METRICS / f"warmup-{name}.json")


@dataclass(frozen=True)
class SFTPaths(ChainFiles):
    """`sft@{run}`: its inputs (`data`, the warm-up states) and, per chain, the checkpoint and loss
    curve it writes; one metrics file over the chains."""

    data: DataPaths
    warmup: Path | None  # folder of the warm-up states it starts from (None where only the outputs matter)
    checkpoints: Path  # folder: seed{n}.pt
    metrics: Path
    curves: Path  # folder: seed{n}.tsv

    def checks(self, seed: int) -> Path:
        """The validation checks of a controlled start: one row per check (steps done, value)."""
        return seed_file(self.curves, seed, "-val.tsv")

    def warmup_state(self, seed: int) -> Path:
        if self.warmup is None:
            raise ValueError("these SFT paths were built without their warm-up")
        return seed_file(self.warmup, seed)


SFT_CURVES = CURVES / "sft"


def sft(run: str, warmup_name: str | None = None) -> SFTPaths:
    state = None if warmup_name is None else warmup_states(warmup_name)
    return SFTPaths(data(run), state, DATA / run / "sft", METRICS / f"sft-{run}.json", SFT_CURVES / run)


@dataclass(frozen=True)
class GRPOPaths:
    """`grpo@{variant}`: the start checkpoints and problems (`start`: seed n starts from SFT seed n),
    one checkpoint and curve per seed."""

    start: SFTPaths
    checkpoints: Path  # folder: seed{n}.pt
    metrics: Path
    curves: Path  # folder: seed{n}.tsv (every training step), seed{n}-eval.tsv (every evaluation)
    eval_mean: Path  # the held-out accuracy curve, seed mean with its 95% band (DVC's overlay plots)

    def checkpoint(self, seed: int, rep: int = 0) -> Path:
        return unit_file(self.checkpoints, seed, rep)

    def curve(self, seed: int, rep: int = 0) -> Path:
        return unit_file(self.curves, seed, rep, ".tsv")

    def eval_curve(self, seed: int, rep: int = 0) -> Path:
        return unit_file(self.curves, seed, rep, "-eval.tsv")

    def path_curve(self, seed: int, rep: int = 0) -> Path:
        """A controlled end's checks: validation pass@1 (the rule's), and the path drawn beside it."""
        return unit_file(self.curves, seed, rep, "-path.tsv")


GRPO_CHECKPOINTS = DATA / "grpo"
GRPO_CURVES = CURVES / "grpo"
GRPO_EVAL = CURVES / "grpo-eval"


def grpo(variant: str, sft_run: str) -> GRPOPaths:
    return GRPOPaths(
        sft(sft_run),
        GRPO_CHECKPOINTS / variant,
        METRICS / f"grpo-{variant}.json",
        GRPO_CURVES / variant,
        GRPO_EVAL / f"{variant}.tsv",
    )


@dataclass(frozen=True)
class PassKPaths:
    """`passk`: the SFT run's checkpoints (one per chain) and held-out problems, the contrast run's
    (if it has one), every variant's checkpoints."""

    start: SFTPaths
    contrast: SFTPaths | None
    variants: Path  # the folder of the variants' checkpoint folders (GRPOPaths.checkpoints)
    counts: Path  # per-problem correct counts c_i, committed
    metrics: Path
    curves: Path  # folder: {model}.tsv, pass@k at every k with its bootstrap band
    figure_curves: Path
    figure_scatter: Path
    figure_solve_rates: Path
    figure_temperatures: Path  # pass@k minus SFT's, one panel per sampling temperature

    scored: tuple[str, ...] = ()  # the variants it scores (those trained from `start`)

    def variant_checkpoint(self, variant: str, seed: int, rep: int = 0) -> Path:
        return unit_file(self.variants / variant, seed, rep)

    def variant_folders(self) -> list[Path]:
        """The checkpoint folders of the variants it scores: its inputs (no other variant's)."""
        return [self.variants / v for v in self.scored]


PASSK_COUNTS = REPORTS / "passk-counts.json"


def passk(sft_run: str, contrast: str | None, variants: tuple[str, ...] = ()) -> PassKPaths:
    return PassKPaths(
        sft(sft_run),
        None if contrast is None else sft(contrast),
        GRPO_CHECKPOINTS,
        PASSK_COUNTS,
        METRICS / "passk.json",
        CURVES / "passk",
        FIGURES / "passk-curves.png",
        FIGURES / "passk-scatter.png",
        FIGURES / "passk-solve-rates.png",
        FIGURES / "passk-temperatures.png",
        tuple(variants),
    )


@dataclass(frozen=True)
class HackPaths(ChainFiles):
    """`hack`: the start checkpoint and problems, and what the substring-reward runs leave."""

    start: SFTPaths
    checkpoints: Path  # folder: seed{n}.pt
    metrics: Path
    samples: Path
    curves: Path  # folder: seed{n}.tsv (every step), seed{n}-eval.tsv (every evaluation)
    figure: Path

    def eval_curve(self, seed: int) -> Path:
        return seed_file(self.curves, seed, "-eval.tsv")


HACK_SAMPLES = REPORTS / "hack-samples.json"


def hack(sft_run: str) -> HackPaths:
    return HackPaths(
        sft(sft_run),
        DATA / "hack",
        METRICS / "hack.json",
        HACK_SAMPLES,
        CURVES / "hack",
        FIGURES / "hack-reward-vs-accuracy.png",
    )


@dataclass(frozen=True)
class WorkedPaths:
    """`worked`: one JSON keyed by example id, and its figures."""

    metrics: Path
    figures: tuple[Path, ...]


WORKED_FIGURES = (
    "worked-a2-group-advantages.png",
    "worked-a7-kl-estimators.png",
    "worked-a8-memory.png",
    "worked-b5-signal-probability.png",
    "worked-b10-passk-toy.png",
    "worked-b14-demo.png",
)


def worked() -> WorkedPaths:
    return WorkedPaths(METRICS / "worked.json", tuple(FIGURES / name for name in WORKED_FIGURES))


@dataclass(frozen=True)
class ReportPaths:
    """`report`: reads every metrics file, figure and the claims; writes the report."""

    claims: Path
    plan: Path  # the confirmatory plan, whose commit the report names
    metrics: Path  # folder
    figures: Path  # folder
    samples: Path
    counts: Path  # passk's per-problem counts (the per-problem picture)
    curves: Path  # folder: every stage's curves (the learning-curve figures are drawn from them)
    benchmarks: Path
    starts: Path  # `rlvr starts`' results (committed, like the benchmarks; its figure lies beside it)
    reruns: Path  # `rlvr verify --rerun [--perturb]`'s records
    markdown: Path
    html: Path
    figure_copies: Path  # folder: the figures with provenance in their PNG metadata
    verdicts: Path
    # every other stage's run record, whose commit and MLflow runs the figures' provenance names: a
    # stage rerun with outputs unchanged byte for byte still changes what the report must say
    records: tuple[Path, ...] = ()


def report(records: tuple[Path, ...] = ()) -> ReportPaths:
    return ReportPaths(
        CLAIMS,
        PLAN,
        METRICS,
        FIGURES,
        HACK_SAMPLES,
        PASSK_COUNTS,
        CURVES,
        BENCHMARKS,
        STARTS,
        RERUNS,
        REPORTS / "report.md",
        REPORTS / "report.html",
        REPORTS / "report-figures",
        REPORTS / "report.json",
        records,
    )
