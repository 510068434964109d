import subprocess
import sys

import pytest
import torch
from conftest import make

from rlvr.configs import ModelConfig
from rlvr.model import TinyLM
from rlvr.optim import AdamW


def _train(opt_of, lrs, frozen: str | None = None) -> list[torch.Tensor]:
    """A few steps of a TinyLM on a fixed batch; lr changes every step (as the SFT schedule does).
    `frozen`: a parameter left out of the loss on odd steps (its grad is None there)."""
    torch.manual_seed(0)
    model = TinyLM(make(ModelConfig), 12)
    opt = opt_of(model.parameters())
    tokens = torch.randint(0, 12, (8, 10), generator=torch.Generator().manual_seed(1))  # (B, T)
    for i, lr in enumerate(lrs):
        for group in getattr(opt, "param_groups", [{}]):
            group["lr"] = lr
        opt.lr = lr
        loss = model(tokens).logsumexp(-1).mean()
        opt.zero_grad()
        loss.backward()
        if frozen is not None and i % 2:
            dict(model.named_parameters())[frozen].grad = None
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


LRS = [1e-3, 3e-3, 2e-3, 5e-4, 1e-3]


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adamw_is_bit_identical_to_torch_adamw(wd):
    ours = _train(lambda ps: AdamW(ps, lr=LRS[0], weight_decay=wd), LRS)
    theirs = _train(lambda ps: torch.optim.AdamW(ps, lr=LRS[0], weight_decay=wd), LRS)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_weight_decay_zero_is_bit_identical_to_torch_adam_even_when_a_grad_is_missing():
    ours = _train(lambda ps: AdamW(ps, lr=LRS[0]), LRS, frozen="ln_f.weight")
    theirs = _train(lambda ps: torch.optim.Adam(ps, lr=LRS[0]), LRS, frozen="ln_f.weight")
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    moved = _train(lambda ps: AdamW(ps, lr=LRS[0]), LRS)
    assert not all(torch.equal(a, b) for a, b in zip(ours, moved, strict=True))  # the missing grad mattered


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lr": -1.0},
        {"lr": 1e-3, "betas": (0.9, 1.0)},
        {"lr": 1e-3, "eps": -1.0},
        {"lr": 1e-3, "weight_decay": -0.1},
    ],
)
def test_bad_hyperparameters_are_rejected(kwargs):
    with pytest.raises(ValueError):
        AdamW([torch.zeros(2, requires_grad=True)], **kwargs)


def test_no_trainable_parameters_is_an_error():
    with pytest.raises(ValueError, match="no parameters"):
        AdamW([torch.zeros(2)], lr=1e-3)


def test_training_a_step_does_not_import_torch_dynamo():
    """The point of the module: a training process never pays torch._dynamo's ~1.7 s import."""
    code = (
        "import sys, torch\nfrom rlvr.optim import AdamW\n"
        "w = torch.zeros(3, requires_grad=True); opt = AdamW([w], lr=0.1)\n"
        "(w - 1).square().sum().backward(); torch.nn.utils.clip_grad_norm_([w], 1.0); opt.step(); "
        "opt.zero_grad()\n"
        "assert w.abs().sum() > 0\nprint('torch._dynamo' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_state_dict_round_trip_continues_the_run_exactly():
    """Train 2 steps, move the moments and step counts to a new optimiser on a copy of the weights,
    train 3 more: the weights equal 5 steps with one optimiser."""
    import copy

    torch.manual_seed(0)
    model = TinyLM(make(ModelConfig), 12)
    tokens = torch.randint(0, 12, (8, 10), generator=torch.Generator().manual_seed(1))  # (B, T)

    def steps(m, opt, n):
        for _ in range(n):
            opt.zero_grad()
            m(tokens).logsumexp(-1).mean().backward()
            opt.step()

    twin = copy.deepcopy(model)
    opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    steps(model, opt, 2)
    twin.load_state_dict(model.state_dict())
    opt2 = AdamW(twin.parameters(), lr=1e-3, weight_decay=0.1)
    opt2.load_state_dict(opt.state_dict())
    steps(model, opt, 3)
    steps(twin, opt2, 3)
    assert opt2.steps == opt.steps == [5] * len(opt.params)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), twin.parameters()))


def test_state_of_other_parameters_is_refused():
    small = AdamW(TinyLM(make(ModelConfig, d_model=16, n_head=2), 12).parameters(), lr=1e-3)
    big = AdamW(TinyLM(make(ModelConfig), 12).parameters(), lr=1e-3)
    with pytest.raises(ValueError, match="optimiser state exp_avg: shapes"):
        big.load_state_dict(small.state_dict())
