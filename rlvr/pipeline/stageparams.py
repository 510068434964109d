"""What one stage instance knows of params.yaml: the keys it declares, and nothing else.

A stage's spec (`rlvr.pipeline.specs`) lists the dotted params.yaml keys it reads; dvc.yaml's
`params:` are that list, so DVC reruns the stage when one of them changes. `stage_params` builds a
`StageParams`, once, from that one list:

- `declared`: {key: its value in params.yaml}, as DVC reads it (the MLflow artifact `params.json`);
- `hash`: the hash of `declared`, which the instance's checkpoints and metrics carry and its MLflow
  run is tagged with (`params.raw_hash`);
- `logged`: the settings its MLflow run logs as params: the resolved config of what it ran, flat
  and by short names (`beta`, `lr`, `advantage`...), not the params.yaml keys it came from. A
  variant is `grpo.defaults` overridden by `variants.<name>`: its run logs `beta` 0.0 once, not
  `grpo.defaults.beta` beside `variants.no_kl.beta`, so runs of every variant line up column by
  column;
- `config`: the instance's training settings, resolved here once (`instance_config`): a
  variant's `GRPOConfig`, an SFT run's `SFTConfig` (for its warm-up too), the hack's GRPO settings.
  The stage hands it by value to its chains, so a setting such as `lr` goes from params.yaml to the
  loop that reads it without being resolved twice (docs/layout.md counts the hand-offs);
- the typed settings themselves (`variant(name)`, `task(name)`, `threads`...), the sections the
  maths takes (`rlvr.configs`), handed out only as far as the declaration covers them.

Reading a key the stage does not declare raises `UndeclaredParam` there and then, naming the key and
the stage: DVC would not rerun the stage when that key changed. `logged` is read the same way, so a
run logs no setting its stage does not declare. A section declared in part (the data, pass@k and hack stages
declare of an SFT run only the keys every run states itself, `RUN_OWN_KEYS`) comes as that section
with the declared fields only; reading another of its fields raises, in a seed worker too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rlvr.configs import GRPOConfig, ModelConfig, SFTConfig, TaskConfig
from rlvr.fields import UserError
from rlvr.io.params import GRPO_SETTINGS, RUN_OWN_KEYS, TOP_KEYS, WARMUP_KEYS, Params, WarmupConfig
from rlvr.pipeline.paths import data_role
from rlvr.pipeline.specs import declared_keys, every_output, instance_inputs


class UndeclaredParam(UserError):
    """A stage read a params.yaml key its spec does not declare (one line: the key and the stage)."""


def _yaml_value(raw: dict, key: str) -> Any:
    """The value at dotted key `key` of the params.yaml mapping (every declared key is there: no key
    of params.yaml is optional)."""
    value: Any = raw
    for part in key.split("."):
        value = value[part]
    return value


def _declared(name: str, key: str | None, params: Params) -> dict[str, Any]:
    """{key: params.yaml value} of every key the instance declares."""
    return {k: _yaml_value(params.raw, k) for k in declared_keys(name, key, params)}


def _hash(declared: dict[str, Any]) -> str:
    blob = json.dumps(declared, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def config_hash(name: str, key: str | None, params: Params) -> str:
    """An instance's params hash: what its checkpoints carry, and what a later stage checks a
    checkpoint it loads against."""
    return _hash(_declared(name, key, params))


def _sources(path: str, raw: dict) -> tuple[str, ...]:
    """The params.yaml keys the typed value at `path` is made from. A variant is `grpo.defaults`
    overridden by `variants.<name>`, so its settings come from both (DVC must rerun a stage that
    reads one when either changes); its task and start are its own. An SFT run is `sft_defaults`
    under `sft.<name>`: what the run is (RUN_OWN_KEYS) comes from it alone; a setting of how it
    trains, from the run where it states one, else from the defaults."""
    parts = path.split(".")
    if parts[0] == "sft" and len(parts) >= 2:
        if len(parts) == 2:
            return (path, "sft_defaults")
        own = parts[2] in RUN_OWN_KEYS or parts[2] in raw["sft"][parts[1]]
        return (path,) if own else ("sft_defaults." + ".".join(parts[2:]),)
    if parts[0] != "variants" or len(parts) < 2:
        return (path,)
    if len(parts) == 2:
        return (path, "grpo.defaults")
    return (path, "grpo.defaults." + ".".join(parts[2:])) if parts[2] in GRPO_SETTINGS else (path,)


@dataclass(frozen=True)
class StageParams:
    """One stage instance's params, built once by `stage_params`: see the module's docstring."""

    stage: str  # "grpo"
    key: str | None  # its instance ("no_kl"); None for a stage without instances
    declared: dict[str, Any]  # {dotted key: params.yaml value}: what DVC reruns it for
    hash: str  # of `declared`
    inputs: list[tuple[Path, str]]  # the data files it reads, each with its use (MLflow's dataset context)
    _params: Params = dataclasses.field(repr=False, compare=False)  # the whole: read through `_read`
    logged: dict[str, Any] = dataclasses.field(default_factory=dict)  # its MLflow run's params
    config: Any = None  # its own settings, resolved (`instance_config`); None for a stage without any

    @property
    def run(self) -> str:
        """`grpo@no_kl`, or `passk`: DVC's name of the instance, and its MLflow run's."""
        return f"{self.stage}@{self.key}" if self.key is not None else self.stage

    def __getattr__(self, name: str) -> Any:
        """A top-level key (`threads`, `device`, `seed`, `model`, `passk`, `hack`, `worked`)."""
        if name.startswith("_") or name not in TOP_KEYS:
            raise AttributeError(name)
        return self._read(name, getattr(self._params, name))

    def task(self, name: str) -> TaskConfig:
        return self._read(f"tasks.{name}", self._params.task(name))

    def sft_run(self, name: str) -> SFTConfig:
        return self._read(f"sft.{name}", self._params.sft_run(name))

    def warmup(self, name: str) -> WarmupConfig:
        return self._read(f"warmups.{name}", self._params.warmup(name))

    def variant(self, name: str) -> GRPOConfig:
        return self._read(f"variants.{name}", self._params.variant(name))

    def entries(self, table: str) -> list[str]:
        """The entries of `table` ("variants", "sft") whose keys the stage declares, in params.yaml
        order: `passk`'s variants are the ones it scores."""
        named = {k.split(".")[1] for k in self.declared if k.startswith(f"{table}.")}
        return [name for name in getattr(self._params, table) if name in named]

    def hash_of(self, name: str, key: str | None) -> str:
        """Another instance's params hash (`config_hash`): the one a checkpoint it made must carry."""
        return config_hash(name, key, self._params)

    def every_output(self) -> list[Path]:
        """What every stage instance of the pipeline writes, by params.yaml's names (the guard's
        preflight, stage `check`): the pipeline's shape, not a setting any stage computes with."""
        return every_output(self._params)

    def _read(self, path: str, value: Any) -> Any:
        """`value`, the typed value at `path`, as far as the declaration covers it (`_seen`);
        UndeclaredParam if none of it is declared."""
        seen = self._seen(path, value)
        if seen is _HIDDEN:
            raise UndeclaredParam(_undeclared(self.run, self._missing(path)))
        return seen

    def _seen(self, path: str, value: Any) -> Any:
        """`value` whole if the declaration covers it; a section declared in part as that section
        with its declared fields only (`_part`); else _HIDDEN."""
        sources = _sources(path, self._params.raw)
        if all(self._covers(s) for s in sources):
            return value
        if not dataclasses.is_dataclass(value) or not any(self._covers(s) or self._under(s) for s in sources):
            return _HIDDEN
        shown, hidden = {}, {}
        for f in dataclasses.fields(value):
            inner = f"{path}.{f.name}"
            shown[f.name] = self._seen(inner, getattr(value, f.name))
            if shown[f.name] is _HIDDEN:
                hidden[f.name] = self._missing(inner)
                del shown[f.name]
        return _part(type(value), shown, self.run, hidden)

    def _missing(self, path: str) -> str:
        """The first params.yaml key behind `path` that the stage does not declare."""
        return next(s for s in _sources(path, self._params.raw) if not self._covers(s))

    def _covers(self, path: str) -> bool:
        """A declared key is `path` or holds it."""
        return any(path == d or path.startswith(d + ".") for d in self.declared)

    def _under(self, path: str) -> bool:
        """A declared key lies inside `path`."""
        return any(d.startswith(path + ".") for d in self.declared)


