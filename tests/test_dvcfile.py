"""dvc.yaml is generated, and honest: every stage depends on the code it runs and the params it reads."""

import subprocess

import pytest
import yaml
from conftest import ROOT, at_head, tiny_raw

from rlvr.fields import record_reads
from rlvr.pipeline import dvcfile
from rlvr.pipeline.config import parse_params
from rlvr.pipeline.specs import STAGES, uncovered_reads


def committed() -> dict:
    """dvc.yaml as the generator writes it (that the committed file is this: `rlvr verify`)."""
    return yaml.safe_load(dvcfile.render())


def test_every_stage_lists_every_module_it_reaches():
    assert dvcfile.missing_code_deps(committed()) == []


def test_removing_an_import_from_dvc_yaml_is_caught():
    doc = committed()
    deps = doc["stages"]["grpo"]["do"]["deps"]
    deps.remove("rlvr/tasks.py")  # the grpo stage reads its problems through rlvr.tasks
    assert dvcfile.missing_code_deps(doc) == [("grpo", "rlvr/tasks.py")]


def test_imports_inside_functions_count(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text(
        "import os\n\ndef f():\n    from rlvr.tasks import split\n    from rlvr.pipeline import "
        "paths\n    return split\n"
    )
    assert dvcfile._imports(src, "rlvr.mod") == {"rlvr.tasks", "rlvr.pipeline", "rlvr.pipeline.paths"}


def test_grpo_stage_reaches_the_prompt_encoding():
    """The defect this layer fixes: grpo@* listed grpo.py, model.py, verifiers.py and missed the
    modules that encode its prompts."""
    deps = dvcfile.code_deps("grpo")
    for f in (
        "rlvr/tasks.py",
        "rlvr/tokenizer.py",
        "rlvr/pipeline/config.py",
        "rlvr/rollout.py",
        "rlvr/pipeline/stages/grpo.py",
    ):
        assert f in deps


def test_stage_functions_live_only_under_stages():
    out = subprocess.run(
        ["git", "grep", "-n", "def run_", "--", "rlvr/"], cwd=ROOT, capture_output=True, text=True
    )
    assert [line for line in out.stdout.splitlines() if not line.startswith("rlvr/pipeline/")] == []


def test_a_read_outside_the_declared_params_is_reported():
    params = parse_params(tiny_raw())
    with record_reads() as reads:
        params.sft_run("two_digit").noise.rate  # declared for data
        params.sft_run("two_digit").lr  # not: data must not rerun when the SFT lr changes
    assert "sft.two_digit.noise.rate" in reads
    assert uncovered_reads("data", None, params, sorted(reads)) == ["sft.two_digit.lr"]


def test_a_variant_read_counts_for_its_override_and_the_defaults():
    params = parse_params(tiny_raw())
    with record_reads() as reads:
        params.variant("dapo").beta
    assert reads == {"variants.dapo.beta", "grpo.defaults.beta"}
    with record_reads() as reads:
        list(params.variants)  # listing the variants depends on all of them
    assert reads == {"variants"}


def test_every_stage_is_in_dvc_yaml():
    assert list(committed()["stages"]) == list(STAGES)


@pytest.mark.parametrize("name", ["params.yaml", "dvc.yaml", "dvc.lock"])
def test_dvc_reads_our_yaml_with_the_c_parser_and_it_reads_what_pure_python_reads(name):
    """ruamel.yaml.clib is installed (a pinned dependency): DVC's many reads of dvc.lock per stage
    take a quarter of the time. Both parsers, with ruamel's YAML 1.2 resolver, give the same data."""
    from ruamel.yaml import YAML
    from ruamel.yaml.main import CParser

    fast = YAML(typ="safe")
    assert CParser is not None and fast.Parser is CParser
    text = (at_head(name) if name == "dvc.lock" else ROOT / name).read_text()
    assert fast.load(text) == YAML(typ="safe", pure=True).load(text)
