"""Where RL narrows, by sampling temperature: the figures, tables and sentence the report shows.

Two views. `passk_by_temperature` (drawn by the `passk` stage): GRPO's pass@k minus its own chain's
SFT start's at each of `passk.temperatures`, one panel each, with the crossover of every chain. The
narrowing map (drawn by the `report` stage from `rlvr starts`' counts, reports/starts/starts.json):
for each candidate start of chapter B and each temperature, the paired pass@64 difference GRPO - SFT
with its 95% interval over chains, and a sentence computed from those intervals; beside it, whether
the pass@k-trained advantage (`passk_adv`) narrows less than `grpo` on the pipeline's own chains.
Every number comes from the counts (rlvr.narrowing); nothing here is written in advance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlvr.narrowing import ABOVE, ACROSS, BELOW, ZERO, paired_difference, rl_minus_start, temperature_key
from rlvr.passk import crossings_text
from rlvr.report.compare import delta_bounds
from rlvr.report.document import Heading, Para, Table
from rlvr.report.passkplots import crossover_words
from rlvr.report.plots import figure_title, legend_below, new_figure, palette, save
from rlvr.stats import metric_bounds

# Each figure's chapter and caption, as rlvr.report.plots.CAPTIONS has the others'.
CAPTIONS: dict[str, tuple[str, str]] = {
    "passk-temperatures.png": (
        "B",
        "GRPO's pass@k minus its own chain's SFT start's on the 300 held-out problems, one panel per "
        "sampling temperature (chain mean, 95% band over chains); a dot marks a chain's crossover, "
        "the first k where GRPO falls strictly below its start.",
    ),
    "narrowing-map.png": (
        "B",
        "The narrowing map: pass@64 of GRPO minus its SFT start's, paired by chain, for each candidate "
        "start of chapter B and sampling temperature (`rlvr starts`, validation problems), with the "
        "95% interval over chains; below 0 RL narrows coverage.",
    ),
}
NOT_MEASURED = "not yet measured: run `rlvr starts`"
PASSK_ADV, BASE = "passk_adv", "grpo"  # the pass@k-trained advantage, and what it is paired with


def _k_axis(ax, n: int) -> None:
    """k on a log2 axis, every power of two labelled."""
    ticks = [2**i for i in range(n.bit_length()) if 2**i <= n]
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlim(1, n)


def _crossing_note(per_chain: list, k_max: int) -> str:
    """How many chains cross, and at which k (past four chains, their range and median): the small
    panels' words on one line, so a legend entry stays short however many chains there are."""
    return crossover_words(per_chain, k_max).replace(":\n", " at ")


def passk_by_temperature(
    by_t: dict[str, tuple[dict, dict]], variants: list[str], k_max: int, path: Path
) -> Path:
    """One panel per temperature: each variant's pass@k minus its chain's SFT's, chain mean with its
    95% band (clipped to [-1, 1], the range of a difference of two shares), on a symmetric-log axis
    (linear within +-0.01), a dot on the zero line at each chain's crossover. by_t: temperature key
    -> (curves, metrics) as `summarise_counts` gives them at that temperature."""
    lo_bound, hi_bound = delta_bounds(metric_bounds("pass_at_k"))
    fig = new_figure((5.2 * len(by_t), 4.6))
    axes = np.atleast_1d(fig.subplots(1, len(by_t), sharey=True))
    for ax, (key, (curves, metrics)) in zip(axes, by_t.items()):
        ax.axhline(0, color="black", lw=1)
        for colour, v in zip(palette(len(variants)), variants):
            rows, per_chain = curves[v], metrics["variants"][v]["crossover_per_chain"]
            ks = [r["k"] for r in rows]
            ax.plot(
                ks,
                [r["minus_sft"] for r in rows],
                color=colour,
                lw=1.6,
                label=f"{v}: {_crossing_note(per_chain, k_max)}",
            )
            ax.fill_between(
                ks,
                [max(r["minus_sft_lo"], lo_bound) for r in rows],
                [min(r["minus_sft_hi"], hi_bound) for r in rows],
                color=colour,
                alpha=0.15,
                lw=0,
            )
            for k in sorted({int(c) for c in per_chain if str(c).isdigit()}):
                ax.plot([k], [0], "o", color=colour, ms=6, mec="black", mew=0.6)
        ax.set_yscale("symlog", linthresh=0.01)
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, -0.01), max(high, 0.01))  # at least the linear part: a flat 0 reads as 0
        ax.set(title=f"sampled at T = {key}", xlabel="k (samples per problem)")
        _k_axis(ax, k_max)
        ax.grid(alpha=0.3, which="both")
    legend_below(fig, fontsize=7)
    axes[0].set_ylabel("pass@k minus the chain's SFT (symlog, linear within 0.01)")
    figure_title(
        fig, "GRPO's pass@k minus its SFT start's, by sampling temperature (below 0: the start solves more)"
    )
    return save(fig, path)


