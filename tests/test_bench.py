"""`rlvr bench`'s own logic: FLOP counts, the peer switch, the scaling record and how the report shows
them. Timings are never asserted (benchmarks measure speed; tests check behaviour)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rlvr import flops
from rlvr.bench import fair, grpo_step, peer, sampling, scaling, seed_profile, suite, workloads
from rlvr.configs import ModelConfig
from rlvr.fields import ConfigError
from rlvr.io.params import load_params

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
    c = workloads.shared_columns(p)
    assert 0 < c < p.shape[1] and bool((p[:, :c] == p[:1, :c]).all()) and not bool((p[:, c] == p[0, c]).all())
    assert workloads.shared_columns(p[:1]) == 0  # one prompt: nothing shared with another


def test_phases_time_each_call_less_the_calls_nested_in_it(monkeypatch):
    clock = iter([0.0, 1.0, 3.0, 10.0, 11.0, 12.5])  # outer starts, inner 1..3, inner 10..11, outer ends
    monkeypatch.setattr(seed_profile.time, "perf_counter", lambda: next(clock))
    timer = seed_profile.Phases()
    inner = timer.wrap(lambda: "x", "inner")
    outer = timer.wrap(lambda: (inner(), inner()), lambda: "outer")
    assert outer() == ("x", "x")
    assert timer.seconds == {"inner": 3.0, "outer": 12.5 - 3.0}
    assert timer.stack == []


def test_op_classes_sort_torch_ops():
    assert [
        seed_profile.op_class(n)
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

    from rlvr import grpo_loop as grpo

    params = load_params(ROOT / "params.yaml")
    small = replace(params.variant("grpo"), steps=3, eval_every=2, prompts_per_step=4, group_size=2)
    params = replace(params, model=replace(TINY, max_len=32), variants={**params.variants, "grpo": small})
    originals = (grpo.rollout_groups, grpo.response_logits, grpo.grpo_update, grpo.evaluate)
    monkeypatch.chdir(tmp_path)
    out = seed_profile.bench(params, profiled_steps=2)
    assert (grpo.rollout_groups, grpo.response_logits, grpo.grpo_update, grpo.evaluate) == originals
    assert out["start"] == "untrained" and out["steps"] == 3 and out["threads"] == 1
    assert [r["phase"] for r in out["phases"]] == [
        *seed_profile.SEED_PHASES,
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
    from rlvr.report.benchtables import seed_profile_blocks
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
        suite.bench_all(params, out, only=["sft"], peer="vllm")
    monkeypatch.setattr(peer, "available", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[peer\]'"):
        suite.bench_all(params, out, only=["sft"], peer="trl")
    assert not out.exists()  # nothing ran, nothing written


def test_against_needs_the_pipeline_benchmark_and_a_commit_before_any_benchmark(tmp_path):
    from conftest import ROOT

    params = load_params(ROOT / "params.yaml")
    out = tmp_path / "benchmarks.json"
    with pytest.raises(ConfigError, match="add --only pipeline"):
        suite.bench_all(params, out, only=["sft"], against="HEAD")
    with pytest.raises(ConfigError, match="--against 'no-such-rev': not a commit"):
        suite.bench_all(params, out, only=["pipeline"], against="no-such-rev")
    assert not out.exists()  # nothing ran, nothing written


def test_the_named_commit_is_measured_first_then_head(monkeypatch):
    from rlvr.bench import floor

    order = []
    monkeypatch.setattr(
        floor, "measure", lambda root, rev: order.append(rev) or {"commit": rev, "ratio": 1.0}
    )
    monkeypatch.setattr("rlvr.io.gitinfo.git_commit", lambda root, path=None: "h" * 40)
    out = floor.bench(None, against="a" * 40)
    assert order == ["a" * 40, "h" * 40]  # back to back, the named commit first
    assert out["commit"] == "h" * 40 and out["against"] == {"commit": "a" * 40, "ratio": 1.0}
    assert "against" not in floor.bench(None)  # nothing named, nothing else measured


def test_report_shows_both_commits_back_to_back_and_where_each_benchmark_ran():
    from rlvr.report.benchtables import back_to_back_blocks, machine_line
    from rlvr.report.document import markdown

    run = lambda c, w, f: {"commit": c * 40, "wall_seconds": w, "floor_seconds": f, "ratio": w / f}  # noqa: E731
    pipeline = {**run("b", 760.0, 700.0), "against": run("a", 745.2, 690.0)}
    text = markdown(back_to_back_blocks(pipeline), "figures")
    assert "`rlvr bench --only pipeline --against aaaaaaaaaa`" in text
    assert "| `aaaaaaaaaa` (measured first) | 745.2 | 690.0 | 1.08 |" in text
    assert "| `bbbbbbbbbb` | 760.0 | 700.0 | 1.09 |" in text
    assert back_to_back_blocks(run("b", 760.0, 700.0)) == []  # no commit named: no table
    bench = {
        "machine": {"cpu": "Chip X", "cpu_count": 2},
        "sft": {"measured_on": {"cpu": "Chip X", "date": "2026-12-01"}},
        "pipeline": {"measured_on": {"cpu": "Chip Y", "date": "2026-12-03"}},
    }
    assert machine_line(bench) == (
        "Measured on Chip X, 2 cores. Measured elsewhere: `pipeline` on Chip Y, 2026-12-03."
    )
    bench["machine"]["last_run"] = ["sft"]
    bench["passk_model"] = {"seconds": 1.0}  # from before benchmarks recorded their machine
    assert machine_line(bench) == (
        "Last run (`sft`) on Chip X, 2 cores. Measured elsewhere: `pipeline` on Chip Y, 2026-12-03. "
        "Measured before each benchmark recorded its machine (not said here): `passk_model`."
    )


def test_peer_figures_that_were_not_measured_say_why(monkeypatch):
    monkeypatch.setattr(peer, "available", lambda: True)
    assert peer.note(False) == peer.PEER_SKIPPED  # installed, not asked for
    assert peer.note(True) == ""  # measured
    monkeypatch.setattr(peer, "available", lambda: False)
    assert peer.note(False) == peer.PEER_MISSING == "not installed"


def test_scaling_moves_one_dimension_at_a_time_from_the_base(monkeypatch):
    from conftest import ROOT

    monkeypatch.setattr(scaling, "SCALING", {"group_size": (2, 4), "response_tokens": (2,), "d_model": (16,)})
    monkeypatch.setattr(grpo_step, "WARMUP", 0)
    out = scaling.bench(load_params(ROOT / "params.yaml"), steps=1)
    assert [(r["axis"], r["group_size"], r["response_tokens"], r["d_model"]) for r in out["rows"]] == [
        ("group_size", 2, 4, 128),
        ("group_size", 4, 4, 128),
        ("response_tokens", 8, 2, 128),
        ("d_model", 8, 4, 16),
    ]
    assert all(r["seconds"] > 0 and r["trl_seconds"] is None for r in out["rows"])
    assert out["trl"] in (peer.PEER_SKIPPED, peer.PEER_MISSING)


def _fair_record(prompts: str, knob: str, ours: float, sweep: dict, work: int | None = None) -> dict:
    """A comparison as `fair.compare` records it, from medians (ours, and the peer's per setting)."""
    fake = {"ours": lambda: [ours]} | {k: (lambda v=v: lambda: [v])() for k, v in sweep.items()}
    peer_blocks = {k: fake[k] for k in sweep}
    return {"prompts": prompts, **fair.compare(fake["ours"], peer_blocks, knob, rounds=1, work=work)}


def test_report_shows_fair_peer_ratios_their_best_setting_and_the_method():
    from rlvr.report.benchtables import NOT_ALONE, bench_rows, machine_line, peer_blocks, peer_rows
    from rlvr.report.document import markdown

    hf = {25: 9.0, 50: 7.0, 100: 8.0, 300: 11.5}  # seconds of a run by prompts per call
    bench_json = {
        "sampling": {
            "completions": 19200,
            "completions_per_second": {"median": 30000.0},
            "target_completions_per_second": 20000,
            "hf_generate": {"trl": "1.16.0", "transformers": "5.24.0"},
            "vs_hf_generate": {
                "chat": _fair_record(
                    "chat", "prompts_per_call", 0.48, {int(k): v for k, v in hf.items()}, 19200
                ),
                "bare": _fair_record("bare", "prompts_per_call", 0.4, {25: 2.0, 300: 1.6}, 19200),
            },
            "target_speedup_vs_hf_generate": 6.0,
            "share_of_gemm_limit": 0.6,
            "target_share_of_gemm_limit": 0.75,
        },
        "grpo_step": {
            "prompts": 16,
            "group_size": 8,
            "response_tokens": 4,
            "beta_0.0": {
                "step_seconds": {"median": 0.03},
                "vs_trl": {
                    "chat": _fair_record("chat", "generation_batch", 0.034, {32: 0.2, 64: 0.18, 128: 0.165}),
                    "bare": _fair_record("bare", "generation_batch", 0.03, {32: 0.1, 64: 0.09, 128: 0.12}),
                },
            },
            "beta_0.04": {"step_seconds": {"median": 0.04}},
            "trl": {"trl": "1.16.0"},
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
    assert rows["sampling, chat prompts: ours / HF `generate` at its best, measured alone"] == [
        "14.6 x",
        ">= 6 x",
        "yes",
    ]
    assert rows["sampling, bare prompts: ours / HF `generate` at its best, measured alone"][0] == "4 x"
    assert rows["sampling: share of the fp32 GEMM limit"] == ["0.6", ">= 0.75", "no"]
    assert rows["GRPO step, beta = 0, chat prompts: TRL at its best / ours, measured alone"] == [
        "4.85 x",
        ">= 4 x",
        "yes",
    ]
    assert rows["GRPO step, beta = 0, bare prompts: TRL at its best / ours, measured alone"][0] == "3 x"
    # beta 0.04 has no fair comparison and grpo_step.trl names versions, not a reason: never measured alone
    assert rows["GRPO step, beta = 0.04: TRL at its best / ours, measured alone"] == [NOT_ALONE, "–", "–"]
    table = peer_rows(bench_json)
    assert table[0] == [
        "sampling, 19,200 completions, 4 tokens",
        "chat",
        "40,000/s",
        "HF `generate` 2,743/s at 50 prompts a call",
        "25: 2,133/s · 50: 2,743/s · 100: 2,400/s · 300: 1,670/s",
        "14.6 x",
    ]
    assert table[2][:4] == [
        "GRPO step, 16 prompts x G 8, 4 tokens, beta = 0",
        "chat",
        "0.034 s",
        "TRL GRPOTrainer 0.165 s at generation batch 128",
    ]
    assert table[3][3] == "TRL GRPOTrainer 0.09 s at generation batch 64" and table[3][-1] == "3 x"
    assert [r[1] for r in table] == ["chat", "bare", "chat", "bare"]  # both prompt forms, every workload
    text = markdown(peer_blocks(bench_json), "figures")
    assert "### Peers at their best, measured alone" in text and fair.METHOD in text
    assert machine_line(bench_json) == (
        "Measured on AMD EPYC 9B14, 2 cores, 2 torch threads, torch 2.13.0+cpu, "
        "1-minute load 0.1 before, 1.2 after. Measured before each benchmark recorded its machine "
        "(not said here): `grpo_step`, `sampling`."
    )


def test_report_never_shows_peer_figures_measured_inside_the_peers_loop():
    """Figures the older method recorded (our step inside TRL's callback, one 19,200-row `generate`
    call) are not shown: each peer row says they were not measured alone."""
    from rlvr.report.benchtables import NOT_ALONE, bench_rows, fair_bench, peer_rows

    old = {
        "sampling": {
            "completions_per_second": {"median": 30000.0},
            "hf_generate": {"completions_per_second": {"median": 1665.0}},
            "speedup_vs_hf_generate": 24.4,
        },
        "grpo_step": {
            "beta_0.0": {"step_seconds": {"median": 0.034}, "speedup_vs_trl": 9.8, "trl_step_seconds": {}},
            "trl": {"trl": "1.16.0"},
        },
        "scaling": {"trl": "measured at group_size 8, 64", "rows": [{"seconds": 0.1, "trl_seconds": 0.9}]},
    }
    rows = {r[0]: r[1] for r in bench_rows(old)}
    assert rows["sampling: ours / HF `generate` at its best, measured alone"] == NOT_ALONE
    assert rows["GRPO step, beta = 0: TRL at its best / ours, measured alone"] == NOT_ALONE
    assert not any(v in ("24.4 x", "9.8 x") for v in rows.values()) and peer_rows(old) == []
    shown = fair_bench(old)["scaling"]
    assert shown["rows"][0]["trl_seconds"] is None and shown["trl"] == NOT_ALONE
    fair_scaling = {**old["scaling"], "peer_method": fair.METHOD}
    assert fair_bench({"scaling": fair_scaling})["scaling"] == fair_scaling  # measured alone: kept
    skipped = {"grpo_step": {"beta_0.0": {"step_seconds": {"median": 0.03}}, "trl": peer.PEER_SKIPPED}}
    assert {r[0]: r[1] for r in bench_rows(skipped)}[
        "GRPO step, beta = 0: TRL at its best / ours, measured alone"
    ] == peer.PEER_SKIPPED


def _logged_blocks(log: list, name: str, seconds: float):
    """A fake timed block that logs when it starts and ends."""

    def block() -> list[float]:
        log.append(("start", name))
        log.append(("end", name))
        return [seconds]

    return block


def test_fair_schedule_alternates_whole_blocks_ours_then_the_peer():
    """ABAB: each peer setting's block follows one of ours, every block ends before the next starts
    (nothing of ours runs inside a peer's block), and the schedule is recorded as run."""
    log: list = []
    peer_blocks = {s: _logged_blocks(log, f"peer {s}", 1.0) for s in (32, 64)}
    ours_s, peer_s, schedule = fair.abab(_logged_blocks(log, "ours", 0.1), peer_blocks, rounds=2)
    assert schedule == ["ours", "peer 32", "ours", "peer 64"] * 2
    assert log == [(event, name) for name in schedule for event in ("start", "end")]  # never nested
    assert ours_s == [0.1] * 4 and peer_s == {32: [1.0, 1.0], 64: [1.0, 1.0]}


def test_fair_compare_reports_the_peers_best_setting_and_the_ratio_to_it():
    ours = lambda: [0.02, 0.03]  # noqa: E731
    sweep = {25: lambda: [0.5, 0.7], 50: lambda: [0.3, 0.32], 300: lambda: [0.9, 0.2]}
    r = fair.compare(ours, sweep, "prompts_per_call", rounds=2, work=100)
    assert fair.best_setting({k: v() for k, v in sweep.items()}) == 50  # lowest median, not lowest min
    assert r["best"]["prompts_per_call"] == 50 and r["best"]["seconds"]["median"] == 0.31
    assert r["ratio"] == round(0.31 / 0.025, 2) and r["ours"]["per_second"] == 4000
    assert [s["prompts_per_call"] for s in r["sweep"]] == [25, 50, 300]
    assert r["ours"]["seconds"]["runs"] == 2 * 2 * 3  # a block of ours beside every peer block
    assert r["method"] == fair.METHOD and r["rounds"] == 2 and len(r["schedule"]) == 12


def test_every_peer_and_ours_block_runs_in_a_fresh_process_over_the_sweep_and_both_forms(monkeypatch):
    from conftest import ROOT

    params = load_params(ROOT / "params.yaml")
    calls: list = []

    def fake_process(fn, *args):
        calls.append((fn.__name__, args))
        return [0.5] if fn.__name__ in ("trl_block", "hf_sampling_block") else [0.1]

    monkeypatch.setattr(fair, "in_fresh_process", fake_process)
    shape = grpo_step.StepShape(16, 8, 4, 0.0, "bare")
    r = grpo_step.grpo_vs_trl(params, TINY, shape, 5, grpo_step.trl_generation_batches(16, 8))
    assert [c[0] for c in calls] == ["ours_grpo_block", "trl_block"] * 6
    assert [c[1][-1] for c in calls if c[0] == "trl_block"] == [32, 64, 128] * 2  # TRL's generation batch
    assert all(c[1][2].form == "bare" for c in calls) and r["prompts"] == "bare" and r["ratio"] == 5.0
    calls.clear()
    for form in fair.FORMS:
        s = sampling.sampling_vs_hf(params, form)
        assert s["prompts"] == form and s["work_per_run"] == 300 * 64
    assert [c[0] for c in calls] == ["ours_sampling_block", "hf_sampling_block"] * 16
    per_call = [c[1][2] for c in calls if c[0] == "hf_sampling_block"]
    assert per_call == list(sampling.HF_PROMPTS_PER_CALL) * 4 and sampling.HF_PROMPTS_PER_CALL == (
        25,
        50,
        100,
        300,
    )
    assert [c[1][1] for c in calls[::8]] == ["chat", "chat", "bare", "bare"]


def test_grpo_step_with_the_peer_compares_both_prompt_forms_at_both_betas(monkeypatch):
    from conftest import ROOT

    params = load_params(ROOT / "params.yaml")
    asked: list = []

    def fake_compare(params, model, shape, steps, batches):
        asked.append((shape.beta, shape.form, batches))
        return {"prompts": shape.form, "ratio": 5.0}

    monkeypatch.setattr(peer, "require", lambda: None)
    monkeypatch.setattr(peer, "versions", lambda: {"trl": "1.16.0"})
    monkeypatch.setattr(grpo_step, "grpo_vs_trl", fake_compare)
    monkeypatch.setattr(grpo_step, "WARMUP", 0)
    out = grpo_step.bench(params, steps=1, peer=True)
    assert asked == [(b, f, (32, 64, 128)) for b in (0.0, 0.04) for f in ("chat", "bare")]
    assert set(out["beta_0.0"]["vs_trl"]) == {"chat", "bare"} and out["peer_method"] == fair.METHOD
    assert "speedup_vs_trl" not in out["beta_0.0"] and "trl_step_seconds" not in out["beta_0.0"]


def test_prompt_forms_are_the_chat_template_and_the_bare_question():
    from conftest import ROOT

    from rlvr.tasks import split
    from rlvr.tokenizer import Tokenizer

    tok = Tokenizer()
    assert fair.tokenizer("chat").prompt_ids("37+48=") == tok.prompt_ids("37+48=")
    assert fair.tokenizer("bare").prompt_ids("37+48=") == tok.encode("37+48=")
    params = load_params(ROOT / "params.yaml")
    chat, bare = (sampling._held_prompts(params, f) for f in fair.FORMS)
    assert chat.shape[0] == bare.shape[0] == 300 and bare.shape[1] == 6 < chat.shape[1]
    first = split("two_digit", 300, params.seed)[0][0].prompt  # TRL's prompts: the first training ones
    assert grpo_step._trl_prompts(params, 2, "bare")[0] == first and len(tok.encode(first)) == 6
    assert grpo_step._trl_prompts(params, 2, "chat")[0] == tok.decode(tok.prompt_ids(first))
    with pytest.raises(ValueError, match="prompt form 'json': unknown"):
        fair.tokenizer("json")


def test_a_block_runs_in_another_interpreter_and_its_failure_names_it():
    import os

    assert fair.in_fresh_process(os.getpid) != os.getpid()
    assert fair.in_fresh_process(sum, [1.5, 2.0]) == 3.5  # arguments and result travel pickled
    with pytest.raises(RuntimeError, match="benchmark block sqrt failed in its own process"):
        fair.in_fresh_process(__import__("math").sqrt, -1.0)


def test_trl_generation_batches_keep_every_optimizer_step_whole():
    assert grpo_step.trl_generation_batches(16, 8) == (32, 64, 128)
    assert grpo_step.trl_generation_batches(2, 4) == (4, 8)
    assert peer.accumulation(16, 8, None) == (128, 1)  # TRL's default here: the whole step at once
    assert peer.accumulation(16, 8, 32) == (32, 4)
    with pytest.raises(ValueError, match="generation batch 12: must divide"):
        peer.accumulation(16, 8, 12)


def test_report_draws_the_scaling_figure_with_its_caption(tmp_path):
    from rlvr.pipeline.stages.report import scaling_figure
    from rlvr.report import plots
    from rlvr.report.document import Figure, Table
    from rlvr.report.layout import ReportData, build

    record = {
        "prompts": 16,
        "beta": 0.04,
        "base": scaling.SCALING_BASE,
        "trl": "measured at group_size 8, 64",
        "rows": [
            {
                "axis": a,
                **{**scaling.SCALING_BASE, a: v},
                "seconds": 0.01 * v,
                "trl_seconds": 0.1 * v if a == "group_size" else None,
            }
            for a, vs in scaling.SCALING.items()
            for v in vs
        ],
    }
    made = {
        "git_commit": "2b521db0ab",
        "git_dirty": False,
        "host": "box",
        "started_utc": "2026-12-02T07:18:39+00:00",
    }
    assert scaling_figure({}, tmp_path / "x.png", made) is None
    fig = scaling_figure({"scaling": record}, tmp_path / "bench-scaling.png", made)
    assert fig["png"].startswith(b"\x89PNG") and fig["caption"] == plots.SCALING_CAPTION
    assert fig["provenance"] == (
        "stage `report, from `rlvr bench --only scaling`` · code: git 2b521db0ab, "
        "made on box at 2026-12-02T07:18:39+00:00"
    )
    record_text = json.loads((tmp_path / fig["record"]).read_text())["drawn_from"]
    assert "drawn by stage `report` (code: git 2b521db0ab, made on box at 2026-12-02" in record_text
    bench_record = {"scaling": record, "sft": {"tokens_per_second": {"median": 1.0}}}
    sections = build(ReportData([], [], {}, bench=bench_record, bench_figure=fig))
    blocks = [b for s in sections for b in getattr(s, "blocks", [s])]  # the sections' contents
    assert any(isinstance(b, Figure) and b.caption == plots.SCALING_CAPTION for b in blocks)
    table = next(b for b in blocks if isinstance(b, Table) and b.cls == "scaling")
    assert len(table.rows) == sum(len(v) for v in scaling.SCALING.values())


@pytest.mark.skipif(not peer.available(), reason="the peer extra (pip install -e '.[peer]') is not installed")
def test_peer_tokenizer_and_model_match_ours():
    from rlvr.tokenizer import Tokenizer

    tok = Tokenizer()
    fast = peer.hf_tokenizer(tok)
    text = tok.decode(tok.prompt_ids("12+34="))
    assert fast(text, add_special_tokens=False)["input_ids"] == tok.prompt_ids("12+34=")
    model = peer.hf_model(TINY, tok)
    assert model.config.n_embd == 8 and model.config.n_layer == 2 and model.config.vocab_size == len(tok)


@pytest.mark.skipif(not peer.available(), reason="the peer extra (pip install -e '.[peer]') is not installed")
def test_trl_steps_run_alone_with_no_hook_for_our_step():
    """TRL's trainer is timed with the clock as its only callback: there is no way to run our step
    inside it. A tiny run at a generation batch of half a step (two micro-batches a step)."""
    import inspect

    from rlvr.tokenizer import Tokenizer

    assert list(inspect.signature(peer.grpo_trainer_steps).parameters)[-2:] == ["generation_batch", "seed"]
    tok = Tokenizer()
    prompts = [tok.decode(tok.prompt_ids(q)) for q in ("12+34=", "56+07=")]
    peer.quiet()
    times = peer.grpo_trainer_steps(
        replace(TINY, max_len=32), prompts, 2, 2, 0.0, 2, 1e-3, tok, generation_batch=2
    )
    assert len(times) == 2 and all(t > 0 for t in times)


def test_a_stage_runs_from_its_running_line_to_the_next():
    from rlvr.bench.floor import by_kind, ratio_rows
    from rlvr.tools.rerun import stage_walls

    lines = [
        (1.0, "Running stage 'check':\n"),
        (1.5, "> python -m rlvr.pipeline check\n"),
        (2.0, "Running stage 'sft@a':\n"),
        (12.0, "Running stage 'sft@b':\n"),
        (20.0, "Updating lock file 'dvc.lock'\n"),
    ]
    start, walls = stage_walls(lines, 0.25, 22.0)
    assert start == 0.75 and walls == {"check": 1.0, "sft@a": 10.0, "sft@b": 10.0}
    rows = ratio_rows(walls, {"check": 0.5, "sft@a": 8.0, "sft@b": 10.0})
    assert rows[0] == {
        "stage": "check",
        "wall_seconds": 1.0,
        "floor_seconds": 0.5,
        "overhead_seconds": 0.5,
        "ratio": 2.0,
    }
    assert by_kind(rows)["sft"] == {"stages": 2, "wall_seconds": 20.0, "floor_seconds": 18.0, "ratio": 1.11}


def test_a_repro_without_stages_is_an_error():
    from rlvr.tools.rerun import stage_walls

    with pytest.raises(RuntimeError, match="ran no stage"):
        stage_walls([(1.0, "Stage 'check' didn't change, skipping\n")], 0.0, 2.0)


def test_a_failed_repro_says_why_from_its_stderr(tmp_path):
    from rlvr.tools.rerun import clone_env, timed_repro

    with pytest.raises(RuntimeError, match="(?s)failed in the fresh clone.*not inside of a DVC repository"):
        timed_repro(tmp_path, clone_env(tmp_path))  # no DVC repository there: DVC says so on stderr


def test_every_target_the_report_reads_is_in_the_one_targets_file():
    """rlvr/bench/targets.yaml holds every workload's targets; each workload writes its own beside its
    figures, and the report's benchmark table reads them back by name: a target renamed on one side
    only would silently drop its "met" column."""
    import re

    from conftest import ROOT

    from rlvr.bench.targets import TARGETS

    read = re.findall(r'get\("(\w+)", "(target_\w+)"', (ROOT / "rlvr/report/benchtables.py").read_text())
    assert read and all(key in TARGETS[workload] for workload, key in read), read
    assert set(TARGETS) <= set(suite.BENCHMARKS) | {"compiled"} and "compiled" in suite.BENCHMARKS
    leaves = [
        k for w, t in TARGETS.items() for k in (t if w != "compiled" else [k for v in t.values() for k in v])
    ]
    assert all(k.startswith("target_") for k in leaves)


def test_passk_benchmark_times_the_stages_counts_and_the_sampling_they_replaced(tmp_path, monkeypatch):
    """An untrained tiny model (no checkpoint in an empty folder): the stage's way (n counts a problem
    from their exact law) and the sampled way (64 responses a problem) are both timed, with n the
    stage's own."""
    from conftest import ROOT

    from rlvr.bench import passk

    params = load_params(ROOT / "params.yaml")
    params = replace(params, model=replace(TINY, max_len=32))
    monkeypatch.chdir(tmp_path)
    out = passk.bench(params, repeats=1)
    assert out["samples_per_problem"] == params.passk.n and out["model"] == "untrained"
    assert out["seconds_per_model"]["runs"] == out["sampled_seconds_per_model"]["runs"] == 1
    assert out["target_seconds"] > 0


def test_bootstrap_benchmark_finds_scipys_band_and_states_both_memories():
    """The pass@k band's resampler against scipy's percentile bootstrap on the stage's sizes: the
    same band (to rounding), and scipy's (R, P, K) tensor costs it more memory than our weights."""
    from conftest import ROOT

    from rlvr.bench import bootstrap

    params = load_params(ROOT / "params.yaml")
    out = bootstrap.bench(params, repeats=1)
    assert (out["problems"], out["ks"], out["resamples"]) == (300, 64, params.passk.bootstrap)
    assert out["max_abs_difference"] <= out["target_max_abs_difference"] == 1e-12
    assert out["scipy_peak_mib"] > 5 * out["ours_peak_mib"] > 0  # R*P*K floats against R*P counts
    assert out["ours_seconds"]["runs"] == out["scipy_seconds"]["runs"] == 1


def test_cluster_benchmark_needs_ray_and_summarises_both_executors(monkeypatch):
    """Without the extra: one line naming it. With a measurement in hand: chains per minute each
    way from the median, and Ray's cost as their ratio; results that differ are an error."""
    import json
    import subprocess
    import sys
    import types

    from rlvr.bench import cluster
    from rlvr.fields import ConfigError

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"bench 'cluster' needs Ray: pip install -e '.\[cluster\]'"):
        cluster.bench(None)
    monkeypatch.setitem(sys.modules, "ray", types.ModuleType("ray"))
    measured = {"chains": 8, "pool_seconds": [30.0, 32.0, 31.0], "ray_seconds": [40.0, 36.0, 38.0]}

    def answering(identical: bool):
        printed = json.dumps({**measured, "identical": identical})
        return lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, printed)

    monkeypatch.setattr(cluster.os, "geteuid", lambda: 0)
    monkeypatch.setattr(cluster.subprocess, "run", answering(True))
    out = cluster.bench(None)
    assert out["pool"]["seconds_median"] == 31.0 and out["pool"]["chains_per_minute"] == round(480 / 31, 1)
    assert out["ray"]["seconds_median"] == 38.0 and out["ray_over_pool"] == round(38 / 31, 2)
    assert (out["ray"]["nodes"], out["ray"]["cpus_per_node"], out["identical_results"]) == (2, 1, True)
    monkeypatch.setattr(cluster.subprocess, "run", answering(False))
    with pytest.raises(RuntimeError, match="different results"):
        cluster.bench(None)


def test_cluster_benchmark_runs_the_grpo_stages_own_chains(tiny_repo):
    """The workload is `grpo@grpo` as its stage hands it to an executor: every unit, and every
    chain's start carried as bytes."""
    from rlvr.bench import cluster
    from rlvr.io.files import FileBytes

    _, raw = tiny_repo
    seeds, (cfg, shared) = cluster._chains("params.yaml")
    units, starts = shared.units, shared.starts
    assert cfg.lr == raw["variants"]["grpo"].get("lr", raw["grpo"]["defaults"]["lr"])  # its own settings
    assert seeds == list(range(len(units))) and len(units) == len(raw["variants"]["grpo"]["seeds"])
    assert all(isinstance(starts[s], FileBytes) for s, _ in units)
