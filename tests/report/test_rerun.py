"""`rlvr verify` in three words: a rerun's results against the committed ones are identical, the same
statistically, or moved (rlvr.report.moves, rlvr.tools.rerun). On synthetic reports folders: no
pipeline runs here (tests/pipeline/test_pipeline.py reruns the tiny pipeline in a fresh clone)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.report.claims import Claim
from rlvr.report.document import markdown
from rlvr.report.moves import compare_results, moved_lines, said, verdict_moves, word
from rlvr.report.reruns import perturbed_blocks, rerun_blocks, rerun_rows
from rlvr.tools import rerun, verify

CLAIMS = [
    Claim(id="acc", kind="exact", book=0.9, tol=0.05, metric=["g.json", "acc"], feasible=[0, 1]),
    Claim(id="kl", kind="range", book=0.25, lo=0.0, hi=0.5, metric=["g.json", "kl"]),
    Claim(id="fact", kind="cited", book="15.6 -> 71.0"),
]
COMMITTED = {"acc": [0.9, 0.91, 0.89, 0.9], "kl": [0.2, 0.25, 0.22, 0.21]}  # acc [0.887, 0.913]: reproduced


def results(folder: Path, chains: dict, seconds: float = 3.0, run_id: str = "r0") -> Path:
    """A reports folder as a stage leaves it: one metrics file over four chains, with a duration
    and a run id beside the numbers, and the per-problem counts."""
    metrics = {k: sum(v) / len(v) for k, v in chains.items()}
    g = {
        "seeds": [0, 1, 2, 3],
        **metrics,
        "per_seed": chains,
        "train_seconds": seconds,
        "mlflow_run_id": run_id,
    }
    (folder / "metrics").mkdir(parents=True)
    (folder / "metrics" / "g.json").write_text(json.dumps(g))
    (folder / "passk-counts.json").write_text(json.dumps({"counts": {"sft/seed0": [1, 2]}}))
    return folder


def compared(tmp_path: Path, **changed) -> dict:
    committed = results(tmp_path / "committed", COMMITTED)
    return compare_results(
        committed, results(tmp_path / "rerun", {**COMMITTED, **changed}, 9.9, "r1"), CLAIMS
    )


def test_a_rerun_with_bit_equal_metrics_is_identical_whatever_its_durations_and_run_ids(tmp_path):
    out = compared(tmp_path)
    assert out["word"] == "identical" and out["metrics_differing"] == []
    assert out["flips"] == out["moves"] == out["numbers_outside"] == []
    assert (
        out["committed_counts"]
        == out["rerun_counts"]
        == {
            "reproduced": 2,
            "differs": 0,
            "inconclusive": 0,
            "not comparable": 0,
            "cited": 1,
            "missing": 0,
        }
    )


def test_numbers_that_move_with_every_verdict_held_are_the_same_statistically_and_listed(tmp_path):
    out = compared(tmp_path, acc=[0.92, 0.93, 0.92, 0.93])  # still inside 0.9 +- 0.05, not in [0.887, 0.913]
    assert out["word"] == "statistically the same" and out["metrics_differing"] == ["metrics/g.json"]
    assert out["flips"] == out["moves"] == []
    [outside] = out["numbers_outside"]
    assert outside["claim"] == "acc" and outside["rerun"] == pytest.approx(0.925)
    assert moved_lines(out) == ["acc: value 0.9 -> 0.925, outside the committed [0.887, 0.913]"]


def test_a_move_to_inconclusive_is_listed_and_not_a_flip(tmp_path):
    out = compared(tmp_path, kl=[0.3, 0.6, 0.2, 0.7])  # the interval now lies across 0.5
    assert out["word"] == "statistically the same" and out["flips"] == []
    [move] = out["moves"]
    assert (move["claim"], move["committed"], move["rerun"]) == ("kl", "reproduced", "inconclusive")
    assert move["rerun_interval"][0] < 0.5 < move["rerun_interval"][1]
    assert out["rerun_verdicts"]["kl"] == "inconclusive" and out["committed_verdicts"]["kl"] == "reproduced"


def test_a_flip_between_reproduced_and_differs_is_moved(tmp_path):
    out = compared(tmp_path, kl=[0.8, 0.82, 0.81, 0.8])  # wholly above 0.5
    assert out["word"] == "moved" and [f["claim"] for f in out["flips"]] == ["kl"]
    assert moved_lines(out)[0] == "kl: reproduced -> differs (a flip)"
    lines = said(out, "a fresh clone of abc")
    assert lines[0].startswith("moved                   a fresh clone of abc: 1 flip(s), 0 move(s)")
    assert lines[1] == "  kl: reproduced -> differs (a flip)"


def test_verdict_tables_alone_are_never_called_identical():
    """The report stage compares verdict tables only: without the metrics compared, bit-equality is
    not known, so the best word is the same statistically."""
    table = {"claims": {"a": {"verdict": "reproduced", "interval": [0.8, 0.9], "ours": 0.85}}}
    assert word({**verdict_moves(table, table), "numbers_outside": []}) == "statistically the same"


def test_a_rerun_separates_flips_from_moves_through_inconclusive():
    """Between reproduced and differs is a flip (the check fails); to or from inconclusive is a move,
    listed with both intervals; an unchanged verdict is neither."""
    committed = {
        "claims": {
            "a": {"verdict": "reproduced", "interval": [0.8, 0.9]},
            "b": {"verdict": "inconclusive", "interval": [0.4, 0.6]},
            "c": {"verdict": "differs", "interval": [1, 2], "tested_interval": [0.5, 1.5]},
            "d": {"verdict": "cited", "interval": None},
        }
    }
    perturbed = {
        "claims": {
            "a": {"verdict": "differs", "interval": [0.6, 0.7]},
            "b": {"verdict": "reproduced", "interval": [0.52, 0.6]},
            "c": {"verdict": "differs", "interval": [1, 2]},
            "d": {"verdict": "cited", "interval": None},
        }
    }
    out = verdict_moves(committed, perturbed)
    assert out["flips"] == [
        {
            "claim": "a",
            "committed": "reproduced",
            "rerun": "differs",
            "committed_interval": [0.8, 0.9],
            "rerun_interval": [0.6, 0.7],
            "committed_value": None,
            "rerun_value": None,
        }
    ]
    assert [m["claim"] for m in out["moves"]] == ["b"] and out["moves"][0]["rerun_interval"] == [0.52, 0.6]
    assert verdict_moves(committed, committed) == {"flips": [], "moves": []}
    record = {
        **out,
        "commit": "0123456789abc",
        "perturbation": "RLVR_PERTURB=1e-6",
        "committed_counts": {"reproduced": 1},
        "rerun_counts": {"differs": 2},
    }
    text = markdown(perturbed_blocks(record), "x")
    assert "RLVR_PERTURB=1e-6" in text and "| a | reproduced | [0.8, 0.9] | differs | [0.6, 0.7] |" in text
    assert "perturbed: 2 differs" in text


def test_the_reruns_table_shows_what_each_record_holds_and_a_dash_for_what_it_did_not_measure():
    new = {
        "command": "rlvr verify --rerun",
        "commit": "0123456789abcdef",
        "wall_seconds": 1089.4,
        "target_wall_seconds": 900,
        "profile": {"stage_seconds_total": 948.0, "gap_seconds_total": 130.2},
        "metrics_differing": [],
        "flips": [],
        "moves": [],
        "numbers_outside": [],
    }
    old = {  # a record from before the reruns left `rlvr bench`: no profile, no numbers compared
        "command": "rlvr bench --only perturbed",
        "perturbation": "RLVR_PERTURB=1e-6",
        "commit": "fedcba9876543210",
        "wall_seconds": 925.3,
        "flips": [],
        "moves": [{"claim": "x", "committed": "reproduced", "rerun": "inconclusive"}],
    }
    assert rerun_rows({"perturbed": old, "rerun": new}) == [
        [
            "the pipeline again: `rlvr verify --rerun`",
            "0123456789",
            "1,089 s (budget 900 s)",
            "948 s",
            "130 s",
            "identical",
            "0",
            "0",
            "0",
        ],
        [
            "every start perturbed: `rlvr bench --only perturbed`",
            "fedcba9876",
            "925 s",
            "–",
            "–",
            "statistically the same",
            "0",
            "1",
            "–",
        ],
    ]
    assert rerun_blocks({}) == []


def test_a_record_goes_under_its_kind_and_keeps_the_others(tmp_path):
    path = tmp_path / "rerun.json"
    rerun.write_record(path, "perturbed", {"word": "statistically the same"})
    rerun.write_record(path, "rerun", {"word": "identical"})
    rerun.write_record(path, "rerun", {"word": "moved"})
    assert json.loads(path.read_text()) == {
        "perturbed": {"word": "statistically the same"},
        "rerun": {"word": "moved"},
    }


def _git_repo(folder: Path) -> Path:
    """A git repository whose committed results are COMMITTED, judged by CLAIMS (written as YAML)."""
    import yaml

    def git(*args):
        subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)

    results(folder / "reports", COMMITTED)
    (folder / "experiments").mkdir()
    entries = [
        {
            "id": "acc",
            "kind": "exact",
            "book": 0.9,
            "tol": 0.05,
            "metric": ["g.json", "acc"],
            "feasible": [0, 1],
        },
        {"id": "kl", "kind": "range", "book": 0.25, "lo": 0.0, "hi": 0.5, "metric": ["g.json", "kl"]},
    ]
    prose = {"chapter": "B", "quote": "q", "text": "A claim a reader understands alone here.", "why": "w"}
    (folder / "experiments" / "claims.yaml").write_text(yaml.safe_dump([{**e, **prose} for e in entries]))
    (folder / "experiments" / "plan.yaml").write_text("chains: one look\n")  # no second look
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results")
    return folder


def _rewrite(repo: Path, **changed) -> None:
    """The workspace's results after a `dvc repro` on another machine, say."""
    g = repo / "reports" / "metrics" / "g.json"
    chains = {**COMMITTED, **changed}
    g.write_text(
        json.dumps(
            {**json.loads(g.read_text()), **{k: sum(v) / 4 for k, v in chains.items()}, "per_seed": chains}
        )
    )


