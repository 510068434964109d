"""Typed configuration: one dataclass per params.yaml section, validated before any compute.

params.yaml is the single source of truth, and the only one: no field here has a default, so a
missing key is an error naming it, never a silent fallback. Each field's type says everything a
value must satisfy, and the one type checker (`check_value`) enforces it:

- `Literal[...]` for a choice (the allowed names are listed in the error);
- `Annotated[int | float, AtLeast(x) / Above(x) / Between(lo, hi)]` for a range, declared once,
  beside the field;
- `list[x]`, `bool`, `int`, `float`, `str` as usual.
Rules that tie two fields together (d_model % n_head, window <= steps) are each section's `validate`.

Every section knows where it sits in params.yaml (`where`, e.g. `sft.two_digit`). While
`record_reads()` is active, every field read is reported under that dotted name: the pipeline test
uses it to check that a stage depends (dvc.yaml `params:`) on every key it actually reads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Iterator, Literal



class UserError(Exception):
    """An error the user can fix (a param, a missing or foreign input, an unreachable server): the CLI
    prints it as one line naming what is wrong and exits with status 2, no traceback."""


class ConfigError(UserError, ValueError):
    """A bad or missing value in params.yaml (or another config file)."""


def _require(cond: bool, path: str, value: Any, rule: str) -> None:
    if not cond:
        raise ConfigError(f"{path} = {value!r}: {rule}")


# --------------------------------------------------------------------------------------------
# Ranges, declared in a field's annotation: `lr: Annotated[float, Above(0)]`.

@dataclass(frozen=True)
class AtLeast:
    lo: float

    def check(self, v) -> str | None:
        return None if v >= self.lo else f"must be >= {self.lo:g}"


@dataclass(frozen=True)
class Above:
    lo: float

    def check(self, v) -> str | None:
        return None if v > self.lo else f"must be > {self.lo:g}"


@dataclass(frozen=True)
class Between:
    lo: float
    hi: float

    def check(self, v) -> str | None:
        return None if self.lo <= v <= self.hi else f"must lie in [{self.lo:g}, {self.hi:g}]"


Count = Annotated[int, AtLeast(1)]  # a size or a number of steps: at least one
Positive = Annotated[float, Above(0)]
NonNegative = Annotated[float, AtLeast(0)]
Probability = Annotated[float, Between(0, 1)]

TaskName = Literal["single_digit", "two_digit"]
Advantage = Literal["group", "mean_only", "rloo", "batch_std"]
KLEstimator = Literal["k1", "k2", "k3"]
Ratio = Literal["token", "sequence", "cispo"]
Aggregation = Literal["seq_mean", "token_mean", "seq_sum_const"]

TASKS: tuple[str, ...] = typing.get_args(TaskName)
ADVANTAGES: tuple[str, ...] = typing.get_args(Advantage)
KL_ESTIMATORS: tuple[str, ...] = typing.get_args(KLEstimator)
RATIOS: tuple[str, ...] = typing.get_args(Ratio)
AGGREGATIONS: tuple[str, ...] = typing.get_args(Aggregation)


def check_value(value: Any, tp: Any, path: str) -> Any:
    """Check (and for float fields, coerce ints) one value against a field annotation."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        inner, *rules = typing.get_args(tp)
        value = check_value(value, inner, path)
        for rule in rules:
            problem = rule.check(value)
            _require(problem is None, path, value, problem or "")
        return value
    if origin is Literal:
        allowed = typing.get_args(tp)
        _require(value in allowed, path, value, f"must be one of {', '.join(map(str, allowed))}")
        return value
    if origin is list:
        _require(isinstance(value, list), path, value, "must be a list")
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
        _require(isinstance(value, bool), path, value, "must be true or false")
        return value
    if tp is int:
        _require(isinstance(value, int) and not isinstance(value, bool), path, value, "must be an integer")
        return value
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        _require(ok, path, value, "must be a number")
        return float(value)
    if tp is str:
        _require(isinstance(value, str), path, value, "must be a string")
        return value
    if tp is dict:
        _require(isinstance(value, dict), path, value, "must be a mapping")
        return value
    raise TypeError(f"unsupported field type {tp!r} at {path}")


