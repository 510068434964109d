import pytest
from scipy.stats import binomtest

from rlvr.noise import noisy_rows
from rlvr.sft import encode_sft
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer

ALPHA = 0.001  # two-sided binomial test level; seed fixed, so the test is deterministic


@pytest.mark.parametrize("rate", [0.1, 0.45, 0.64])
def test_corrupted_fraction_is_consistent_with_noise_rate(rate):
    train = split("two_digit", 300, seed=0)[0]
    rows = noisy_rows(train, rate, repeats=1, seed=0)
    k = sum(r["noised"] for r in rows)
    assert binomtest(k, len(rows), rate).pvalue > ALPHA
    # a corrupted label is a draw from the answer range, so it differs from the truth almost always
    wrong = sum(r["label"] != r["answer"] for r in rows)
    assert wrong <= k and wrong > 0.95 * k


def test_noise_zero_keeps_every_label_and_is_deterministic():
    train = split("single_digit", 0, seed=0)[0]
    rows = noisy_rows(train, 0.0, repeats=3, seed=0)
    assert all(r["label"] == r["answer"] and not r["noised"] for r in rows)
    assert len(rows) == 3 * 55
    assert noisy_rows(train, 0.5, 2, seed=4) == noisy_rows(train, 0.5, 2, seed=4)


def test_noise_rate_outside_unit_interval_is_rejected():
    with pytest.raises(ValueError, match="noise_rate"):
        noisy_rows(split("single_digit", 0, 0)[0], 1.5, 1, 0)


def test_loss_mask_covers_label_and_eos_only():
    tok = Tokenizer()
    rows = [{"prompt": "37+48=", "label": "85"}, {"prompt": "37+48=", "label": "815"}]
    tokens, mask = encode_sft(rows, tok)
    targets = tokens[:, 1:]
    assert [tok.decode(targets[i][mask[i] > 0].tolist()) for i in range(2)] == ["85<eos>", "815<eos>"]


def test_slip_rates_are_the_beta_quantiles_and_each_slip_digit_is_wrong():
    from scipy.stats import beta

    from rlvr.noise import slip_table

    table = slip_table(1.4, 1.9, seed=0)
    assert len(table) == 100
    rates = sorted(r for r, _ in table.values())
    expected = beta.ppf([(i + 0.5) / 100 for i in range(100)], 1.4, 1.9)
    assert max(abs(a - b) for a, b in zip(rates, expected)) < 1e-12
    assert all(w != (u + v) % 10 and 0 <= w <= 9 for (u, v), (_, w) in table.items())
    assert slip_table(1.4, 1.9, seed=0) == table and slip_table(1.4, 1.9, seed=1) != table


def test_a_slip_changes_only_the_last_digit_and_follows_its_facts_rate():
    from rlvr.noise import fact, slip_rows, slip_table

    train = split("two_digit", 300, seed=0)[0]
    table = slip_table(1.4, 1.9, seed=0)
    rows = slip_rows(train, 1.4, 1.9, repeats=2, seed=0)
    assert len(rows) == 2 * len(train)
    for r in rows:
        if r["noised"]:
            rate, wrong = table[(r["a"] % 10, r["b"] % 10)]
            assert r["label"] == r["answer"][:-1] + str(wrong)
        else:
            assert r["label"] == r["answer"]
    # per fact, the share of slipped labels is consistent with the fact's rate
    from collections import defaultdict

    by_fact = defaultdict(list)
    for r in rows:
        by_fact[(r["a"] % 10, r["b"] % 10)].append(r["noised"])
    pvalues = [binomtest(sum(v), len(v), table[f][0]).pvalue for f, v in by_fact.items()]
    assert min(pvalues) > ALPHA / 100  # Bonferroni over the 100 facts
    assert fact(train[0]) == (train[0].a % 10, train[0].b % 10)


def test_author_solve_rate_is_one_minus_the_facts_slip_rate():
    from rlvr.configs import SlipNoise, UniformNoise
    from rlvr.noise import author_solve_rates, slip_table

    train, held, _ = split("two_digit", 300, seed=0)
    rates = author_solve_rates(held, SlipNoise(kind="slips", alpha=1.4, beta=1.9), seed=0)
    table = slip_table(1.4, 1.9, seed=0)
    assert rates == [1 - table[(p.a % 10, p.b % 10)][0] for p in held]
    uniform = author_solve_rates(held[:3], UniformNoise(kind="uniform", rate=0.3), seed=0)
    assert uniform == pytest.approx([0.7 + 0.3 / 179] * 3)