def test_plain_verify_says_in_one_word_how_the_workspace_compares_with_head(tmp_path, monkeypatch, capsys):
    repo = _git_repo(tmp_path)
    monkeypatch.chdir(repo)
    monkeypatch.setattr(verify, "CHECKS", {})  # the comparison alone
    assert rerun.workspace_against_head(repo)["word"] == "identical"
    assert main(["verify"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("identical               the workspace's results against HEAD's (")
    assert out[-1] == "all 0 checks hold; results identical"
    _rewrite(repo, kl=[0.3, 0.6, 0.2, 0.7])
    assert main(["verify"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("statistically the same  the workspace's results against HEAD's (")
    assert out[1].startswith("  kl: reproduced -> inconclusive, interval [")
    assert out[-1] == "all 0 checks hold; results statistically the same"
    _rewrite(repo, kl=[0.8, 0.82, 0.81, 0.8])
    assert main(["verify"]) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("moved ") and "  kl: reproduced -> differs (a flip)" in captured.out
    assert captured.err.startswith(
        "rlvr: error: a verdict flipped between reproduced and differs against HEAD"
    )


def test_outside_git_there_is_nothing_to_compare_with(tmp_path):
    results(tmp_path / "reports", COMMITTED)
    assert rerun.workspace_against_head(tmp_path) is None


@pytest.mark.parametrize(
    "argv, says",
    [
        (["verify", "--perturb"], "--perturb: only with --rerun"),
        (["verify", "--keep-clone", "x"], "--keep-clone: only with --rerun"),
        (["bench", "--only", "perturbed"], "not a benchmark: run `rlvr verify --rerun --perturb`"),
        (["bench", "--only", "fresh_clone"], "not a benchmark: run `rlvr verify --rerun`"),
    ],
)
def test_reruns_are_asked_for_as_verify_reruns(argv, says, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
