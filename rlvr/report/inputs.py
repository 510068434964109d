"""What the report layer reads, checked before it is used: one small schema per kind of file.

The verdicts (`reports/report.json`), the metrics files (`reports/metrics/`), the run records
(`reports/runs/`) and the pass@k counts (`reports/passk-counts.json`) are read by `rlvr summary`,
`rlvr diff`, `rlvr verify` and the report stage. A file cut short, left with a merge conflict or
edited by hand would otherwise surface as a traceback far from its cause, or, worse, be used: a row
of counts cut to 10 of 300 problems was compared with whole rows and moved a p-value. Each reader
here returns the file's contents when they have the shape the stages write, and otherwise raises
one InputError naming the file, the place in it and what was expected.

A schema is written with Python's own types: `str`, `int`, `float` (any number), `dict` (any
mapping); `[s]` a list of s; `{key: s}` a mapping with those keys (a key ending in "?" may be
absent; other keys are allowed); `Each(s)` a mapping whose every value is s; `Maybe(s)` s or null.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.io.files import damaged, read_json


@dataclass(frozen=True)
class Each:
    value: Any  # the schema of every value of a mapping (its keys are names: any string)


@dataclass(frozen=True)
class Maybe:
    inner: Any  # the schema, or null


NUMBER = Maybe(float)  # a value that a run without it records as null (NaN is written as null too)
INTERVAL = Maybe([NUMBER])  # [lo, hi], or null where there are too few chains for one
SEED_TABLES = {"per_seed?": Each([NUMBER]), "ci95?": Each(INTERVAL)}  # what seed_metrics writes

VERDICTS = {
    "counts": Each(int),
    "claims": Each({"verdict": str, "interval?": INTERVAL}),
    "by_class?": Each(Each(int)),
}
RECORD = {
    "mlflow_run_id?": str,
    "mlflow_seed_run_ids?": Each(str),
    "step_seconds_median?": float,
    "train_seconds?": float,
    "tokens_per_second?": float,
    **SEED_TABLES,
}
METRICS = {  # by the file name's prefix; any other metrics file is a mapping
    "grpo-": {"task": str, "seeds": [int], "variant": str, "sft?": str, **SEED_TABLES},
    "sft-": {"task": str, "seeds": [int], **SEED_TABLES},
    "passk.json": {"sft": dict, "variants": Each(dict)},
}
COUNTS = {"n": int, "counts": Each([int]), "n_by_model?": Each(int), "k_max?": int, "problems?": [str]}

_NAMES = {str: "a string", int: "an integer", float: "a number", dict: "a mapping", bool: "true or false"}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


def _expected(schema: Any) -> str:
    if isinstance(schema, Maybe):
        return f"{_expected(schema.inner)} or null"
    if isinstance(schema, list):
        return "a list"
    if isinstance(schema, (dict, Each)):
        return "a mapping"
    return _NAMES[schema]


def _fits(value: Any, schema: Any) -> bool:
    """Whether `value` has the outer type `schema` asks for (its contents are checked apart)."""
    if isinstance(schema, Maybe):
        return value is None or _fits(value, schema.inner)
    if isinstance(schema, list):
        return isinstance(value, list)
    if isinstance(schema, (dict, Each)) or schema is dict:
        return isinstance(value, dict)
    if schema is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if schema is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, schema)


def problem(value: Any, schema: Any, where: str = "") -> str | None:
    """The first place where `value` departs from `schema`, in words; None when it fits."""
    if not _fits(value, schema):
        return f"{where + ': ' if where else ''}expected {_expected(schema)}, found {_kind(value)}"
    if isinstance(schema, Maybe):
        return None if value is None else problem(value, schema.inner, where)
    prefix = f"{where}." if where else ""
    if isinstance(schema, list):
        return next((p for i, v in enumerate(value) if (p := problem(v, schema[0], f"{where}[{i}]"))), None)
    if isinstance(schema, Each):
        return next((p for k, v in value.items() if (p := problem(v, schema.value, f"{prefix}{k}"))), None)
    if isinstance(schema, dict):
        for key, sub in schema.items():
            name = key.removesuffix("?")
            if name not in value:
                if key.endswith("?"):
                    continue
                return f"{where + ': ' if where else ''}no `{name}`"
            if found := problem(value[name], sub, f"{prefix}{name}"):
                return found
    return None


def checked(path: Path, schema: Any) -> Any:
    """The contents of JSON file `path`, which must fit `schema`; else one InputError naming it."""
    data = read_json(path)
    if found := problem(data, schema):
        raise damaged(path, found)
    return data


def read_verdicts(path: Path) -> dict:
    """reports/report.json: the verdict counts and one record per claim."""
    return checked(Path(path), VERDICTS)


def read_record(path: Path) -> dict:
    """A run record (reports/runs/<file>): the stage's timings and MLflow run ids."""
    return checked(Path(path), RECORD)


def read_metrics(path: Path) -> dict:
    """A metrics file, by its kind (the schema its name's prefix picks); every per-seed table has
    one value per seed."""
    path = Path(path)
    schema = next((s for prefix, s in METRICS.items() if path.name.startswith(prefix)), dict)
    data = checked(path, schema)
    seeds = data.get("seeds")
    for key, values in (data.get("per_seed") or {}).items():
        if isinstance(seeds, list) and len(values) != len(seeds):
            raise damaged(path, f"per_seed.{key}: {len(values)} values for {len(seeds)} seeds")
    return data


def read_metrics_dir(folder: Path) -> dict[str, dict]:
    """Every metrics file of a folder, checked: {file name: contents}."""
    return {p.name: read_metrics(p) for p in sorted(Path(folder).glob("*.json"))}


def read_records_dir(folder: Path) -> dict[str, dict]:
    """Every run record of a folder, checked ({} where there is no folder: results without records)."""
    folder = Path(folder)
    return {p.name: read_record(p) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


def read_counts(path: Path) -> dict:
    """reports/passk-counts.json: correct samples per problem, a row per scored model. Every row
    has one count per problem (a row cut short would be compared with whole ones), and each count
    lies in [0, the samples drawn for its model]."""
    path = Path(path)
    data = checked(path, COUNTS)
    rows = data["counts"]
    width = len(data["problems"]) if "problems" in data else len(next(iter(rows.values()), []))
    by_model = data.get("n_by_model") or {}
    for model, row in rows.items():
        if len(row) != width:
            raise damaged(path, f"counts.{model}: {len(row)} values for {width} problems")
        n = by_model.get(model, data["n"])
        for i, c in enumerate(row):
            if not 0 <= c <= n:
                raise damaged(path, f"counts.{model}[{i}] = {c}: must lie in [0, {n}], the samples drawn")
    return data