# --------------------------------------------------------------------------------------------
# pass@k by temperature: the SFT start and the headline variants (the `passk` stage's numbers)


def _k_text(k: float, k_max: int) -> str:
    """A crossover k as the tables write it: the k, "> k_max" (never below the start up to k_max) or
    "none" (RL not ahead at k = 1), `rlvr.passk.mean_crossing`'s numbers."""
    k = round(k)
    return "none" if k <= 0 else f"> {k_max}" if k > k_max else str(k)


def temperature_rows(passk: dict) -> list[list[str]]:
    """One row per headline variant and temperature (then greedy): the SFT start's pass@1 and pass@64
    beside the variant's (chain means), the crossover of the chain-mean curves with its 95% interval
    and every chain's crossover (a k, or why none). [] before the stage scored more than one
    temperature. passk: reports/metrics/passk.json."""
    temps, greedy = passk.get("temperatures"), passk.get("greedy") or {}
    if not temps or not passk.get("by_temperature"):
        return []
    k_max = passk["k_max"]
    first = temperature_key(temps[0])
    by_t = {first: passk, **passk["by_temperature"]}
    variants = [v for v in greedy if v != "sft"]
    rows = []
    for v in variants:
        for key, m in by_t.items():
            sft, e = m["sft"], m["variants"][v]
            lo, hi = e["crossover_k_ci95"]
            rows.append(
                [
                    v,
                    f"T = {key}" + (" (the claims')" if key == first else ""),
                    f"{sft['pass_at_1']:.3f} → {e['pass_at_1_rl']:.3f}",
                    f"{sft['pass_at_n']:.3f} → {e['pass_at_n_rl']:.3f}",
                    f"{_k_text(e['crossover_k'], k_max)} [{_k_text(lo, k_max)}, {_k_text(hi, k_max)}]",
                    crossings_text(e["crossover_per_chain"]),
                ]
            )
        if v in greedy and "sft" in greedy:
            rows.append(
                [
                    v,
                    "greedy",
                    f"{greedy['sft']['pass_at_1']:.3f} → {greedy[v]['pass_at_1']:.3f}",
                    "–",
                    "–",
                    "–",
                ]
            )
    return rows


# --------------------------------------------------------------------------------------------
# The narrowing map: `rlvr starts`' candidates x temperatures, and passk_adv against grpo

WORDS = {BELOW: "narrows", ABOVE: "widens", ZERO: "no change on any chain", ACROSS: "cannot tell"}


def narrowing_map(starts: dict | None) -> list[dict] | None:
    """For each candidate start and temperature of `rlvr starts`' record, pass@64 (k = its n) of
    GRPO minus its own chain's SFT start's, paired by chain (`rl_minus_start`): [{"start",
    "temperature", "k", "mean", "ci95", "per_chain", "chains", "direction"}]. None where the record is
    missing or predates temperatures (it then holds T = 1 counts only)."""
    if not starts or not starts.get("temperatures"):
        return None
    n, temps = starts["n"], starts["temperatures"]
    rows = []
    for name in starts["candidates"]:
        entry = starts["starts"][name]
        for t in temps:
            key = temperature_key(t)
            counts = (
                entry["counts"] if key == temperature_key(temps[0]) else entry["counts_by_temperature"][key]
            )
            diff = rl_minus_start(counts, "grpo", entry["seeds"], n, n, n)
            rows.append({"start": name, "temperature": t, "k": n, **diff})
    return rows


