"""Where RL narrows, by temperature: the paired differences over chains (rlvr.narrowing), the
narrowing map and its sentence (rlvr.report.narrowing), on synthetic counts whose answer is known."""

import json
import statistics

import pytest
from conftest import at_head

from rlvr.narrowing import (
    ABOVE,
    ACROSS,
    BELOW,
    ZERO,
    chain_pass_at,
    greedy_summary,
    paired_difference,
    temperature_key,
)
from rlvr.report import narrowing
from rlvr.report.document import markdown

P, N = 20, 4  # problems, samples per problem: pass@4 of a problem is 1 exactly when c > 0
T_975_DF3 = 3.182446305284263  # scipy.stats.t.ppf(0.975, 3)


def solved(m: int) -> list[int]:
    """Counts (P,) with the first m problems never solved, the others solved twice in N."""
    return [0] * m + [2] * (P - m)


def candidate(unsolved_by_grpo: list[int], unsolved_by_sft: int = 0) -> dict:
    """One candidate's counts: four chains whose SFT start leaves `unsolved_by_sft` problems unsolved
    and whose GRPO run leaves unsolved_by_grpo[s]: pass@4 of GRPO minus SFT is -(m_s - m_sft) / P."""
    counts = {}
    for s, m in enumerate(unsolved_by_grpo):
        counts[f"sft/seed{s}"] = solved(unsolved_by_sft)
        counts[f"grpo/seed{s}"] = solved(m)
    return {"seeds": list(range(len(unsolved_by_grpo))), "counts": counts}


NARROWS, WIDENS, UNSURE, SAME = [4, 5, 6, 4], [0, 1, 0, 0], [2, 0, 3, 1], [3, 3, 3, 3]


def starts_record(by_temperature: dict[str, dict[str, dict]]) -> dict:
    """A starts.json with temperatures: {temperature key: {candidate: candidate(...)}}; the first key
    is the first temperature."""
    keys = list(by_temperature)
    names = list(by_temperature[keys[0]])
    starts = {}
    for name in names:
        entry = by_temperature[keys[0]][name]
        starts[name] = {
            "seeds": entry["seeds"],
            "counts": entry["counts"],
            "counts_by_temperature": {k: by_temperature[k][name]["counts"] for k in keys[1:]},
        }
    return {"n": N, "temperatures": [float(k) for k in keys], "candidates": names, "starts": starts}


def test_a_paired_difference_is_the_t_interval_of_the_per_chain_differences():
    a, b = [0.9, 0.8, 0.95, 0.7], [0.85, 0.6, 0.9, 0.72]
    d = [y - x for x, y in zip(a, b)]
    half = T_975_DF3 * statistics.stdev(d) / 2
    got = paired_difference(a, b)
    assert got["per_chain"] == pytest.approx(d) and got["mean"] == pytest.approx(statistics.fmean(d))
    assert got["ci95"] == pytest.approx([statistics.fmean(d) - half, statistics.fmean(d) + half])
    assert got["direction"] == ACROSS and got["chains"] == 4


def test_a_difference_beyond_what_two_shares_allow_is_clipped_to_minus_one_one():
    got = paired_difference([0.0, 1.0, 0.0, 0.5], [1.0, 0.0, 1.0, 0.5])
    assert got["ci95"][0] == -1.0 and got["ci95"][1] == 1.0


@pytest.mark.parametrize(
    "unsolved, direction",
    [(NARROWS, BELOW), (WIDENS, ABOVE), (UNSURE, ACROSS), (SAME, ZERO)],
)
def test_the_direction_is_where_the_interval_lies(unsolved, direction):
    c = candidate(unsolved, unsolved_by_sft=3 if unsolved in (WIDENS, SAME) else 0)
    sft = chain_pass_at(c["counts"], "sft", c["seeds"], N, N)
    grpo = chain_pass_at(c["counts"], "grpo", c["seeds"], N, N)
    assert grpo == [1 - m / P for m in unsolved]  # pass@4 by hand: the share ever solved
    assert paired_difference(sft, grpo)["direction"] == direction


def test_one_chain_has_no_interval_and_decides_nothing():
    got = paired_difference([0.9], [0.5])
    assert got["ci95"] is None and got["direction"] == ACROSS


def test_a_paired_difference_refuses_sides_of_different_length():
    with pytest.raises(ValueError, match="one value per chain on each side, got 2 and 3"):
        paired_difference([0.1, 0.2], [0.1, 0.2, 0.3])


