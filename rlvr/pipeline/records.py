"""What a stage measured apart from what it found: its results in `reports/metrics/<file>`, its
run record (timings, MLflow run ids, and `made`: the commit that ran, whether the code differed from
it, the host, the tracking store and the start) in `reports/runs/<file>`, and its headline in
`reports/headline/<file>`: the few numbers of its results DVC shows as metrics (`dvc metrics show`,
`dvc exp show`). Every stage names its headline numbers from one short vocabulary (`NAMES`), so the
table DVC draws from all of them has a handful of columns and fits a terminal; the results keep the
full names, the intervals and the per-variant tables.

Only the results are what the report reads, so a rerun that trains the same weights leaves the
report cached: wall-clock seconds and run ids change on every run and would make it stale. The run
record is still a DVC output of the stage (not cached in git's sense of "results"), so
`rlvr provenance` follows dvc.lock from a metrics file to its record and on to the MLflow runs.
Curves keep the same split: a step's seconds go to MLflow, not into the TSV the report draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr.io.files import read_json, write_json

RUNS = Path("reports/runs")
HEADLINES = Path("reports/headline")
VOLATILE = (
    "train_seconds",
    "tokens_per_second",
    "step_seconds_median",
    "mlflow_run_id",
    "mlflow_seed_run_ids",
    "made",  # where, when and with which code the stage ran (rlvr.pipeline.tracking.made_here)
)
VOLATILE_COLUMNS = ("step_seconds",)  # per-step timings: in MLflow's step metrics only

# The names a headline may use, shared by the stages: `dvc metrics show` draws one column per name
# used anywhere, so a name is short and means the same in every stage that shows it. "start" is
# the policy GRPO starts from (the SFT start), "end" the policy after GRPO.
NAMES = {
    "loss": "SFT: the start's final training loss (nats / token)",
    "acc_start": "the start's accuracy: held-out (training without held-out problems); passk: pass@1",
    "acc_end": "accuracy after GRPO (the hack: exact answers of its samples); passk: pass@1 of the end",
    "passk_start": "pass@k at the largest k (64) of the start",
    "passk_end": "pass@k at the largest k (64) of chapter B's controlled end",
    "reward_end": "hack: the hackable verifier's mean reward after GRPO",
    "reproduced": "report: claims whose verdict is reproduced",
    "differs": "report: claims whose verdict is differs",
    "inconclusive": "report: claims whose verdict is inconclusive",
}


def _beside(metrics_path: str | Path, folder: str) -> Path:
    """A file of the same name in `folder` next to the metrics folder: reports/metrics/x.json ->
    reports/<folder>/x.json, and reports/report.json -> reports/<folder>/report.json (a metrics
    file written elsewhere, a test's, keeps its companions there too, never in this checkout's
    reports/)."""
    metrics_path = Path(metrics_path)
    parent = metrics_path.parent
    base = parent.parent if parent.name == "metrics" else parent
    return base / folder / metrics_path.name


def record_path(metrics_path: str | Path) -> Path:
    """The run record beside a metrics file: reports/metrics/x.json -> reports/runs/x.json."""
    return _beside(metrics_path, RUNS.name)


def headline_path(metrics_path: str | Path) -> Path:
    """The headline beside a metrics file: reports/metrics/x.json -> reports/headline/x.json."""
    return _beside(metrics_path, HEADLINES.name)


def headline(results: dict[str, Any], names: dict[str, str | tuple[str, ...]]) -> dict[str, Any]:
    """The few numbers of `results` DVC shows, each under its short name (one of `NAMES`). `names`
    maps a name to a dotted path into the results (`sft.pass_at_1`), or to several, the first the
    results have (a task without held-out problems shows its training accuracy). A name whose paths
    the results all lack is left out; a value that is not a number is an error (`dvc metrics diff`
    subtracts every value, and `dvc exp show` drops a list)."""
    unknown = set(names) - set(NAMES)
    if unknown:
        raise KeyError(f"headline names {sorted(unknown)}: not in records.NAMES ({', '.join(NAMES)})")
    out: dict[str, Any] = {}
    for name, paths in names.items():
        for path in (paths,) if isinstance(paths, str) else paths:
            value = _at(results, path)
            if value is not None:
                out[name] = _number(name, value)
                break
    return out


def _at(results: dict[str, Any], path: str) -> Any:
    """The value at a dotted path into nested tables, or None."""
    node: Any = results
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _number(name: str, value: Any) -> int | float:
    """Refuse a headline value that is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"headline {name} = {value!r}: a metric must be a number")
    return value


def split(metrics: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results, run record): the VOLATILE keys moved out, at the top level and in the per-seed,
    per-GRPO-seed and interval tables (`per_seed`, `per_rep`, `ci95`), where each seed's timings sit."""
    stable, volatile = {}, {}
    for key, value in metrics.items():
        if key in VOLATILE:
            volatile[key] = value
        elif key in ("per_seed", "ci95", "per_rep") and isinstance(value, dict):
            stable[key] = {k: v for k, v in value.items() if k not in VOLATILE}
            moved = {k: v for k, v in value.items() if k in VOLATILE}
            if moved:
                volatile[key] = moved
        else:
            stable[key] = value
    return stable, volatile


def write_metrics(
    path: str | Path, metrics: dict[str, Any], headline_names: dict[str, str | tuple[str, ...]] | None = None
) -> tuple[Path, Path]:
    """Write a stage's results and its run record (both atomically), and with `headline_names` its
    headline (`headline`). Returns the results' path and the record's."""
    stable, volatile = split(metrics)
    if headline_names is not None:
        write_json(headline_path(path), headline(stable, headline_names))
    return write_json(path, stable), write_json(record_path(path), volatile)


def read_record(metrics_path: str | Path, root: Path = Path(".")) -> dict[str, Any]:
    """The run record of a metrics file ({} where it has none: a file written before records)."""
    path = root / record_path(metrics_path)
    return read_json(path) if path.is_file() else {}


def stable_row(row: dict[str, Any]) -> dict[str, Any]:
    """A curve row without its per-step timings (the TSV part of `seeds.write_curves`)."""
    return {k: v for k, v in row.items() if k not in VOLATILE_COLUMNS}
