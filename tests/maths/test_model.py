import torch
from conftest import make

from rlvr.configs import ModelConfig
from rlvr.model import TinyLM, _finish, draw, sample
from rlvr.rollout import prompt_tensor
from rlvr.tasks import all_problems
from rlvr.tokenizer import Tokenizer

TOK = Tokenizer()


def make_model(seed=0, **kw) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM(make(ModelConfig, **kw), len(TOK)).eval()


def prompts(task="two_digit", k=12):
    return prompt_tensor(all_problems(task)[:k], TOK)


def test_default_size_is_in_the_issue_range():
    assert 200_000 <= make_model().num_params() <= 600_000


@torch.no_grad()
def sample_without_cache(model, prompts, n, max_new_tokens, temperature, generator):
    """The ground truth the KV-cache sampler is tested against: every row's whole sequence through
    `model(seq)` at every step, one uniform per row per step from the same generator (slow, plain)."""
    seq = prompts.repeat_interleave(n, dim=0)  # (B, Tp)
    B = seq.shape[0]
    out = torch.full((B, max_new_tokens), TOK.pad_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for t in range(max_new_tokens):
        tok = draw(model(seq)[:, -1], temperature, generator)  # (B,)
        out[:, t] = tok
        done |= tok == TOK.eos_id
        if bool(done.all()):
            break
        seq = torch.cat([seq, tok.view(B, 1)], dim=1)  # (B, Tp+t+1)
    return _finish(prompts, out, n, TOK.eos_id, TOK.pad_id)


def test_kv_cache_sampler_matches_cache_free_reference_exactly():
    model, p = make_model(), prompts()
    for temperature in (1.0, 0.7, 0.0):
        a = sample(model, p, 8, 4, TOK.eos_id, TOK.pad_id, temperature, torch.Generator().manual_seed(3))
        b = sample_without_cache(model, p, 8, 4, temperature, torch.Generator().manual_seed(3))
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.mask, b.mask)


def test_cached_logits_match_full_forward():
    """The sampler's greedy continuation equals argmax of the full forward at every step."""
    model, p = make_model(1), prompts(k=3)
    roll = sample(model, p, 1, 4, TOK.eos_id, TOK.pad_id, temperature=0.0)
    seq = roll.tokens
    for t in range(p.shape[1], seq.shape[1]):
        live = roll.mask[:, t] > 0
        want = model(seq[:, :t])[:, -1].argmax(-1)
        assert torch.equal(seq[live, t], want[live])


def test_rows_stop_at_eos_and_are_masked():
    model, p = make_model(2), prompts(k=20)
    roll = sample(model, p, 16, 4, TOK.eos_id, TOK.pad_id, 1.0, torch.Generator().manual_seed(0))
    resp, mask = roll.response, roll.mask[:, roll.prompt_len :]
    assert roll.mask[:, : roll.prompt_len].sum() == 0
    for row, m in zip(resp.tolist(), mask.tolist()):
        live = [t for t, k in zip(row, m) if k > 0]
        dead = [t for t, k in zip(row, m) if k == 0]
        assert m == sorted(m, reverse=True)  # mask is a prefix of ones
        assert TOK.eos_id not in live[:-1]  # <eos>, if any, is the last live token
        assert all(t == TOK.pad_id for t in dead)
        if dead:
            assert live[-1] == TOK.eos_id


def test_loop_stops_when_every_row_is_done():
    model = make_model(3)
    with torch.no_grad():  # force <eos> as the most likely token everywhere
        model.ln_f.weight.zero_()
        model.ln_f.bias.copy_(model.tok_emb.weight[TOK.eos_id] * 1e3)
    roll = sample(model, prompts(k=5), 4, 4, TOK.eos_id, TOK.pad_id, 1.0, torch.Generator().manual_seed(0))
    assert roll.response.shape[1] == 1 and bool((roll.response == TOK.eos_id).all())


def test_n_samples_of_a_prompt_share_its_prefix():
    model, p = make_model(4), prompts(k=5)
    roll = sample(model, p, 6, 4, TOK.eos_id, TOK.pad_id, 1.0, torch.Generator().manual_seed(0))
    assert roll.tokens.shape[0] == 5 * 6
    assert torch.equal(roll.tokens[:, : p.shape[1]], p.repeat_interleave(6, dim=0))
    # the samples are not copies of each other: sampling is per row
    assert len({tuple(r) for r in roll.response[:6].tolist()}) > 1


def _prefill_shapes(model: TinyLM, p: torch.Tensor) -> list[tuple[int, int]]:
    """(rows, tokens) of every input the first layer sees while `sample` encodes the prompts."""
    seen, heads = [], model.blocks[0].heads

    def spy(x):
        seen.append(tuple(x.shape[:2]))
        return heads(x)

    model.blocks[0].heads = spy
    try:
        sample(model, p, 4, 3, TOK.eos_id, TOK.pad_id, 1.0, torch.Generator().manual_seed(0))
    finally:
        del model.blocks[0].heads
    return [s for s in seen if s[1] > 1 or s[0] != p.shape[0] * 4]  # decode steps see (P*n, 1)