def _tagged(value: Any, options: list[type], path: str) -> Any:
    """One of several sections, picked by the Literal value of their `kind` field."""
    kinds = {typing.get_args(typing.get_type_hints(o)["kind"])[0]: o for o in options}
    _require(isinstance(value, dict), path, value, "must be a mapping with a `kind`")
    _require(value.get("kind") in kinds, f"{path}.kind", value.get("kind"), f"must be one of {', '.join(kinds)}")
    return build(kinds[value["kind"]], value, path)


# --------------------------------------------------------------------------------------------
# Sections, and the record of which keys a stage read.

_reads: set[str] | None = None  # dotted params keys read while record_reads() is active


@contextmanager
def record_reads() -> Iterator[set[str]]:
    """Collect the dotted params.yaml keys of every section field read inside the block."""
    global _reads
    outer, _reads = _reads, set()
    try:
        yield _reads
    finally:
        _reads = outer


def recording() -> bool:
    """True inside `record_reads()`: code that would read params in another process reads them here."""
    return _reads is not None


class Section:
    """Base of every params.yaml section: a frozen dataclass that knows where it sits (`where`).

    A section built from several places of params.yaml (a variant is `grpo.defaults` overridden by
    `variants.<name>`) reports a read under each place that can hold the field: `_where` is a tuple
    of (dotted path, the fields that place can hold, or None for all).
    """

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if _reads is not None and name in type(self).__dataclass_fields__ \
                and not isinstance(value, (Section, Table)):
            for where, fields in object.__getattribute__(self, "__dict__").get("_where", ()):
                if fields is None or name in fields:
                    _reads.add(f"{where}.{name}" if where else name)
        return value

    def validate(self, path: str) -> None:
        """Rules that involve more than one field; single-field rules are in the annotations."""


class Table(dict):
    """A params.yaml mapping of named sections (`sft`, `variants`, `tasks`). Looking up one entry
    reads only that entry; listing the entries (iterating, len, `in`) reads the whole table."""

    where = ""

    def _listed(self) -> None:
        if _reads is not None:
            _reads.add(self.where)

    def __iter__(self):
        self._listed()
        return super().__iter__()

    def __len__(self) -> int:
        self._listed()
        return super().__len__()

    def __contains__(self, key) -> bool:
        self._listed()
        return super().__contains__(key)

    def keys(self):
        self._listed()
        return super().keys()

    def values(self):
        self._listed()
        return super().values()

    def items(self):
        self._listed()
        return super().items()


def _table(entries: dict, where: str) -> Table:
    t = Table(entries)
    t.where = where
    return t


def _check_keys(data: dict, allowed: tuple[str, ...] | list[str], path: str) -> None:
    """No key outside `allowed`, none of `allowed` missing: else one line naming the first."""
    prefix = f"{path}." if path else ""
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}: unknown key; allowed keys: {', '.join(allowed)}")
    missing = [k for k in allowed if k not in data]
    if missing:
        raise ConfigError(f"{prefix}{missing[0]}: missing required key")


def build(cls: type, data: Any, path: str, where: tuple | None = None):
    """Build section `cls` from a mapping: every field required, no unknown keys, types checked.
    `where` (default: `path`, every field) is where its reads are reported; () reports none."""
    _require(isinstance(data, dict), path, data, "must be a mapping")
    hints = typing.get_type_hints(cls, include_extras=True)
    names = [f.name for f in dataclasses.fields(cls)]
    _check_keys(data, names, path)
    obj = cls(**{n: check_value(data[n], hints[n], f"{path}.{n}") for n in names})
    object.__setattr__(obj, "_where", where if where is not None else ((path, None),))
    obj.validate(path)
    return obj


# --------------------------------------------------------------------------------------------
# The sections, in params.yaml order.

@dataclass(frozen=True)
class ModelConfig(Section):
    """TinyLM shape (the default ~0.4 M parameters trains on a 2-core CPU)."""

    d_model: Count  # residual width
    n_layer: Count  # transformer blocks
    n_head: Count  # attention heads; must divide d_model
    max_len: Count  # positions: longest prompt + response the model can see

    def validate(self, path: str) -> None:
        _require(self.d_model % self.n_head == 0, f"{path}.n_head", self.n_head, f"must divide {path}.d_model")


