"""Typed configuration: one dataclass per params.yaml section, validated before any compute.

params.yaml is the single source of truth. `load_params` reads it, rejects unknown keys (naming the
key and the allowed ones), checks types and ranges, and returns a `Params` tree. Every user error is
a `ConfigError` whose message is one line naming the param path, the value and the rule.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

TASKS = ("single_digit", "two_digit")


class ConfigError(ValueError):
    """A user-caused configuration error; the CLI prints it as one line and exits non-zero."""


def _require(cond: bool, path: str, value: Any, rule: str) -> None:
    if not cond:
        raise ConfigError(f"{path} = {value!r}: {rule}")


def _check_type(value: Any, tp: Any, path: str) -> Any:
    """Coerce/check one value against a dataclass field annotation (int, float, bool, str, list[x])."""
    origin = typing.get_origin(tp)
    if origin is list:
        _require(isinstance(value, list), path, value, "must be a list")
        (inner,) = typing.get_args(tp)
        return [_check_type(v, inner, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _check_type(value, args[0], path)
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
    raise TypeError(f"unsupported field type {tp!r} at {path}")


def build(cls: type, data: Any, path: str):
    """Build dataclass `cls` from a dict, rejecting unknown keys and checking field types."""
    _require(isinstance(data, dict), path, data, "must be a mapping")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(f"{path}.{unknown[0]}: unknown key; allowed keys: {', '.join(names)}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _check_type(data[f.name], hints[f.name], f"{path}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{path}.{f.name}: missing required key")
    obj = cls(**kwargs)
    if hasattr(obj, "validate"):
        obj.validate(path)
    return obj


@dataclass(frozen=True)
class ModelConfig:
    """TinyLM shape. Defaults give ~0.4 M parameters: small enough for a 2-core CPU."""

    d_model: int = 128  # residual width
    n_layer: int = 2  # transformer blocks
    n_head: int = 4  # attention heads; d_model % n_head == 0
    max_len: int = 32  # positions: longest prompt + response the model can see

    def validate(self, path: str) -> None:
        for name in ("d_model", "n_layer", "n_head", "max_len"):
            _require(getattr(self, name) >= 1, f"{path}.{name}", getattr(self, name), "must be >= 1")
        _require(self.d_model % self.n_head == 0, f"{path}.n_head", self.n_head, "must divide model.d_model")


@dataclass(frozen=True)
class TaskConfig:
    """One arithmetic task. The problem set is fixed by the name; the split and lengths are params."""

    heldout: int = 0  # problems held out of SFT and GRPO (the evaluation set)
    max_new_tokens: int = 2  # response cap when sampling: answer digits + <eos>

    def validate(self, path: str) -> None:
        _require(self.heldout >= 0, f"{path}.heldout", self.heldout, "must be >= 0")
        _require(self.max_new_tokens >= 1, f"{path}.max_new_tokens", self.max_new_tokens, "must be >= 1")


@dataclass(frozen=True)
class SFTConfig:
    """One noisy-SFT run: data corruption, optimisation, and how accuracy is measured afterwards."""

    task: str = "single_digit"  # which task's training split to fit
    noise_rate: float = 0.5  # probability a training label is replaced by a random answer
    repeats: int = 4  # copies of each training problem, each with its own noise draw
    clean_epochs: int = 0  # warm-up passes on the true answers of the same rows, before the noisy ones
    epochs: int = 10  # passes over the (repeated) SFT set with its noisy labels
    batch_size: int = 64  # sequences per optimiser step
    lr: float = 3e-3  # AdamW peak learning rate (cosine decay to 10%)
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    grad_clip: float = 1.0  # max global grad norm
    eval_samples: int = 16  # samples per prompt (T=1) for sampled accuracy
    eval_max_prompts: int = 300  # cap on train prompts used for train-set accuracy

    def validate(self, path: str) -> None:
        _require(self.task in TASKS, f"{path}.task", self.task, f"must be one of {', '.join(TASKS)}")
        _require(0.0 <= self.noise_rate <= 1.0, f"{path}.noise_rate", self.noise_rate, "must lie in [0, 1]")
        _require(self.lr > 0, f"{path}.lr", self.lr, "must be > 0")
        _require(self.weight_decay >= 0, f"{path}.weight_decay", self.weight_decay, "must be >= 0")
        _require(self.grad_clip > 0, f"{path}.grad_clip", self.grad_clip, "must be > 0")
        for name in ("repeats", "epochs", "batch_size", "eval_samples", "eval_max_prompts"):
            _require(getattr(self, name) >= 1, f"{path}.{name}", getattr(self, name), "must be >= 1")
        _require(self.clean_epochs >= 0, f"{path}.clean_epochs", self.clean_epochs, "must be >= 0")


ADVANTAGES = ("group", "mean_only", "rloo", "batch_std")
KL_ESTIMATORS = ("k1", "k2", "k3")
RATIOS = ("token", "sequence", "cispo")
AGGREGATIONS = ("seq_mean", "token_mean", "seq_sum_const")


@dataclass(frozen=True)
class GRPOConfig:
    """One GRPO variant: `grpo.defaults` with the variant's overrides applied."""

    task: str = "single_digit"  # the task trained and evaluated on (must be the SFT run's task)
    sft: str = "single_digit"  # which SFT run (params `sft.<name>`) to start from
    steps: int = 25  # optimiser iterations (each: sample, score, mu inner epochs)
    prompts_per_step: int = 16  # P: distinct prompts per step
    group_size: int = 8  # G: samples per prompt
    temperature: float = 1.0  # sampling temperature for rollouts
    lr: float = 1e-3  # Adam learning rate
    grad_clip: float = 1.0  # max global grad norm
    beta: float = 0.04  # KL coefficient; DeepSeekMath 0.04, R1-Zero 0.001, TRL default 0
    kl_estimator: str = "k3"  # k1 | k2 | k3 (Schulman 2020)
    clip_eps_low: float = 0.2  # ratio lower clip: 1 - eps_low
    clip_eps_high: float = 0.2  # ratio upper clip: 1 + eps_high (DAPO clip-higher: 0.28)
    ratio: str = "token"  # token (PPO) | sequence (GSPO) | cispo (clipped, detached IS weight)
    advantage: str = "group"  # group | mean_only (Dr. GRPO) | rloo | batch_std
    aggregation: str = "seq_mean"  # seq_mean (GRPO) | token_mean (DAPO) | seq_sum_const (Dr. GRPO)
    inner_epochs: int = 1  # mu: gradient steps per batch of rollouts
    dynamic_sampling: bool = False  # DAPO: keep only mixed-reward groups, resample to fill P
    max_gen_rounds: int = 4  # cap on sampling rounds per step under dynamic sampling
    overlong_buffer: int = 0  # DAPO soft overlong penalty window in tokens (0 = off)
    overlong_penalty: float = 1.0  # penalty at the length cap, ramped over the buffer
    eval_every: int = 5  # steps between held-out evaluations
    eval_samples: int = 8  # samples per held-out prompt at each evaluation

    def validate(self, path: str) -> None:
        _require(self.task in TASKS, f"{path}.task", self.task, f"must be one of {', '.join(TASKS)}")
        _require(self.group_size >= 2, f"{path}.group_size", self.group_size, "must be >= 2 (a group needs siblings)")
        _require(self.lr > 0, f"{path}.lr", self.lr, "must be > 0")
        _require(self.beta >= 0, f"{path}.beta", self.beta, "must be >= 0")
        _require(self.temperature > 0, f"{path}.temperature", self.temperature, "must be > 0")
        _require(self.clip_eps_low >= 0, f"{path}.clip_eps_low", self.clip_eps_low, "must be >= 0")
        _require(self.clip_eps_high >= 0, f"{path}.clip_eps_high", self.clip_eps_high, "must be >= 0")
        for name, allowed in (("kl_estimator", KL_ESTIMATORS), ("ratio", RATIOS),
                              ("advantage", ADVANTAGES), ("aggregation", AGGREGATIONS)):
            value = getattr(self, name)
            _require(value in allowed, f"{path}.{name}", value, f"must be one of {', '.join(allowed)}")
        for name in ("steps", "prompts_per_step", "inner_epochs", "max_gen_rounds", "eval_every", "eval_samples"):
            _require(getattr(self, name) >= 1, f"{path}.{name}", getattr(self, name), "must be >= 1")
        _require(self.overlong_buffer >= 0, f"{path}.overlong_buffer", self.overlong_buffer, "must be >= 0")


