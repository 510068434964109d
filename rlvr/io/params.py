"""params.yaml, read and validated into typed sections before any compute.

params.yaml is the single source of truth, and the only one: no field has a default, so a missing
key is an error naming it, never a silent fallback. The sections the maths takes are declared with
it (`rlvr.configs`: model, task, noise, SFT run, GRPO variant, worked examples); the ones only the
pipeline reads (warm-ups, pass@k, the hack, the starts comparison, the whole file) are here. One
type checker (`check_value`) enforces every field's annotation (`rlvr.fields`), and rules that tie
sections together (a variant's start exists and is of its task; every seed has its chain's start;
runs sharing a warm-up agree on what it depends on) are `parse_params`'s.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from rlvr.configs import TASKS, GRPOConfig, ModelConfig, SFTConfig, TaskConfig, WorkedConfig
from rlvr.fields import (
    ConfigError,
    Count,
    NonNegative,
    Positive,
    Probability,
    Section,
    Seed,
    Seeds,
    UserError,
    require,
)
from rlvr.io.files import bounded_text, check_expansion


def check_value(value: Any, tp: Any, path: str) -> Any:
    """Check (and for float fields, coerce ints) one value against a field annotation."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        inner, *rules = typing.get_args(tp)
        value = check_value(value, inner, path)
        for rule in rules:
            problem = rule.check(value)
            require(problem is None, path, value, problem or "")
        return value
    if origin is Literal:
        allowed = typing.get_args(tp)
        require(value in allowed, path, value, f"must be one of {', '.join(map(str, allowed))}")
        return value
    if origin is list:
        require(isinstance(value, list), path, value, "must be a list")
        (inner,) = typing.get_args(tp)
        return [check_value(v, inner, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(tp):
            return None
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(options) == 1:
            return check_value(value, options[0], path)
        return _tagged(value, options, path)
    if isinstance(tp, type) and issubclass(tp, Section):
        return build(tp, value, path)
    if tp is bool:
        require(isinstance(value, bool), path, value, "must be true or false")
        return value
    if tp is int:
        require(isinstance(value, int) and not isinstance(value, bool), path, value, "must be an integer")
        return value
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        require(ok, path, value, "must be a number")
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float
            number = math.inf
        require(math.isfinite(number), path, value, "must be a finite number")
        return number
    if tp is str:
        require(isinstance(value, str), path, value, "must be a string")
        return value
    if tp is dict:
        require(isinstance(value, dict), path, value, "must be a mapping")
        return value
    raise TypeError(f"unsupported field type {tp!r} at {path}")


def _tagged(value: Any, options: list[type], path: str) -> Any:
    """One of several sections, picked by the Literal value of their `kind` field."""
    kinds = {typing.get_args(typing.get_type_hints(o)["kind"])[0]: o for o in options}
    require(isinstance(value, dict), path, value, "must be a mapping with a `kind`")
    require(
        value.get("kind") in kinds, f"{path}.kind", value.get("kind"), f"must be one of {', '.join(kinds)}"
    )
    return build(kinds[value["kind"]], value, path)


def _check_keys(data: dict, allowed: tuple[str, ...] | list[str], path: str) -> None:
    """No key outside `allowed`, none of `allowed` missing: else one line naming the first."""
    prefix = f"{path}." if path else ""
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}: unknown key; allowed keys: {', '.join(allowed)}")
    missing = [k for k in allowed if k not in data]
    if missing:
        raise ConfigError(f"{prefix}{missing[0]}: missing required key")


def build(cls: type, data: Any, path: str):
    """Build section `cls` from a mapping: every field required, no unknown keys, types checked."""
    require(isinstance(data, dict), path, data, "must be a mapping")
    hints = typing.get_type_hints(cls, include_extras=True)
    names = [f.name for f in dataclasses.fields(cls)]
    _check_keys(data, names, path)
    obj = cls(**{n: check_value(data[n], hints[n], f"{path}.{n}") for n in names})
    obj.validate(path)
    return obj


# --------------------------------------------------------------------------------------------
# The sections, in params.yaml order.

# What an SFT run's warm-up depends on: runs that agree on all of these (and on their rows' true
# answers, checked when the state is loaded) reach bit-identical states after their clean epochs.
# `epochs` is here because the cosine schedule spans the warm-up and the noisy epochs (a constant
# one does not depend on it); `seeds` because a warm-up trains one state per chain.
WARMUP_KEYS = (
    "task",
    "model",
    "seeds",
    "repeats",
    "clean_epochs",
    "epochs",
    "batch_size",
    "lr",
    "schedule",
    "weight_decay",
    "grad_clip",
)


@dataclass(frozen=True)
class WarmupConfig(Section):
    """A clean warm-up shared by SFT runs: the first `clean_epochs` of run `run`'s schedule, on its
    rows' true answers. Trained once (stage warmup@<name>); every run that names it starts there."""

    run: str  # the SFT run whose settings (WARMUP_KEYS) and rows define it; it names this warm-up too


@dataclass(frozen=True)
class GRPOSection(Section):
    defaults: dict  # GRPOConfig settings shared by every variant (all but task and sft)


@dataclass(frozen=True)
class PassKConfig(Section):
    """pass@k evaluation on the held-out problems."""

    sft: str  # SFT run whose held-out problems are scored; its variants are compared with it
    contrast: str | None  # a second SFT run of the same task scored beside it; null: none
    n: Count  # samples per problem for the SFT start and the `headline` variants
    n_others: Count  # samples per problem for the contrast and every other variant
    headline: list[str]  # variants scored with n (the claims' own); the rest with n_others
    ks: list[Count]  # k values reported; the largest is the chapter's k (pass@64, never solved in 64)
    # Sampling temperatures: the first is the claims' own (every model is scored there); the others,
    # and one greedy sample per problem, score the SFT start and the `headline` variants only.
    temperatures: list[Positive]
    bootstrap: Count  # bootstrap resamples over problems (and chains) for the 95% bands

    def validate(self, path: str) -> None:
        low = min(self.n, self.n_others)
        require(bool(self.ks), f"{path}.ks", self.ks, "list at least one k")
        require(
            all(a < b for a, b in zip(self.ks, self.ks[1:])),
            f"{path}.ks",
            self.ks,
            "must be in increasing order, each k once",
        )
        for i, k in enumerate(self.ks):
            require(k <= low, f"{path}.ks[{i}]", k, f"must satisfy 1 <= k <= min(n, n_others) ({low})")
        require(bool(self.temperatures), f"{path}.temperatures", self.temperatures, "list at least one")
        for i, t in enumerate(self.temperatures):
            require(
                t not in self.temperatures[:i],
                f"{path}.temperatures[{i}]",
                t,
                "is listed twice: each temperature once",
            )

    def samples(self, model: str) -> int:
        """Samples per problem for `model` ("sft", the contrast's name or a variant's)."""
        return self.n if model == "sft" or model in self.headline else self.n_others

    def every_temperature(self, model: str) -> bool:
        """Whether `model` is scored at every temperature and greedily too (the SFT start and the
        headline variants), or at the first temperature only."""
        return model == "sft" or model in self.headline


@dataclass(frozen=True)
class HackConfig(Section):
    """Chapter A's hackable-verifier exercise: GRPO on a substring reward (`rlvr.reward_hacking`)."""

    sft: str  # the SFT run the policy starts from
    variant: (
        str  # the GRPO variant whose loop settings are used (seeds, steps, temperature below replace its own)
    )
    seeds: Seeds  # one substring-reward run per seed
    steps: Count  # GRPO steps on the substring reward
    max_new_tokens: Count  # room for several digits: the hack needs it
    temperature: Positive  # rollout temperature (the loss uses the same tempered log-probs)
    sample_rows: Count  # responses kept per sample table (start, middle, end)
    window: Count  # steps averaged for the start and end figures

    def validate(self, path: str) -> None:
        require(
            self.window <= self.steps,
            f"{path}.window",
            self.window,
            f"must be <= {path}.steps ({self.steps})",
        )


@dataclass(frozen=True)
class StartsConfig(Section):
    """`rlvr starts` (not a DVC stage): chapter B's candidate starts side by side, each over its
    chains, the SFT side first, then `variant` trained from each. A candidate names an SFT run of the
    pipeline (`sft`) or one of `runs`, which only this comparison trains."""

    candidates: list[str]  # the starts compared, in display order
    runs: dict  # name -> SFTConfig: candidates the pipeline does not train (no warm-up stage: trained whole)
    variant: str  # the GRPO settings trained from the candidates' chains (not its own seeds)
    chains: Seeds  # GRPO seed s from each candidate's chain s, for its seeds among these
    target_pass_at_n: Probability  # the chapter's SFT pass@64: the SFT-side facts a default is chosen by
    target_never_solved: NonNegative  # the chapter's SFT never-solved count


Device = Literal["cpu", "cuda"]  # where TinyLM trains and samples (`determinism.check_device`)


@dataclass(frozen=True)
class Params(Section):
    """The whole of params.yaml, validated. `raw` beside it is the mapping as read, which DVC reads
    too: a stage's declared keys take their values from it (`rlvr.pipeline.stageparams`)."""

    seed: Seed  # master seed: splits, noise draws, initialisation, sampling
    threads: Count  # torch.set_num_threads for every stage
    device: Device  # where the stages that run TinyLM run it; cpu is bit-for-bit repeatable per machine
    model: ModelConfig
    tasks: dict[str, TaskConfig]
    sft_defaults: (
        dict  # SFTConfig settings every run (and starts run) takes where it states none: read through them
    )
    sft: dict[str, SFTConfig]  # by run name
    warmups: dict[str, WarmupConfig]
    grpo: GRPOSection
    variants: dict[str, GRPOConfig]
    passk: PassKConfig
    worked: WorkedConfig
    hack: HackConfig
    starts: StartsConfig

    def task(self, name: str) -> TaskConfig:
        return _entry(self.tasks, name, "task", "tasks")

    def sft_run(self, name: str) -> SFTConfig:
        return _entry(self.sft, name, "sft run", "runs")

    def warmup(self, name: str) -> WarmupConfig:
        return _entry(self.warmups, name, "warm-up", "warm-ups")

    def variant(self, name: str) -> GRPOConfig:
        return _entry(self.variants, name, "variant", "variants")


def _entry(entries: dict, name: str, what: str, known: str) -> Any:
    """entries[name], or one line naming the unknown `what` and the known ones."""
    if name not in entries:
        raise ConfigError(f"{what} {name!r}: unknown; known {known}: {', '.join(entries)}")
    return entries[name]


TOP_KEYS = tuple(f.name for f in dataclasses.fields(Params))
GRPO_SETTINGS = tuple(f.name for f in dataclasses.fields(GRPOConfig) if f.name not in ("task", "sft"))


# A name (of a task, SFT run, warm-up, variant or starts run) becomes part of a DVC stage's command,
# of output paths and of MLflow run names: letters, digits and underscores only, so that no name can
# be read by a shell (`$(...)`, `;`), climb out of a folder (`..`, `/`) or split a command (a space).
NAME = re.compile(r"[A-Za-z0-9_]{1,64}")  # 64: every path and run name made from it stays well short


def check_name(name: Any, path: str) -> str:
    """`name` is a safe entry name (`NAME`), else one line naming it and the rule."""
    require(
        isinstance(name, str) and NAME.fullmatch(name) is not None,
        path,
        name,
        "is not a valid name: use letters, digits and underscores only, at most 64 of them (it "
        "becomes part of a stage's command, its output paths and its MLflow run names)",
    )
    return name


def _named(raw: Any, path: str) -> dict:
    """A non-empty mapping of named entries, every name a safe one (`check_name`)."""
    require(isinstance(raw, dict) and raw, path, raw, "must be a non-empty mapping of named entries")
    for name in raw:
        check_name(name, f"{path}.{name}")
    return raw


def parse_params(raw: Any) -> Params:
    """Validate a params.yaml mapping into `Params`. Raises ConfigError on the first problem."""
    require(isinstance(raw, dict), "params", type(raw).__name__, "params.yaml must be a mapping")
    _check_keys(raw, TOP_KEYS, "")
    seed = check_value(raw["seed"], Seed, "seed")
    threads = check_value(raw["threads"], Count, "threads")
    device = check_value(raw["device"], Device, "device")
    model = build(ModelConfig, raw["model"], "model")

    tasks = {}
    for name, body in _named(raw["tasks"], "tasks").items():
        require(name in TASKS, f"tasks.{name}", name, f"unknown task; known tasks: {', '.join(TASKS)}")
        tasks[name] = build(TaskConfig, body, f"tasks.{name}")
    sft_defaults = _sft_defaults(raw["sft_defaults"])
    sft = {
        name: build(SFTConfig, with_defaults(sft_defaults, body), f"sft.{name}")
        for name, body in _named(raw["sft"], "sft").items()
    }
    for name, run in sft.items():
        require(
            run.task in tasks,
            f"sft.{name}.task",
            run.task,
            f"must be a task defined under tasks ({', '.join(tasks)})",
        )
        require(
            run.target is not None or run.redraws == 0,
            f"sft.{name}.redraws",
            run.redraws,
            "must be 0 without a target: a chain is drawn again only when its step cap came before it",
        )
    warmups = {
        name: build(WarmupConfig, body, f"warmups.{name}")
        for name, body in _named(raw["warmups"], "warmups").items()
    }
    _check_warmups(sft, warmups, model)

    grpo = build(GRPOSection, raw["grpo"], "grpo")
    defaults = grpo.defaults
    _check_keys(defaults, GRPO_SETTINGS, "grpo.defaults")
    hints = typing.get_type_hints(GRPOConfig, include_extras=True)
    for k, v in defaults.items():
        check_value(v, hints[k], f"grpo.defaults.{k}")
    variants = {}
    for name, override in _named(raw["variants"], "variants").items():
        require(isinstance(override, dict), f"variants.{name}", override, "must be a mapping of overrides")
        for key in ("task", "sft"):
            if key not in override:
                raise ConfigError(
                    f"variants.{name}.{key}: missing required key "
                    "(each variant names its task and start checkpoint)"
                )
        cfg = build(GRPOConfig, {**defaults, **override}, f"variants.{name}")
        require(cfg.sft in sft, f"variants.{name}.sft", cfg.sft, f"must name an sft run ({', '.join(sft)})")
        require(
            sft[cfg.sft].task == cfg.task,
            f"variants.{name}.task",
            cfg.task,
            f"must be the task of sft run {cfg.sft!r} ({sft[cfg.sft].task})",
        )
        _check_chains(cfg.seeds, sft[cfg.sft].seeds, f"variants.{name}.seeds", cfg.sft)
        require(
            cfg.target is None or tasks[cfg.task].validation > 0,
            f"variants.{name}.target",
            cfg.target,
            f"a controlled end is checked on validation problems; tasks.{cfg.task}.validation is 0",
        )
        variants[name] = cfg

    passk = build(PassKConfig, raw["passk"], "passk")
    for key in ("sft", "contrast"):
        run = getattr(passk, key)
        if key == "sft" or run is not None:
            require(run in sft, f"passk.{key}", run, f"must name an sft run ({', '.join(sft)})")
    require(
        tasks[sft[passk.sft].task].heldout > 0,
        "passk.sft",
        passk.sft,
        f"scores its run's held-out problems; tasks.{sft[passk.sft].task}.heldout is 0",
    )
    for i, v in enumerate(passk.headline):
        require(v in variants, f"passk.headline[{i}]", v, f"must name a variant ({', '.join(variants)})")
    require(
        passk.contrast is None or sft[passk.contrast].task == sft[passk.sft].task,
        "passk.contrast",
        passk.contrast,
        f"must be an sft run of passk.sft's task ({sft[passk.sft].task})",
    )
    worked = build(WorkedConfig, raw["worked"], "worked")
    hack = build(HackConfig, raw["hack"], "hack")
    require(
        hack.variant in variants, "hack.variant", hack.variant, f"must name a variant ({', '.join(variants)})"
    )
    require(hack.sft in sft, "hack.sft", hack.sft, f"must name an sft run ({', '.join(sft)})")
    require(
        sft[hack.sft].task == variants[hack.variant].task,
        "hack.sft",
        hack.sft,
        f"must be an sft run of variant {hack.variant!r}'s task ({variants[hack.variant].task})",
    )
    _check_chains(hack.seeds, sft[hack.sft].seeds, "hack.seeds", hack.sft)
    starts = _starts(raw["starts"], sft_defaults, sft, variants)
    params = Params(
        seed,
        threads,
        device,
        model,
        tasks,
        sft_defaults,
        sft,
        warmups,
        grpo,
        variants,
        passk,
        worked,
        hack,
        starts,
    )
    object.__setattr__(params, "raw", raw)
    return params


def with_defaults(defaults: dict, body: Any) -> Any:
    """A run's settings over the defaults (its own value wins); a body that is no mapping is left for
    `build` to refuse in its own words."""
    return {**defaults, **body} if isinstance(body, dict) else body


# What an SFT run is, which each run states itself: its rows (task, labels), chains, warm-up, stop and
# budget. A stage that reads only these of a run (data, pass@k, the hack) declares them as
# `sft.<run>.<key>`, a key that is always there, whatever a `dvc exp run -S` changes.
RUN_OWN_KEYS = ("task", "warmup", "seeds", "noise", "repeats", "target", "epochs")


def _sft_defaults(raw: Any) -> dict:
    """The block every SFT run takes its unstated settings from (`with_defaults`): how the runs
    train, not what they are (RUN_OWN_KEYS), each checked as the runs' are."""
    require(isinstance(raw, dict), "sft_defaults", raw, "must be a mapping of SFT settings")
    hints = typing.get_type_hints(SFTConfig, include_extras=True)
    allowed = [f.name for f in dataclasses.fields(SFTConfig) if f.name not in RUN_OWN_KEYS]
    for key, value in raw.items():
        path = f"sft_defaults.{key}"
        require(key in allowed, path, value, f"unknown key; allowed keys: {', '.join(allowed)}")
        check_value(value, hints[key], path)
    return raw


def _starts(raw: Any, sft_defaults: dict, sft: dict, variants: dict) -> StartsConfig:
    """The starts comparison: its own runs are SFT configs (over `sft_defaults`, as the pipeline's
    runs are); every candidate is one of them or an SFT run, of the task its variant trains on."""
    require(isinstance(raw, dict), "starts", raw, "must be a mapping")
    runs = {
        check_name(name, f"starts.runs.{name}"): build(
            SFTConfig, with_defaults(sft_defaults, body), f"starts.runs.{name}"
        )
        for name, body in (raw.get("runs") or {}).items()
    }
    body = {**raw, "runs": {}}
    cfg = build(StartsConfig, body, "starts")
    require(
        cfg.variant in variants, "starts.variant", cfg.variant, f"must name a variant ({', '.join(variants)})"
    )
    task = variants[cfg.variant].task
    for name in runs:
        require(
            name not in sft, f"starts.runs.{name}", name, "is already an sft run: name it in candidates only"
        )
    known = {**sft, **runs}
    for i, name in enumerate(cfg.candidates):
        require(
            name in known,
            f"starts.candidates[{i}]",
            name,
            f"must name an sft run or a starts.runs entry ({', '.join(known)})",
        )
        require(known[name].task == task, f"starts.candidates[{i}]", name, f"must be a run of task {task}")
        require(
            any(seed in cfg.chains for seed in known[name].seeds),
            f"starts.candidates[{i}]",
            name,
            "shares no chain with starts.chains: GRPO seed s is trained from the candidate's chain s, "
            "so its seeds must include some of those",
        )
    object.__setattr__(cfg, "runs", runs)
    return cfg


def _check_chains(seeds: list[int], sft_seeds: list[int], path: str, run: str) -> None:
    """Seed s of a GRPO run starts from seed s of its SFT run (chain s): every seed needs its start."""
    missing = [s for s in seeds if s not in sft_seeds]
    require(
        not missing,
        path,
        seeds,
        f"seed {missing[0] if missing else ''} has no SFT start: every seed must be "
        f"one of sft.{run}.seeds ({sft_seeds}), chain s starting from SFT seed s",
    )


def _check_warmups(sft: dict, warmups: dict, model: ModelConfig) -> None:
    """Each warm-up names a run that starts from it; each run names a warm-up whose run agrees with
    it on every WARMUP_KEYS setting (the top-level model standing in for a null `model`)."""
    for name, w in warmups.items():
        require(w.run in sft, f"warmups.{name}.run", w.run, f"must name an sft run ({', '.join(sft)})")
        require(
            sft[w.run].warmup == name,
            f"warmups.{name}.run",
            w.run,
            f"must be a run that starts from this warm-up (sft.{w.run}.warmup is {sft[w.run].warmup!r})",
        )
    for name, run in sft.items():
        require(
            run.warmup in warmups,
            f"sft.{name}.warmup",
            run.warmup,
            f"must name a warm-up under warmups ({', '.join(warmups)})",
        )
        owner = warmups[run.warmup].run
        for key in WARMUP_KEYS:
            if key == "epochs" and run.schedule == "constant":
                continue  # a constant lr does not depend on the run's length
            mine, theirs = getattr(run, key), getattr(sft[owner], key)
            if key == "model":
                mine, theirs = mine or model, theirs or model
            require(
                mine == theirs,
                f"sft.{name}.{key}",
                mine,
                f"must equal sft.{owner}.{key} ({theirs}): the run starts from warm-up {run.warmup!r}, "
                f"whose clean epochs depend on it (give the run a warm-up of its own otherwise)",
            )


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file by the YAML 1.2 rules, the ones DVC applies to params.yaml: `2e-4` is a
    float and `no` a string (PyYAML's YAML 1.1 reads them as a string and False), so that `rlvr
    check`, the stages and `dvc repro` read every value alike. An anchor a hand-written file still
    uses (`<<: *x`) is copied into each mapping that merges it: no two entries share a value object."""
    from ruamel.yaml import YAML, YAMLError

    try:
        data = YAML(typ="safe", pure=True).load(bounded_text(path, "params file"))
    except YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read: not a params file") from None
    try:
        check_expansion(data, path, "params file")  # before the copy below expands the aliases
    except UserError as exc:
        raise ConfigError(str(exc)) from None
    return json.loads(json.dumps(data))  # YAML aliases share objects; JSON's copy does not


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate params.yaml. A missing file or bad YAML is a ConfigError too."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found (run from the repo root or pass --params)")
    return parse_params(read_yaml(path))