@dataclass(frozen=True)
class TaskConfig(Section):
    """One arithmetic task. The problem set is fixed by the name; the split and lengths are params."""

    heldout: Annotated[int, AtLeast(0)]  # problems held out of SFT and GRPO (the evaluation set)
    max_new_tokens: Count  # response cap when sampling: answer digits + <eos>


@dataclass(frozen=True)
class UniformNoise(Section):
    """Each label is replaced, with probability `rate`, by an answer drawn uniformly from the task's
    range of sums: every problem gets the same error rate, so a fitted policy solves each about as
    often as any other."""

    kind: Literal["uniform"]
    rate: Probability  # probability a training label is replaced by a random answer


@dataclass(frozen=True)
class SlipNoise(Section):
    """A learner's slips on addition facts: for each units-digit fact u + v the label's author writes
    a wrong units digit (the same wrong digit every time: its misremembered fact) with a rate of its
    own, s_uv ~ Beta(alpha, beta), drawn once per fact. A problem is as hard as its units fact, so a
    fitted policy has a spread of per-problem solve rates, some near 0 (two_digit only)."""

    kind: Literal["slips"]
    alpha: Positive  # Beta shape of the per-fact slip rates (< 1: mass near rate 0)
    beta: Positive  # Beta shape (< 1: mass near rate 1, facts the author nearly always gets wrong)


@dataclass(frozen=True)
class SFTConfig(Section):
    """One SFT run: its model, data corruption, optimisation, and how accuracy is measured.

    The run trains once per seed in `seeds`: seed s is the start of chain s (SFT seed s -> GRPO seed s
    of every variant starting here -> its pass@k counts). The rows (and their noise) are one draw
    shared by every chain; a chain's seed sets the initialisation, the data order and the sampling.
    """

    task: TaskName  # which task's training split to fit
    seeds: list[int]  # one SFT run per seed: the chains every variant starting here is paired with
    model: ModelConfig | None  # this run's TinyLM shape; null: the top-level `model`
    noise: UniformNoise | SlipNoise  # how training labels are corrupted (`kind` picks the model)
    repeats: Count  # copies of each training problem, each with its own noise draw
    warmup: str  # the clean warm-up (`warmups`) this run starts from: clean_epochs on the true answers
    clean_epochs: Annotated[int, AtLeast(0)]  # warm-up passes on the true answers, before the noisy ones
    epochs: Count  # passes over the (repeated) SFT set with its noisy labels
    batch_size: Count  # sequences per optimiser step
    lr: Positive  # AdamW peak learning rate
    schedule: Literal["cosine", "constant"]  # cosine: 5% warm-up, decay to 10%; constant: lr every step
    weight_decay: NonNegative  # AdamW decoupled weight decay
    grad_clip: Positive  # max global grad norm
    eval_samples: Count  # samples per prompt (T = 1) for sampled accuracy
    eval_max_prompts: Count  # cap on train prompts used for train-set accuracy

    def validate(self, path: str) -> None:
        _check_seeds(self.seeds, f"{path}.seeds")


# What an SFT run's warm-up depends on: runs that agree on all of these (and on their rows' true
# answers, checked when the state is loaded) reach bit-identical states after their clean epochs.
# `epochs` is here because the cosine schedule spans the warm-up and the noisy epochs (a constant
# one does not depend on it); `seeds` because a warm-up trains one state per chain.
WARMUP_KEYS = ("task", "model", "seeds", "repeats", "clean_epochs", "epochs", "batch_size", "lr", "schedule",
               "weight_decay", "grad_clip")


@dataclass(frozen=True)
class WarmupConfig(Section):
    """A clean warm-up shared by SFT runs: the first `clean_epochs` of run `run`'s schedule, on its
    rows' true answers. Trained once (stage warmup@<name>); every run that names it starts there."""

    run: str  # the SFT run whose settings (WARMUP_KEYS) and rows define it; it names this warm-up too


