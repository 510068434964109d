"""Checkpoints hold weights and the config that shapes them, nothing volatile, and refuse to load
as something they are not."""

import hashlib
from fractions import Fraction

import pytest
import torch
from conftest import make

from rlvr.configs import ModelConfig
from rlvr.model import TinyLM
from rlvr.pipeline import checkpoint
from rlvr.pipeline.checkpoint import CheckpointError
from rlvr.tokenizer import Tokenizer

TOK = Tokenizer()


def tiny(seed=0) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM(make(ModelConfig, d_model=16, n_layer=1, n_head=2), len(TOK))


def md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_same_weights_give_the_same_bytes_wherever_they_are_written(tmp_path):
    a = checkpoint.save(tmp_path / "a" / "sft.pt", tiny(), TOK, "sft@x", "h1")
    b = checkpoint.save(tmp_path / "b" / "other-name.pt", tiny(), TOK, "sft@x", "h1")
    assert md5(a) == md5(b)
    assert md5(checkpoint.save(tmp_path / "c.pt", tiny(seed=1), TOK, "sft@x", "h1")) != md5(a)


def test_round_trip_restores_the_weights_in_eval_mode(tmp_path):
    model = tiny()
    path = checkpoint.save(tmp_path / "m.pt", model, TOK, "grpo@v/seed0", "abc")
    back = checkpoint.load(path, TOK, "grpo@v/seed0", "abc")
    assert not back.training and back.cfg == model.cfg
    assert all(torch.equal(v, back.state_dict()[k]) for k, v in model.state_dict().items())


def test_training_twice_gives_the_same_checkpoint_file(tmp_path, monkeypatch, mlflow_store):
    """The SFT stage, run twice on the same inputs, writes byte-identical checkpoints (its timings and
    run ids go to the metrics JSON, which does differ)."""
    import yaml
    from conftest import tiny_raw

    from rlvr.pipeline.run import run_stage

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_raw()))
    run_stage("data", None, progress=False)
    run_stage("warmup", "single_digit", progress=False)
    hashes, run_ids = [], []
    for _ in range(2):
        run_ids.append(run_stage("sft", "single_digit", progress=False)["mlflow_run_id"])
        hashes.append(md5(tmp_path / "data/single_digit/sft/seed0.pt"))
    assert hashes[0] == hashes[1] and run_ids[0] != run_ids[1]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"run": "sft@single_digit"}, "holds 'sft@single_digit_hi', expected 'sft@single_digit'"),
        ({"config_hash": "0000"}, "made with other params (config hash h1, params.yaml gives 0000)"),
    ],
)
def test_a_foreign_or_stale_checkpoint_is_refused_in_one_line(tmp_path, kwargs, message):
    path = checkpoint.save(tmp_path / "sft.pt", tiny(), TOK, "sft@single_digit_hi", "h1")
    with pytest.raises(CheckpointError) as err:
        checkpoint.load(path, TOK, **kwargs)
    assert message in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("damage", ["truncate", "random", "other_pickle", "foreign_object"])
def test_a_damaged_file_is_refused_in_one_line(tmp_path, damage):
    path = checkpoint.save(tmp_path / "sft.pt", tiny(), TOK, "sft@x", "h")
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "random":
        path.write_bytes(bytes(range(256)) * 8)
    elif damage == "other_pickle":
        torch.save({"weights": torch.zeros(2)}, path)
    else:  # an object a weights-only load refuses: torch's own message advises weights_only=False
        torch.save({"weights": Fraction(1, 3)}, path)
    with pytest.raises(CheckpointError) as err:
        checkpoint.load(path, TOK)
    msg = str(err.value)
    assert msg.startswith(f"{path}: not ") and "\n" not in msg
    assert "trust the source" not in msg and "\x1b" not in msg and len(msg) - len(str(path)) <= 200


def test_a_missing_checkpoint_names_the_stage_to_run(tmp_path):
    with pytest.raises(CheckpointError, match=r"nope\.pt: not found \(run its DVC stage first: dvc repro\)"):
        checkpoint.load(tmp_path / "nope.pt", TOK)


