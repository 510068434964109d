"""`rlvr check` refuses every value a later stage cannot use, and a run that diverges anyway stops.

Each refused value below was found by a fault run that got past the check: a seed numpy or torch
refuses (a traceback in `rlvr worked` or `rlvr passk`), a chain seed with no start (SFT trains, then
GRPO crashes), a repeated seed, an infinite or NaN learning rate or temperature (trained to all-NaN
weights and committed). A finite setting can still diverge (lr 1e10): training then stops at the
first NaN or infinite loss, gradient or weight with one line, and the stage writes nothing.
"""

import math

import pytest
import torch
import yaml
from conftest import make, tiny_raw

from rlvr.cli import main
from rlvr.configs import GRPOConfig, ModelConfig, SFTConfig
from rlvr.fields import SEED_MAX, Above, AtLeast, Between, DistinctSeeds, UserError
from rlvr.io.params import parse_params
from rlvr.optim import Diverged

SEED_RANGE = "must lie in [0, 4294967295] (a 32-bit seed)"


def run_check(tmp_path, raw, capsys):
    """`rlvr --params <raw as a file> check`: its exit status and its stderr."""
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))  # NaN and infinities as YAML's .nan and .inf
    code = main(["--params", str(path), "check"])
    return code, capsys.readouterr().err.strip()


@pytest.mark.parametrize(
    "mutate, expected",
    [
        # seeds: integers in [0, 2**32)
        (lambda r: r.update(seed=-1), f"seed = -1: {SEED_RANGE}"),
        (lambda r: r.update(seed=2**80), f"seed = {2**80}: {SEED_RANGE}"),
        (lambda r: r.update(seed=1.5), "seed = 1.5: must be an integer"),
        (lambda r: r["worked"].update(seed=-1), f"worked.seed = -1: {SEED_RANGE}"),
        (lambda r: r["sft"]["two_digit"].update(seeds=[0, -1]), f"sft.two_digit.seeds[1] = -1: {SEED_RANGE}"),
        (lambda r: r["variants"]["grpo"].update(seeds=[-1]), f"variants.grpo.seeds[0] = -1: {SEED_RANGE}"),
        (lambda r: r["grpo"]["defaults"].update(seeds=[0, 2**32]), "grpo.defaults.seeds[1] = 4294967296"),
        (lambda r: r["hack"].update(seeds=[-1]), f"hack.seeds[0] = -1: {SEED_RANGE}"),
        (
            lambda r: r["starts"]["runs"]["two_digit_slips"].update(seeds=[-1]),
            f"starts.runs.two_digit_slips.seeds[0] = -1: {SEED_RANGE}",
        ),
        (lambda r: r["starts"].update(chains=[]), "starts.chains = []"),
        # seed lists: at least one, none repeated; GRPO seeds per chain: at least one
        (
            lambda r: r["sft"]["two_digit"].update(seeds=[1, 0, 1]),
            "sft.two_digit.seeds = [1, 0, 1]: seeds must differ",
        ),
        (
            lambda r: r["variants"]["grpo"].update(seeds=[0, 0]),
            "variants.grpo.seeds = [0, 0]: seeds must differ",
        ),
        (
            lambda r: r["sft_defaults"].update(batch_size=0),
            "sft_defaults.batch_size = 0: must be >= 1",
        ),
        (lambda r: r["hack"].update(seeds=[]), "hack.seeds = []: list at least one seed"),
        (lambda r: r["variants"]["grpo"].update(grpo_seeds=0), "variants.grpo.grpo_seeds = 0: must be >= 1"),
        (
            lambda r: r["grpo"]["defaults"].update(grpo_seeds=-1),
            "grpo.defaults.grpo_seeds = -1: must be >= 1",
        ),
        # learning rates and temperatures: finite and > 0 (lr 0 trains nothing, a negative lr ascends)
        (lambda r: r["sft"]["two_digit"].update(lr=0), "sft.two_digit.lr = 0.0: must be > 0"),
        (lambda r: r["variants"]["grpo"].update(lr=-1e-3), "variants.grpo.lr = -0.001: must be > 0"),
        (lambda r: r["worked"].update(demo_lr=0), "worked.demo_lr = 0.0: must be > 0"),
        (lambda r: r["passk"].update(temperatures=[0]), "passk.temperatures[0] = 0.0: must be > 0"),
        # every float: finite
        (
            lambda r: r["sft"]["two_digit"].update(lr=math.inf),
            "sft.two_digit.lr = inf: must be a finite number",
        ),
        (
            lambda r: r["sft"]["two_digit"].update(lr=math.nan),
            "sft.two_digit.lr = nan: must be a finite number",
        ),
        (
            lambda r: r["variants"]["grpo"].update(lr=math.nan),
            "variants.grpo.lr = nan: must be a finite number",
        ),
        (
            lambda r: r["grpo"]["defaults"].update(lr=-math.inf),
            "grpo.defaults.lr = -inf: must be a finite number",
        ),
        (
            lambda r: r["variants"]["grpo"].update(temperature=math.inf),
            "variants.grpo.temperature = inf: must be a finite number",
        ),
        (lambda r: r["hack"].update(temperature=math.inf), "hack.temperature = inf: must be a finite number"),
        (
            lambda r: r["passk"].update(temperatures=[1.0, math.nan]),
            "passk.temperatures[1] = nan: must be a finite number",
        ),
        (
            lambda r: r["sft_defaults"].update(grad_clip=math.inf),
            "sft_defaults.grad_clip = inf: must be a finite",
        ),
        (
            lambda r: r["grpo"]["defaults"].update(beta=math.nan),
            "grpo.defaults.beta = nan: must be a finite number",
        ),
        (
            lambda r: r["sft"]["two_digit"].update(target=math.nan),
            "sft.two_digit.target = nan: must be a finite",
        ),
        (
            lambda r: r["worked"].update(demo_d_min=-math.inf),
            "worked.demo_d_min = -inf: must be a finite number",
        ),
        (lambda r: r["worked"].update(demo_lr=10**400), "worked.demo_lr = 1000"),  # beyond any float
    ],
)
def test_check_refuses_a_value_no_stage_can_use_in_one_line(
    tmp_path, capsys, tiny_raw_params, mutate, expected
):
    mutate(tiny_raw_params)
    code, err = run_check(tmp_path, tiny_raw_params, capsys)
    assert code == 2
    assert err.startswith("rlvr: error: ") and expected in err, err
    assert "\n" not in err


