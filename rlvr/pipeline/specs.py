"""The pipeline, declared once: each DVC stage's params, data inputs and outputs.

`dvc.yaml` is written from this module (`rlvr pipeline --write`; a test checks that the committed
file is what it writes), and the stages read their paths and their params list from it, so the
files DVC tracks, the files a stage writes and the params a stage is rerun for cannot drift apart.
The code each stage depends on is not declared here: `rlvr.pipeline.dvcfile` finds it by following the
stage module's imports.

A spec is written once for DVC's templates and for a concrete instance. Its functions take `key`,
`item` and `p`: in dvc.yaml they are `Ref`s that print as `${key}`, `${item.sft}`, `${hack.sft}`;
for an instance they are its name, its params entry and the validated Params. The params a stage
declares are all it reads: `rlvr.pipeline.stageparams` hands it those and no others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.io.files import svg_beside
from rlvr.io.params import RUN_OWN_KEYS, Params
from rlvr.pipeline import paths
from rlvr.pipeline.records import headline_path, record_path

LABEL_KEYS = ("noise", "target", "epochs")  # an SFT run's settings a figure names its start by
RUNS_ON = ("threads", "device")  # where a training stage runs: its thread budget and its device


def sft_keys(run: str, keys) -> list[str]:
    """The dotted params keys `keys` of SFT run `run`, for a stage that reads only part of a run:
    keys each run states itself (RUN_OWN_KEYS), never taken from `sft_defaults`."""
    assert set(keys) <= set(RUN_OWN_KEYS), (
        f"{set(keys) - set(RUN_OWN_KEYS)}: a run may take these from sft_defaults"
    )
    return [f"sft.{run}.{k}" for k in keys]


def figure_outs(*pngs) -> dict:
    """A stage's figures as outputs: each PNG and the SVG drawn beside it, kept in git (not cached)."""
    return {f: {"cache": False} for png in pngs for f in (png, svg_beside(png))}