def test_prefill_encodes_the_shared_prompt_start_once():
    """The chat template's system part, which every prompt shares, is encoded for one row; each
    prompt's own rest for its row (a twelve-prompt batch: 12 * Tp rows before, c + 12 * (Tp - c) now)."""
    from rlvr.model import common_prefix_len

    model, p = make_model(7), prompts(k=12)
    c = common_prefix_len(p)
    assert 0 < c < p.shape[1]
    assert _prefill_shapes(model, p) == [(1, c), (12, p.shape[1] - c)]
    assert _prefill_shapes(model, p[:1]) == [(1, p.shape[1])]  # one prompt: nothing to share


def test_tree_forward_cache_holds_the_full_forward_keys():
    """`tree_forward(..., cache)` keeps each layer's keys and values per level: the sampler's prompt
    cache. Put back together they are the full forward's, to float rounding."""
    from rlvr.model import tree_forward

    model, p = make_model(8), prompts(k=5)
    c = 6
    cache: list = []
    with torch.no_grad():
        tree_forward(model, [p[:1, :c], p[:, c:]], cache)
        x, full = model.embed(p), []
        for block in model.blocks:
            q, k, v = block.heads(x)  # (P, H, Tp, D)
            full.append((k, v))
            x = block(x)
    assert len(cache) == len(model.blocks)
    for (ks, vs), (k, v) in zip(cache, full):
        assert [t.shape[0] for t in ks] == [1, 5] and [t.shape[2] for t in vs] == [c, p.shape[1] - c]
        for parts, whole in ((ks, k), (vs, v)):
            joined = torch.cat([parts[0].expand(5, -1, -1, -1), parts[1]], dim=2)  # (P, H, Tp, D)
            assert torch.allclose(joined, whole, atol=1e-5)


def test_too_long_request_is_a_clear_error():
    model = make_model(max_len=20)
    try:
        sample(model, prompts(k=1), 1, 4, TOK.eos_id, TOK.pad_id)
    except ValueError as exc:
        assert "max_len" in str(exc)
    else:
        raise AssertionError("expected ValueError")


def test_grouped_response_logits_match_the_full_forward():
    model = make_model(5)
    p = prompts(k=3)
    roll = sample(model, p, 4, 4, TOK.eos_id, TOK.pad_id, 1.0, torch.Generator().manual_seed(0))
    from rlvr.model import common_prefix_len, grouped_response_logits

    assert common_prefix_len(p) > 0  # the shared system prompt takes the three-level path
    grouped = grouped_response_logits(model, p, roll.response)  # (12, T, V)
    full = model(roll.tokens[:, :-1])[:, p.shape[1] - 1 :]  # (12, T, V)
    assert grouped.shape == full.shape
    assert torch.allclose(grouped, full, atol=1e-5)


def test_grouped_response_logits_gradients_match_the_full_forward():
    model = make_model(6)
    p = prompts(k=2)
    roll = sample(model, p, 3, 4, TOK.eos_id, TOK.pad_id, 1.0, torch.Generator().manual_seed(1))
    from rlvr.model import grouped_response_logits

    grads = []
    for fn in (
        lambda: grouped_response_logits(model, p, roll.response),
        lambda: model(roll.tokens[:, :-1])[:, p.shape[1] - 1 :],
    ):
        model.zero_grad()
        fn().logsumexp(-1).sum().backward()
        grads.append(torch.cat([q.grad.flatten() for q in model.parameters()]))
    assert torch.allclose(grads[0], grads[1], atol=1e-4)


def test_decode_blocks_never_change_the_tokens():
    """Blocking the decode step by prompts is a memory layout, not a different sampler: blocks of one
    prompt, of a few, uneven last blocks and one block for all rows draw the same tokens."""
    model, p = make_model(6), prompts(k=13)
    whole = sample(
        model, p, 8, 4, TOK.eos_id, TOK.pad_id, 1.0, torch.Generator().manual_seed(5), chunk_rows=10**6
    )
    for rows in (1, 8, 24, 40, 100):
        roll = sample(
            model, p, 8, 4, TOK.eos_id, TOK.pad_id, 1.0, torch.Generator().manual_seed(5), chunk_rows=rows
        )
        assert torch.equal(roll.tokens, whole.tokens) and torch.equal(roll.mask, whole.mask), rows


def test_decode_block_size_must_be_positive():
    model = make_model()
    for rows in (0, -3):
        try:
            sample(model, prompts(k=2), 2, 4, TOK.eos_id, TOK.pad_id, chunk_rows=rows)
        except ValueError as exc:
            assert "chunk_rows" in str(exc)
        else:
            raise AssertionError(f"chunk_rows = {rows} accepted")