def test_chain_pass_at_averages_a_chains_grpo_seeds_and_names_a_missing_run():
    counts = {
        "grpo/seed0": solved(0),
        "grpo/seed0-g1": solved(10),
        "grpo/seed1": solved(5),
        "grpo/seed1-g1": solved(5),
    }
    assert chain_pass_at(counts, "grpo", [0, 1], N, N, reps=2) == [0.75, 0.75]
    with pytest.raises(ValueError, match="no counts for grpo/seed2"):
        chain_pass_at(counts, "grpo", [0, 2], N, N)


def test_greedy_summary_is_the_chain_mean_of_the_greedy_accuracy():
    greedy = {"sft/seed0": [1, 0, 0, 0], "sft/seed1": [1, 1, 0, 0]}
    got = greedy_summary(greedy, "sft", [0, 1])
    assert got["pass_at_1"] == 0.375 and got["per_chain"] == [0.25, 0.5]
    assert got["ci95"][0] == 0.0  # a share: its interval stays within [0, 1]


def test_the_map_says_where_rl_narrows_widens_and_cannot_tell():
    record = starts_record(
        {
            "1": {"A": candidate(NARROWS), "B": candidate(WIDENS, 3), "C": candidate(UNSURE)},
            "0.6": {"A": candidate(NARROWS), "B": candidate(UNSURE), "C": candidate(SAME, 3)},
        }
    )
    cells = narrowing.narrowing_map(record)
    assert [(c["start"], temperature_key(c["temperature"]), c["direction"]) for c in cells] == [
        ("A", "1", BELOW),
        ("A", "0.6", BELOW),
        ("B", "1", ABOVE),
        ("B", "0.6", ACROSS),
        ("C", "1", ACROSS),
        ("C", "0.6", ZERO),
    ]
    assert cells[0]["mean"] == pytest.approx(-statistics.fmean(NARROWS) / P)
    text = narrowing.narrowing_sentence(cells, [])
    assert "RL narrows coverage (GRPO's pass@4 below its start's" in text
    assert "from `A` (T = 1, 0.6)." in text
    assert "It widens coverage (interval wholly above 0) from `B` (T = 1)." in text
    assert "No chain's pass@4 moves from `C` (T = 0.6)." in text
    assert "The interval holds 0 (cannot tell) from `B` (T = 0.6) and `C` (T = 1)." in text
    assert [r[-1] for r in narrowing.map_rows(cells)][:3] == ["narrows", "narrows", "widens"]


def test_a_map_where_rl_narrows_nowhere_says_so():
    record = starts_record({"1": {"A": candidate(WIDENS, 3)}, "0.6": {"A": candidate(UNSURE)}})
    text = narrowing.narrowing_sentence(narrowing.narrowing_map(record), [])
    assert text.startswith("RL narrows coverage nowhere on the map: no interval lies wholly below 0.")


def test_a_starts_record_without_temperatures_is_not_yet_measured():
    """A record `rlvr starts` wrote before it scored at several temperatures (the committed one, less
    its temperatures), or none at all: the map says it is not yet measured."""
    committed = json.loads(at_head("reports/starts/starts.json").read_text())
    older = {k: v for k, v in committed.items() if k != "temperatures"}
    for record in (older, None):
        assert narrowing.narrowing_map(record) is None
        blocks = narrowing.narrowing_blocks({}, None, record, [])
        assert "The narrowing map is not yet measured: run `rlvr starts`." in markdown(blocks, "figs")


def pipeline_counts(grpo: list[int], passk_adv: list[int]) -> dict:
    """passk-counts.json for four chains at T = 1: SFT solves every problem; grpo (two GRPO seeds a
    chain, n 8) and passk_adv (n 4) leave the given numbers of problems unsolved."""
    counts = {}
    for s in range(4):
        counts[f"sft/seed{s}"] = [8] * P
        counts[f"grpo/seed{s}"] = counts[f"grpo/seed{s}-g1"] = [0] * grpo[s] + [8] * (P - grpo[s])
        counts[f"passk_adv/seed{s}"] = solved(passk_adv[s])
    n_by_model = {k: (4 if k.startswith("passk_adv") else 8) for k in counts}
    return {
        "n": 8,
        "k_max": 4,
        "n_by_model": n_by_model,
        "counts": counts,
        "temperatures": [1.0],
        "problems": [],
    }


