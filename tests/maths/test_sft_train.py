import torch
from conftest import make

from rlvr.configs import ModelConfig, SFTConfig
from rlvr.model import TinyLM
from rlvr.noise import noisy_rows
from rlvr.rollout import Sampling, accuracy
from rlvr.sft import encode_sft, train_sft
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer


def test_clean_sft_learns_single_digit_addition():
    """Noise 0, a few seconds of training: greedy accuracy >= 0.9 on the 55 problems."""
    tok = Tokenizer()
    torch.manual_seed(0)
    model = TinyLM(make(ModelConfig), len(tok))
    train = split("single_digit", 0, seed=0)[0]
    tokens, mask = encode_sft(noisy_rows(train, 0.0, repeats=8, seed=0), tok)
    cfg = make(
        SFTConfig, noise={"kind": "uniform", "rate": 0.0}, repeats=8, epochs=25, batch_size=64, lr=0.003
    )
    gen = torch.Generator().manual_seed(0)
    curve = train_sft(model, (tokens, mask), cfg, gen, progress=False)
    assert curve[-1]["loss"] < curve[0]["loss"]
    assert accuracy(model, train, 1, Sampling(tok, 2, 0.0), gen) >= 0.9


def _grads(model, loss_fn):
    model.zero_grad()
    loss = loss_fn()
    loss.backward()
    return loss.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])


def test_shared_prefix_loss_equals_the_full_forward_in_value_and_gradient():
    """Two-digit rows of different lengths (right padding): the system prompt encoded once per batch
    gives the same loss and gradients as the reference `sft_loss`, every row run whole."""
    from rlvr.sft import sft_loss, sft_loss_shared_prefix, shared_prefix_len

    tok = Tokenizer()
    torch.manual_seed(0)
    model = TinyLM(make(ModelConfig, d_model=32, n_layer=2, n_head=2), len(tok))
    train = split("two_digit", 0, seed=0)[0]
    tokens, mask = encode_sft(noisy_rows(train[::300], 0.5, repeats=1, seed=0), tok)
    assert shared_prefix_len(tokens, mask) == len(tok.prompt_ids("")) - 1  # up to <user>, not the operands
    ours, g_ours = _grads(model, lambda: sft_loss_shared_prefix(model, tokens, mask))
    full, g_full = _grads(model, lambda: sft_loss(model, tokens, mask))
    assert torch.allclose(ours, full, atol=1e-6)
    assert torch.allclose(g_ours, g_full, atol=1e-5)


def test_shared_prefix_of_one_row_stops_at_its_first_target():
    """A single row agrees with itself everywhere: the shared part must still end where the loss begins."""
    from rlvr.sft import sft_loss, sft_loss_shared_prefix, shared_prefix_len

    tok = Tokenizer()
    torch.manual_seed(1)
    model = TinyLM(make(ModelConfig, d_model=32, n_layer=1, n_head=2), len(tok))
    tokens, mask = encode_sft([{"prompt": "3 + 4 =", "label": "7"}], tok)
    first_target = int(mask[0].nonzero()[0])
    assert shared_prefix_len(tokens, mask) == first_target + 1
    assert torch.allclose(
        sft_loss_shared_prefix(model, tokens, mask), sft_loss(model, tokens, mask), atol=1e-6
    )


