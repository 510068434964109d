import pytest
from scipy.stats import binomtest

from rlvr.sft import encode_sft, noisy_rows
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer

ALPHA = 0.001  # two-sided binomial test level; seed fixed, so the test is deterministic


@pytest.mark.parametrize("rate", [0.1, 0.45, 0.64])
def test_corrupted_fraction_is_consistent_with_noise_rate(rate):
    train, _ = split("two_digit", 300, seed=0)
    rows = noisy_rows(train, rate, repeats=1, seed=0)
    k = sum(r["noised"] for r in rows)
    assert binomtest(k, len(rows), rate).pvalue > ALPHA
    # a corrupted label is a draw from the answer range, so it differs from the truth almost always
    wrong = sum(r["label"] != r["answer"] for r in rows)
    assert wrong <= k and wrong > 0.95 * k


def test_noise_zero_keeps_every_label_and_is_deterministic():
    train, _ = split("single_digit", 0, seed=0)
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