def test_the_edges_of_the_seed_range_are_accepted(tiny_raw_params):
    tiny_raw_params.update(seed=SEED_MAX)
    tiny_raw_params["worked"].update(seed=0)
    params = parse_params(tiny_raw_params)
    assert params.seed == 2**32 - 1 and params.worked.seed == 0


@pytest.mark.parametrize("rule", [AtLeast(0), Above(0), Between(0, 1)])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_range_refuses_nan_and_infinities_whatever_its_bounds(rule, value):
    """`inf >= 0` holds and every comparison with NaN is False: the rule says so before comparing."""
    assert rule.check(value) == "must be a finite number"
    assert rule.check(0.5) is None
    assert rule.check(10**400) in (None, "must lie in [0, 1]")  # a huge int is finite: compared exactly


def test_a_seed_list_needs_one_seed_and_no_repeats():
    assert DistinctSeeds().check([]) == "list at least one seed"
    assert DistinctSeeds().check([3, 1, 3, 1, 2]) == "seeds must differ (1, 3 repeated)"
    assert DistinctSeeds().check([0, 1]) is None


# ------------------------------------------------------------------ a run that diverges stops


def _single_digit():
    from rlvr.noise import noisy_rows
    from rlvr.sft import encode_sft
    from rlvr.tasks import split
    from rlvr.tokenizer import Tokenizer

    tok = Tokenizer()
    train = split("single_digit", 0, seed=0)[0]
    return tok, train, encode_sft(noisy_rows(train, 0.0, repeats=1, seed=0), tok)