def test_clean_warmup_sees_true_answers_first_then_the_noisy_labels():
    tok = Tokenizer()
    train = split("single_digit", 0, seed=0)[0]
    rows = noisy_rows(train, 1.0, repeats=1, seed=0)
    tokens, mask = encode_sft(rows, tok)
    clean = encode_sft(rows, tok, field="answer")
    assert not torch.equal(tokens, clean[0]) and torch.equal(mask, clean[1])
    cfg = make(
        SFTConfig, noise={"kind": "uniform", "rate": 1.0}, repeats=1, clean_epochs=2, epochs=1, batch_size=32
    )
    torch.manual_seed(0)
    model = TinyLM(make(ModelConfig, d_model=32, n_layer=1, n_head=2), len(tok))
    curve = train_sft(
        model, (tokens, mask), cfg, torch.Generator().manual_seed(0), progress=False, clean=clean
    )
    per_epoch = -(-len(rows) // 32)
    assert [r["phase"] for r in curve] == ["clean"] * 2 * per_epoch + ["noisy"] * per_epoch


def test_clean_warmup_without_clean_tensors_is_an_error():
    import pytest

    tok = Tokenizer()
    train = split("single_digit", 0, seed=0)[0]
    tokens, mask = encode_sft(noisy_rows(train, 0.5, repeats=1, seed=0), tok)
    cfg = make(SFTConfig, clean_epochs=1, epochs=1)
    model = TinyLM(make(ModelConfig, d_model=32, n_layer=1, n_head=2), len(tok))
    with pytest.raises(ValueError, match="clean_epochs = 1 needs the clean-label tensors"):
        train_sft(model, (tokens, mask), cfg, torch.Generator().manual_seed(0), progress=False)


def _warmup_case(clean_epochs: int):
    """A small run with slip-free uniform noise: its rows, clean tensors and config."""
    tok = Tokenizer()
    train = split("single_digit", 0, seed=0)[0]
    rows = noisy_rows(train, 0.5, repeats=2, seed=0)
    cfg = make(SFTConfig, repeats=2, clean_epochs=clean_epochs, epochs=2, batch_size=32)
    return tok, encode_sft(rows, tok), encode_sft(rows, tok, field="answer"), cfg


def _fresh(tok):
    torch.manual_seed(0)
    return TinyLM(make(ModelConfig, d_model=32, n_layer=1, n_head=2), len(tok))


def test_warm_up_saved_then_continued_is_bit_identical_to_one_run(tmp_path):
    """What the pipeline does (stage warmup@, then sft@ in another process, through the saved state)
    gives the weights and curve of training both phases in one call, bit for bit; without the saved
    optimiser moments or generator it would not."""
    from rlvr.optim import AdamW
    from rlvr.pipeline import checkpoint
    from rlvr.sft import fit_noisy, warm_up

    tok, (tokens, mask), clean, cfg = _warmup_case(clean_epochs=2)
    one = _fresh(tok)
    one_curve = train_sft(
        one, (tokens, mask), cfg, torch.Generator().manual_seed(0), progress=False, clean=clean
    )

    model = _fresh(tok)
    gen = torch.Generator().manual_seed(0)
    opt, curve = warm_up(model, clean, cfg, gen, progress=False)
    path = checkpoint.save_warmup(
        tmp_path / "w.pt",
        model,
        tok,
        "warmup@x",
        "h",
        opt.state_dict(),
        gen.get_state(),
        curve,
        checkpoint.answers_digest(clean[0]),
    )
    state = checkpoint.load_warmup(path, tok, "warmup@x", "h")
    resumed = AdamW(state.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    resumed.load_state_dict(state.optimizer)
    gen2 = torch.Generator()
    gen2.set_state(state.generator)
    two_curve = state.curve + fit_noisy(state.model, resumed, tokens, mask, cfg, gen2, progress=False)
    assert two_curve == one_curve
    assert all(
        torch.equal(a, b) for a, b in zip(one.state_dict().values(), state.model.state_dict().values())
    )

    cold = checkpoint.load_warmup(path, tok, "warmup@x", "h")  # same weights and data order, fresh moments
    gen3 = torch.Generator()
    gen3.set_state(cold.generator)
    fit_noisy(cold.model, AdamW(cold.model.parameters(), lr=cfg.lr), tokens, mask, cfg, gen3, progress=False)
    assert not torch.equal(cold.model.tok_emb.weight, one.tok_emb.weight)


def test_zero_clean_epochs_warm_up_is_the_initial_state():
    from rlvr.sft import warm_up

    tok, (tokens, mask), clean, cfg = _warmup_case(clean_epochs=0)
    model = _fresh(tok)
    before = [p.detach().clone() for p in model.parameters()]
    opt, curve = warm_up(model, clean, cfg, torch.Generator().manual_seed(0), progress=False)
    assert curve == [] and opt.steps == [0] * len(before)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_final_loss_is_the_mean_of_the_last_ten_steps():
    from rlvr.sft import final_loss

    assert final_loss([{"loss": float(i)} for i in range(12)]) == sum(range(2, 12)) / 10
    assert final_loss([{"loss": 1.0}, {"loss": 3.0}]) == 2.0 and final_loss([]) is None
