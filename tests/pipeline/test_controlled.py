"""Controlled starts, nested GRPO seeds and the numbers built on them: the stopping rule, the exact
validation measure, the validation split, variance components, and pass@k from unequal samples."""

import math

import numpy as np
import pytest
import torch
from conftest import make

from rlvr.configs import ModelConfig, SFTConfig, TaskConfig
from rlvr.controlled import StopAtTarget
from rlvr.fields import ConfigError
from rlvr.model import TinyLM
from rlvr.passk import (
    crossing_interval,
    crossing_label,
    mean_crossing,
    never_solved,
    never_solved_in,
    one_run_sd,
    pass_at_k,
    thin,
    unit_key,
)
from rlvr.passk_summary import summarise_counts
from rlvr.rollout import Sampling, answer_probability, binomial_counts, correct_counts
from rlvr.sft import fit_noisy
from rlvr.stats import variance_components
from rlvr.tasks import all_problems, split
from rlvr.tokenizer import Tokenizer

# ------------------------------------------------------------------ the stopping rule


class Scripted:
    """A stand-in for a validation measure: returns the given values in turn, one per check."""

    def __init__(self, values):
        self.values, self.calls = list(values), 0

    def __call__(self, model):
        self.calls += 1
        return self.values.pop(0)


def tiny_model():
    return TinyLM(ModelConfig(d_model=8, n_layer=1, n_head=2, max_len=8), 20)


def test_stop_from_below_ends_at_the_first_check_that_reaches_the_target():
    model = tiny_model()
    stop = StopAtTarget(0.5, 1, 0.0, Scripted([0.1, 0.3, 0.52, 0.9]))
    assert [stop(model, s) for s in range(3)] == [False, False, True]
    assert stop.reached and stop.chosen == {"step": 2, "value": 0.52}


