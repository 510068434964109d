"""MLflow tracking: one run per stage execution, nested runs per seed, batched metric logging.

A run's params are the settings it ran with, resolved and flat (`rlvr.pipeline.settings`); the raw
params.yaml keys behind them are its artifact `params.json`, and their hash its tag `params.raw_hash`.
A seed's run spans its training: the worker that trained it measured its start and end.

The store defaults to an embedded SQLite file at the repo root (`sqlite:///<root>/mlflow.db`), the
root taken from `$DVC_ROOT` when DVC runs the stage (so queued `dvc exp` runs share one store);
`MLFLOW_TRACKING_URI` overrides it. We use `MlflowClient` rather than the fluent API: no global
"active run" state, and runs end FINISHED / FAILED / KILLED exactly as the `with` block does.
A single logging call costs ~10 ms on SQLite, so per-step metrics are buffered and sent in batches.

Every run names the code that ran (`made_here`: HEAD's commit and whether the code differs from it)
in MLflow's own source tags, so the runs table's Source and Version columns show it, and in the
project's `git.commit` / `git.dirty`; the stage writes the same record into its run record
(reports/runs/), which is how a clone without this store still says where and when a result was made.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rlvr.fields import flatten
from rlvr.io.files import md5
from rlvr.io.gitinfo import code_version
from rlvr.io.system import cpu_model, pid_running
from rlvr.pipeline.store import (
    TrackingError,
    check_reachable,
    client_uri,
    default_tracking_uri,
    recorded_uri,
    repo_root,
    tracking_uri,
)

EXPERIMENT = "rlvr-repro"
_BATCH = 900  # MLflow accepts at most 1000 metrics per log_batch call

# Our per-step metric -> the name TRL's trainers log the same quantity under (docs/tracking.md holds
# the table with each one's meaning and unit). MLflow gets each quantity once, under TRL's name where
# TRL has one; the TSV curves keep ours.
TRL_NAMES = {
    "reward_mean": "reward",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "kl_k3_token_nats": "kl",
    "entropy_nats": "entropy",
    "clip_frac_low": "clip_ratio/low_mean",
    "clip_frac_high": "clip_ratio/high_mean",
    "clip_frac_region": "clip_ratio/region_mean",
    "response_len_mean": "completions/mean_length",
    "response_len_min": "completions/min_length",
    "response_len_max": "completions/max_length",
    "truncated_frac": "completions/clipped_ratio",
    "grad_norm": "grad_norm",
    "lr": "learning_rate",
    "num_tokens": "num_tokens",
    "loss": "loss",
    "step_seconds": "step_time",
}


def trl_named(metrics: dict[str, float]) -> dict[str, float]:
    """A step's metrics as MLflow logs them: each once, under TRL's name where TRL has one."""
    return {TRL_NAMES.get(k, k): v for k, v in metrics.items()}


def made_here(start: float | None = None) -> dict[str, Any]:
    """Where and when a stage ran, and with which code: the commit (HEAD) and whether the code and
    settings differed from it, the host and its CPU (which decides the floats, so a diff of two runs
    can say whether they are comparable), the tracking store (no credentials) and the start (UTC).
    Its MLflow run's tags say the same; the stage keeps it in its run record (`made`)."""
    from datetime import UTC, datetime

    code = code_version(repo_root())
    return {
        "git_commit": code["commit"],
        "git_dirty": code["dirty"],
        "git_changed": code["changed"],  # the files that differed from the commit (none when clean)
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "tracking_uri": recorded_uri(tracking_uri()),
        "started_utc": datetime.fromtimestamp(time.time() if start is None else start, UTC).isoformat(
            timespec="seconds"
        ),
    }


def source_tags(stage: str, made: dict[str, Any]) -> dict[str, str]:
    """The run's code, as MLflow's UI reads it (Source: the command DVC runs; Version: the commit) and
    as the project tags it (`git.commit`, `git.dirty`: true, false or unknown outside git)."""
    dirty = made["git_dirty"]
    return {
        "mlflow.source.type": "LOCAL",
        "mlflow.source.name": "python -m rlvr.pipeline " + stage.replace("@", " "),
        "mlflow.source.git.commit": made["git_commit"],
        "git.commit": made["git_commit"],
        "git.dirty": "unknown" if dirty is None else str(dirty).lower(),
    }