def _reps(counts: dict, name: str, seed: int) -> int:
    """GRPO seeds a chain of `name` was scored with: "{name}/seed{s}" and "-g{r}" for r >= 1."""
    r = 1
    while f"{name}/seed{seed}-g{r}" in counts:
        r += 1
    return r


def _chains(counts: dict, names: tuple[str, ...]) -> list[int]:
    """The chains every one of `names` was scored on."""
    seeds = [
        {int(k.split("/seed")[1].split("-")[0]) for k in counts if k.split("/seed")[0] == n} for n in names
    ]
    return sorted(set.intersection(*seeds)) if seeds else []


def advantage_against_base(problems: dict | None, rl: str = PASSK_ADV, base: str = BASE) -> list[dict]:
    """Does `rl` narrow less than `base`? At each temperature where both were scored from the
    pipeline's start: each one's pass@k_max minus its own chain's SFT's, and `rl` minus `base` paired
    by chain (the start cancels: it is their pass@k_max difference). [] without counts for both.
    problems: reports/passk-counts.json."""
    if not problems:
        return []
    temps = problems.get("temperatures") or [None]
    by_t = {temps[0]: problems["counts"]}
    by_t.update({t: problems.get("by_temperature", {}).get(temperature_key(t), {}) for t in temps[1:]})
    k, n_of = problems["k_max"], problems.get("n_by_model") or {}
    out = []
    for t, counts in by_t.items():
        seeds = _chains(counts, ("sft", rl, base))
        if len(seeds) < 1:
            continue
        n = {m: n_of.get(f"{m}/seed{seeds[0]}", problems["n"]) for m in ("sft", rl, base)}
        sides = {
            m: rl_minus_start(counts, m, seeds, n["sft"], n[m], k, _reps(counts, m, seeds[0]))
            for m in (rl, base)
        }
        out.append(
            {
                "temperature": t,
                "chains": seeds,
                "k": k,
                rl: sides[rl],
                base: sides[base],
                "difference": paired_difference(sides[base]["per_chain"], sides[rl]["per_chain"]),
            }
        )
    return out


def _interval(d: dict, digits: int = 3) -> str:
    """ "-0.012 [-0.03, 0.004]": a paired difference's mean and 95% interval (the mean alone without one)."""
    mean = f"{d['mean']:+.{digits}f}"
    return mean if d["ci95"] is None else f"{mean} [{d['ci95'][0]:+.{digits}f}, {d['ci95'][1]:+.{digits}f}]"


def map_rows(rows: list[dict]) -> list[list[str]]:
    """The narrowing map as table rows: start, temperature, chains, GRPO - SFT at pass@64 with its
    interval, each chain's value, and what the interval says."""
    return [
        [
            r["start"],
            f"T = {temperature_key(r['temperature'])}",
            str(r["chains"]),
            _interval(r),
            ", ".join(f"{x:+.3f}" for x in r["per_chain"]),
            WORDS[r["direction"]],
        ]
        for r in rows
    ]


def advantage_rows(rows: list[dict], rl: str = PASSK_ADV, base: str = BASE) -> list[list[str]]:
    """`advantage_against_base` as table rows: temperature, chains, each side minus its start, and
    their paired difference."""
    return [
        [
            "–" if r["temperature"] is None else f"T = {temperature_key(r['temperature'])}",
            ", ".join(map(str, r["chains"])),
            _interval(r[base]),
            _interval(r[rl]),
            _interval(r["difference"]),
            {BELOW: f"{rl} narrows more", ABOVE: f"{rl} narrows less", ZERO: "the same on every chain"}.get(
                r["difference"]["direction"], "cannot tell"
            ),
        ]
        for r in rows
    ]