def test_stop_keeps_the_check_before_when_it_is_nearer_and_restores_its_weights():
    model = tiny_model()
    stop = StopAtTarget(0.5, 1, 0.0, Scripted([0.1, 0.49, 0.7]))
    stop(model, 0)
    stop(model, 1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # a step that jumps past the target
    assert stop(model, 2)
    assert stop.chosen == {"step": 1, "value": 0.49}
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_stop_from_above_follows_a_falling_value():
    model = tiny_model()
    stop = StopAtTarget(0.42, 1, 0.0, Scripted([0.95, 0.6, 0.44, 0.41]))
    assert [stop(model, s) for s in range(4)] == [False, False, False, True]
    assert stop.from_below is False and stop.chosen["value"] == 0.41


def test_stop_checks_every_k_steps_far_from_the_target_and_every_step_near_it():
    measure = Scripted([0.0, 0.1, 0.45, 0.46, 0.47, 0.48])
    stop = StopAtTarget(0.5, 4, 0.1, measure)
    for s in range(11):
        stop(tiny_model(), s)
    assert [c["step"] for c in stop.checks] == [0, 4, 8, 9, 10]  # within 0.1 after step 8


def test_a_start_that_never_reaches_its_target_is_reported_missed_at_the_cap():
    cfg = make(SFTConfig, epochs=1, batch_size=64, noise={"kind": "uniform", "rate": 0.0})
    assert cfg.target is None  # the stop is passed in; the run's own target decides nothing here
    tok = Tokenizer()
    from rlvr.noise import sft_rows
    from rlvr.sft import encode_sft

    rows = sft_rows(all_problems("single_digit"), cfg.noise, 1, 0)
    tokens, mask = encode_sft(rows, tok)
    from rlvr.optim import AdamW

    model = TinyLM(make(ModelConfig, d_model=16, n_layer=1, n_head=2), len(tok))
    opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    stop = StopAtTarget(1.0, 1, 0.0, lambda m: 0.0)  # unreachable
    curve = fit_noisy(
        model, opt, tokens, mask, cfg, torch.Generator().manual_seed(0), progress=False, stop=stop
    )
    assert not stop.reached
    assert stop.chosen["step"] == len(curve) == 1  # 55 rows, batch 64: one step, measured at the cap


def _stuck_then_free(model_of_first_draw: list) -> object:
    """A validation measure under which the first draw's model sits on a plateau (0.1) and any other
    model is at the target (0.5): which model is which is told by identity."""

    def measure(model):
        if not model_of_first_draw:
            model_of_first_draw.append(model)
        return 0.1 if model is model_of_first_draw[0] else 0.5

    return measure


def _sft_chain(monkeypatch, redraws: int, measure) -> dict:
    """Chain 3 of a tiny controlled run through the SFT stage's `train_seed` (warm-up state made as
    the warm-up stage makes it), with `measure` as its validation value; returns its summary."""
    from rlvr import chain
    from rlvr.noise import sft_rows
    from rlvr.pipeline.checkpoint import WarmupState
    from rlvr.pipeline.stages import sft as stage
    from rlvr.pipeline.stages.warmup import train_seed as warm_seed
    from rlvr.pipeline.warmups import Warmup
    from rlvr.sft import encode_sft

    clean_labels = {"kind": "uniform", "rate": 0.0}
    cfg = make(SFTConfig, epochs=2, batch_size=64, target=0.5, redraws=redraws, noise=clean_labels)
    model_cfg = make(ModelConfig, d_model=16, n_layer=1, n_head=2)
    tok = Tokenizer()
    rows = sft_rows(all_problems("single_digit"), cfg.noise, 1, 0)
    clean = encode_sft(rows, tok, field="answer")
    torch.manual_seed(3)  # as the seed worker seeds chain 3
    warm = warm_seed(3, cfg, model_cfg, clean, 0.0, "cpu")
    model = TinyLM(model_cfg, len(tok))
    model.load_state_dict(warm.state)
    state = WarmupState(model, warm.extra[0], warm.extra[1], warm.curve, "")
    monkeypatch.setattr(Warmup, "load", lambda *a, **k: state)  # as the checkpoint would load it
    scripted = lambda target, every, near, val, tok: StopAtTarget(0.5, 1, 0.0, measure)  # noqa: E731
    monkeypatch.setattr(chain, "accuracy_stop", scripted)  # the rule `controlled_start` builds
    warmup = Warmup({}, "warmup@x", "h", "", model_cfg, clean, 0.0)
    problems = all_problems("single_digit")[:5]
    task = make(TaskConfig, heldout=0, validation=0, max_new_tokens=2)
    evals = (problems, [], problems)  # train, held-out (none: chapter A), validation
    return stage.train_seed(3, cfg, task, encode_sft(rows, tok), warmup, evals, "cpu").summary


def test_a_chain_stuck_at_its_cap_is_drawn_again_and_its_redraw_is_its_start(monkeypatch):
    out = _sft_chain(monkeypatch, 2, _stuck_then_free([]))
    assert (out["reached"], out["redraws"], out["start_val"]) == (1.0, 1, 0.5)  # the second draw reached it


def test_a_chain_stuck_on_every_draw_is_missed_after_its_last_redraw(monkeypatch):
    out = _sft_chain(monkeypatch, 2, lambda model: 0.1)
    assert (out["reached"], out["redraws"], out["start_steps"]) == (0.0, 2, 2)  # cap of 2 steps, 3 draws
    assert _sft_chain(monkeypatch, 0, lambda model: 0.1)["redraws"] == 0  # no redraws declared: none made


def test_a_redraw_is_a_fresh_start_of_its_own_and_draw_0_is_the_chains():
    from rlvr.chain import draw_seed, fresh_start

    assert draw_seed(5, 0) == 5
    seeds = {draw_seed(c, d) for c in range(16) for d in range(1, 4)}
    assert len(seeds) == 48 and not seeds & set(range(16))  # no redraw repeats a chain's own start
    cfg = make(SFTConfig, clean_epochs=0)
    model_cfg = make(ModelConfig, d_model=16, n_layer=1, n_head=2)
    clean = (torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 3))
    torch.manual_seed(5)
    as_worker = TinyLM(model_cfg, len(Tokenizer())).state_dict()
    torch.manual_seed(123)  # whatever the global seed was before, a fresh start draws under its own
    drawn = fresh_start(5, cfg, model_cfg, clean, 0.0, "cpu")[0].state_dict()
    again = fresh_start(draw_seed(5, 1), cfg, model_cfg, clean, 0.0, "cpu")[0].state_dict()
    assert all(torch.equal(as_worker[k], drawn[k]) for k in drawn)
    assert not all(torch.equal(again[k], drawn[k]) for k in drawn)


def test_redraws_without_a_target_are_refused():
    from conftest import ROOT

    from rlvr.io.params import parse_params, read_yaml

    raw = read_yaml(ROOT / "params.yaml")
    raw["sft"]["single_digit"].update(target=None, redraws=1)  # fitted to its budget: no target
    with pytest.raises(ConfigError, match="sft.single_digit.redraws.*without a target"):
        parse_params(raw)
    with pytest.raises(ConfigError, match="redraws"):
        make(SFTConfig, redraws=-1)


