"""Every kind named in a config Literal (advantage, KL estimator, ratio, aggregation) is dispatched
from one table in rlvr.grpo; an unknown name is one line naming the known ones, never a fall-through."""

import pytest
import torch
from conftest import ROOT

from rlvr import grpo
from rlvr.configs import ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS, RATIOS

TABLES = [
    (ADVANTAGES, grpo.GROUP_ADVANTAGES),
    (KL_ESTIMATORS, grpo.KL_ESTIMATES),
    (RATIOS, grpo.RATIO_OBJECTIVES),
    (AGGREGATIONS, grpo.AGGREGATES),
]


@pytest.mark.parametrize("names, table", TABLES)
def test_every_named_kind_has_exactly_one_row(names, table):
    assert tuple(table) == names


def test_an_unknown_kind_is_one_line_naming_the_known_ones():
    x = torch.zeros(2, 3)
    calls = [
        (
            lambda: grpo.group_advantages(x, "vimco"),  # not docs/variants.md's `median`: following it passes
            "advantage kind = 'vimco': must be one of group, mean_only",
        ),
        (lambda: grpo.kl_estimate(x, x, "k4"), "kl_estimator = 'k4': must be one of k1, k2, k3"),
        (lambda: grpo.policy_objective(x, x, x[:, 0], x, "vtrace"), "ratio = 'vtrace': must be one of token"),
        (lambda: grpo.aggregate(x, x, "sum"), "aggregation = 'sum': must be one of seq_mean, token_mean"),
    ]
    for call, words in calls:
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value).startswith(words) and "\n" not in str(err.value)


def test_a_new_kind_added_as_docs_variants_md_shows_is_dispatched(monkeypatch):
    """docs/variants.md's example: a group-median baseline, one row of GROUP_ADVANTAGES."""
    row = lambda r, centred, eps: r - r.median(dim=1, keepdim=True).values  # noqa: E731 (the doc's row)
    monkeypatch.setitem(grpo.GROUP_ADVANTAGES, "median", row)
    adv = grpo.group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]), "median")
    assert adv.tolist() == [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]  # median 0; an equal group: 0
    doc = (ROOT / "docs/variants.md").read_text()
    assert '"median": lambda r, centred, eps: r - r.median(dim=1, keepdim=True).values' in doc