@dataclass(frozen=True)
class PassKConfig:
    """pass@k evaluation on the held-out problems."""

    sft: str = "two_digit"  # SFT run whose held-out problems are scored; its variants are compared with it
    n: int = 64  # samples per problem
    ks: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64])  # k values reported
    temperature: float = 1.0  # sampling temperature
    bootstrap: int = 1000  # bootstrap resamples over problems for the 95% band

    def validate(self, path: str) -> None:
        _require(self.n >= 1, f"{path}.n", self.n, "must be >= 1")
        _require(self.temperature > 0, f"{path}.temperature", self.temperature, "must be > 0")
        for i, k in enumerate(self.ks):
            _require(1 <= k <= self.n, f"{path}.ks[{i}]", k, f"must satisfy 1 <= k <= passk.n ({self.n})")


@dataclass(frozen=True)
class HackConfig:
    """Chapter A's hackable-verifier exercise: GRPO on a substring reward (`rlvr.hack`)."""

    variant: str = "a_grpo"  # the GRPO variant whose settings (and start checkpoint) are used
    steps: int = 60  # GRPO steps on the substring reward
    max_new_tokens: int = 6  # room for several digits: the hack needs it
    temperature: float = 1.0  # rollout temperature (the loss uses the same tempered log-probs)
    sample_rows: int = 8  # responses kept per sample table (start, middle, end)
    window: int = 5  # steps averaged for the start and end figures

    def validate(self, path: str) -> None:
        for name in ("steps", "max_new_tokens", "sample_rows", "window"):
            _require(getattr(self, name) >= 1, f"{path}.{name}", getattr(self, name), "must be >= 1")
        _require(self.temperature > 0, f"{path}.temperature", self.temperature, "must be > 0")
        _require(self.window <= self.steps, f"{path}.window", self.window, f"must be <= {path}.steps ({self.steps})")


