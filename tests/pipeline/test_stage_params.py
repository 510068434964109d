"""A stage's params hash names its checkpoints, and its MLflow params are the columns runs are
compared by: neither may move when the code that computes them changes, or checkpoints already in
users' caches stop loading and old runs stop lining up with new ones.

`golden/params.yaml` is params.yaml as committed when `golden/stage-params.json` was recorded from
it: for every stage instance, its params hash, the params.yaml keys it declares (what DVC reruns it
for) and what its MLflow run logs (each data child run's too). The copy keeps the record valid when
params.yaml is tuned later. Record it again only for a change that means to move them:
`PYTHONPATH=tests python tests/pipeline/test_stage_params.py > tests/golden/stage-params.json`.
"""

import json
import pickle
from pathlib import Path

import pytest
from conftest import tiny_raw

from rlvr.fields import UserError
from rlvr.io.params import load_params, parse_params
from rlvr.pipeline.specs import STAGES, scored_variants
from rlvr.pipeline.stageparams import StageParams, UndeclaredParam, data_run_settings, stage_params

GOLDEN = Path(__file__).resolve().parents[1] / "golden"  # tests/golden


def record(params_file: Path = GOLDEN / "params.yaml") -> dict:
    """{instance: {"hash", "params", "logged"}} for every stage instance, and {"logged"} for each
    data child run (`data/<sft run>`), computed by the code as it is."""
    params = load_params(params_file)
    out = {}
    for s in STAGES.values():
        for key in [None] if s.foreach is None else list(getattr(params, s.foreach)):
            own = stage_params(s.name, key, params)
            out[own.run] = {"hash": own.hash, "params": sorted(own.declared), "logged": own.logged}
    data = stage_params("data", None, params)
    for run in params.sft:
        out[f"data/{run}"] = {"logged": data_run_settings(run, data)}
    return out


def _exact(value) -> str:
    """JSON text: tells 0 from 0.0 (MLflow logs them as different strings) where == would not."""
    return json.dumps(value, sort_keys=True)


def test_every_instance_keeps_its_hash_declared_keys_and_logged_params():
    golden = json.loads((GOLDEN / "stage-params.json").read_text())
    now = record()
    assert sorted(now) == sorted(golden)
    for name, entry in golden.items():
        for field, value in entry.items():
            assert _exact(now[name][field]) == _exact(value), (name, field)


def test_the_hashes_checkpoints_carry_are_pinned():
    """A few, written out: a changed record file cannot move them unnoticed."""
    hashes = {name: entry["hash"] for name, entry in record().items() if "hash" in entry}
    assert hashes["sft@two_digit"] == "88569dfaaf4a"
    assert hashes["warmup@single_digit"] == "a51a6c9fb6c6"
    assert hashes["grpo@no_kl"] == "45c67221a005"
    assert hashes["grpo@grpo"] == "5147819fa7e8"
    assert hashes["hack"] == "a4cbc2b4b7f3"
    assert hashes["passk"] == "383b0d17cc82"


# --------------------------------------------------------------------------------------------
# A stage reads what it declares, and nothing else.


@pytest.fixture(scope="module")
def params():
    return parse_params(tiny_raw())


def declaring(params, *keys: str) -> StageParams:
    """A stage `probe` that declares `keys` (a spec's list, written out)."""
    return StageParams("probe", None, {k: None for k in keys}, "", [], params)


def test_a_read_outside_the_declared_params_fails_at_once_naming_the_key_and_the_stage(params):
    data = stage_params("data", None, params)
    run, whole = data.sft_run("two_digit"), params.sft_run("two_digit")
    assert run.noise == whole.noise and run.repeats == whole.repeats  # declared for data
    with pytest.raises(UndeclaredParam) as err:
        run.lr  # data must not rerun when the SFT lr changes, so it must not read it
    # two_digit states no lr: the key behind its value is the defaults'; it states its target
    assert str(err.value).startswith("stage data reads params key sft_defaults.lr, which it does not")
    with pytest.raises(UndeclaredParam, match="stage data reads params key sft.two_digit.target,"):
        run.target
    assert "\n" not in str(err.value) and isinstance(err.value, UserError)  # the CLI's one line, exit 2
    with pytest.raises(UndeclaredParam, match="stage data reads params key threads,"):
        data.threads
    with pytest.raises(UndeclaredParam, match="stage grpo@dapo reads params key sft.two_digit,"):
        stage_params("grpo", "dapo", params).sft_run("two_digit")