@pytest.mark.parametrize(
    "grpo, passk_adv, word, verdict",
    [
        ([4, 5, 6, 4], [1, 2, 2, 1], "narrows less", "`passk_adv` narrows less than `grpo`"),
        ([1, 2, 2, 1], [4, 5, 6, 4], "narrows more", "`passk_adv` narrows more than `grpo`"),
        ([2, 2, 2, 2], [1, 3, 2, 2], "cannot tell", "cannot be told (the interval holds 0)"),
        ([2, 2, 2, 2], [2, 2, 2, 2], "the same on every chain", "do not differ on any chain"),
    ],
)
def test_whether_the_passk_advantage_narrows_less_is_paired_by_chain(grpo, passk_adv, word, verdict):
    rows = narrowing.advantage_against_base(pipeline_counts(grpo, passk_adv))
    (r,) = rows
    assert r["chains"] == [0, 1, 2, 3] and r["k"] == 4
    assert r["grpo"]["per_chain"] == pytest.approx([-m / P for m in grpo])
    assert r["difference"]["per_chain"] == pytest.approx([(g - p) / P for g, p in zip(grpo, passk_adv)])
    assert narrowing.advantage_rows(rows)[0][-1].removeprefix("passk_adv ") == word
    assert verdict in narrowing.narrowing_sentence(None, rows)


def test_without_passk_adv_counts_there_is_no_comparison():
    counts = pipeline_counts([1, 1, 1, 1], [1, 1, 1, 1])
    counts["counts"] = {k: v for k, v in counts["counts"].items() if not k.startswith("passk_adv")}
    assert narrowing.advantage_against_base(counts) == [] and narrowing.advantage_against_base(None) == []


def test_the_temperature_table_reads_every_temperature_and_greedy():
    def at(p1, pn, k, per_chain):
        return {
            "sft": {"pass_at_1": 0.5, "pass_at_n": 0.99},
            "variants": {
                "grpo": {
                    "pass_at_1_rl": p1,
                    "pass_at_n_rl": pn,
                    "crossover_k": k,
                    "crossover_k_ci95": [k - 1, 65.0],
                    "crossover_per_chain": per_chain,
                }
            },
        }

    passk = {
        **at(0.7, 0.98, 16, ["16", "tie"]),
        "k_max": 64,
        "problems": 300,
        "temperatures": [1.0, 0.6],
        "by_temperature": {"0.6": at(0.8, 0.97, 4, ["4", "8"])},
        "greedy": {"sft": {"pass_at_1": 0.6}, "grpo": {"pass_at_1": 0.75}},
    }
    rows = narrowing.temperature_rows(passk)
    assert rows == [
        ["grpo", "T = 1 (the claims')", "0.500 → 0.700", "0.990 → 0.980", "16 [15, > 64]", "16, tie"],
        ["grpo", "T = 0.6", "0.500 → 0.800", "0.990 → 0.970", "4 [3, > 64]", "4, 8"],
        ["grpo", "greedy", "0.600 → 0.750", "–", "–", "–"],
    ]
    assert narrowing.temperature_rows({"k_max": 64}) == []  # a passk.json made before temperatures


def test_the_report_stage_draws_the_map_with_its_provenance_or_nothing_before_temperatures(tmp_path):
    import dataclasses

    from PIL import Image

    from rlvr.pipeline import paths
    from rlvr.pipeline.stages.report import narrowing_figure

    record = starts_record({"1": {"A": candidate(NARROWS)}, "0.6": {"A": candidate(UNSURE)}})
    record["made"] = "`rlvr starts` at commit abc"
    counts = pipeline_counts([4, 5, 6, 4], [1, 2, 2, 1])
    where = dataclasses.replace(
        paths.report(),
        starts=tmp_path / "starts.json",
        counts=tmp_path / "counts.json",
        figure_copies=tmp_path,
    )
    where.starts.write_text(json.dumps(record))
    where.counts.write_text(json.dumps(counts))
    made = {"git_commit": "2b521db0ab", "git_dirty": False, "host": "box", "started_utc": "2026-12-02T07:18"}
    fig = narrowing_figure(record, counts, where, made)
    assert fig["name"] == "narrowing-map.png" and fig["caption"].startswith("The narrowing map")
    assert fig["provenance"].startswith(
        "stage `report, from `rlvr starts` and stage passk` · code: git 2b521db0ab"
    )
    full = json.loads((tmp_path / fig["record"]).read_text())  # the one-line provenance's full record
    assert "`rlvr starts` at commit abc" in full["drawn_from"] and full["made"] == made
    with Image.open(tmp_path / "narrowing-map.png") as im:
        deps = json.loads(im.text["rlvr:deps"])
        assert json.loads(im.text["rlvr:made"]) == made  # drawn here: the report's own run
    assert set(deps) == {where.starts.as_posix(), where.counts.as_posix()}
    old = {k: v for k, v in record.items() if k != "temperatures"}
    assert narrowing_figure(old, counts, where, made) is None
    assert narrowing_figure(None, counts, where, made) is None