def test_validation_checks_leave_the_data_order_unchanged():
    """The checks draw nothing from the training generator: with a stop that never fires, training is
    bit-identical to training without one."""
    cfg = make(SFTConfig, epochs=2, batch_size=16)
    tok = Tokenizer()
    from rlvr.noise import sft_rows
    from rlvr.optim import AdamW
    from rlvr.sft import encode_sft

    rows = sft_rows(all_problems("single_digit"), cfg.noise, 1, 0)
    tokens, mask = encode_sft(rows, tok)
    val = all_problems("single_digit")[:10]

    def train(stop):
        torch.manual_seed(0)
        model = TinyLM(make(ModelConfig, d_model=16, n_layer=1, n_head=2), len(tok))
        opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
        fit_noisy(model, opt, tokens, mask, cfg, torch.Generator().manual_seed(1), progress=False, stop=stop)
        return model.state_dict()

    never = StopAtTarget(1.0, 1, 0.0, lambda m: float(answer_probability(m, val, tok).mean()))
    a, b = train(None), train(never)
    assert all(torch.equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------ the exact validation measure


def test_answer_probability_is_the_sampled_accuracy_in_expectation():
    torch.manual_seed(3)
    tok = Tokenizer()
    model = TinyLM(make(ModelConfig, d_model=16, n_layer=1, n_head=2), len(tok))
    with torch.no_grad():  # sharpen the random model so the answers have visible probability
        model.tok_emb.weight.mul_(8)
    problems = all_problems("single_digit")[:6]
    p = answer_probability(model, problems, tok)  # (P,)
    n = 4000
    c = correct_counts(model, problems, n, Sampling(tok, 2), torch.Generator().manual_seed(0))
    se = torch.sqrt(p * (1 - p) / n)
    assert torch.all((c / n - p).abs() <= 5 * se + 1e-4)


def test_binomial_counts_have_the_law_of_sampled_counts():
    """Counts drawn from Binomial(n, p) and counts of n real samples agree in mean and spread: each
    problem's two counts differ by no more than their sampling noise allows (5 SD of a difference)."""
    torch.manual_seed(3)
    tok = Tokenizer()
    model = TinyLM(make(ModelConfig, d_model=16, n_layer=1, n_head=2), len(tok))
    with torch.no_grad():
        model.tok_emb.weight.mul_(8)
    problems = all_problems("single_digit")[:8]
    n = 2000
    drawn = binomial_counts(model, problems, n, Sampling(tok, 2), torch.Generator().manual_seed(1))  # (P,)
    sampled = correct_counts(model, problems, n, Sampling(tok, 2), torch.Generator().manual_seed(2))  # (P,)
    p = answer_probability(model, problems, tok).double()
    sd_diff = torch.sqrt(2 * n * p * (1 - p))
    assert drawn.dtype == torch.long and drawn.shape == (len(problems),)
    assert torch.all((drawn - sampled).abs() <= 5 * sd_diff + 1)
    again = binomial_counts(model, problems, n, Sampling(tok, 2), torch.Generator().manual_seed(1))
    assert torch.equal(drawn, again)  # one generator, one seed: the same counts


def test_binomial_counts_are_zero_where_the_answer_does_not_fit_the_cap():
    """ "12" needs three new tokens (two digits and <eos>): with a cap of 2 no sample can be right."""
    torch.manual_seed(0)
    tok = Tokenizer()
    model = TinyLM(make(ModelConfig, d_model=16, n_layer=1, n_head=2), len(tok))
    problems = [p for p in all_problems("two_digit") if len(p.answer) == 2][:3]
    assert binomial_counts(model, problems, 64, Sampling(tok, 2), torch.Generator().manual_seed(0)).sum() == 0
    many = binomial_counts(model, problems, 10**6, Sampling(tok, 3), torch.Generator().manual_seed(0))
    assert many.sum() > 0  # about 230 expected


def test_answer_probability_of_a_two_digit_answer_multiplies_its_tokens():
    tok = Tokenizer()
    model = TinyLM(make(ModelConfig, d_model=16, n_layer=1, n_head=2), len(tok))
    problem = all_problems("two_digit")[5]
    seq = tok.prompt_ids(problem.prompt) + tok.response_ids(problem.answer)
    x = torch.tensor([seq])
    with torch.no_grad():
        logp = torch.log_softmax(model(x[:, :-1]).float(), dim=-1)[0]
    start = len(tok.prompt_ids(problem.prompt))
    want = math.exp(sum(float(logp[t - 1, seq[t]]) for t in range(start, len(seq))))
    assert answer_probability(model, [problem], tok)[0].item() == pytest.approx(want, rel=1e-5)


# ------------------------------------------------------------------ the validation split


def test_validation_is_disjoint_from_train_and_test_and_leaves_the_test_set_alone():
    train, held, val = split("two_digit", 300, 0, 300)
    assert len(held) == len(val) == 300 and len(train) == 8100 - 600
    assert not ({*held} & {*val} or {*held} & {*train} or {*val} & {*train})
    assert split("two_digit", 300, 0)[1] == held  # the test problems do not move with validation


def test_a_split_larger_than_the_task_is_refused():
    with pytest.raises(ConfigError, match="heldout \\+ validation"):
        split("single_digit", 30, 0, 30)


def test_a_target_outside_0_1_is_refused():
    with pytest.raises(ConfigError, match="target"):
        make(SFTConfig, target=1.5)


# ------------------------------------------------------------------ where the variance lives


def test_variance_components_split_starts_grpo_and_evaluation():
    rng = np.random.default_rng(0)
    starts = rng.normal(0.5, 0.1, size=400)  # one start per chain
    per_rep = [[s + rng.normal(0, 0.03) for _ in range(2)] for s in starts]  # two GRPO seeds each
    v = variance_components(per_rep, eval_sd=0.01)
    assert v["starts"] == pytest.approx(0.1, rel=0.15)
    assert v["grpo"] == pytest.approx(math.sqrt(0.03**2 - 0.01**2) / math.sqrt(2), rel=0.15)
    assert v["evaluation"] == pytest.approx(0.01 / math.sqrt(2))


def test_one_seed_per_chain_has_no_grpo_component():
    v = variance_components([[0.4], [0.5], [0.6]], eval_sd=0.02)
    assert "grpo" not in v and v["starts"] == pytest.approx(math.sqrt(0.01 - 0.0004))


# ------------------------------------------------------------------ pass@k from unequal samples


def test_never_solved_in_k_is_p_times_one_minus_pass_at_k_and_the_zero_count_at_n_equal_k():
    c = np.array([0, 0, 3, 64, 10])
    assert never_solved_in(c, 64, 64) == never_solved(c) == 2
    c256 = np.array([0, 1, 4, 256])
    assert never_solved_in(c256, 256, 64) == pytest.approx(float(np.sum(1 - pass_at_k(c256, 256, 64))))
    missed_4 = math.comb(252, 64) / math.comb(256, 64)  # 64 of 256 samples miss all 4 correct ones
    assert never_solved_in(c256, 256, 64) == pytest.approx(1 + 192 / 256 + missed_4)


def test_one_run_noise_is_zero_for_certain_problems_and_shrinks_with_samples():
    assert one_run_sd(np.array([0, 256, 0]), 256, 1, 64) == pytest.approx(0.0, abs=1e-12)
    c = np.full(300, 128)
    assert one_run_sd(c, 256, 1, 256) < one_run_sd(c, 256, 1, 64)
    assert one_run_sd(c, 256, 1, 64) == pytest.approx(math.sqrt(0.25 / 64) / math.sqrt(300), rel=0.15)


def test_thinning_keeps_counts_in_range_and_is_the_identity_at_equal_n():
    c = np.array([0, 5, 100, 256])
    assert np.array_equal(thin(c, 256, 256), c)
    t = thin(c, 256, 64, seed=1)
    assert t[0] == 0 and t[-1] == 64 and np.all((0 <= t) & (t <= 64))


def test_crossing_labels_name_why_curves_do_not_cross():
    ks = np.arange(1, 5)
    assert crossing_label(ks, np.ones(4), np.ones(4)) == "tie"
    assert (
        crossing_label(ks, np.array([0.2, 0.5, 0.7, 0.8]), np.array([0.5, 0.6, 0.7, 0.9]))
        == "RL ahead to k = 4"
    )
    assert crossing_label(ks, np.array([0.5, 0.6, 0.7, 0.8]), np.array([0.4, 0.6, 0.8, 0.9])) == (
        "RL not ahead at k = 1"
    )


def test_mean_crossing_encodes_every_outcome_as_a_number():
    assert mean_crossing(np.array([0.1, 0.0, -0.1])) == 3
    assert mean_crossing(np.array([-0.1, 0.1, 0.1])) == 0  # RL not ahead at k = 1
    assert mean_crossing(np.array([0.1, 0.1, 0.0])) == 4  # never below: K + 1


def test_crossing_interval_is_tight_when_every_chain_and_problem_agrees():
    d = np.zeros((4, 50, 8))
    d[:, :, :3] = 0.1
    d[:, :, 3:] = -0.1  # every chain, every problem: RL ahead to k = 3, behind from k = 4
    k, ci = crossing_interval(d, 200, 0)
    assert k == 4 and ci == [4.0, 4.0]


def test_summarise_counts_averages_grpo_seeds_within_a_chain_and_scores_with_each_models_n():
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, 40)
    counts = {}
    for s in (0, 1, 2):
        counts[unit_key("sft", s)] = rng.binomial(256, p).tolist()
        for r in (0, 1):
            counts[unit_key("grpo", s, r)] = rng.binomial(256, np.sqrt(p)).tolist()
        counts[unit_key("other", s)] = rng.binomial(16, np.sqrt(p)).tolist()
    chains = {"sft": [0, 1, 2], "grpo": [0, 1, 2], "other": [0, 1, 2]}
    n = {"sft": 256, "grpo": 256, "other": 16}
    metrics, curves = summarise_counts(counts, chains, n, [1, 4, 16], 50, 0, reps={"grpo": 2}, k_max=16)
    g = metrics["variants"]["grpo"]
    assert [len(reps) for reps in g["per_rep"]["pass_at_1_rl"]] == [2, 2, 2]
    assert g["per_seed"]["pass_at_1_rl"][1] == pytest.approx(np.mean(g["per_rep"]["pass_at_1_rl"][1]))
    assert set(g["variance"]["pass_at_1_rl"]) == {"starts", "grpo", "evaluation"}
    assert metrics["variants"]["other"]["samples_per_problem"] == 16
    assert len(curves["grpo"]) == 16 and len(g["crossover_per_chain"]) == 3
    with pytest.raises(ValueError, match="no counts for grpo/seed0-g2"):
        summarise_counts(counts, chains, n, [1], 10, 0, reps={"grpo": 3}, k_max=16)