@dataclass(frozen=True)
class GRPOConfig(Section):
    """One GRPO variant: `grpo.defaults` with the variant's overrides applied.

    Our names and TRL's `GRPOConfig`, for readers who know one of them:

    | ours              | TRL                                        |
    |-------------------|--------------------------------------------|
    | group_size        | num_generations                            |
    | inner_epochs      | num_iterations                             |
    | clip_eps_low      | epsilon                                    |
    | clip_eps_high     | epsilon_high                               |
    | beta              | beta                                       |
    | temperature       | temperature                                |
    | ratio             | importance_sampling_level (token/sequence) |
    | aggregation       | loss_type (grpo ~ seq_mean, dapo/bnpo ~ token_mean, dr_grpo ~ seq_sum_const) |
    | advantage         | scale_rewards (group ~ group, none ~ mean_only, batch ~ batch_std) |
    | dynamic_sampling  | (none; DAPO's filter, as in verl)          |
    | overlong_buffer   | (none; DAPO's soft overlong punishment)     |
    """

    task: TaskName  # the task trained and evaluated on (must be the SFT run's task)
    sft: str  # which SFT run (params `sft.<name>`) to start from
    seeds: list[int]  # the variant trains once per seed, all inside its stage (one process)
    steps: Count  # optimiser iterations (each: sample, score, mu inner epochs)
    prompts_per_step: Count  # P: distinct prompts per step
    group_size: Annotated[int, AtLeast(2)]  # G: samples per prompt (a group needs siblings)
    temperature: Positive  # sampling temperature for rollouts (the loss uses the tempered log-probs)
    lr: Positive  # Adam learning rate
    grad_clip: Positive  # max global grad norm
    beta: NonNegative  # KL coefficient; DeepSeekMath 0.04, R1-Zero 0.001, TRL default 0
    kl_estimator: KLEstimator  # Schulman (2020)
    clip_eps_low: NonNegative  # ratio lower clip: 1 - clip_eps_low
    clip_eps_high: NonNegative  # ratio upper clip: 1 + clip_eps_high (DAPO clip-higher: 0.28)
    ratio: Ratio  # token (PPO) | sequence (GSPO) | cispo (clipped, detached IS weight)
    advantage: Advantage  # group | mean_only (Dr. GRPO) | rloo | batch_std
    aggregation: Aggregation  # seq_mean (GRPO) | token_mean (DAPO) | seq_sum_const (Dr. GRPO)
    inner_epochs: Count  # mu: gradient steps per batch of rollouts
    dynamic_sampling: bool  # DAPO: keep only mixed-reward groups, resample to fill P
    max_gen_rounds: Count  # cap on sampling rounds per step under dynamic sampling
    overlong_buffer: Annotated[int, AtLeast(0)]  # DAPO soft overlong penalty window in tokens (0 = off)
    overlong_penalty: NonNegative  # penalty at the length cap, ramped over the buffer
    eval_every: Count  # steps between held-out evaluations (and always the last step)
    eval_samples: Count  # samples per held-out prompt at each evaluation

    def validate(self, path: str) -> None:
        _check_seeds(self.seeds, f"{path}.seeds")


def _check_seeds(seeds: list[int], path: str) -> None:
    _require(len(seeds) > 0, path, seeds, "list at least one seed")
    _require(len(set(seeds)) == len(seeds), path, seeds, "seeds must differ")


@dataclass(frozen=True)
class GRPOSection(Section):
    defaults: dict  # GRPOConfig settings shared by every variant (all but task and sft)

@dataclass(frozen=True)
class PassKConfig(Section):
    """pass@k evaluation on the held-out problems."""

    sft: str  # SFT run whose held-out problems are scored; its variants are compared with it
    contrast: str  # a second SFT run of the same task scored beside it (e.g. the uniform-noise start)
    n: Count  # samples per problem
    ks: list[Count]  # k values reported
    temperature: Positive  # sampling temperature
    bootstrap: Count  # bootstrap resamples over problems for the 95% band

    def validate(self, path: str) -> None:
        for i, k in enumerate(self.ks):
            _require(k <= self.n, f"{path}.ks[{i}]", k, f"must satisfy 1 <= k <= {path}.n ({self.n})")