def test_a_warm_up_state_and_a_checkpoint_are_not_taken_for_each_other(tmp_path):
    model = tiny()
    ckpt = checkpoint.save(tmp_path / "sft.pt", model, TOK, "sft@x", "h")
    state = checkpoint.save_warmup(
        tmp_path / "w.pt",
        model,
        TOK,
        "warmup@x",
        "h",
        {"steps": []},
        torch.Generator().get_state(),
        [],
        "digest",
    )
    with pytest.raises(CheckpointError, match="expected format 'rlvr-checkpoint/2'"):
        checkpoint.load(state, TOK)
    with pytest.raises(CheckpointError, match="expected format 'rlvr-warmup/2'"):
        checkpoint.load_warmup(ckpt, TOK, "warmup@x", "h")
    with pytest.raises(CheckpointError, match="made with other params"):
        checkpoint.load_warmup(state, TOK, "warmup@x", "other")
    back = checkpoint.load_warmup(state, TOK, "warmup@x", "h")
    assert back.model.training and back.answers == "digest" and back.curve == []


def test_carried_bytes_load_as_the_file_does_and_are_refused_as_it_is(tmp_path):
    """A task gets a checkpoint as bytes (`carried`): the same model as from the file, the same
    one-line refusals naming the file; a missing file is refused when it is read."""
    path = checkpoint.save(tmp_path / "m.pt", tiny(), TOK, "sft@x/seed0", "h")
    carried = checkpoint.carried(path)
    assert carried.path == path and repr(carried) == f"FileBytes({str(path)!r}, {len(carried.data)} bytes)"
    a, b = checkpoint.load(path, TOK, "sft@x/seed0", "h"), checkpoint.load(carried, TOK, "sft@x/seed0", "h")
    assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())
    with pytest.raises(CheckpointError, match=r"m.pt: made with other params"):
        checkpoint.load(carried, TOK, "sft@x/seed0", "other")
    damaged = type(carried)(path, carried.data[: len(carried.data) // 2])
    with pytest.raises(CheckpointError, match=r"m.pt: not a readable checkpoint"):
        checkpoint.load(damaged, TOK)
    with pytest.raises(CheckpointError, match=r"nope.pt: not found \(run its DVC stage first"):
        checkpoint.carried(tmp_path / "nope.pt")


def _flip_tensor_byte(path) -> None:
    """Flip one byte inside a stored tensor's data (a zip entry under `data/`), leaving the archive
    readable: what a damaged cache object can look like."""
    import zipfile

    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename and i.file_size >= 16)
    at = info.header_offset  # the local header's own name and extra lengths (its extra pads to 64 bytes)
    start = (
        at
        + 30
        + int.from_bytes(data[at + 26 : at + 28], "little")
        + int.from_bytes(data[at + 28 : at + 30], "little")
    )
    data[start + 7] ^= 0x40
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["checkpoint", "warmup"])
def test_bytes_damaged_after_writing_are_refused_before_anything_loads(tmp_path, kind):
    """One flipped byte in a weight: torch would still read the file, with another weight; the
    checkpoint's own digest refuses it in one line naming the file and the way back."""
    if kind == "checkpoint":
        path = checkpoint.save(tmp_path / "seed0.pt", tiny(), TOK, "sft@x/seed0", "h")
        read = lambda source: checkpoint.load(source, TOK, "sft@x/seed0", "h")  # noqa: E731
    else:
        path = checkpoint.save_warmup(
            tmp_path / "seed0.pt",
            tiny(),
            TOK,
            "warmup@x",
            "h",
            {"steps": []},
            torch.Generator().get_state(),
            [{"step": 1, "loss": 0.5}],
            "answers",
        )
        read = lambda source: checkpoint.load_warmup(source, TOK, "warmup@x", "h")  # noqa: E731
    read(path)
    _flip_tensor_byte(path)
    for source in (path, checkpoint.carried(path)):
        with pytest.raises(CheckpointError) as err:
            read(source)
        msg = str(err.value)
        assert msg.startswith(f"{path}: damaged since its stage wrote it") and "\n" not in msg
        assert "rlvr restore" in msg


def test_the_digest_sees_every_kind_of_content():
    base = {
        "model": {"w": torch.zeros(2, 3)},
        "curve": [{"loss": 0.5}],
        "run": "sft@x",
        "step": torch.tensor(3.0),
    }
    changed = [
        {**base, "model": {"w": torch.zeros(3, 2)}},  # shape
        {**base, "model": {"w": torch.zeros(2, 3, dtype=torch.float64)}},  # dtype
        {**base, "model": {"w": torch.ones(2, 3)}},  # bytes
        {**base, "curve": [{"loss": 0.25}]},
        {**base, "run": "sft@y"},
        {**base, "step": torch.tensor(4.0)},
    ]
    assert checkpoint.digest(base) == checkpoint.digest(dict(reversed(base.items())))
    assert len({checkpoint.digest(c) for c in changed} | {checkpoint.digest(base)}) == len(changed) + 1