@dataclass(frozen=True)
class Params:
    seed: int
    threads: int
    model: ModelConfig
    tasks: dict[str, TaskConfig]
    sft: dict[str, SFTConfig]
    grpo_seeds: list[int] = field(default_factory=list)
    grpo_defaults: dict[str, Any] = field(default_factory=dict)
    variants: dict[str, GRPOConfig] = field(default_factory=dict)
    passk: PassKConfig | None = None
    worked: "WorkedConfig | None" = None
    hack: HackConfig | None = None

    def task(self, name: str) -> TaskConfig:
        if name not in self.tasks:
            raise ConfigError(f"task {name!r}: unknown; known tasks: {', '.join(self.tasks)}")
        return self.tasks[name]

    def sft_run(self, name: str) -> SFTConfig:
        if name not in self.sft:
            raise ConfigError(f"sft run {name!r}: unknown; known runs: {', '.join(self.sft)}")
        return self.sft[name]

    def variant(self, name: str) -> GRPOConfig:
        if name not in self.variants:
            raise ConfigError(f"variant {name!r}: unknown; known variants: {', '.join(self.variants)}")
        return self.variants[name]


TOP_KEYS = ("seed", "threads", "model", "tasks", "sft", "grpo", "variants", "passk", "worked", "hack")


def parse_params(raw: Any) -> Params:
    """Validate a params.yaml mapping into `Params`. Raises ConfigError on the first problem."""
    _require(isinstance(raw, dict), "params", type(raw).__name__, "params.yaml must be a mapping")
    unknown = sorted(set(raw) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown key; allowed keys: {', '.join(TOP_KEYS)}")
    for key in ("seed", "threads", "model", "tasks", "sft"):
        if key not in raw:
            raise ConfigError(f"{key}: missing required key")
    seed = _check_type(raw["seed"], int, "seed")
    threads = _check_type(raw["threads"], int, "threads")
    _require(threads >= 1, "threads", threads, "must be >= 1")
    model = build(ModelConfig, raw["model"], "model")

    _require(isinstance(raw["tasks"], dict), "tasks", raw["tasks"], "must be a mapping")
    tasks = {}
    for name, body in raw["tasks"].items():
        _require(name in TASKS, f"tasks.{name}", name, f"unknown task; known tasks: {', '.join(TASKS)}")
        tasks[name] = build(TaskConfig, body, f"tasks.{name}")

    _require(isinstance(raw["sft"], dict), "sft", raw["sft"], "must be a mapping")
    sft = {name: build(SFTConfig, body, f"sft.{name}") for name, body in raw["sft"].items()}
    for name, run in sft.items():
        _require(run.task in tasks, f"sft.{name}.task", run.task, f"must be a task defined under tasks ({', '.join(tasks)})")

    grpo_raw = raw.get("grpo") or {}
    _require(isinstance(grpo_raw, dict), "grpo", grpo_raw, "must be a mapping")
    bad = sorted(set(grpo_raw) - {"seeds", "defaults"})
    if bad:
        raise ConfigError(f"grpo.{bad[0]}: unknown key; allowed keys: seeds, defaults")
    grpo_seeds = _check_type(grpo_raw.get("seeds", []), list[int], "grpo.seeds")
    defaults = grpo_raw.get("defaults", {})
    build(GRPOConfig, defaults, "grpo.defaults")  # defaults alone must already be valid
    variants = {}
    variants_raw = raw.get("variants") or {}
    _require(isinstance(variants_raw, dict), "variants", variants_raw, "must be a mapping")
    for name, override in variants_raw.items():
        _require(isinstance(override, dict), f"variants.{name}", override, "must be a mapping of overrides")
        for key in ("task", "sft"):
            if key not in override:
                raise ConfigError(f"variants.{name}.{key}: missing required key (each variant names its task and start checkpoint)")
        cfg = build(GRPOConfig, {**defaults, **override}, f"variants.{name}")
        _require(cfg.sft in sft, f"variants.{name}.sft", cfg.sft, f"must name an sft run ({', '.join(sft)})")
        _require(sft[cfg.sft].task == cfg.task, f"variants.{name}.task", cfg.task,
                 f"must be the task of sft run {cfg.sft!r} ({sft[cfg.sft].task})")
        variants[name] = cfg

    passk = build(PassKConfig, raw["passk"], "passk") if "passk" in raw else None
    if passk is not None:
        _require(passk.sft in sft, "passk.sft", passk.sft, f"must name an sft run ({', '.join(sft)})")
    worked = build(WorkedConfig, raw["worked"], "worked") if "worked" in raw else None
    hack = build(HackConfig, raw["hack"], "hack") if "hack" in raw else None
    if hack is not None:
        _require(hack.variant in variants, "hack.variant", hack.variant, f"must name a variant ({', '.join(variants)})")
    return Params(seed, threads, model, tasks, sft, grpo_seeds, dict(defaults), variants, passk, worked, hack)


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate params.yaml. A missing file or bad YAML is a ConfigError too."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found (run from the repo root or pass --params)")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    return parse_params(raw)