def _places(rows: list[dict]) -> str:
    """ "two_digit (T = 1, 0.6) and two_digit_slips (T = 1)": map cells grouped by start."""
    by_start: dict[str, list[str]] = {}
    for r in rows:
        by_start.setdefault(r["start"], []).append(temperature_key(r["temperature"]))
    parts = [f"`{s}` (T = {', '.join(ts)})" for s, ts in by_start.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def narrowing_sentence(
    rows: list[dict] | None, adv: list[dict], rl: str = PASSK_ADV, base: str = BASE
) -> str:
    """What the map and the advantage comparison say, computed from their intervals: where RL
    narrows (GRPO's pass@64 below its start's, the 95% interval over chains wholly below 0), where
    it widens, where no chain differs and where the interval cannot tell; then whether `rl` narrows
    less than `base` on the pipeline's own chains."""
    parts = []
    if rows is None:
        parts.append(f"The narrowing map is {NOT_MEASURED}.")
    else:
        groups = {d: [r for r in rows if r["direction"] == d] for d in (BELOW, ABOVE, ZERO, ACROSS)}
        k = rows[0]["k"] if rows else 64
        parts.append(
            f"RL narrows coverage (GRPO's pass@{k} below its start's, the 95% interval over chains wholly "
            f"below 0) from {_places(groups[BELOW])}."
            if groups[BELOW]
            else "RL narrows coverage nowhere on the map: no interval lies wholly below 0."
        )
        if groups[ABOVE]:
            parts.append(f"It widens coverage (interval wholly above 0) from {_places(groups[ABOVE])}.")
        if groups[ZERO]:
            parts.append(f"No chain's pass@{k} moves from {_places(groups[ZERO])}.")
        if groups[ACROSS]:
            parts.append(f"The interval holds 0 (cannot tell) from {_places(groups[ACROSS])}.")
    for r in adv:
        d = r["difference"]
        at = "" if r["temperature"] is None else f" at T = {temperature_key(r['temperature'])}"
        verdict = {
            ABOVE: f"`{rl}` narrows less than `{base}`",
            BELOW: f"`{rl}` narrows more than `{base}`",
            ZERO: f"`{rl}` and `{base}` do not differ on any chain",
        }.get(
            d["direction"], f"which of `{rl}` and `{base}` narrows less cannot be told (the interval holds 0)"
        )
        parts.append(
            f"On the pipeline's own chains ({', '.join(map(str, r['chains']))}){at}, pass@{r['k']} minus the "
            f"start's is {_interval(r[rl])} for `{rl}` and {_interval(r[base])} for `{base}`; paired by "
            f"chain, `{rl}` - `{base}` is {_interval(d)}: {verdict}."
        )
    return " ".join(parts)


def narrowing_map_figure(
    rows: list[dict], adv: list[dict], path: Path, rl: str = PASSK_ADV, base: str = BASE
) -> Path:
    """Left: the narrowing map, one group per candidate start, one marker per temperature, the
    paired pass@64 difference GRPO - SFT with its 95% interval over chains (clipped to [-1, 1]).
    Right (when the pipeline scored both): `base` and `rl` each minus the start on its own chains."""
    lo_bound, hi_bound = delta_bounds(metric_bounds("pass_at_64"))
    panels = 2 if adv else 1
    fig = new_figure((6.4 * panels, 4.6))
    axes = np.atleast_1d(fig.subplots(1, panels))

    def draw(ax, x: float, d: dict, color: str, label: str | None, marker: str = "o") -> None:
        ci = d["ci95"] or [d["mean"], d["mean"]]
        err = [[d["mean"] - max(ci[0], lo_bound)], [min(ci[1], hi_bound) - d["mean"]]]
        ax.errorbar([x], [d["mean"]], yerr=err, fmt=marker, color=color, capsize=4, label=label)

    starts = list(dict.fromkeys(r["start"] for r in rows))
    temps = list(dict.fromkeys(temperature_key(r["temperature"]) for r in rows))
    width = 0.5 / max(len(temps), 1)
    for r in rows:
        j = temps.index(temperature_key(r["temperature"]))
        first = r["start"] == starts[0]
        x = starts.index(r["start"]) + (j - (len(temps) - 1) / 2) * width
        draw(axes[0], x, r, f"C{j}", f"T = {temps[j]}" if first else None)
    k = rows[0]["k"] if rows else 64
    axes[0].set_xticks(range(len(starts)), starts)
    axes[0].set_xlim(-0.5, len(starts) - 0.5)
    axes[0].set(
        xlabel="candidate start (rlvr starts, validation problems)",
        ylabel=f"pass@{k}: GRPO minus its SFT start (paired by chain)",
        title="where GRPO narrows its start, by temperature",
    )
    for i, r in enumerate(adv):
        t = "" if r["temperature"] is None else f"T = {temperature_key(r['temperature'])}"
        for j, name in enumerate((base, rl)):
            draw(axes[-1], j + (i - (len(adv) - 1) / 2) * 0.2, r[name], f"C{i}", t if j == 0 else None, "s")
    if adv:
        axes[-1].set_xticks([0, 1], [base, rl])
        axes[-1].set_xlim(-0.5, 1.5)
        axes[-1].set(
            xlabel="variant (the pipeline's start and chains, held-out problems)",
            ylabel=f"pass@{adv[0]['k']}: the variant minus its SFT start",
            title=f"does {rl} narrow less than {base}?",
        )
    for ax in axes:
        ax.axhline(0, color="black", lw=1)
        ax.grid(alpha=0.3)
    legend_below(fig)
    figure_title(
        fig, f"pass@{k} of RL minus its start, mean and 95% interval over chains (below 0: RL narrows)"
    )
    return save(fig, path)


# --------------------------------------------------------------------------------------------
# The report's section

TEMPERATURES = (
    "pass@k of the SFT start and of each headline variant at every sampling temperature of "
    "`passk.temperatures` (the first is the one the claims are judged at), on the {problems} held-out "
    "problems: chain means, the crossover of the chain-mean curves with its 95% bootstrap interval "
    'over chains and problems ("> {k}": never below the start up to k = {k}; "none": not ahead at '
    "k = 1), and every chain's own crossover (a k, or why none). Greedy: one greedy sample per problem."
)
MAP = (
    "For each candidate start of chapter B (`rlvr starts`: every chain trained to the start's target, "
    "scored on the validation problems with {n} samples) and each sampling temperature: pass@{n} of "
    "GRPO minus its own chain's SFT start's, its mean and 95% t-interval over chains. Below 0 on the "
    "whole interval, RL narrows coverage; above 0, it widens it."
)


def narrowing_blocks(passk: dict, problems: dict | None, starts: dict | None, figures: list) -> list:
    """The section: pass@k by temperature, the narrowing map with its sentence and table, `passk_adv`
    against `grpo`, and `figures` (the map's, as blocks). A missing or pre-temperature `rlvr starts`
    record reads as not yet measured."""
    blocks: list = [Heading("Where RL narrows, by temperature (chapter B)", 2, "narrowing")]
    rows = temperature_rows(passk)
    if rows:
        blocks += [
            Para(TEMPERATURES.format(problems=passk["problems"], k=passk["k_max"])),
            Table(
                [
                    "variant",
                    "sampled at",
                    "pass@1 SFT → RL",
                    f"pass@{passk['k_max']} SFT → RL",
                    "crossover k [95%]",
                    "per chain",
                ],
                rows,
                "temperatures",
            ),
        ]
    cells, adv = narrowing_map(starts), advantage_against_base(problems)
    blocks.append(Heading("The narrowing map", 3, "narrowing-map"))
    if starts and cells:
        blocks.append(Para(MAP.format(n=starts["n"])))
    blocks.append(Para(narrowing_sentence(cells, adv)))
    if cells:
        blocks.append(
            Table(
                [
                    "start",
                    "sampled at",
                    "chains",
                    f"pass@{cells[0]['k']} GRPO - SFT [95%]",
                    "per chain",
                    "RL",
                ],
                map_rows(cells),
                "narrowing",
            )
        )
    if adv:
        blocks.append(
            Table(
                [
                    "sampled at",
                    "chains",
                    f"pass@{adv[0]['k']} {BASE} - SFT [95%]",
                    f"pass@{adv[0]['k']} {PASSK_ADV} - SFT [95%]",
                    f"{PASSK_ADV} - {BASE}, paired [95%]",
                    "which narrows less",
                ],
                advantage_rows(adv),
                "narrowing-adv",
            )
        )
    return blocks + figures
