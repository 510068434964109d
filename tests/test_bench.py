"""`rlvr bench`'s own logic: FLOP counts, the peer switch, the scaling record and how the report shows
them. Timings are never asserted (benchmarks measure speed; tests check behaviour)."""

from __future__ import annotations

import pytest

from bench import peer
from bench import suite as bench
from rlvr import flops
from rlvr.configs import ModelConfig
from rlvr.fields import ConfigError
from rlvr.pipeline.config import load_params

TINY = ModelConfig(d_model=8, n_layer=2, n_head=2, max_len=16)


def test_token_flops_count_every_matrix_product_of_the_model():
    # per layer 24 d^2 + 4 d ctx; LM head 2 d V: d 8, 2 layers, context 3, vocab 5
    assert flops.token_flops(TINY, 3, 5) == 2 * (24 * 64 + 4 * 8 * 3) + 2 * 8 * 5
    assert flops.token_flops(TINY, 3, 5, logits=False) == 2 * (24 * 64 + 4 * 8 * 3)
    assert flops.sequence_flops(TINY, 2, 2, 5) == flops.token_flops(TINY, 3, 5) + flops.token_flops(
        TINY, 4, 5
    )


def test_sampling_flops_encode_each_prompt_once_and_decode_every_row():
    P, Tp, n, m, V = 3, 4, 5, 3, 7
    prefill = P * (sum(flops.token_flops(TINY, t, V, logits=False) for t in range(1, Tp + 1)) + 2 * 8 * V)
    decode = P * n * (flops.token_flops(TINY, Tp + 1, V) + flops.token_flops(TINY, Tp + 2, V))
    assert flops.sampling_flops(TINY, P, Tp, n, m, V) == prefill + decode
    # the reference forward is counted only when beta > 0: exactly one forward more
    with_ref = flops.grpo_step_flops(TINY, P, n, Tp, m, V, 0.04)
    without = flops.grpo_step_flops(TINY, P, n, Tp, m, V, 0.0)
    assert (with_ref - without) * 3 == without - flops.sampling_flops(TINY, P, Tp, n, m, V)


def test_sampling_flops_count_the_prompts_shared_start_once():
    """The sampler and the loss encode the tokens every prompt shares (the system prompt) once."""
    P, Tp, n, m, V, c = 3, 5, 2, 2, 7, 2
    nolog = lambda t: flops.token_flops(TINY, t, V, logits=False)  # noqa: E731
    prefill = nolog(1) + nolog(2) + P * (nolog(3) + nolog(4) + nolog(5) + 2 * 8 * V)
    decode = P * n * flops.token_flops(TINY, Tp + 1, V)
    assert flops.sampling_flops(TINY, P, Tp, n, m, V, shared=c) == prefill + decode
    assert flops.sampling_flops(TINY, P, Tp, n, m, V) - flops.sampling_flops(TINY, P, Tp, n, m, V, c) == (
        P - 1
    ) * (nolog(1) + nolog(2))
    forward_saved = (P - 1) * (nolog(1) + nolog(2))  # per forward; the step runs 1 + 3 (+ 1 with beta)
    assert (
        flops.grpo_step_flops(TINY, P, n, Tp, m, V, 0.04)
        - flops.grpo_step_flops(TINY, P, n, Tp, m, V, 0.04, c)
        == forward_saved * 5
    )


def test_shared_columns_are_what_the_prefill_encodes_once():
    from rlvr.rollout import prompt_tensor
    from rlvr.tasks import all_problems
    from rlvr.tokenizer import Tokenizer

    tok = Tokenizer()
    p = prompt_tensor(all_problems("two_digit")[:40], tok)  # (40, Tp)
    c = bench.shared_columns(p)
    assert 0 < c < p.shape[1] and bool((p[:, :c] == p[:1, :c]).all()) and not bool((p[:, c] == p[0, c]).all())
    assert bench.shared_columns(p[:1]) == 0  # one prompt: nothing shared with another


def test_phases_time_each_call_less_the_calls_nested_in_it(monkeypatch):
    clock = iter([0.0, 1.0, 3.0, 10.0, 11.0, 12.5])  # outer starts, inner 1..3, inner 10..11, outer ends
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(clock))
    timer = bench._Phases()
    inner = timer.wrap(lambda: "x", "inner")
    outer = timer.wrap(lambda: (inner(), inner()), lambda: "outer")
    assert outer() == ("x", "x")
    assert timer.seconds == {"inner": 3.0, "outer": 12.5 - 3.0}
    assert timer.stack == []