# ------------------------------------------------------------------ the report's tables


def test_the_starts_table_counts_chains_on_target_and_lists_a_missed_one():
    from rlvr.report.chains import chain_rows, controlled_rows

    metrics = {
        "sft-a.json": {
            "seeds": [0, 1, 2],
            "per_seed": {
                "start_val": [0.42, 0.47, 0.2],
                "start_steps": [10, 30, 99],
                "reached": [1.0, 1.0, 0.0],
                "sampled_acc_train": [0.41, 0.46, 0.21],
            },
        }
    }
    (row,) = controlled_rows(metrics, {"a": 0.42})
    assert row[:3] == ["a", "0.42", "2 of 3"] and "(1 of 3 within ±0.03)" in row[3]
    assert [r[4] for r in chain_rows(metrics, {"a": 0.42})] == ["reached", "reached", "missed (cap)"]
    metrics["sft-a.json"]["per_seed"]["redraws"] = [0, 1, 2]
    assert controlled_rows(metrics, {"a": 0.42})[0][2] == "2 of 3 (2 drawn again)"
    assert [r[4] for r in chain_rows(metrics, {"a": 0.42})] == [
        "reached",
        "reached after 1 redraw",
        "missed (cap) after 2 redraws",
    ]
    assert controlled_rows(metrics, {"a": None})[0][1:3] == ["budget", "–"]  # a contrast fitted to its budget


def test_the_variance_table_names_the_largest_source_and_the_deciding_half_width():
    from rlvr.report.chains import variance_rows
    from rlvr.report.claims import Claim
    from rlvr.report.verdict import Evidence, Judged

    ev = Evidence(0.5, 0.4, 0.6, "8 chains", [0.5] * 8, list(range(8)), {"starts": 0.1, "grpo": 0.02})
    row = Judged(Claim(id="X", kind="exact", metric=["f.json", "k"]), "inconclusive", ev, tested=ev)
    worked = Judged(Claim(id="W", kind="exact", metric=["worked.json", "k"]), "inconclusive", ev, tested=ev)
    (out,) = variance_rows([row, worked])  # a closed-form claim has no variance table row
    assert out[2:8] == ["0.1", "0.02", "–", "starts", "0.1", "inconclusive"]