def _tiny_model(tok):
    from rlvr.model import TinyLM

    torch.manual_seed(0)
    return TinyLM(make(ModelConfig, d_model=16, n_layer=1, n_head=2), len(tok))


def test_a_nan_sft_loss_stops_training_at_its_step_before_the_update(monkeypatch):
    """The loss of the third step is NaN: Diverged (a UserError) names the step, the value and the
    run's lr and grad_clip; the weights are those after step 1, never trained on the NaN."""
    import rlvr.sft

    tok, _, (tokens, mask) = _single_digit()
    model = _tiny_model(tok)
    calls, real = [], rlvr.sft.sft_loss

    def loss_nan_at_step_2(*args):
        calls.append(1)
        loss = real(*args)
        return loss * math.nan if len(calls) == 3 else loss

    monkeypatch.setattr(rlvr.sft, "sft_loss", loss_nan_at_step_2)
    cfg = make(SFTConfig, epochs=5, batch_size=32, lr=0.003, grad_clip=1.0)  # 2 steps an epoch
    seen = []
    with pytest.raises(Diverged) as caught:
        rlvr.sft.train_sft(
            model, (tokens, mask), cfg, torch.Generator().manual_seed(0), on_step=seen.append, progress=False
        )
    assert isinstance(caught.value, UserError)
    assert str(caught.value) == (
        "training: loss = nan at step 2: training diverged; lower or check lr (0.003), grad_clip (1)"
    )
    assert [r["step"] for r in seen] == [0, 1]  # the NaN step was neither taken nor recorded
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_an_absurd_learning_rate_stops_sft_with_one_line():
    """No monkeypatch: lr 1e10 passes the check (finite, > 0), and the second step's loss is NaN; an
    lr whose first Adam step overflows float32 stops before any weight changes."""
    from rlvr.sft import train_sft

    tok, _, (tokens, mask) = _single_digit()
    with pytest.raises(Diverged, match=r"^training: loss = nan at step 1: .* lr \(1e\+10\)"):
        train_sft(
            _tiny_model(tok),
            (tokens, mask),
            make(SFTConfig, epochs=3, lr=1e10),
            torch.Generator(),
            progress=False,
        )
    model = _tiny_model(tok)
    before = [p.clone() for p in model.parameters()]
    with pytest.raises(Diverged, match=r"Adam's step size .* = 1e\+39 \(beyond torch.float32\) at step 0"):
        train_sft(
            model, (tokens, mask), make(SFTConfig, epochs=3, lr=1e38), torch.Generator(), progress=False
        )
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_nan_grpo_loss_stops_training_at_its_step(monkeypatch):
    import rlvr.grpo_loop

    tok, train, _ = _single_digit()
    real = rlvr.grpo_loop.grpo_loss
    monkeypatch.setattr(
        rlvr.grpo_loop, "grpo_loss", lambda *a, **k: (lambda out: (out[0] * math.nan, out[1]))(real(*a, **k))
    )
    cfg = make(GRPOConfig, steps=3, prompts_per_step=4, group_size=2, eval_every=3, lr=1e-3)
    data = rlvr.grpo_loop.GRPOData(train, train, tok, 2)
    with pytest.raises(Diverged) as caught:
        rlvr.grpo_loop.train_grpo(_tiny_model(tok), cfg, data, torch.Generator().manual_seed(0))
    assert str(caught.value) == (
        "training: loss = nan at step 1: training diverged; lower or check lr (0.001), grad_clip (1), "
        "temperature (1)"
    )
    placed = caught.value.at("variants.grpo", chain=3)
    assert str(placed).startswith("variants.grpo chain 3: loss = nan at step 1: ")
    assert str(placed).endswith(
        "variants.grpo.lr (0.001), variants.grpo.grad_clip (1), variants.grpo.temperature (1)"
    )