@dataclass(frozen=True)
class WorkedConfig(Section):
    """The chapters' worked examples (`rlvr.worked`): sampling sizes and the 24-prompt demo's knobs."""

    seed: int  # seeds every draw: the k3 samples, the Monte Carlo check, the demo's rewards
    kl_samples: Count  # tokens sampled from pi for the k3 check (chapter A's test size)
    kl_vocab: Annotated[int, AtLeast(2)]  # vocabulary of the toy pi and pi_ref (a one-token vocabulary has no KL)
    demo_prompts: Annotated[int, AtLeast(3)]  # prompts in chapter B's demo pool (split into easy, mid, hard thirds)
    demo_group_size: Annotated[int, AtLeast(2)]  # G: rewards sampled per prompt per iteration in the demo
    demo_iters: Count  # demo policy-gradient iterations (~0.1 s: the shared skill saturates by then)
    demo_lr: Positive  # step size on the logits (w, u); w collects every prompt's gradient
    demo_d_min: float  # difficulty of the easiest prompt, in logits (starts at p = 0.88)
    demo_d_max: float  # difficulty of the hardest prompt, in logits (starts at p = 0.007)

    def validate(self, path: str) -> None:
        _require(self.demo_d_min < self.demo_d_max, f"{path}.demo_d_min", self.demo_d_min,
                 f"must be < demo_d_max ({self.demo_d_max})")


@dataclass(frozen=True)
class HackConfig(Section):
    """Chapter A's hackable-verifier exercise: GRPO on a substring reward (`rlvr.hack`)."""

    sft: str  # the SFT run the policy starts from
    variant: str  # the GRPO variant whose loop settings are used (seeds, steps, temperature below replace its own)
    seeds: list[int]  # one substring-reward run per seed
    steps: Count  # GRPO steps on the substring reward
    max_new_tokens: Count  # room for several digits: the hack needs it
    temperature: Positive  # rollout temperature (the loss uses the same tempered log-probs)
    sample_rows: Count  # responses kept per sample table (start, middle, end)
    window: Count  # steps averaged for the start and end figures

    def validate(self, path: str) -> None:
        _check_seeds(self.seeds, f"{path}.seeds")
        _require(self.window <= self.steps, f"{path}.window", self.window, f"must be <= {path}.steps ({self.steps})")


@dataclass(frozen=True)
class StartsConfig(Section):
    """`rlvr starts` (not a DVC stage): chapter B's candidate starts side by side, each over its
    chains, the SFT side first, then `variant` trained from each. A candidate names an SFT run of the
    pipeline (`sft`) or one of `runs`, which only this comparison trains."""

    candidates: list[str]  # the starts compared, in display order
    runs: dict  # name -> SFTConfig: candidates the pipeline does not train (no warm-up stage: trained whole)
    variant: str  # the GRPO variant trained from every candidate's chains
    target_pass_at_n: Probability  # the chapter's SFT pass@64: the SFT-side facts a default is chosen by
    target_never_solved: NonNegative  # the chapter's SFT never-solved count


@dataclass(frozen=True)
class Params(Section):
    """The whole of params.yaml."""

    seed: int  # master seed: splits, noise draws, initialisation, sampling
    threads: Count  # torch.set_num_threads for every stage
    model: ModelConfig
    tasks: Table  # name -> TaskConfig
    sft: Table  # run name -> SFTConfig
    warmups: Table  # warm-up name -> WarmupConfig
    grpo: GRPOSection
    variants: Table  # variant name -> GRPOConfig
    passk: PassKConfig
    worked: WorkedConfig
    hack: HackConfig
    starts: StartsConfig

    def task(self, name: str) -> TaskConfig:
        if name not in dict.keys(self.tasks):
            raise ConfigError(f"task {name!r}: unknown; known tasks: {', '.join(dict.keys(self.tasks))}")
        return self.tasks[name]

    def sft_run(self, name: str) -> SFTConfig:
        if name not in dict.keys(self.sft):
            raise ConfigError(f"sft run {name!r}: unknown; known runs: {', '.join(dict.keys(self.sft))}")
        return self.sft[name]

    def warmup(self, name: str) -> WarmupConfig:
        if name not in dict.keys(self.warmups):
            raise ConfigError(f"warm-up {name!r}: unknown; known warm-ups: {', '.join(dict.keys(self.warmups))}")
        return self.warmups[name]

    def variant(self, name: str) -> GRPOConfig:
        if name not in dict.keys(self.variants):
            raise ConfigError(f"variant {name!r}: unknown; known variants: {', '.join(dict.keys(self.variants))}")
        return self.variants[name]


TOP_KEYS = tuple(f.name for f in dataclasses.fields(Params))
GRPO_SETTINGS = tuple(f.name for f in dataclasses.fields(GRPOConfig) if f.name not in ("task", "sft"))


