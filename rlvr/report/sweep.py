"""`rlvr sweep-report`: where RL sharpens and where it narrows, across a queued grid of settings.

A sweep is a set of DVC experiments over chapter B's `grpo` variant (docs/sweeps.md):

    dvc exp run --queue -S 'variants.grpo.beta=0,0.1' -S 'variants.grpo.steps=50,100'
    RLVR_THREADS=1 dvc queue start -j 2

This module reads what `dvc exp show --json` reports for every experiment (its params.yaml values)
with the passk stage's results at the experiment's commit (`reports/metrics/passk.json`: DVC's
metrics are the stages' short headlines, without each variant's pass@k) and tabulates, per grid point, GRPO's
pass@1 and pass@64 against the SFT start's, the problems never solved, and the crossover k per
chain (`rlvr.passk.first_crossing`): narrowing is pass@64 below SFT's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr.fields import ConfigError, flatten
from rlvr.io.gitinfo import committed_bytes

PASSK = "reports/metrics/passk.json"  # the passk stage's results: git keeps them, in every commit
FOOTNOTE = (
    'Seed means of the variant\'s seeds, on the held-out problems (64 samples each). "narrows?": the '
    "seed-mean pass@64 is below the SFT start's; a point comparison, no interval (`rlvr diff` gives one "
    "for two variants of one workspace).\n"
)


def results_at(rev: str, root: Path = Path(".")) -> dict | None:
    """The passk stage's results as commit `rev` holds them (the workspace: as on disk); None where
    there are none (an experiment that failed before passk)."""
    if rev == "workspace":
        path = root / PASSK
        return json.loads(path.read_text()) if path.is_file() else None
    raw = committed_bytes(root, rev, PASSK)
    return None if raw is None else json.loads(raw)


def with_results(show: list[dict], read: Callable[[str], dict | None] = results_at) -> list[dict]:
    """`dvc exp show --json` with each entry's pass@k results (`read` of its rev) among its metrics,
    under PASSK, where `experiments` finds them."""
    for entry in _entries(show):
        data, results = entry.get("data"), read(entry.get("rev") or "")
        if isinstance(data, dict) and results is not None:
            data["metrics"] = {**(data.get("metrics") or {}), PASSK: {"data": results}}
    return show


def _entries(show: list[dict]):
    """Every commit of `dvc exp show --json` and every experiment under it."""
    for top in show:
        yield top
        for group in top.get("experiments") or []:
            yield from group.get("revs") or []


def experiments(show: list[dict]) -> list[dict]:
    """Flatten `dvc exp show --json`: [{"name", "rev", "params": {dotted: value}, "passk": {...}}] for
    each commit (the baseline) and each of its experiments that ran to the end and has pass@k
    results. Failed experiments are left out (DVC shows them with their baseline's numbers); so is
    the workspace, when it is its commit unchanged. A variant's setting it takes from
    `grpo.defaults` is filled in (`variants.grpo.beta` = `grpo.defaults.beta` unless it sets it)."""
    out = []

    def add(entry: dict, name: str, experiment: bool) -> None:
        data = entry.get("data") or {}
        passk = ((data.get("metrics") or {}).get(PASSK) or {}).get("data")
        params = ((data.get("params") or {}).get("params.yaml") or {}).get("data")
        if passk and params and not entry.get("error"):
            out.append(
                {
                    "name": name,
                    "rev": entry.get("rev"),
                    "params": _effective(params),
                    "passk": passk,
                    "experiment": experiment,
                }
            )

    for top in show:
        add(top, _label(top), experiment=False)
        for group in top.get("experiments") or []:
            for rev in group.get("revs") or []:
                add(rev, _label(rev), experiment=True)
    if len(out) > 1 and out[0]["rev"] == "workspace" and _same(out[0], out[1]):
        out.pop(0)
    return out


def _label(entry: dict) -> str:
    """An experiment's name, else its commit's short hash; the workspace by that word, whole."""
    rev = entry.get("rev") or "?"
    return entry.get("name") or (rev if rev == "workspace" else rev[:7])


def _same(a: dict, b: dict) -> bool:
    return a["params"] == b["params"] and a["passk"] == b["passk"]


def _effective(params: dict) -> dict[str, Any]:
    """Flat params with every variant's inherited `grpo.defaults` settings written out."""
    flat = flatten(params)
    defaults = (params.get("grpo") or {}).get("defaults") or {}
    for variant in params.get("variants") or {}:
        for key, value in defaults.items():
            flat.setdefault(f"variants.{variant}.{key}", value)
    return flat


def varied(exps: list[dict]) -> list[str]:
    """The params that differ between the experiments (the sweep's axes), in params.yaml order."""
    keys = list(dict.fromkeys(k for e in exps for k in e["params"]))
    return [k for k in keys if len({json.dumps(e["params"].get(k)) for e in exps}) > 1]


def sweep_rows(exps: list[dict], variant: str = "grpo") -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per experiment with results for `variant`."""
    axes = varied(exps)
    header = [
        "experiment",
        *axes,
        "pass@1 SFT → RL",
        "pass@64 SFT / RL",
        "never solved SFT / RL",
        "crossover k (chains crossing)",
        "narrows?",
    ]
    rows = []
    for e in exps:
        v = e["passk"].get("variants", {}).get(variant)
        if v is None:
            continue
        sft = e["passk"]["sft"]
        narrows = "yes" if v["pass_at_n_rl"] < sft["pass_at_n"] else "no"
        rows.append(
            [
                e["name"],
                *(str(e["params"].get(a)) for a in axes),
                f"{sft['pass_at_1']:.3f} → {v['pass_at_1_rl']:.3f}",
                f"{sft['pass_at_n']:.3f} / {v['pass_at_n_rl']:.3f}",
                f"{sft['never_solved']:.3g} / {v['never_solved_rl']:.2f}",
                crossover_cell(v, max(e["params"]["passk.ks"])),
                narrows,
            ]
        )
    return header, rows


def crossover_cell(v: dict, k_max: int) -> str:
    """The crossover of the variant's chain-mean curves (`rlvr.passk.mean_crossing`: 0 when RL is not
    ahead at k = 1, k_max + 1 when it never falls below) and its chains whose own curves cross."""
    k = v["crossover_k"]
    where = "RL not ahead at k = 1" if k == 0 else "none" if k > k_max else f"{k:g}"
    return f"{where} ({v['chains_crossing']}/{v['chains']})"


def sweep_figure(exps: list[dict], path: Path, variant: str = "grpo") -> Path | None:
    """pass@1 and pass@64 of RL minus SFT's against the first axis, one line per value of the second."""
    from rlvr.report.plots import legend_below, new_figure, save

    axes = varied(exps)
    points = [e for e in exps if variant in e["passk"].get("variants", {})]
    if not axes or not points:
        return None
    x_key, group_key = axes[0], (axes[1] if len(axes) > 1 else None)
    fig = new_figure((11, 4))
    left, right = fig.subplots(1, 2)
    groups = sorted({json.dumps(e["params"].get(group_key)) for e in points}) if group_key else ["null"]
    for g in groups:
        sel = sorted(
            (e for e in points if json.dumps(e["params"].get(group_key)) == g),
            key=lambda e: e["params"][x_key],
        )
        xs = [e["params"][x_key] for e in sel]
        label = f"{group_key} = {json.loads(g)}" if group_key else variant
        for ax, key, base in ((left, "pass_at_1_rl", "pass_at_1"), (right, "pass_at_n_rl", "pass_at_n")):
            ax.plot(
                xs,
                [e["passk"]["variants"][variant][key] - e["passk"]["sft"][base] for e in sel],
                "o-",
                label=label,
            )
    for ax, what in ((left, "pass@1"), (right, "pass@64")):
        ax.axhline(0, color="black", lw=0.8)
        note = " (below 0: RL narrows)" if what == "pass@64" else ""
        ax.set(
            xlabel=x_key, ylabel=f"{what}: RL minus SFT (seed mean)", title=f"{what} gain of {variant}{note}"
        )
        ax.grid(alpha=0.3)
    legend_below(fig)
    return save(fig, path)