def test_op_classes_sort_torch_ops():
    assert [
        bench.op_class(n)
        for n in (
            "aten::mm",
            "aten::bmm",
            "aten::_scaled_dot_product_flash_attention_for_cpu",
            "aten::gelu_backward",
            "aten::native_layer_norm",
            "aten::cat",
            "aten::copy_",
            "aten::mul",
            "aten::sum",
        )
    ] == [
        "matrix products",
        "matrix products",
        "attention kernel",
        "GELU, layer norm, softmax",
        "GELU, layer norm, softmax",
        "memory (copy, cat, fill, index)",
        "memory (copy, cat, fill, index)",
        "other elementwise, reductions",
        "other elementwise, reductions",
    ]


def test_seed_profile_splits_one_seed_by_phase_and_op_class(tmp_path, monkeypatch):
    """A short seed of an untrained tiny model (no checkpoint in an empty folder): every phase is
    timed, the phases add up to the wall, the op classes to 1, and the loop's functions are put back."""
    from dataclasses import replace

    from conftest import ROOT

    from rlvr import grpo

    params = load_params(ROOT / "params.yaml")
    small = replace(
        params.variant("grpo"), steps=3, eval_every=2, eval_samples=2, prompts_per_step=4, group_size=2
    )
    params = replace(params, model=replace(TINY, max_len=32), variants={**params.variants, "grpo": small})
    originals = (grpo.rollout_groups, grpo.response_logits, grpo.grpo_update, grpo.evaluate)
    monkeypatch.chdir(tmp_path)
    out = bench.bench_seed_profile(params, profiled_steps=2)
    assert (grpo.rollout_groups, grpo.response_logits, grpo.grpo_update, grpo.evaluate) == originals
    assert out["start"] == "untrained" and out["steps"] == 3 and out["threads"] == 1
    assert [r["phase"] for r in out["phases"]] == [
        *bench.SEED_PHASES,
        "the rest (checkpoint, reference copy, step rows)",
    ]
    assert all(r["seconds"] >= 0 for r in out["phases"][:-1])  # a fast phase may round to 0 on a fast CPU
    assert abs(sum(r["seconds"] for r in out["phases"]) - out["seconds"]) < 0.05
    assert abs(sum(r["share"] for r in out["phases"]) - 1) < 0.01
    shares = [r["share"] for r in out["op_classes"]]
    assert abs(sum(shares) - 1) < 0.01 and shares == sorted(shares, reverse=True)
    assert "matrix products" in [r["class"] for r in out["op_classes"]]
    assert 0 < out["op_share_of_wall"] <= 1.0


def test_report_shows_where_a_seed_spends_its_time():
    from rlvr.report.claims import seed_profile_blocks
    from rlvr.report.document import markdown

    profile = {
        "variant": "grpo",
        "start": "data/two_digit/sft.pt",
        "threads": 1,
        "steps": 100,
        "eval_every": 25,
        "seconds": 10.0,
        "phases": [
            {"phase": "training rollouts (sample, score)", "seconds": 2.5, "share": 0.25},
            {"phase": "reference forward", "seconds": 7.5, "share": 0.75},
        ],
        "profiled_steps": 25,
        "op_classes": [
            {"class": "matrix products", "share": 0.5},
            {"class": "attention kernel", "share": 0.5},
        ],
        "op_share_of_wall": 0.9,
    }
    text = markdown(seed_profile_blocks(profile), "figures")
    assert (
        "| training rollouts (sample, score) | 2.50 | 25% |" in text
        and "| reference forward | 7.50 | 75% |" in text
    )
    assert (
        "| matrix products | 50% |" in text
        and "90% of a profiled run" in text
        and "`grpo`, 100 steps" in text
    )
    assert "### Where a GRPO seed's time goes" in text and "one torch thread" in text


def test_gemm_rate_is_a_positive_flop_rate():
    assert flops.gemm_rate(TINY, 64, repeats=2) > 0