def _named(raw: Any, path: str) -> dict:
    _require(isinstance(raw, dict) and raw, path, raw, "must be a non-empty mapping of named entries")
    return raw


def parse_params(raw: Any) -> Params:
    """Validate a params.yaml mapping into `Params`. Raises ConfigError on the first problem."""
    _require(isinstance(raw, dict), "params", type(raw).__name__, "params.yaml must be a mapping")
    _check_keys(raw, TOP_KEYS, "")
    seed = check_value(raw["seed"], int, "seed")
    threads = check_value(raw["threads"], Count, "threads")
    model = build(ModelConfig, raw["model"], "model")

    tasks = {}
    for name, body in _named(raw["tasks"], "tasks").items():
        _require(name in TASKS, f"tasks.{name}", name, f"unknown task; known tasks: {', '.join(TASKS)}")
        tasks[name] = build(TaskConfig, body, f"tasks.{name}")
    sft = {name: build(SFTConfig, body, f"sft.{name}") for name, body in _named(raw["sft"], "sft").items()}
    for name, run in sft.items():
        _require(run.task in tasks, f"sft.{name}.task", run.task, f"must be a task defined under tasks ({', '.join(tasks)})")
    warmups = {name: build(WarmupConfig, body, f"warmups.{name}") for name, body in _named(raw["warmups"], "warmups").items()}
    _check_warmups(sft, warmups, model)

    grpo = build(GRPOSection, raw["grpo"], "grpo")
    defaults = grpo.defaults
    _check_keys(defaults, GRPO_SETTINGS, "grpo.defaults")
    hints = typing.get_type_hints(GRPOConfig, include_extras=True)
    for k, v in defaults.items():
        check_value(v, hints[k], f"grpo.defaults.{k}")
    variants = {}
    for name, override in _named(raw["variants"], "variants").items():
        _require(isinstance(override, dict), f"variants.{name}", override, "must be a mapping of overrides")
        for key in ("task", "sft"):
            if key not in override:
                raise ConfigError(f"variants.{name}.{key}: missing required key (each variant names its task and start checkpoint)")
        cfg = build(GRPOConfig, {**defaults, **override}, f"variants.{name}", where=((f"variants.{name}", None), ("grpo.defaults", GRPO_SETTINGS)))
        _require(cfg.sft in sft, f"variants.{name}.sft", cfg.sft, f"must name an sft run ({', '.join(sft)})")
        _require(sft[cfg.sft].task == cfg.task, f"variants.{name}.task", cfg.task,
                 f"must be the task of sft run {cfg.sft!r} ({sft[cfg.sft].task})")
        _check_chains(cfg.seeds, sft[cfg.sft].seeds, f"variants.{name}.seeds", cfg.sft)
        variants[name] = cfg

    passk = build(PassKConfig, raw["passk"], "passk")
    for key in ("sft", "contrast"):
        run = getattr(passk, key)
        _require(run in sft, f"passk.{key}", run, f"must name an sft run ({', '.join(sft)})")
    _require(sft[passk.contrast].task == sft[passk.sft].task, "passk.contrast", passk.contrast,
             f"must be an sft run of passk.sft's task ({sft[passk.sft].task})")
    worked = build(WorkedConfig, raw["worked"], "worked")
    hack = build(HackConfig, raw["hack"], "hack")
    _require(hack.variant in variants, "hack.variant", hack.variant, f"must name a variant ({', '.join(variants)})")
    _require(hack.sft in sft, "hack.sft", hack.sft, f"must name an sft run ({', '.join(sft)})")
    _require(sft[hack.sft].task == variants[hack.variant].task, "hack.sft", hack.sft,
             f"must be an sft run of variant {hack.variant!r}'s task ({variants[hack.variant].task})")
    _check_chains(hack.seeds, sft[hack.sft].seeds, "hack.seeds", hack.sft)
    starts = _starts(raw["starts"], sft, variants)
    params = Params(seed, threads, model, _table(tasks, "tasks"), _table(sft, "sft"), _table(warmups, "warmups"), grpo,
                    _table(variants, "variants"), passk, worked, hack, starts)
    object.__setattr__(params, "_where", (("", None),))
    object.__setattr__(params, "raw", raw)
    return params


