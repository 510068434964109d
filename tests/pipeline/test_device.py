"""params.yaml's `device`: checked before any work, cpu unchanged, checkpoints portable, cuda repeatable."""

import os
import subprocess
import sys

import pytest
import torch
import yaml
from conftest import ROOT, make

from rlvr.cli import main
from rlvr.configs import GRPOConfig, ModelConfig
from rlvr.determinism import check_device
from rlvr.fields import ConfigError
from rlvr.grpo_loop import GRPOData, train_grpo
from rlvr.io.params import load_params, parse_params
from rlvr.model import TinyLM, sample
from rlvr.pipeline import checkpoint
from rlvr.pipeline.specs import STAGES
from rlvr.pipeline.stageparams import ON_DEVICE, stage_params
from rlvr.rollout import prompt_tensor
from rlvr.sft import encode_sft, train_sft
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer

TOK = Tokenizer()
PROBLEMS = split("single_digit", 0, seed=0)[0]
SMALL = {"d_model": 32, "n_layer": 1, "n_head": 2, "max_len": 32}
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")


@pytest.fixture
def deterministic_mode(monkeypatch):
    """Lets a test switch on the stages' deterministic mode (`set_determinism`): the mode and the
    cuBLAS workspace setting are restored afterwards."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    was = torch.are_deterministic_algorithms_enabled()
    yield
    torch._C._set_deterministic_algorithms(was)  # as `deterministic_ops` sets it: no compiler import


def test_a_device_other_than_cpu_or_cuda_is_one_line_naming_the_key(tiny_raw_params):
    tiny_raw_params["device"] = "gpu"
    with pytest.raises(ConfigError) as err:
        parse_params(tiny_raw_params)
    assert str(err.value) == "device = 'gpu': must be one of cpu, cuda"


def test_cuda_without_a_visible_gpu_is_refused_before_any_work(tmp_path, monkeypatch, capsys, mlflow_store):
    """`rlvr check` and a stage both stop in one line before they do anything (whatever GPU the
    machine has: torch is told it sees none)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["device"] = "cuda"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    assert main(["--params", str(tmp_path / "params.yaml"), "check"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlvr: error: device = 'cuda': no CUDA device is visible") and "\n" not in err
    assert main(["--params", str(tmp_path / "params.yaml"), "data"]) == 2
    assert "no CUDA device is visible" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["params.yaml"]  # no output, no MLflow run


def test_cuda_passes_the_check_where_a_gpu_is_visible(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    check_device("cuda")
    check_device("cpu")


def test_validating_the_default_device_never_imports_torch():
    """The check, data and report stages never load torch: neither the params nor the device check
    make them."""
    code = (
        "import sys; from rlvr.io.params import load_params; "
        "from rlvr.determinism import check_device; "
        f"check_device(load_params({str(ROOT / 'params.yaml')!r}).device); print('torch' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"


def test_the_stages_that_run_the_model_declare_and_log_the_device():
    params = load_params(ROOT / "params.yaml")
    assert params.device == "cpu"  # the default
    for s in STAGES.values():
        keys = [None] if s.foreach is None else list(getattr(params, s.foreach))[:1]
        for key in keys:
            own = stage_params(s.name, key, params)
            declared, logged = "device" in own.declared, own.logged.get("device")
            assert declared == (s.name in ON_DEVICE), s.name
            assert logged == ("cpu" if s.name in ON_DEVICE else None), s.name


def test_a_cuda_stage_runs_its_seeds_in_order_in_the_stage_process(deterministic_mode):
    """CUDA does not survive a fork: with device cuda there are no seed workers, whatever the budget."""
    from rlvr.pipeline.workers import seed_results

    with seed_results(_pid, [0, 1, 2], (), workers=3, device="cuda") as results:
        assert list(results) == [os.getpid()] * 3


def _pid(seed: int) -> int:
    return os.getpid()


def _tiny_policy(device: str | None = None) -> TinyLM:
    """A fresh small model from seed 0; on `device`, or where TinyLM makes it (None)."""
    torch.manual_seed(0)
    model = TinyLM(make(ModelConfig, **SMALL), len(TOK))
    return model if device is None else model.to(device)


def _sft(model: TinyLM, gen: torch.Generator) -> list[dict]:
    from rlvr.configs import SFTConfig

    tokens, mask = encode_sft([{"prompt": p.prompt, "label": p.answer} for p in PROBLEMS], TOK)
    cfg = make(SFTConfig, epochs=1, batch_size=32, noise={"kind": "uniform", "rate": 0.0})
    return train_sft(model, (tokens, mask), cfg, gen, progress=False, shared_prefix=True)


def _grpo_step(policy: TinyLM, gen: torch.Generator) -> list[dict]:
    cfg = make(GRPOConfig, steps=1, prompts_per_step=4, group_size=4, eval_every=1)
    return train_grpo(policy, cfg, GRPOData(PROBLEMS, PROBLEMS[:4], TOK, 2), gen, shared_prefix=True)


def _run(device: str | None) -> dict:
    """SFT, a sample and a GRPO step from seed 0, on `device`; None: TinyLM's and torch's defaults
    (no device named anywhere)."""
    model = _tiny_policy(device)
    generator = torch.Generator if device is None else lambda: torch.Generator(device=device)
    sft_curve = _sft(model, generator().manual_seed(0))
    prompts = prompt_tensor(PROBLEMS, TOK).to(model.device)
    roll = sample(model, prompts, 4, 2, TOK.eos_id, TOK.pad_id, 1.0, generator().manual_seed(1))
    curve = _grpo_step(model, generator().manual_seed(2))
    return {
        "sft_loss": [r["loss"] for r in sft_curve],
        "grpo": str([{k: v for k, v in r.items() if "seconds" not in k} for r in curve]),  # NaN cells alike
        "tokens": roll.tokens.cpu(),
        "mask": roll.mask.cpu(),
        **{f"state.{k}": v.cpu() for k, v in model.state_dict().items()},
    }


def _same(a: dict, b: dict) -> bool:
    """Every entry equal: tensors by torch.equal, the rest by ==."""
    equal = lambda x, y: torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y  # noqa: E731
    return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)


def test_an_explicit_cpu_device_gives_the_default_tensors_bit_for_bit():
    assert _same(_run(None), _run("cpu"))


def test_checkpoint_tensors_are_saved_on_the_cpu_and_load_on_the_device_asked(tmp_path):
    from rlvr.optim import AdamW

    model = _tiny_policy()
    opt = AdamW(model.parameters(), lr=1e-3)
    path = checkpoint.save_warmup(
        tmp_path / "w.pt",
        model,
        TOK,
        "warmup@x",
        "h",
        opt.state_dict(),
        torch.Generator().get_state(),
        [],
        "a",
    )
    saved = torch.load(path, weights_only=True)  # no map_location: each tensor where it was saved
    tensors = [*saved["model"].values(), *saved["optimizer"]["exp_avg"], *saved["optimizer"]["exp_avg_sq"]]
    assert tensors and all(t.device.type == "cpu" for t in tensors)
    assert saved["model"]._metadata == model.state_dict()._metadata  # a state dict, not a bare dict
    back = checkpoint.load_warmup(path, TOK, "warmup@x", "h", device="cpu")
    assert back.model.device.type == "cpu"


@needs_cuda
def test_cuda_runs_are_repeatable_and_their_checkpoints_load_on_the_cpu(tmp_path, deterministic_mode):
    """On a GPU, in the stages' deterministic mode: the same seed twice gives the same tokens,
    losses and weights; a checkpoint written there holds CPU tensors and loads on the CPU."""
    from rlvr.determinism import deterministic_ops

    deterministic_ops()
    assert _same(_run("cuda"), _run("cuda"))
    model = _tiny_policy("cuda")
    path = checkpoint.save(tmp_path / "c.pt", model, TOK, "sft@x/seed0", "h")
    saved = torch.load(path, weights_only=True)  # no map_location: each tensor where it was saved
    assert all(t.device.type == "cpu" for t in saved["model"].values())
    on_cpu = checkpoint.load(path, TOK, "sft@x/seed0", "h")
    assert on_cpu.device.type == "cpu"
    assert all(torch.equal(v.cpu(), on_cpu.state_dict()[k]) for k, v in model.state_dict().items())
    assert checkpoint.load(path, TOK, device="cuda").device.type == "cuda"