def test_a_diverged_error_crosses_a_process_as_raised():
    """A seed worker's Diverged reaches the stage pickled: the same message, still a UserError."""
    import pickle

    exc = Diverged("loss = nan", math.nan, 4, {"lr": 0.5}).at("sft.x", chain=1)
    back = pickle.loads(pickle.dumps(exc))
    assert isinstance(back, UserError) and str(back) == str(exc)
    assert (
        str(back) == "sft.x chain 1: loss = nan at step 4: training diverged; lower or check sft.x.lr (0.5)"
    )
    hack = Diverged("loss = inf", math.inf, 2, {"lr": 0.5, "temperature": 2.0})  # its lr: its variant's
    assert str(hack.at("hack", paths={"lr": "variants.a_grpo.lr"})).endswith(
        "lower or check variants.a_grpo.lr (0.5), hack.temperature (2)"
    )


@pytest.fixture
def tiny_single_digit(tmp_path, monkeypatch, mlflow_store):
    """A tiny checkout in tmp_path with chapter A's data, warm-up and SFT chains trained."""
    from rlvr.pipeline.run import run_stage

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_raw()))
    run_stage("data", None, progress=False)
    run_stage("warmup", "single_digit", progress=False)
    run_stage("sft", "single_digit", progress=False)
    return tmp_path


def test_a_stage_whose_chain_diverges_stops_in_one_line_and_leaves_no_outputs(
    tiny_single_digit, monkeypatch, capsys
):
    """GRPO: every unit's loss is NaN, so the stage stops at the first, naming its variant and chain,
    before any output exists. SFT: only chain 1 diverges, after chain 0's checkpoint was written:
    the stage stops and removes it (no new checkpoint beside an old metrics file)."""
    import rlvr.grpo_loop
    import rlvr.sft
    from rlvr.pipeline.run import run_stage
    from rlvr.pipeline.specs import instance_paths, stage

    d = tiny_single_digit
    params = yaml.safe_load((d / "params.yaml").read_text())
    real_grpo = rlvr.grpo_loop.grpo_loss
    nan_loss = lambda *a, **k: (lambda out: (out[0] * math.nan, out[1]))(real_grpo(*a, **k))  # noqa: E731
    monkeypatch.setattr(rlvr.grpo_loop, "grpo_loss", nan_loss)
    with pytest.raises(
        UserError,
        match=r"^variants\.a_grpo chain 0: loss = nan at step 1: training diverged; "
        r"lower or check variants\.a_grpo\.lr \(0\.003\)",
    ):
        run_stage("grpo", "a_grpo", progress=False)
    from rlvr.io.params import load_params

    loaded = load_params(d / "params.yaml")
    grpo = stage("grpo")
    outs = [
        d / p
        for p in (
            *grpo.outs(instance_paths("grpo", "a_grpo", loaded)),
            *grpo.metrics(instance_paths("grpo", "a_grpo", loaded)),
        )
    ]
    assert outs and not any(p.exists() for p in outs)

    real_sft = rlvr.sft.sft_loss_shared_prefix

    def nan_in_chain_1(*args):
        loss = real_sft(*args)
        return loss * math.nan if torch.initial_seed() == 1 else loss  # a worker is seeded with its chain

    monkeypatch.setattr(rlvr.sft, "sft_loss_shared_prefix", nan_in_chain_1)
    with pytest.raises(
        UserError, match=r"^sft\.single_digit chain 1: loss = nan at step 0: .* sft\.single_digit\.lr"
    ):
        run_stage("sft", "single_digit", progress=False)
    sft = stage("sft")
    paths = instance_paths("sft", "single_digit", loaded)
    outs = [d / p for p in (*sft.outs(paths), *sft.metrics(paths))]
    assert outs and not any(p.exists() for p in outs)
    assert params["sft"]["single_digit"]["seeds"] == [0, 1]  # chain 0's checkpoint was made, then removed
    assert "removed its outputs: data/single_digit/sft" in capsys.readouterr().err
