"""Process set-up: seeds, threads and deterministic ops, without loading the compiler."""

import subprocess
import sys


def test_set_determinism_turns_on_deterministic_ops_without_importing_the_compiler():
    code = (
        "import sys, torch; from rlvr.determinism import set_determinism; set_determinism(3, 1); "
        "print(torch.are_deterministic_algorithms_enabled(), torch.get_num_threads(), "
        "'torch._inductor.config' in sys.modules, torch.initial_seed())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "1", "False", "3"]


def test_deterministic_ops_leave_new_memory_unfilled():
    code = (
        "import torch; from rlvr.determinism import set_determinism; set_determinism(0, 1); "
        "import torch.utils.deterministic as d; print(d.fill_uninitialized_memory)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False"]


def _sample_and_train(fill: bool) -> list:
    """Tokens sampled by a fresh tiny model, then its weights after two GRPO steps, with deterministic
    mode's NaN fill of new memory on or off."""
    from dataclasses import replace

    import torch
    import torch.utils.deterministic

    from rlvr.configs import ModelConfig
    from rlvr.determinism import set_determinism
    from rlvr.grpo_loop import grpo_update, rollout_groups
    from rlvr.io.params import parse_params
    from rlvr.model import TinyLM
    from rlvr.optim import AdamW
    from rlvr.tasks import split
    from rlvr.tokenizer import Tokenizer
    from tests.conftest import tiny_raw

    params = parse_params(tiny_raw())
    set_determinism(0, 1)
    torch.utils.deterministic.fill_uninitialized_memory = fill
    tok = Tokenizer()
    train = split("two_digit", 300, 0)[0]
    policy = TinyLM(ModelConfig(d_model=32, n_layer=2, n_head=2, max_len=32), len(tok))
    cfg = replace(params.variant("grpo"), prompts_per_step=4, group_size=4, beta=0.04)
    ref, opt = TinyLM(policy.cfg, len(tok)).requires_grad_(False), AdamW(policy.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    out = []
    for _ in range(2):
        batch = rollout_groups(policy, train[:4], cfg, 4, tok, gen)
        batch = replace(batch, rewards=torch.rand(batch.rewards.shape, generator=gen).round())
        grpo_update(policy, ref, opt, batch, cfg, 4, shared_prefix=True)
        out.append(batch.tokens)
    return out + [p.detach().clone() for p in policy.parameters()]


def test_the_unfilled_memory_changes_no_number():
    import torch
    import torch.utils.deterministic

    try:
        filled, unfilled = _sample_and_train(True), _sample_and_train(False)
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = False
    assert len(filled) == len(unfilled)
    assert all(torch.equal(a, b) for a, b in zip(filled, unfilled, strict=True))


def test_error_line_is_one_line_for_a_users_error_and_none_for_a_bug():
    """The rule both entry points print by: a UserError or a missing file as it says, a failed write
    as the file and what to do, and anything else (a bug) not at all, so its traceback shows."""
    import errno

    from rlvr.fields import UserError
    from rlvr.io.files import error_line

    assert error_line(UserError("sft.x.lr = -1: must be > 0")) == "sft.x.lr = -1: must be > 0"
    assert "nope.json" in error_line(FileNotFoundError(2, "No such file or directory", "nope.json"))
    full = error_line(OSError(errno.ENOSPC, "No space left on device", "data/x.pt"))
    assert full.startswith("data/x.pt: ") and "\n" not in full
    assert error_line(ValueError("a bug")) is None and error_line(KeyError("k")) is None


def _fake_lscpu(tmp_path, monkeypatch, body: str) -> None:
    """An `lscpu` on PATH that prints `body` (a machine's report, as another machine's lscpu would)."""
    exe = tmp_path / "lscpu"
    exe.write_text(f"#!/bin/sh\ncat <<'JSON'\n{body}\nJSON\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")


def test_cpu_model_names_family_and_model_from_flat_or_nested_lscpu(tmp_path, monkeypatch):
    from rlvr.io.system import cpu_model

    flat = (
        '{"lscpu": [{"field": "Model name:", "data": "Chip X"}, {"field": "CPU family:", "data": "25"},'
        ' {"field": "Model:", "data": "17"}]}'
    )
    _fake_lscpu(tmp_path, monkeypatch, flat)
    assert cpu_model() == "Chip X (family 25, model 17)"
    nested = (
        '{"lscpu": [{"field": "Vendor ID:", "data": "V", "children": ['
        '{"field": "Model name:", "data": "Chip Y", "children": ['
        '{"field": "CPU family:", "data": "6"}, {"field": "Model:", "data": "143"}]}]}]}'
    )
    _fake_lscpu(tmp_path, monkeypatch, nested)
    assert cpu_model() == "Chip Y (family 6, model 143)"


def test_cpu_model_falls_back_to_platform_when_lscpu_says_nothing_usable(tmp_path, monkeypatch):
    import platform

    from rlvr.io.system import cpu_model

    _fake_lscpu(tmp_path, monkeypatch, "not json")
    assert cpu_model() == (platform.processor() or platform.machine())
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))  # no lscpu at all
    assert cpu_model() == (platform.processor() or platform.machine())