def test_a_declared_section_comes_whole_and_a_part_comes_with_its_declared_fields_only(params):
    grpo = stage_params("grpo", "dapo", params)
    assert grpo.variant("dapo") is params.variant("dapo")  # the maths gets the section itself
    assert grpo.task("two_digit") is params.task("two_digit")
    assert stage_params("warmup", "two_digit", params).sft_run("two_digit") is params.sft_run("two_digit")
    start = stage_params("passk", None, params).sft_run("two_digit")  # the run its figures name
    assert start.target == params.sft_run("two_digit").target and start.noise.beta == 1.5
    with pytest.raises(UndeclaredParam, match="reads params key sft_defaults.lr,"):
        start.lr  # pass@k scores the checkpoints: how they were trained is not its business


def test_a_variant_setting_needs_its_override_and_the_defaults_declared(params):
    """A variant is grpo.defaults overridden by variants.<name>: DVC must rerun a stage reading its
    beta when either changes."""
    cfg = declaring(params, "variants.dapo").variant("dapo")
    assert cfg.task == "two_digit" and cfg.sft == params.variant("dapo").sft  # its own keys
    with pytest.raises(UndeclaredParam, match="reads params key grpo.defaults.beta,"):
        cfg.beta
    whole = declaring(params, "variants.dapo", "grpo.defaults").variant("dapo")
    assert whole is params.variant("dapo")


def test_a_part_reaches_a_seed_worker_as_it_is(params):
    """Seed workers get their settings pickled: a part arrives with the same fields, and still
    refuses the others."""
    part = stage_params("passk", None, params).sft_run("two_digit")
    copy = pickle.loads(pickle.dumps(part))
    assert copy.target == part.target and copy.seeds == part.seeds and isinstance(copy, type(part))
    with pytest.raises(UndeclaredParam, match="stage passk reads params key sft_defaults.lr,"):
        copy.lr


def test_an_attribute_that_is_no_setting_is_an_ordinary_attribute_error(params):
    """`hasattr`, `getattr(x, name, default)` and copy's protocol lookups see no setting."""
    part = stage_params("passk", None, params).sft_run("two_digit")
    assert not hasattr(part, "__deepcopy__") and getattr(part, "nothing", None) is None
    assert not hasattr(stage_params("grpo", "dapo", params), "nothing")


def test_an_instance_gets_its_own_settings_resolved_once(params):
    """`config`: what the instance trains with, resolved by `stage_params` and handed by the stage to
    its chains as it is (no stage asks for its own settings again)."""
    assert stage_params("grpo", "dapo", params).config is params.variant("dapo")
    assert stage_params("sft", "two_digit", params).config is params.sft_run("two_digit")
    warmup = params.warmup("two_digit")
    assert stage_params("warmup", "two_digit", params).config is params.sft_run(warmup.run)
    hack, h = stage_params("hack", None, params).config, params.hack
    variant = params.variant(h.variant)
    assert (hack.seeds, hack.steps, hack.temperature) == (h.seeds, h.steps, h.temperature)
    assert (hack.lr, hack.beta, hack.advantage) == (variant.lr, variant.beta, variant.advantage)
    for name in ("check", "data", "passk", "worked", "report"):
        assert stage_params(name, None, params).config is None, name


def test_what_a_stage_is_told_of_other_instances(params):
    passk = stage_params("passk", None, params)
    assert passk.entries("variants") == list(scored_variants(params))  # the variants it scores
    assert passk.hash_of("sft", "two_digit") == stage_params("sft", "two_digit", params).hash


def test_a_stage_run_by_the_dispatcher_gets_only_what_it_declares(tmp_path, monkeypatch):
    """`python -m rlvr.pipeline worked` hands the stage its own params: a read of the master seed
    (worked declares `worked` and `threads`) stops it before it writes anything."""
    from rlvr.pipeline.run import run_stage
    from rlvr.pipeline.stages import worked

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(worked, "run", lambda params, paths, progress: params.seed)
    with pytest.raises(UndeclaredParam, match="^stage worked reads params key seed, which it does not"):
        run_stage("worked", None, str(GOLDEN / "params.yaml"), progress=False)
    assert list(tmp_path.iterdir()) == []


if __name__ == "__main__":
    print(json.dumps(record(), indent=1, sort_keys=True))