def _undeclared(run: str, path: str) -> str:
    return (
        f"stage {run} reads params key {path}, which it does not declare: add it to the stage's "
        "params in rlvr/pipeline/specs.py (DVC reruns a stage only for the keys listed there)"
    )


_HIDDEN = object()  # what `_seen` gives for a value no declared key reaches


def _part(cls: type, shown: dict[str, Any], run: str, hidden: dict[str, str]):
    """Section `cls` holding only the fields in `shown`; reading a field in `hidden` raises
    UndeclaredParam naming its undeclared key. Pickled by value: a seed worker gets the same part."""
    part = object.__new__(_part_class(cls))
    part.__dict__.update(shown)
    part.__dict__["_undeclared"] = (run, hidden)
    return part


@cache
def _part_class(cls: type) -> type:
    """`cls` with its undeclared fields refused (one class per section type)."""

    def __getattr__(self, name: str):  # only for what the instance lacks: its undeclared fields
        run, hidden = self.__dict__["_undeclared"]
        if name in hidden:
            raise UndeclaredParam(_undeclared(run, hidden[name]))
        raise AttributeError(name)

    def __reduce__(self):
        shown = dict(self.__dict__)
        run, hidden = shown.pop("_undeclared")
        return _part, (cls, shown, run, hidden)

    return type(cls.__name__, (cls,), {"__getattr__": __getattr__, "__reduce__": __reduce__})


