"""The one-file chain (experiments/chain.py) and the pipeline's stages run the same functions: on
tiny params, chain 0 of chapter B gives the same SFT start, GRPO run and pass@k counts either way."""

import importlib.util
import json

from conftest import ROOT

from rlvr.pipeline.run import run_stage


def chain_module():
    spec = importlib.util.spec_from_file_location("chain", ROOT / "experiments/chain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_chain_in_one_process_is_the_pipelines_chain(tiny_repo, capsys):
    d, _ = tiny_repo
    run_stage("grpo", "grpo_end", progress=False)
    run_stage("grpo", "grpo", progress=False)  # passk scores every variant of the start
    run_stage("grpo", "dapo", progress=False)
    run_stage("passk", None, progress=False)
    chain = chain_module()
    assert chain.main(["--params", str(d / "params.yaml"), "--seed", "0"]) == 0
    printed = json.loads(capsys.readouterr().out)
    out = chain.run_chain(chain.arguments(["--params", str(d / "params.yaml"), "--seed", "0"]))
    same = lambda a, b: json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # noqa: E731 (NaN too)
    assert same(printed["sft"], out["sft"]) and same(printed["grpo"], out["grpo"])

    sft = json.loads((d / "reports/metrics/sft-two_digit.json").read_text())["per_seed"]
    for key in ("start_val", "start_steps", "sampled_acc_heldout", "greedy_acc_heldout", "sampled_acc_train"):
        assert out["sft"][key] == sft[key][0], key
    grpo = json.loads((d / "reports/metrics/grpo-grpo_end.json").read_text())["per_seed"]
    for key in ("eval_acc_start", "eval_acc_final", "kl_k3_nats_max", "end_reached", "end_val"):
        assert out["grpo"][key] == grpo[key][0], key
    counts = json.loads((d / "reports/passk-counts.json").read_text())["counts"]
    assert out["counts"]["sft"] == counts["sft/seed0"] and out["counts"]["grpo"] == counts["grpo_end/seed0"]


def test_every_knob_is_an_argument_with_its_default(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps help at the terminal's width
    chain = chain_module()
    try:
        chain.arguments(["--help"])
    except SystemExit:
        pass
    text = capsys.readouterr().out
    for flag in (
        "--chapter",
        "--seed",
        "--sft-target",
        "--grpo-lr",
        "--prompts",
        "--steps",
        "--end-target",
        "--samples",
    ):
        assert flag in text
    assert "(default: B)" in text and "(default: 100)" in text
    # every knob shows the value params.yaml gives the chapter's run and variant, not "the run's"
    from rlvr.io.params import load_params

    params = load_params(ROOT / "params.yaml")
    sft, grpo = params.sft_run("two_digit"), params.variant("grpo_end")
    options = text.split("options:", 1)[1]
    for flag, value in (("--sft-target", sft.target), ("--grpo-lr", grpo.lr), ("--end-target", grpo.target)):
        assert f"(default: {value})" in options.split(flag, 1)[1].split("\n  --", 1)[0], flag
    assert "the run's" not in text and "the variant's" not in text


def test_the_one_file_chain_stands_on_rlvr_alone():
    """experiments/chain.py imports the maths and its I/O, never the machinery DVC runs: a reader can
    follow a chain without the pipeline."""
    import ast

    tree = ast.parse((ROOT / "experiments/chain.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert any(m.startswith("rlvr.") for m in imported)
    assert not [m for m in imported if m.startswith(("rlvr.pipeline", "rlvr.tools", "rlvr.bench"))]
