"""experiments/machines.py pairs one stage's per-chain values from two machines' commits."""

import importlib.util

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("machines", ROOT / "experiments/machines.py")
machines = importlib.util.module_from_spec(spec)
spec.loader.exec_module(machines)

METRICS = {"seeds": [1, 2, 3], "per_seed": {"end": [3.0, 4.0, 5.0], "start": [1.0, 1.0, 2.0]}}


def test_a_difference_of_two_keys_is_taken_per_chain():
    assert machines.per_chain(METRICS, "end-start") == {1: 2.0, 2: 3.0, 3: 3.0}
    assert machines.per_chain(METRICS, "end") == {1: 3.0, 2: 4.0, 3: 5.0}


def test_chains_are_paired_and_only_the_shared_ones_count():
    a = {1: 1.0, 2: 2.0, 3: 3.0, 9: 100.0}
    b = {1: 0.5, 2: 2.5, 3: 2.0}
    r = machines.compare(a, b)
    assert r["chains"] == [1, 2, 3] and r["lower_on_b"] == 2
    assert r["mean"] == pytest.approx((-0.5 + 0.5 - 1.0) / 3)
    lo, hi = r["ci95"]
    assert lo < r["mean"] < hi


def test_an_unknown_metric_is_one_line_naming_the_known_ones():
    with pytest.raises(SystemExit, match="nope: no such per-chain value; known: end, start"):
        machines.per_chain(METRICS, "end-nope")