def stage_params(name: str, key: str | None, params: Params) -> StageParams:
    """Stage `name`'s params (instance `key`), from its declaration in `rlvr.pipeline.specs`."""
    declared = _declared(name, key, params)
    inputs = [(d, role) for d in instance_inputs(name, key, params) if (role := data_role(d))]
    ctx = StageParams(name, key, declared, _hash(declared), inputs, params)
    ctx = dataclasses.replace(ctx, config=instance_config(ctx))  # read through the guard, as is `logged`
    return dataclasses.replace(ctx, logged=logged_params(ctx))


def instance_config(params: StageParams) -> Any:
    """The settings a stage instance trains with: `grpo@v` variant v's, `sft@r` SFT run r's,
    `warmup@w` those of the SFT run w warms up, `hack` its variant's with its own seeds, steps and
    temperature; None for the stages that train nothing."""
    stage, key = params.stage, params.key
    if stage == "grpo":
        return params.variant(key)
    if stage == "sft":
        return params.sft_run(key)
    if stage == "warmup":
        return params.sft_run(params.warmup(key).run)
    if stage == "hack":  # its variant's, with the hack's own seeds, steps and temperature in their place
        h = params.hack
        grpo = params.variant(h.variant)
        return dataclasses.replace(grpo, seeds=h.seeds, steps=h.steps, temperature=h.temperature)
    return None


# --------------------------------------------------------------------------------------------
# What a stage's MLflow run logs as its params: its settings, flat, by short names.

# The stages that run TinyLM, on params.yaml's `device`: their runs log it beside their settings.
ON_DEVICE = ("warmup", "sft", "grpo", "hack", "passk")


def logged_params(params: StageParams) -> dict[str, Any]:
    """The MLflow params of a stage instance: what it ran with, flat, and where (`device`, for the
    stages that run the model)."""
    settings = _settings(params.stage, params.key, params)
    return {**settings, "device": params.device} if params.stage in ON_DEVICE else settings


