"""Settings dataclasses with typed, range-checked fields: what each maths module's config is made of.

The maths' settings (`rlvr.configs`) are frozen dataclasses subclassing `Section`. A field's type
says everything a value must satisfy:

- `Literal[...]` for a choice;
- `Annotated[int | float, AtLeast(x) / Above(x) / Between(lo, hi)]` for a range, declared once,
  beside the field (`Count`, `Positive`, `NonNegative`, `Probability`, `Seed` name the common ones;
  a range refuses NaN and infinities);
- `Seeds` for a list of chains' seeds: at least one, each a `Seed`, none repeated;
- `list[x]`, `bool`, `int`, `float` (finite: NaN and infinities are refused), `str` as usual.
Rules that tie two fields together (d_model % n_head) are the section's `validate`.

Nothing here reads a file: `rlvr.io.params` builds sections from params.yaml and checks each
value against these annotations.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any


class UserError(Exception):
    """An error the user can fix (a param, a missing or foreign input, an unreachable server): the CLI
    prints it as one line naming what is wrong and exits with status 2, no traceback."""


class ConfigError(UserError, ValueError):
    """A bad or missing value in params.yaml (or another config file)."""


def require(cond: bool, path: str, value: Any, rule: str) -> None:
    """Raise ConfigError("<path> = <value>: <rule>") unless `cond` holds: one line, whatever the
    path holds (a key with a newline or another control character in it is shown escaped)."""
    if not cond:
        shown = re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], path)
        raise ConfigError(f"{shown} = {value!r}: {rule}")


# --------------------------------------------------------------------------------------------
# Ranges, declared in a field's annotation: `lr: Annotated[float, Above(0)]`. A range refuses NaN and
# +-inf before comparing: `inf >= 0` holds and every comparison with NaN is False, so a bound alone
# would let an infinite learning rate through and refuse or pass a NaN by the way it is written.


def _bound(x: float) -> str:
    """A bound as params.yaml would write it: an int exactly (a seed's 4294967295), a float by %g."""
    return str(x) if isinstance(x, int) else f"{x:g}"


def _not_finite(v) -> str | None:
    if isinstance(v, int):  # exact, however large (math.isfinite would overflow converting 10**400)
        return None
    return None if math.isfinite(v) else "must be a finite number"


@dataclass(frozen=True)
class AtLeast:
    lo: float

    def check(self, v) -> str | None:
        return _not_finite(v) or (None if v >= self.lo else f"must be >= {_bound(self.lo)}")


@dataclass(frozen=True)
class Above:
    lo: float

    def check(self, v) -> str | None:
        return _not_finite(v) or (None if v > self.lo else f"must be > {_bound(self.lo)}")


@dataclass(frozen=True)
class Between:
    lo: float
    hi: float
    what: str = ""  # what the range is, said after it: "a 32-bit seed"

    def check(self, v) -> str | None:
        if (problem := _not_finite(v)) or self.lo <= v <= self.hi:
            return problem
        return f"must lie in [{_bound(self.lo)}, {_bound(self.hi)}]" + (
            f" ({self.what})" if self.what else ""
        )


@dataclass(frozen=True)
class DistinctSeeds:
    """A list of seeds (chains): at least one, no two alike (a repeated seed would train one chain
    twice and count it as two)."""

    def check(self, seeds: list) -> str | None:
        if not seeds:
            return "list at least one seed"
        repeated = sorted({s for s in seeds if seeds.count(s) > 1})
        if repeated:
            return f"seeds must differ ({', '.join(map(str, repeated))} repeated)"
        return None


Count = Annotated[int, AtLeast(1)]  # a size or a number of steps: at least one
Positive = Annotated[float, Above(0)]
NonNegative = Annotated[float, AtLeast(0)]
Probability = Annotated[float, Between(0, 1)]
# A seed: a non-negative 32-bit integer, which every generator here takes (numpy's refuses a negative
# seed, torch's one past 2**64 - 1, numpy's legacy one past 2**32 - 1).
SEED_MAX = 2**32 - 1
Seed = Annotated[int, Between(0, SEED_MAX, "a 32-bit seed")]
Seeds = Annotated[list[Seed], DistinctSeeds()]  # a run's chains: one or more distinct seeds


# --------------------------------------------------------------------------------------------
# Dotted names: a params.yaml key as `variants.grpo.beta`.


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}: a nested mapping under dotted names, as MLflow's flat params and
    a sweep's axes name them."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


# --------------------------------------------------------------------------------------------
# Sections.


class Section:
    """Base of every settings dataclass: a frozen dataclass whose fields' annotations are its rules
    (`rlvr.io.params.check_value` applies them) and whose `validate` holds the rest."""

    def validate(self, path: str) -> None:
        """Rules that involve more than one field; single-field rules are in the annotations."""