def test_unknown_peer_and_missing_peer_extra_fail_before_any_benchmark(tmp_path, monkeypatch):
    from conftest import ROOT

    params = load_params(ROOT / "params.yaml")
    out = tmp_path / "benchmarks.json"
    with pytest.raises(ConfigError, match="--peer 'vllm': unknown; known peers: trl"):
        bench.bench_all(params, out, only=["sft"], peer="vllm")
    monkeypatch.setattr(peer, "available", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[peer\]'"):
        bench.bench_all(params, out, only=["sft"], peer="trl")
    assert not out.exists()  # nothing ran, nothing written


def test_peer_figures_that_were_not_measured_say_why(monkeypatch):
    monkeypatch.setattr(peer, "available", lambda: True)
    assert bench._peer_note(False) == bench.PEER_SKIPPED  # installed, not asked for
    assert bench._peer_note(True) == ""  # measured
    monkeypatch.setattr(peer, "available", lambda: False)
    assert bench._peer_note(False) == bench.PEER_MISSING == "not installed"


def test_scaling_moves_one_dimension_at_a_time_from_the_base(monkeypatch):
    from conftest import ROOT

    monkeypatch.setattr(bench, "SCALING", {"group_size": (2, 4), "response_tokens": (2,), "d_model": (16,)})
    monkeypatch.setattr(bench, "WARMUP", 0)
    out = bench.bench_scaling(load_params(ROOT / "params.yaml"), steps=1)
    assert [(r["axis"], r["group_size"], r["response_tokens"], r["d_model"]) for r in out["rows"]] == [
        ("group_size", 2, 4, 128),
        ("group_size", 4, 4, 128),
        ("response_tokens", 8, 2, 128),
        ("d_model", 8, 4, 16),
    ]
    assert all(r["seconds"] > 0 and r["trl_seconds"] is None for r in out["rows"])
    assert out["trl"] in (bench.PEER_SKIPPED, bench.PEER_MISSING)


def test_report_shows_peer_ratios_against_their_targets_and_why_a_peer_is_missing():
    from rlvr.report.claims import bench_rows, machine_line

    bench_json = {
        "sampling": {
            "completions_per_second": {"median": 30000.0},
            "target_completions_per_second": 20000,
            "hf_generate": {"completions_per_second": {"median": 5000.0}},
            "speedup_vs_hf_generate": 6.0,
            "target_speedup_vs_hf_generate": 6.0,
            "share_of_gemm_limit": 0.6,
            "target_share_of_gemm_limit": 0.75,
        },
        "grpo_step": {
            "beta_0.0": {
                "step_seconds": {"median": 0.03},
                "speedup_vs_trl": 3.1,
                "trl_step_seconds": {"median": 0.093},
            },
            "beta_0.04": {"step_seconds": {"median": 0.04}},
            "trl": "not installed",
            "target_speedup_vs_trl": 4.0,
        },
        "machine": {
            "cpu": "AMD EPYC 9B14",
            "cpu_count": 2,
            "threads": 2,
            "torch": "2.13.0+cpu",
            "load_average_1min": {"before": 0.1, "after": 1.2},
        },
    }
    rows = {r[0]: r[1:] for r in bench_rows(bench_json)}
    assert rows["sampling: ours / HF `generate`"] == ["6 x", ">= 6 x", "yes"]
    assert rows["sampling: share of the fp32 GEMM limit"] == ["0.6", ">= 0.75", "no"]
    assert rows["GRPO step, beta = 0: TRL / ours"] == ["3.1 x", ">= 4 x", "no"]
    assert rows["GRPO step, beta = 0: TRL GRPOTrainer, interleaved"][0] == "0.093 s"
    assert rows["GRPO step, beta = 0.04: TRL GRPOTrainer, interleaved"] == ["not installed", "–", "–"]
    assert "GRPO step, beta = 0.04: TRL / ours" not in rows  # no ratio without the peer
    assert machine_line(bench_json) == (
        "Measured on AMD EPYC 9B14, 2 cores, 2 torch threads, torch 2.13.0+cpu, "
        "1-minute load 0.1 before, 1.2 after."
    )


def test_report_draws_the_scaling_figure_with_its_caption(tmp_path):
    from rlvr.pipeline.stages.report import scaling_figure
    from rlvr.report import plots
    from rlvr.report.claims import build
    from rlvr.report.document import Figure, Table

    scaling = {
        "prompts": 16,
        "beta": 0.04,
        "base": bench.SCALING_BASE,
        "trl": "measured at group_size 8, 64",
        "rows": [
            {
                "axis": a,
                **{**bench.SCALING_BASE, a: v},
                "seconds": 0.01 * v,
                "trl_seconds": 0.1 * v if a == "group_size" else None,
            }
            for a, vs in bench.SCALING.items()
            for v in vs
        ],
    }
    assert scaling_figure({}, tmp_path / "x.png") is None
    fig = scaling_figure({"scaling": scaling}, tmp_path / "bench-scaling.png")
    assert fig["png"].startswith(b"\x89PNG") and fig["caption"] == plots.SCALING_CAPTION
    blocks = build(
        [], [], {}, None, {"scaling": scaling, "sft": {"tokens_per_second": {"median": 1.0}}}, None, fig
    )
    assert any(isinstance(b, Figure) and b.caption == plots.SCALING_CAPTION for b in blocks)
    table = next(b for b in blocks if isinstance(b, Table) and b.cls == "scaling")
    assert len(table.rows) == sum(len(v) for v in bench.SCALING.values())


@pytest.mark.skipif(not peer.available(), reason="the peer extra (pip install -e '.[peer]') is not installed")
def test_peer_tokenizer_and_model_match_ours():
    from rlvr.tokenizer import Tokenizer

    tok = Tokenizer()
    fast = peer.hf_tokenizer(tok)
    text = tok.decode(tok.prompt_ids("12+34="))
    assert fast(text, add_special_tokens=False)["input_ids"] == tok.prompt_ids("12+34=")
    model = peer.hf_model(TINY, tok)
    assert model.config.n_embd == 8 and model.config.n_layer == 2 and model.config.vocab_size == len(tok)