def _starts(raw: Any, sft: dict, variants: dict) -> StartsConfig:
    """The starts comparison: its own runs are SFT configs; every candidate is one of them or an SFT
    run, of the task its variant trains on."""
    _require(isinstance(raw, dict), "starts", raw, "must be a mapping")
    runs = {name: build(SFTConfig, body, f"starts.runs.{name}") for name, body in (raw.get("runs") or {}).items()}
    body = {**raw, "runs": {}}
    cfg = build(StartsConfig, body, "starts")
    _require(cfg.variant in variants, "starts.variant", cfg.variant, f"must name a variant ({', '.join(variants)})")
    task = variants[cfg.variant].task
    for name in runs:
        _require(name not in sft, f"starts.runs.{name}", name, "is already an sft run: name it in candidates only")
    known = {**sft, **runs}
    for i, name in enumerate(cfg.candidates):
        _require(name in known, f"starts.candidates[{i}]", name,
                 f"must name an sft run or a starts.runs entry ({', '.join(known)})")
        _require(known[name].task == task, f"starts.candidates[{i}]", name, f"must be a run of task {task}")
    object.__setattr__(cfg, "runs", _table(runs, "starts.runs"))
    return cfg


def _check_chains(seeds: list[int], sft_seeds: list[int], path: str, run: str) -> None:
    """Seed s of a GRPO run starts from seed s of its SFT run (chain s): every seed needs its start."""
    missing = [s for s in seeds if s not in sft_seeds]
    _require(not missing, path, seeds, f"seed {missing[0] if missing else ''} has no SFT start: every seed must be "
                                       f"one of sft.{run}.seeds ({sft_seeds}), chain s starting from SFT seed s")


def _check_warmups(sft: dict, warmups: dict, model: ModelConfig) -> None:
    """Each warm-up names a run that starts from it; each run names a warm-up whose run agrees with
    it on every WARMUP_KEYS setting (the top-level model standing in for a null `model`)."""
    for name, w in warmups.items():
        _require(w.run in sft, f"warmups.{name}.run", w.run, f"must name an sft run ({', '.join(sft)})")
        _require(sft[w.run].warmup == name, f"warmups.{name}.run", w.run,
                 f"must be a run that starts from this warm-up (sft.{w.run}.warmup is {sft[w.run].warmup!r})")
    for name, run in sft.items():
        _require(run.warmup in warmups, f"sft.{name}.warmup", run.warmup,
                 f"must name a warm-up under warmups ({', '.join(warmups)})")
        owner = warmups[run.warmup].run
        for key in WARMUP_KEYS:
            if key == "epochs" and run.schedule == "constant":
                continue  # a constant lr does not depend on the run's length
            mine, theirs = getattr(run, key), getattr(sft[owner], key)
            if key == "model":
                mine, theirs = mine or model, theirs or model
            _require(mine == theirs, f"sft.{name}.{key}", mine,
                     f"must equal sft.{owner}.{key} ({theirs}): the run starts from warm-up {run.warmup!r}, "
                     f"whose clean epochs depend on it (give the run a warm-up of its own otherwise)")


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file by the YAML 1.2 rules, the ones DVC applies to params.yaml: `2e-4` is a
    float and `no` a string (PyYAML's YAML 1.1 reads them as a string and False), so that `rlvr
    check`, the stages and `dvc repro` read every value alike."""
    from ruamel.yaml import YAML, YAMLError

    try:
        return YAML(typ="safe", pure=True).load(Path(path).read_text())
    except YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate params.yaml. A missing file or bad YAML is a ConfigError too."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found (run from the repo root or pass --params)")
    return parse_params(read_yaml(path))


def lookup_raw(raw: dict, key: str) -> Any:
    """The value at a dotted params.yaml key ("sft.two_digit.lr"); KeyError if absent."""
    value: Any = raw
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(key)
        value = value[part]
    return value


def to_dict(obj: Any) -> Any:
    """Section tree -> plain JSON-able dict (for logging and hashing)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_dict(v) for v in obj]
    return obj


def params_hash(obj: Any) -> str:
    """Short stable hash of the resolved params a stage used (tag `params.hash`, checkpoints)."""
    blob = json.dumps(to_dict(obj), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
