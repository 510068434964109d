import torch

from rlvr.tokenizer import Tokenizer
from rlvr.verifiers import (
    answer_targets,
    digit_counts,
    exact_match,
    final_answer,
    final_answer_reward,
    response_text,
    substring_reward,
)

TOK = Tokenizer()


def responses(*texts: str) -> torch.Tensor:
    rows = [TOK.encode(t) + [TOK.eos_id] for t in texts]
    width = max(len(r) for r in rows)
    return torch.tensor([r + [TOK.pad_id] * (width - len(r)) for r in rows])


def test_substring_verifier_pays_for_a_list_of_digits_and_final_answer_does_not():
    resp = responses("3 7 9", "7", "9 7", "37")
    assert substring_reward(resp, ["7"], 4, TOK).tolist() == [1.0, 1.0, 1.0, 1.0]
    assert final_answer_reward(resp, ["7"], 4, TOK).tolist() == [0.0, 1.0, 1.0, 0.0]
    assert final_answer("no number") is None


def test_vectorised_exact_match_agrees_with_decode_and_compare():
    gen = torch.Generator().manual_seed(0)
    answers = ["85", "7", "123"]
    n = 200
    pool = list(TOK.digit_ids) + [TOK.eos_id]
    resp = torch.tensor(pool)[torch.randint(len(pool), (3 * n, 4), generator=gen)]  # (3n, 4)
    is_eos = (resp == TOK.eos_id).int()
    after = (is_eos.cumsum(1) - is_eos) > 0
    resp = resp.masked_fill(after, TOK.pad_id)  # pad after the first <eos>, as the sampler does
    fast = exact_match(resp, answer_targets(answers, TOK), n, TOK.pad_id)
    slow = [
        float(
            TOK.decode(r.tolist()).split("<eos>")[0] == answers[i // n] and "<eos>" in TOK.decode(r.tolist())
        )
        for i, r in enumerate(resp)
    ]
    assert fast.tolist() == slow and sum(slow) > 0


def test_digit_counts():
    resp = responses("3 7 9", "77", "")
    total, distinct = digit_counts(resp, TOK)
    assert total.tolist() == [3.0, 2.0, 0.0] and distinct.tolist() == [3.0, 1.0, 0.0]
    assert response_text(resp[0], TOK) == "3 7 9"
