import pytest

from rlvr.tasks import all_problems
from rlvr.tokenizer import EOS, Tokenizer


def test_round_trip_every_prompt_and_answer():
    tok = Tokenizer()
    for task in ("single_digit", "two_digit"):
        for p in all_problems(task)[::37]:
            ids = tok.prompt_ids(p.prompt) + tok.response_ids(p.answer)
            assert tok.encode(tok.decode(ids)) == ids
            assert tok.decode(tok.response_ids(p.answer), skip_special=True) == p.answer


def test_one_token_per_digit_then_eos():
    tok = Tokenizer()
    assert tok.decode(tok.response_ids("85")) == "85" + EOS
    assert [tok.vocab[i] for i in tok.response_ids("85")] == ["8", "5", EOS]


def test_unknown_character_raises_a_clear_error():
    tok = Tokenizer()
    with pytest.raises(ValueError, match=r"cannot tokenize '\*'"):
        tok.encode("3 * 4 =")
    with pytest.raises(ValueError, match="cannot tokenize 'hello'"):
        tok.encode("hello")


def test_prompts_of_a_task_share_a_length():
    tok = Tokenizer()
    for task in ("single_digit", "two_digit"):
        assert len({len(tok.prompt_ids(p.prompt)) for p in all_problems(task)}) == 1