def _settings(stage: str, key: str | None, params: StageParams) -> dict[str, Any]:
    """The settings of stage `stage` (instance `key`), flat."""
    if stage == "grpo":
        cfg = params.config
        return _grpo_settings(key, cfg, params.task(cfg.task).max_new_tokens)
    if stage == "sft":
        return _sft_settings(key, params.config, params)
    if stage == "warmup":
        return _warmup_settings(key, params)
    if stage == "hack":
        h = params.hack
        return {
            **_grpo_settings(h.variant, params.config, h.max_new_tokens),
            # its own start, seeds, steps, temperature and response cap replace the variant's
            **_fields(h, tuple(f.name for f in dataclasses.fields(h) if f.name != "sft")),
            "sft_run": h.sft,
        }
    if stage == "passk":
        p = params.passk
        task = params.sft_run(p.sft).task
        return {
            "sft_run": p.sft,
            "contrast": p.contrast,
            "task": task,
            "variants": params.entries("variants"),  # the ones it scores
            "n": p.n,
            "n_others": p.n_others,
            "headline": p.headline,
            "ks": p.ks,
            "temperatures": p.temperatures,
            "bootstrap": p.bootstrap,
            "master_seed": params.seed,  # every model's draws start there (`seed`: a seed run's chain)
            "max_new_tokens": params.task(task).max_new_tokens,
        }
    if stage == "worked":
        return {("worked_seed" if k == "seed" else k): v for k, v in _fields(params.worked).items()}
    if stage == "data":
        return {"master_seed": params.seed}  # the splits and noise draws
    return {}  # check, report: no settings of their own


def data_run_settings(name: str, params: StageParams) -> dict[str, Any]:
    """One SFT run's rows (the data stage's child run): its task's split and its labels' noise."""
    cfg = params.sft_run(name)
    return {
        "sft_run": name,
        "task": cfg.task,
        "heldout": params.task(cfg.task).heldout,
        "validation": params.task(cfg.task).validation,
        **_fields(cfg, ("noise", "repeats")),
        "master_seed": params.seed,
    }


def _fields(section, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The section's fields (or `names` of them), nested sections flattened with their name as prefix
    (`noise_kind`, `noise_rate`)."""
    out: dict[str, Any] = {}
    for name in names or tuple(f.name for f in dataclasses.fields(section)):
        value = getattr(section, name)
        if dataclasses.is_dataclass(value):
            out.update({f"{name}_{k}": v for k, v in _fields(value).items()})
        else:
            out[name] = value
    return out


def _model_settings(model: ModelConfig) -> dict[str, Any]:
    """TinyLM's shape: d_model, n_layer, n_head, max_len."""
    return _fields(model)


def _sft_settings(name: str, cfg: SFTConfig, params: StageParams) -> dict[str, Any]:
    """An SFT run: every SFTConfig field (its noise as `noise_kind`, `noise_rate`...), its model's
    shape (the top-level one when the run names none) and its task's."""
    names = tuple(f.name for f in dataclasses.fields(cfg) if f.name != "model")
    task = params.task(cfg.task)
    return {
        "sft_run": name,
        **_fields(cfg, names),
        **_model_settings(cfg.model or params.model),
        "heldout": task.heldout,
        "validation": task.validation,
        "max_new_tokens": task.max_new_tokens,
    }


def _warmup_settings(name: str, params: StageParams) -> dict[str, Any]:
    """A warm-up: the settings of its run that its clean epochs depend on (WARMUP_KEYS), no others."""
    w, cfg = params.warmup(name), params.config
    return {
        "warmup": name,
        "sft_run": w.run,
        **_fields(cfg, tuple(k for k in WARMUP_KEYS if k != "model")),
        **_model_settings(cfg.model or params.model),
    }


def _grpo_settings(variant: str, cfg: GRPOConfig, max_new_tokens: int) -> dict[str, Any]:
    """A GRPO run: the variant's resolved GRPOConfig (defaults with its overrides applied), its start
    (`sft_run`) and its response cap."""
    return {
        "variant": variant,
        "task": cfg.task,
        "sft_run": cfg.sft,
        **_fields(cfg, GRPO_SETTINGS),
        "max_new_tokens": max_new_tokens,
    }