def param_value(v: Any) -> str:
    """A param as MLflow shows it: a list as `0,1,2,3`, anything else as str() does."""
    text = ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
    return text[:6000]


def to_ms(seconds: float | None) -> int | None:
    """A time.time() reading as MLflow's epoch milliseconds."""
    return None if seconds is None else int(seconds * 1000)


class StoreClient:
    """An MlflowClient whose failed calls are one TrackingError naming the store and the cause (a
    full disk, a file-size limit: MLflow says "disk I/O error" and logs a traceback), after which a
    local SQLite store is rolled back to its last good state (a failed write leaves a hot journal,
    which read-only readers such as `mlflow ui` then fail on)."""

    def __init__(self, client, uri: str) -> None:
        self._client, self.uri = client, uri

    def __getattr__(self, name: str):
        call = getattr(self._client, name)
        if not callable(call):
            return call

        def guarded(*args, **kwargs):
            try:
                return call(*args, **kwargs)
            except Exception as exc:  # MlflowException, SQLAlchemy's errors, OSError: all one story
                raise TrackingError(
                    f"MLflow tracking store {self.uri}: {name} failed ({_cause(exc)})"
                ) from None

        return guarded


def _cause(exc: BaseException) -> str:
    """Why a store call failed, in words: the limit or full disk behind a "disk I/O error"."""
    import resource

    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    first = first[:120]
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if "disk I/O error" in first or "database or disk is full" in first:
        if soft != resource.RLIM_INFINITY:
            return f"{first}: the file-size limit (ulimit -f) is {soft} bytes"
        return f"{first}: is the disk full?"
    return first


def recover_store(uri: str) -> None:
    """Roll a local SQLite store's hot journal back (opening it read-write does), so that readers
    find the database as it was before the failed write. Best effort: a full disk may forbid it."""
    if not uri.startswith("sqlite:///"):
        return
    import sqlite3

    db = Path(uri.removeprefix("sqlite:///"))
    if not Path(f"{db}-journal").exists():
        return
    try:
        with sqlite3.connect(db, timeout=30) as con:
            con.execute("PRAGMA schema_version").fetchone()  # reading takes the rollback
    except sqlite3.Error:
        pass