def to_dict(obj: Any) -> Any:
    """Dataclass tree -> plain JSON-able dict (for logging params and hashing)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_dict(v) for v in obj]
    return obj


def params_hash(obj: Any) -> str:
    """Short stable hash of the resolved params a stage used (tag `params.hash`)."""
    blob = json.dumps(to_dict(obj), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


@dataclass(frozen=True)
class WorkedConfig:
    """The chapters' worked examples (`rlvr.worked`): sampling sizes and the 24-prompt demo's knobs."""

    seed: int = 0  # seeds every draw: the k3 samples, the Monte Carlo check, the demo's rewards
    kl_samples: int = 4000  # tokens sampled from pi for the k3 check (chapter A's test size)
    kl_vocab: int = 10  # vocabulary of the toy categorical pi and pi_ref (k3 check, k-estimator bias)
    demo_prompts: int = 24  # prompts in chapter B's demo pool, easiest to hardest
    demo_group_size: int = 8  # G: rewards sampled per prompt per iteration in the demo
    demo_iters: int = 200  # demo policy-gradient iterations (~0.1 s: the shared skill saturates by then)
    demo_lr: float = 0.01  # step size on the logits (w, u); w collects every prompt's gradient
    demo_d_min: float = -2.0  # difficulty of the easiest prompt, in logits (starts at p = 0.88)
    demo_d_max: float = 5.0  # difficulty of the hardest prompt, in logits (starts at p = 0.007)

    def validate(self, path: str) -> None:
        for name in ("kl_samples", "demo_iters"):
            _require(getattr(self, name) >= 1, f"{path}.{name}", getattr(self, name), "must be >= 1")
        _require(self.kl_vocab >= 2, f"{path}.kl_vocab", self.kl_vocab,
                 "must be >= 2 (a distribution over one token has no KL)")
        _require(self.demo_prompts >= 3, f"{path}.demo_prompts", self.demo_prompts,
                 "must be >= 3 (the demo splits prompts into easy, mid and hard thirds)")
        _require(self.demo_group_size >= 2, f"{path}.demo_group_size", self.demo_group_size,
                 "must be >= 2 (a group needs siblings)")
        _require(self.demo_lr > 0, f"{path}.demo_lr", self.demo_lr, "must be > 0")
        _require(self.demo_d_min < self.demo_d_max, f"{path}.demo_d_min", self.demo_d_min,
                 f"must be < demo_d_max ({self.demo_d_max})")
