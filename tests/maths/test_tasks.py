from rlvr.tasks import all_problems, split


def test_single_digit_is_chapter_a_problem_set():
    probs = all_problems("single_digit")
    assert len(probs) == 55
    assert all(0 <= p.a <= 9 and 0 <= p.b <= 9 and p.a + p.b <= 9 for p in probs)
    assert probs[0].prompt == "0 + 0 =" and len(probs[-1].answer) == 1


def test_two_digit_prompt_format():
    probs = all_problems("two_digit")
    assert len(probs) == 90 * 90
    p = next(p for p in probs if (p.a, p.b) == (37, 48))
    assert (p.prompt, p.answer) == ("37+48=", "85")


def test_split_is_disjoint_complete_and_deterministic():
    train, held, _ = split("two_digit", 300, seed=0)
    assert len(held) == 300 and len(train) == 8100 - 300
    assert not set(train) & set(held)
    assert split("two_digit", 300, seed=0)[:2] == (train, held)
    assert split("two_digit", 300, seed=1)[1] != held