class Run:
    """One MLflow run: buffered per-step metrics, params, final metrics, artifacts."""

    def __init__(self, client, run_id: str) -> None:
        self.client, self.run_id = client, run_id
        self._pending: list = []
        self.tags: dict[str, str] = {}
        self.params: dict[str, Any] = {}  # what log_params logged, flat (seed runs start from them)
        self.artifact_uri: str | None = None
        self.end_time: int | None = None  # epoch ms the run ends at when it finishes; None: when it closes
        self.made: dict[str, Any] = {}  # a stage's run: where, when and with which code (`made_here`)
        self._experiment_id: str | None = None  # set by whoever opens it (`stage_run`, `child`)
        self.final: dict[str, float] = {}  # what log_metrics logged (a logged model shows them too)

    def log_params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        flat = flatten(params)
        self.params.update(flat)
        items = [Param(k, param_value(v)) for k, v in flat.items()]
        for i in range(0, len(items), 100):  # MLflow: at most 100 params per call
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def log_text(self, text: str, artifact_file: str) -> None:
        self.client.log_text(self.run_id, text, artifact_file)

    def log_inputs(self, files: list[tuple[Path, str]]) -> None:
        """Log data files the run read as MLflow dataset inputs (its *Datasets* column): each named by
        its path, with its md5 as digest (the hash dvc.lock records), its rows counted, and tagged
        with its context ("training", "evaluation")."""
        from mlflow.entities import Dataset, DatasetInput, InputTag
        from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

        inputs = [
            DatasetInput(
                Dataset(
                    name=path.as_posix(),
                    digest=md5(path),
                    source_type="local",
                    source=json.dumps({"uri": path.as_posix()}),
                    profile=json.dumps({"rows": _rows(path)}),
                ),
                [InputTag(MLFLOW_DATASET_CONTEXT, context)],
            )
            for path, context in files
        ]
        if inputs:
            self.client.log_inputs(self.run_id, datasets=inputs)

    def log_step(self, step: int, metrics: dict[str, float]) -> None:
        """Queue one step's metrics; they are sent in batches (see `flush`)."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._pending += [Metric(k, float(v), now, step) for k, v in metrics.items()]
        if len(self._pending) >= _BATCH:
            self.flush()

    def log_steps(self, series: dict[str, list[tuple[int, float]]]) -> None:
        """Whole series at once: {metric: [(step, value), ...]} (e.g. pass@k with step = k)."""
        for name, points in series.items():
            for step, value in points:
                self.log_step(step, {name: value})
        self.flush()

    def log_metrics(self, metrics: dict[str, float]) -> None:
        """Final (step-less) metrics; non-numbers are skipped."""
        nums = {
            k: v
            for k, v in flatten(metrics).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        self.final.update(nums)
        self.log_step(0, nums)
        self.flush()

    def flush(self) -> None:
        while self._pending:
            chunk, self._pending = self._pending[:_BATCH], self._pending[_BATCH:]
            self.client.log_batch(self.run_id, metrics=chunk)

    def log_artifact(self, path: str | Path, subdir: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), subdir)

    def log_model(self, model, name: str, tags: dict[str, str]) -> str:
        """Log a trained TinyLM as an MLflow logged model of this run (the run's *Logged models*;
        its page lists the run), tagged with `tags` (where DVC keeps the same weights), with the
        run's params and its final metrics (`log_metrics`, logged first) as its own, so its page
        says what trained it and how it scored. PyTorch flavour, pickled, so that
        `mlflow.pytorch.load_model("models:/<id>")` gives back a TinyLM wherever `rlvr` is
        installed; MLflow's "pickle is unsafe" warning is silenced, since a model of this store is
        one a stage of this project wrote. Returns the model's id."""
        import tempfile

        import mlflow.pytorch
        import torch
        from mlflow.entities import LoggedModelOutput, LoggedModelStatus, Metric

        logged = self.client.create_logged_model(
            self._experiment_id,
            name=name,
            source_run_id=self.run_id,
            tags=tags,
            params={k: param_value(v) for k, v in self.params.items()},
            model_type="policy",
        )
        pytorch_log = logging.getLogger("mlflow.pytorch")
        level = pytorch_log.level
        pytorch_log.setLevel(logging.ERROR)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                mlflow.pytorch.save_model(
                    model,
                    f"{tmp}/model",
                    serialization_format="pickle",
                    pip_requirements=[f"torch=={torch.__version__.split('+')[0]}"],
                )
                self.client.log_model_artifacts(logged.model_id, f"{tmp}/model")
        finally:
            pytorch_log.setLevel(level)
        self.client.finalize_logged_model(logged.model_id, LoggedModelStatus.READY)
        self.client.log_outputs(self.run_id, [LoggedModelOutput(logged.model_id, step=0)])
        now = int(time.time() * 1000)
        scored = [Metric(k, v, now, 0, model_id=logged.model_id) for k, v in self.final.items()]
        for i in range(0, len(scored), _BATCH):
            self.client.log_batch(self.run_id, metrics=scored[i : i + _BATCH])
        return logged.model_id

    @contextmanager
    def child(
        self,
        name: str,
        tags: dict[str, Any],
        params: dict[str, Any] | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> Iterator[Run]:
        """A nested run (e.g. one seed inside a variant's stage): the parent's tags (dvc.stage,
        git.commit, the source tags, params.raw_hash...) with the caller's on top, and its own
        params. `start` and `end` (time.time() readings) date the work it records when that ran
        before the run was made (a seed trained in a worker): it then starts at `start` and,
        finished, ends at `end`."""
        inherited = {
            k: v
            for k, v in self.tags.items()
            if not k.startswith("mlflow.") or k.startswith("mlflow.source.")  # not its parent's id
        }
        with _run(
            self.client,
            self._experiment_id,
            name,
            {**inherited, **tags, "mlflow.parentRunId": self.run_id},
            start_time=to_ms(start),
        ) as run:
            run._experiment_id = self._experiment_id
            run.end_time = to_ms(end)
            if params:
                run.log_params(params)
            yield run


def _rows(path: Path) -> int:
    """Rows of a data file: lines of JSON lines, problems of a held-out file (test and validation)."""
    if path.suffix == ".jsonl":
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    data = json.loads(path.read_text())
    return sum(len(v) for v in data.values() if isinstance(v, list)) if isinstance(data, dict) else len(data)


_STOPPED_BY: list[int] = []  # the signals that stopped this stage (Ctrl-C, SIGTERM, SIGHUP), while it runs


def _raise_keyboard_interrupt(signum, frame):  # noqa: ARG001
    _STOPPED_BY.append(signum)
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def _run(
    client, experiment_id: str, name: str, tags: dict[str, Any], start_time: int | None = None
) -> Iterator[Run]:
    """An MLflow run open for the block: FINISHED (at `run.end_time` if set), FAILED or KILLED.
    KILLED too when the block ends otherwise once a signal has stopped the stage: a seed's run held
    open by a generator (`rlvr.pipeline.seeds.over_seeds`) ends by GeneratorExit as the interrupt
    unwinds the loop that consumed it."""
    info = client.create_run(
        experiment_id, start_time=start_time, run_name=name, tags={k: str(v) for k, v in tags.items()}
    )
    run = Run(client, info.info.run_id)
    run.tags = {k: str(v) for k, v in tags.items()}
    run.artifact_uri = info.info.artifact_uri
    status = "FAILED"
    try:
        yield run
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        if status == "FAILED" and _STOPPED_BY:
            status = "KILLED"
        failed = None  # a store that fails here must not hide the error that ended the block
        try:
            run.flush()  # keep every step logged so far, even on a crash
        except TrackingError as exc:
            failed = exc
        end = run.end_time if status == "FINISHED" else None  # a failure ends it now
        try:
            _terminate(client, run.run_id, status, end)
        except TrackingError as exc:
            failed = failed or exc
        if failed is not None:
            recover_store(getattr(client, "uri", ""))
            if status == "FINISHED":
                raise failed


def _terminate(client, run_id: str, status: str, end: int | None, tries: int = 3) -> None:
    """End a run, trying again on a failure: a server whose artifact store refused an upload may
    have closed the connection under it, and the next request on it fails although the server is
    up (the stages switch MLflow's own retries off, so a dead server fails at once). A run left
    RUNNING would read as a stage still training."""
    for attempt in range(tries):
        try:
            return client.set_terminated(run_id, status=status, end_time=end)
        except TrackingError:
            if attempt == tries - 1:
                raise
            time.sleep(0.5 * (attempt + 1))


KIND_TAG = "mlflow.experimentKind"
# A model-training experiment. MLflow 3.17's UI picks its view from its GenAI / Model training toggle
# rather than from this tag: `rlvr ui`'s URL sets the toggle (rlvr.tools.ui).
KIND = "custom_model_development"


def _experiment(client, uri: str) -> str:
    """The id of experiment `rlvr-repro`, made if missing. In the default store (this checkout's
    `mlflow.db`) its artifacts live in this checkout's `mlartifacts/`. MLflow records that folder as
    an absolute path, so a checkout that was copied or moved would write into the original's: then
    the old experiment is renamed (its runs stay, under "rlvr-repro (moved from ...)") and a new one
    is made here."""
    local = uri == default_tracking_uri()
    here = (repo_root() / "mlartifacts").as_uri()
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is not None and local and not exp.artifact_location.startswith(here):
        client.rename_experiment(
            exp.experiment_id, f"{EXPERIMENT} (moved from {exp.artifact_location})"[:250]
        )
        exp = None
    if exp is None:
        return client.create_experiment(
            EXPERIMENT, artifact_location=here if local else None, tags={KIND_TAG: KIND}
        )
    if exp.tags.get(KIND_TAG) != KIND:
        client.set_experiment_tag(exp.experiment_id, KIND_TAG, KIND)
    return exp.experiment_id


@contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    """One process at a time creates or migrates a local SQLite store: two stages starting together
    (`dvc queue start -j 2` on a fresh checkout) would otherwise both build its tables, and one
    fails ("duplicate column name"). A lock file beside the database; a no-op for servers."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    import fcntl

    with open(Path(uri.removeprefix("sqlite:///")).with_suffix(".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


PID_TAG, HOST_TAG, CPU_TAG = "rlvr.pid", "rlvr.host", "rlvr.cpu"
NOTE_TAG = "mlflow.note.content"  # the run's description on its MLflow page
# What MLflow's Compare cannot do with these runs, said on every stage run's page: it sets one
# run's numbers beside another's, and a variant's chain mean beside another's is not paired.
COMPARE_NOTE = (
    "One run per stage execution; its seed runs nest under it, one per chain (tag `seed`: chain s "
    "is SFT seed s and every variant trained from it). MLflow's Compare does not pair chains: two "
    "variants' stage runs there show two means over chains, side by side, and their difference is "
    "not the chain-paired one. For chain-paired differences with their intervals run `rlvr diff "
    "<variant> <variant>` (or compare the seed runs of one `seed` tag)."
)
RAW_HASH_TAG = "params.raw_hash"  # hash of the raw params.yaml keys a stage depends on (params.json)


def close_dead_runs(client, experiment_id: str, stage: str) -> list[str]:
    """Mark KILLED the runs of `stage` still RUNNING whose process, on this host, is gone (killed
    with SIGKILL, or the machine lost power: nothing could mark them). Their seed runs too.
    Returns the ids closed. Runs on other hosts are left alone: their process cannot be seen."""
    host = socket.gethostname()
    stale = client.search_runs(
        [experiment_id], f"tags.`dvc.stage` = '{stage}' and attributes.status = 'RUNNING'", max_results=1000
    )
    closed = []
    for r in stale:
        pid = r.data.tags.get(PID_TAG)
        if r.data.tags.get(HOST_TAG) == host and pid and pid.isdigit() and not pid_running(int(pid)):
            client.set_terminated(r.info.run_id, status="KILLED")
            closed.append(r.info.run_id)
    return closed


@contextmanager
def stage_run(
    stage: str,
    params: dict[str, Any],
    tags: dict[str, Any],
    params_hash: str,
    raw_params: dict[str, Any] | None = None,
    start: float | None = None,
) -> Iterator[Run]:
    """The MLflow run of one stage execution. Raises TrackingError before yielding if unusable.

    `params`: the settings it runs with (logged as the run's params); `raw_params`: the params.yaml
    keys they come from (the artifact `params.json`), whose hash is `params_hash`; `start`: when the
    stage's work began (time.time()), if before this run opens.
    Tags: dvc.stage, dvc.exp, the code that ran (`source_tags`: MLflow's source tags, git.commit,
    git.dirty), params.raw_hash (also under its older name params.hash), plus the caller's (task,
    seed, variant...). `run.made` is `made_here()`, for the stage's run record.
    A body that raises leaves the run FAILED; Ctrl-C, SIGTERM (how DVC stops a stage) or SIGHUP (its
    terminal closed) leaves it KILLED.
    """
    uri = tracking_uri()
    check_reachable(uri)
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    from mlflow.tracking import MlflowClient  # slow import (~1.5 s): only stages that log pay it

    quiet = {name: logging.getLogger(name).level for name in ("mlflow", "alembic")}
    for name in quiet:  # the one-line error below says it; MLflow's own traceback log would not
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        with _store_lock(uri):
            client = MlflowClient(client_uri(uri))
            experiment_id = _experiment(client, uri)
    except Exception as exc:  # any failure to open the store is a configuration problem
        raise TrackingError(
            f"MLflow tracking store {uri} cannot be used: {str(exc).splitlines()[0]}"
        ) from None
    finally:
        for name, level in quiet.items():
            logging.getLogger(name).setLevel(level)
    # From here a failed store call is one TrackingError (StoreClient); MLflow's SQL layer would also
    # log its own traceback for it.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    client = StoreClient(client, uri)

    made = made_here(start)
    all_tags = {
        "dvc.stage": os.environ.get("DVC_STAGE", stage),
        NOTE_TAG: COMPARE_NOTE,
        **source_tags(stage, made),
        RAW_HASH_TAG: params_hash,
        "params.hash": params_hash,
        **tags,
    }
    close_dead_runs(client, experiment_id, all_tags["dvc.stage"])
    all_tags.update({PID_TAG: os.getpid(), HOST_TAG: socket.gethostname(), CPU_TAG: made["cpu"]})
    if os.environ.get("DVC_EXP_NAME"):  # only inside `dvc exp run`
        all_tags["dvc.exp"] = os.environ["DVC_EXP_NAME"]
    stops = [signal.SIGTERM, signal.SIGHUP]  # how DVC stops a stage; a terminal closed under it
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # Ctrl-C (unless it is ignored)
        stops.append(signal.SIGINT)
    previous = {sig: signal.signal(sig, _raise_keyboard_interrupt) for sig in stops}
    try:
        with _run(client, experiment_id, stage, all_tags, start_time=to_ms(start)) as run:
            run._experiment_id = experiment_id
            run.made = made
            run.log_params(params)
            if raw_params is not None:
                run.log_text(json.dumps(raw_params, indent=2, sort_keys=True) + "\n", "params.json")
            yield run
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _STOPPED_BY.clear()