def reaches(key: str, feeding: set[str]) -> bool:
    """Whether a swept key (`variants.grpo.beta`) is, or lies inside, a key the pass@k stage reads
    (`variants.grpo`)."""
    return any(key == f or key.startswith(f + ".") for f in feeding)


def sweep_report(show: list[dict], out: Path, feeding: set[str] | None = None) -> dict:
    """Write `out`/sweep.md (the table) and `out`/sweep.png (the figure, with sweep.svg beside it) from
    `dvc exp show --json`. Refused in one line, `out` left as it is, when there is no sweep to show:
    no experiment, or experiments whose pass@k results are all the same because no param swept
    reaches pass@k (`feeding`: the params keys the passk stage reads, itself or upstream; None when
    unknown, and then equal results alone refuse). Equal results from params that do reach pass@k
    are a finding, and the table says so."""
    if out.exists() and not out.is_dir():
        raise ConfigError(
            f"--out {out}: not a folder (sweep-report writes sweep.md and sweep.png into a folder)"
        )
    exps = experiments(show)
    if not any(e["experiment"] for e in exps) or len(exps) < 2:
        raise ConfigError(
            f"sweep-report: no DVC experiment with pass@k results (only {len(exps)} baseline or workspace "
            f"row(s)); {out} is left as it is: queue a sweep first (docs/sweeps.md)"
        )
    axes = varied(exps)
    same = len({json.dumps(e["passk"], sort_keys=True) for e in exps}) == 1
    if same and (feeding is None or not any(reaches(k, feeding) for k in axes)):
        raise ConfigError(
            f"sweep-report: every experiment's pass@k results are the same: the params swept "
            f"({', '.join(axes) or 'none'}) do not reach pass@k; {out} is left as it is: sweep "
            "a param of the passk stage or of a variant it scores (docs/sweeps.md)"
        )
    header, rows = sweep_rows(exps)
    table = "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        + ["| " + " | ".join(r) + " |" for r in rows]
    )
    from rlvr.io.files import write_text

    note = (
        "Every experiment's pass@k results are the same: the params swept feed the passk stage, but "
        "changed none of its counts.\n\n"
        if same
        else ""
    )
    write_text(out / "sweep.md", "# Sweep: where GRPO narrows\n\n" + table + "\n\n" + note + FOOTNOTE)
    figure = sweep_figure(exps, out / "sweep.png")
    return {
        "experiments": len(rows),
        "axes": axes,
        "same_results": same,
        "table": str(out / "sweep.md"),
        "figure": None if figure is None else str(figure),
    }