class Ref:
    """A DVC template variable: `Ref("item").sft` prints as `${item.sft}`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Ref:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Ref(f"{self._name}.{attr}" if self._name else attr)

    def __str__(self) -> str:
        return "${" + self._name + "}"

    def __format__(self, spec: str) -> str:  # f-strings print the template
        return format(str(self), spec)

    def __fspath__(self) -> str:  # Path("data") / Ref("key") is data/${key}
        return str(self)


@dataclass(frozen=True)
class Stage:
    """One DVC stage (or one `foreach` family of them)."""

    name: str
    foreach: str | None  # params.yaml table the stage repeats over ("sft", "warmups", "variants"), or None
    desc: str
    paths: Callable  # (key, item, p) -> the stage's paths object (rlvr.pipeline.paths)
    params: Callable  # (key, item, p) -> dotted params.yaml keys the stage reads
    # paths object -> data files and folders it reads (code deps are found by import). A stage reading
    # a run's data (`rundata.read_run_data`) names the files it uses and the digests file, whose record
    # of both files it checks: a change to either reruns it, and MLflow logs only what it uses.
    deps: Callable
    outs: Callable  # paths object -> {path: {"cache": bool}} of plain outputs
    metrics: Callable = lambda _: []  # paths object -> results JSON files (never cached), each with its
    #   run record and headline beside it (rlvr.pipeline.records)
    headline: bool = True  # each results file has a headline, DVC's `metrics:` (False: none)
    concrete: bool = False  # written into dvc.yaml with params.yaml's names, not DVC's ${...} templating
    always_changed: bool = False  # run on every `dvc repro`, never skipped or restored from the run-cache


STAGES: dict[str, Stage] = {
    s.name: s
    for s in (
        Stage(
            "check",
            None,
            "the guard, run on every dvc repro: params.yaml, RLVR_THREADS and the MLflow store checked "
            "before DVC touches any other stage's outputs",
            paths=lambda key, item, p: paths.check(),
            params=lambda key, item, p: ["threads"],  # the thread budget it checks
            deps=lambda x: [x.params],
            outs=lambda x: {x.marker: {"cache": False}},
            always_changed=True,
        ),
        Stage(
            "data",
            None,
            "each task's train/held-out split and every SFT run's noisy labels",
            paths=lambda key, item, p: paths.data_all(list(p.sft)),
            params=lambda key, item, p: [
                "seed",
                *sorted({f"tasks.{p.sft[r].task}.{k}" for r in p.sft for k in ("heldout", "validation")}),
                *(k for r in p.sft for k in sft_keys(r, ("task", "noise", "repeats"))),
            ],
            deps=lambda x: [],
            outs=lambda x: {f: {} for d in x.runs.values() for f in (d.rows, d.heldout, d.digests)},
            concrete=True,
        ),
        Stage(
            "warmup",
            "warmups",
            "the clean epochs (true answers) that every SFT run naming warm-up ${key} "
            "starts from, trained once per chain",
            paths=lambda key, item, p: paths.warmup(key, item.run),
            params=lambda key, item, p: [
                *RUNS_ON,
                "model",
                f"warmups.{key}",
                # its run whole: which of a run's WARMUP_KEYS it states is known per run, not to the
                # template, so any change to the run reruns its warm-up (the same state, retrained)
                "sft_defaults",
                f"sft.{item.run}",
            ],
            deps=lambda x: [x.data.rows, x.data.digests],
            outs=lambda x: {x.states: {}},
            metrics=lambda x: [x.metrics],
            headline=False,  # a state to start from, not a result: nothing to compare between experiments
        ),
        Stage(
            "sft",
            "sft",
            "supervised fine-tuning of TinyLM on run ${key}'s labels, from its warm-up, once per seed",
            paths=lambda key, item, p: paths.sft(key, item.warmup),
            params=lambda key, item, p: [
                *RUNS_ON,
                "model",
                f"tasks.{item.task}",
                "sft_defaults",
                f"sft.{key}",
            ],
            deps=lambda x: [x.data.rows, x.data.heldout, x.data.digests, x.warmup],
            outs=lambda x: {x.checkpoints: {}, x.curves: {"cache": False}},
            metrics=lambda x: [x.metrics],
        ),
        Stage(
            "grpo",
            "variants",
            "GRPO variant ${key}, seed n from SFT seed n (its chain), once per seed in its seeds",
            paths=lambda key, item, p: paths.grpo(key, item.sft),
            params=lambda key, item, p: [*RUNS_ON, "grpo.defaults", f"variants.{key}", f"tasks.{item.task}"],
            deps=lambda x: [
                x.start.checkpoints,
                x.start.data.rows,
                x.start.data.heldout,
                x.start.data.digests,
            ],
            outs=lambda x: {x.checkpoints: {}, x.curves: {"cache": False}, x.eval_mean: {"cache": False}},
            metrics=lambda x: [x.metrics],
        ),
        Stage(
            "passk",
            None,
            "pass@k of the SFT policy and of every variant trained from it, n samples per held-out problem",
            paths=lambda key, item, p: paths.passk(p.passk.sft, p.passk.contrast, scored_variants(p)),
            params=lambda key, item, p: [
                "seed",
                *RUNS_ON,
                "grpo.defaults",
                "passk",
                *(f"variants.{v}" for v in scored_variants(p)),
                f"tasks.{p.sft[p.passk.sft].task}",
                f"sft.{p.passk.sft}.task",
                *(
                    key
                    for run in (p.passk.sft, *([] if p.passk.contrast is None else [p.passk.contrast]))
                    for key in sft_keys(run, ("seeds", *LABEL_KEYS))
                ),
            ],
            deps=lambda x: [
                x.start.checkpoints,
                x.start.data.heldout,
                x.start.data.digests,
                *([] if x.contrast is None else [x.contrast.checkpoints]),
                *x.variant_folders(),
            ],
            outs=lambda x: {
                x.counts: {"cache": False},
                **figure_outs(x.figure_curves, x.figure_scatter, x.figure_solve_rates, x.figure_temperatures),
                x.curves: {"cache": False},
            },
            metrics=lambda x: [x.metrics],
            concrete=True,
        ),
        Stage(
            "hack",
            None,
            "GRPO on chapter A's hackable substring verifier, once per seed in hack.seeds",
            paths=lambda key, item, p: paths.hack(p.hack.sft),
            params=lambda key, item, p: [
                *RUNS_ON,
                "grpo.defaults",
                f"variants.{p.hack.variant}",
                "hack",
                *sft_keys(p.hack.sft, LABEL_KEYS),
            ],
            deps=lambda x: [x.start.checkpoints, x.start.data.rows, x.start.data.digests],
            outs=lambda x: {
                x.checkpoints: {},
                x.samples: {"cache": False},
                **figure_outs(x.figure),
                x.curves: {"cache": False},
            },
            metrics=lambda x: [x.metrics],
        ),
        Stage(
            "worked",
            None,
            "every closed-form number of both chapters, with figures",
            paths=lambda key, item, p: paths.worked(),
            params=lambda key, item, p: ["threads", "worked"],
            deps=lambda x: [],
            outs=lambda x: figure_outs(*x.figures),
            metrics=lambda x: [x.metrics],
            headline=False,  # closed forms: nothing to compare between experiments
        ),
        Stage(
            "report",
            None,
            "every chapter claim beside our value and a verdict; figures with provenance",
            paths=lambda key, item, p: paths.report(upstream_records(p)),
            params=lambda key, item, p: ["threads"],  # its header names the thread budget
            deps=lambda x: [
                x.claims,
                x.plan,
                x.metrics,
                x.samples,
                x.counts,
                x.figures,
                x.curves,
                x.benchmarks,
                x.starts,
                x.reruns,
                *x.records,
            ],
            outs=lambda x: {
                x.markdown: {"cache": False},
                x.html: {"cache": False},
                x.figure_copies: {"cache": False},
            },
            metrics=lambda x: [x.verdicts],
            concrete=True,  # its deps name every stage instance's run record, from params.yaml
        ),
    )
}


def upstream_records(p: Params) -> tuple[Path, ...]:
    """The run record of every stage instance but the report's (each results file's, beside it):
    the report reads them for its provenance, so DVC reruns it when any of them changes."""
    records = []
    for s in STAGES.values():
        if s.name == "report":
            continue
        for key in [None] if s.foreach is None else list(getattr(p, s.foreach)):
            records += [Path(record_path(m)) for m in s.metrics(instance_paths(s.name, key, p))]
    return tuple(records)


def scored_variants(p: Params) -> tuple[str, ...]:
    """The variants `passk` scores: those trained from its SFT start (chapter B's), in params order."""
    return tuple(v for v, item in p.variants.items() if item.sft == p.passk.sft)


def stage(name: str) -> Stage:
    if name not in STAGES:
        from rlvr.fields import ConfigError

        raise ConfigError(f"stage {name!r}: unknown; stages: {', '.join(STAGES)}")
    return STAGES[name]


def _item(s: Stage, key: str | None, p: Params) -> Any:
    if s.foreach is None:
        return None
    return {"sft": p.sft_run, "warmups": p.warmup, "variants": p.variant}[s.foreach](key)


def instance_paths(name: str, key: str | None, p: Params):
    """The paths of one stage instance (`key`: the SFT run or variant; None for the others)."""
    s = stage(name)
    return s.paths(key, _item(s, key, p), p)


def declared_keys(name: str, key: str | None, p: Params) -> list[str]:
    """The dotted params.yaml keys one stage instance declares: its dvc.yaml `params:`, filled in."""
    s = stage(name)
    return list(s.params(key, _item(s, key, p), p))


def instance_inputs(name: str, key: str | None, p: Params) -> list[Path]:
    """The data files and folders one stage instance reads: its dvc.yaml deps, less code and the
    guard's marker."""
    return [Path(d) for d in stage(name).deps(instance_paths(name, key, p))]


def instance_outputs(name: str, key: str | None, p: Params) -> list[Path]:
    """Everything the instance writes (`written`): its outputs, its results files with their run
    records and headlines (DVC outputs too, and as easily in the way or read-only)."""
    return [Path(o) for o in written(stage(name), instance_paths(name, key, p))]


def kept_by_git(name: str, key: str | None, p: Params) -> list[Path]:
    """The instance's outputs git keeps, not DVC's cache (`cache: false`, headlines included): what
    the stage backs up as it finishes (`rlvr.pipeline.backup`)."""
    s = stage(name)
    x = instance_paths(name, key, p)
    uncached = [o for o, props in outputs(s, x).items() if props.get("cache") is False]
    return [Path(o) for o in [*uncached, *headlines(s, x)]]


def every_output(p: Params) -> list[Path]:
    """What every stage instance of the pipeline writes (`instance_outputs` of each): the guard
    checks them all before `dvc repro` removes any."""
    out = []
    for s in STAGES.values():
        for key in [None] if s.foreach is None else list(getattr(p, s.foreach)):
            out += instance_outputs(s.name, key, p)
    return out


def outputs(s: Stage, x) -> dict[Any, dict]:
    """{path: DVC out props} of what instance paths `x` of stage `s` write, headlines aside: its outs,
    and each results file with its run record (files git keeps: not cached)."""
    results = s.metrics(x)
    return {
        **s.outs(x),
        **{m: {"cache": False} for m in results},
        **{record_path(m): {"cache": False} for m in results},
    }


def headlines(s: Stage, x) -> list:
    """The files DVC shows as the stage's metrics: one headline per results file (none for a stage
    without a headline)."""
    return [headline_path(m) for m in s.metrics(x)] if s.headline else []


def written(s: Stage, x) -> list:
    """Every file and folder instance paths `x` of stage `s` write: what the stage's guards check
    and clean up (rlvr.pipeline.guard)."""
    return [*outputs(s, x), *headlines(s, x)]


def template(name: str, params: Params) -> tuple[Any, dict]:
    """The stage's paths object and fields for dvc.yaml: written with DVC template variables, or
    with the names in `params` for a `concrete` stage. Results files are outs (git keeps them: not
    cached); DVC's `metrics:` are the headlines only."""
    s = stage(name)
    key, item = (Ref("key"), Ref("item")) if s.foreach else (None, None)
    p = params if s.concrete else Ref("")
    x = s.paths(key, item, p)
    checked = [] if name == "check" else [paths.CHECKED]  # every stage waits for params.yaml to pass
    return x, {
        "params": s.params(key, item, p),
        "deps": checked + s.deps(x),
        "outs": outputs(s, x),
        "metrics": headlines(s, x),
    }


def plot_views(p: Params) -> list[dict]:
    """dvc.yaml's top-level `plots:` (what `dvc plots show` draws), from the params: one chart
    per comparison a reader makes, each overlaying one curve file per variant, model or run (the
    templates colour by file). The files are the seed-mean and per-k tables the stages write, which
    have a value in every cell (no combs from empty rows), with the 95% band over chains beside each
    mean where there is one. DVC needs the files named one by one."""
    variants = p.variants

    def by_task(task: str) -> dict:
        """Each fixed-budget variant's seed-mean curve (a controlled end's chains stop at different
        steps: a mean over the chains still running would fall as they stop, so it has its own view)."""
        return {
            _path(paths.grpo(v, e.sft).eval_mean): "eval_acc"
            for v, e in variants.items()
            if e.task == task and e.target is None
        }

    ended = {v: e for v, e in variants.items() if e.target is not None}
    end_chains = {
        _path(paths.grpo(v, e.sft).eval_curve(s)): "eval_acc" for v, e in ended.items() for s in e.seeds
    }

    start, contrast = p.passk.sft, p.passk.contrast
    from_start = [v for v, e in variants.items() if e.sft == start]  # their minus_sft is paired
    models = ["sft", *([] if contrast is None else [contrast]), *from_start]
    passk_dir = paths.passk(start, contrast).curves
    hack = paths.hack(p.hack.sft)
    first_seed = p.hack.seeds[0]
    return [
        {
            "grpo-accuracy-chapter-b": _view(
                by_task("two_digit"),
                "step",
                "GRPO step",
                "held-out accuracy (seed mean, 95% band over chains)",
                "Chapter B: held-out accuracy of every GRPO variant at its fixed budget",
                "overlay-band",
            )
        },
        *(
            [
                {
                    "grpo-controlled-end": _view(
                        end_chains,
                        "step",
                        "GRPO step",
                        "held-out accuracy (exact), one line per chain",
                        f"{', '.join(ended)}: each of {len(end_chains)} chains to its controlled end "
                        "(chains stop at different steps: no mean is drawn)",
                        "overlay",
                    )
                }
            ]
            if ended
            else []
        ),
        {
            "grpo-accuracy-chapter-a": _view(
                by_task("single_digit"),
                "step",
                "GRPO step",
                "accuracy (seed mean, 95% band over chains)",
                "Chapter A: sampled accuracy of the GRPO runs",
                "overlay-band",
            )
        },
        {
            "passk": _view(
                {_path(passk_dir / f"{m}.tsv"): "pass_at_k" for m in models},
                "k",
                "k (samples per problem)",
                "pass@k (chain mean, 95% band over chains)",
                f"Chapter B: pass@k of the SFT start ({start}){'' if contrast is None else ', its contrast'} "
                "and each variant",
                "overlay-band-log2",
            )
        },
        {
            "passk-gain": _view(
                {_path(passk_dir / f"{m}.tsv"): "minus_sft" for m in from_start},
                "k",
                "k (samples per problem)",
                "pass@k minus SFT's (below 0: SFT solves more)",
                f"Chapter B: each variant's pass@k minus its SFT start's ({start})",
                "gain-band-log2",
            )
        },
        {
            "sft-loss": _view(
                {_path(paths.sft(r).curve(e.seeds[0])): "loss" for r, e in p.sft.items()},
                "step",
                "SFT step",
                "cross-entropy (nats / token)",
                "SFT loss of every run (first chain)",
            )
        },
        {
            "hack": _view(
                {_path(hack.curve(first_seed)): ["reward_mean", "accuracy"]},
                "step",
                "GRPO step",
                "rate",
                f"Chapter A hack: substring reward vs exact accuracy (seed {first_seed})",
            )
        },
    ]


def model_artifacts(p: Params) -> dict[str, dict]:
    """dvc.yaml's top-level `artifacts:`: every trained policy as a DVC model (`dvc.api.artifacts_show`
    finds it by name): `sft-<run>`, the SFT starts, and `grpo-<variant>`, the policies after GRPO,
    each a folder of one `seed<n>.pt` per chain (`rlvr.pipeline.checkpoint.load` rebuilds one)."""
    sft = {
        paths.model_artifact(f"sft@{run}"): {
            "path": _path(paths.sft(run).checkpoints),
            "type": "model",
            "desc": f"SFT run {run}: each chain's start, stopped at its target on validation problems",
            "labels": ["sft", e.task],
        }
        for run, e in p.sft.items()
    }
    grpo = {
        paths.model_artifact(f"grpo@{v}"): {
            "path": _path(paths.grpo(v, e.sft).checkpoints),
            "type": "model",
            "desc": f"GRPO variant {v}: each chain's policy at the end of training, from SFT run {e.sft}",
            "labels": ["grpo", e.task],
        }
        for v, e in p.variants.items()
    }
    return {**sft, **grpo}


def _path(p) -> str:
    return p.as_posix()


def _view(y: dict, x: str, x_label: str, y_label: str, title: str, template: str = "overlay") -> dict:
    """One chart. Templates in .dvc/plots/ (one colour per file, or per field of a single file, one
    dash per revision under `dvc plots diff`; a click on a legend entry picks out that curve):
    `overlay` draws the curves; `overlay-band` also
    the 95% band of each (the `<y>_lo`/`<y>_hi` columns, else `ci95_lo`/`ci95_hi`) on a rate's
    [0, 1] axis, a band beyond it cut at the edge; `overlay-band-log2` the same with x on a log2
    axis (k = 1, 2, 4 ... 64); `gain-band-log2` a difference with its band against a line at 0."""
    return {"template": template, "x": x, "y": y, "title": title, "x_label": x_label, "y_label": y_label}
