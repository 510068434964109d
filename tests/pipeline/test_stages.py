"""Stage-layer behaviour that the pipeline smoke test does not pin down."""

import hashlib
import json

import pytest

from rlvr.pipeline.run import run_stage


def _grpo_outputs(d) -> tuple[dict, list[str]]:
    m = json.loads((d / "reports/metrics/grpo-a_grpo.json").read_text())
    stable = {k: v for k, v in m.items() if "mlflow" not in k and "seconds" not in k}
    stable["per_seed"] = {k: v for k, v in m["per_seed"].items() if "seconds" not in k}
    for key in ("ci95", "per_rep"):  # timings differ run to run; every other number must not
        stable[key] = {k: v for k, v in m[key].items() if "seconds" not in k}
    hashes = [hashlib.md5((d / f"data/grpo/a_grpo/seed{s}.pt").read_bytes()).hexdigest() for s in m["seeds"]]
    return stable, hashes


@pytest.mark.slow  # forked seed workers (torch in each)
def test_seed_results_do_not_depend_on_how_many_workers_trained_them(tiny_repo):
    """Seeds train one torch thread each, in worker processes when the thread budget allows: two
    workers and none give the same numbers and byte-identical checkpoints."""
    d, raw = tiny_repo
    results = []
    for budget in ("1", "2"):  # 1: in this process, one seed after the other; 2: two forked workers
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RLVR_THREADS", budget)
            run_stage("grpo", "a_grpo", progress=False)
        results.append(_grpo_outputs(d))
    assert results[0] == results[1]


def test_a_bad_thread_budget_is_one_line(tiny_repo, monkeypatch):
    from rlvr.fields import ConfigError

    monkeypatch.setenv("RLVR_THREADS", "two")
    with pytest.raises(ConfigError, match="RLVR_THREADS = 'two': must be a whole number >= 1"):
        run_stage("grpo", "a_grpo", progress=False)


def _mark_started(seed: int, folder: str):
    """A seed's work that only leaves a trace that it began."""
    from pathlib import Path

    from rlvr.pipeline.workers import SeedResult

    (Path(folder) / f"seed{seed}").write_text("started")
    return SeedResult({"seed": seed}, [], {})


@pytest.mark.slow  # forked seed workers (torch in each) and waits
def test_seed_workers_start_on_entry_before_any_result_is_asked_for(tmp_path):
    """The stage opens its MLflow run (a ~3 s import) after entering `seed_results`: the workers
    must already be training by then, not wait for the first result to be consumed."""
    import time

    from rlvr.pipeline.workers import seed_results

    with seed_results(_mark_started, [0, 1], (str(tmp_path),), workers=2) as results:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        started = sorted(p.name for p in tmp_path.iterdir())  # before anything was consumed
        assert [r.summary["seed"] for r in results] == [0, 1]
    assert started == ["seed0", "seed1"]


def _slow_mark(seed: int, folder: str):
    import time

    time.sleep(60)
    return _mark_started(seed, folder)


@pytest.mark.slow  # forked seed workers (torch in each) and waits
def test_an_error_while_seed_workers_run_stops_them(tmp_path):
    """An error in the stage (e.g. its MLflow run cannot be opened) terminates the workers at once:
    no seed finishes, and nothing waits out their training."""
    import time

    from rlvr.pipeline.workers import seed_results

    with pytest.raises(RuntimeError, match="store down"):
        with seed_results(_slow_mark, [0, 1, 2], (str(tmp_path),), workers=2):
            time.sleep(1)
            raise RuntimeError("store down")
    assert list(tmp_path.iterdir()) == []  # a worker left to finish would have written its mark


@pytest.mark.slow  # forked seed workers (torch in each)
def test_passk_counts_do_not_depend_on_how_many_workers_scored_them(tiny_repo):
    """pass@k scores its models in the seed workers, one torch thread each: the counts of one worker
    and of two are the same, and every model gets the same draws (one checkpoint listed three times)."""
    from rlvr.io.files import read_heldout
    from rlvr.io.params import load_params
    from rlvr.pipeline.stageparams import config_hash
    from rlvr.pipeline.stages.passk import score
    from rlvr.pipeline.workers import seed_results
    from rlvr.tasks import problems_of

    params = load_params("params.yaml")
    model = (
        "sft/seed0",
        "data/two_digit/sft/seed0.pt",
        "sft@two_digit/seed0",
        config_hash("sft", "two_digit", params),
        8,  # samples per problem
        True,  # at every temperature, and greedily
    )
    problems = problems_of(read_heldout("data/two_digit/heldout.json"), "two_digit")[:20]
    max_new = params.task("two_digit").max_new_tokens
    args = ([model] * 3, problems, max_new, [1.0, 0.6], params.seed, params.device)
    runs = []
    for workers in (1, 2):
        with seed_results(score, [0, 1, 2], args, workers) as results:
            runs.append(list(results))
    assert runs[0] == runs[1]
    first = runs[0][0]
    assert runs[0][0] == runs[0][1] == runs[0][2] and len(first["counts"]) == 20
    assert all(0 <= c <= 8 for c in first["counts"] + first["by_temperature"]["0.6"])
    # the first temperature's counts are those it gets scored alone: adding T = 0.6 moves nothing
    alone = score(0, [(*model[:5], False)], problems, max_new, [1.0], params.seed, params.device)
    assert alone == {"counts": first["counts"]}
    # greedy: one argmax sample per problem, the accuracy `rlvr.rollout.accuracy` gives at T = 0
    from rlvr.pipeline import checkpoint
    from rlvr.rollout import Sampling, accuracy
    from rlvr.tokenizer import Tokenizer

    tok = Tokenizer()
    policy = checkpoint.load(model[1], tok, model[2], model[3], params.device)
    assert sum(first["greedy"]) / 20 == accuracy(policy, problems, 8, Sampling(tok, max_new, 0.0), None)


def test_a_run_whose_true_answers_differ_from_its_warm_up_is_refused(tiny_repo):
    """The warm-up state records a digest of the true answers it trained on; SFT from it on other
    rows (here: one answer edited) stops with one line naming the run and the warm-up."""
    from rlvr.fields import UserError
    from rlvr.pipeline.paths import data
    from rlvr.pipeline.rundata import record_digests

    d, _ = tiny_repo
    rows_path = d / "data/two_digit/sft.jsonl"
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    rows[0]["answer"] = str(int(rows[0]["answer"]) + 1)
    rows_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    record_digests(data("two_digit"))  # edited as the data stage would write them: past the digest check
    with pytest.raises(
        UserError, match="sft.two_digit: its rows' true answers differ from those warm-up 'two_digit'"
    ):
        run_stage("sft", "two_digit", progress=False)


def test_each_chain_has_its_own_sft_start_and_grpo_seed_s_loads_sft_seed_s(tiny_repo):
    """SFT seeds are separate draws (their checkpoints differ), and GRPO seed s starts from SFT
    seed s's checkpoint: copying seed 0's over seed 1's is refused by name."""
    import shutil

    import torch

    from rlvr.io.params import load_params
    from rlvr.pipeline import paths
    from rlvr.pipeline.checkpoint import CheckpointError, carried
    from rlvr.pipeline.seeds import load_start
    from rlvr.pipeline.stageparams import config_hash
    from rlvr.tokenizer import Tokenizer

    d, _ = tiny_repo
    start = paths.sft("two_digit")
    ckpts = [(d / start.checkpoint(s)).read_bytes() for s in (0, 1)]
    assert hashlib.md5(ckpts[0]).digest() != hashlib.md5(ckpts[1]).digest()
    params = load_params(d / "params.yaml")
    h = config_hash("sft", "two_digit", params)
    one = load_start(carried(start.checkpoint(1)), 1, "two_digit", h, Tokenizer())
    saved = torch.load(start.checkpoint(1), weights_only=True)["model"]
    assert all(torch.equal(one.state_dict()[k], v) for k, v in saved.items())
    shutil.copy(start.checkpoint(0), start.checkpoint(1))
    with pytest.raises(
        CheckpointError, match=r"seed1.pt: holds 'sft@two_digit/seed0', expected 'sft@two_digit/seed1'"
    ):
        run_stage("grpo", "grpo", progress=False)
    assert not (d / "reports/metrics/grpo-grpo.json").exists()  # refused before any training


def test_warm_up_states_are_one_per_chain(tiny_repo):
    """A warm-up trains each chain from its own fresh model: the states differ between seeds."""
    d, raw = tiny_repo
    states = [hashlib.md5((d / f"data/warmup/two_digit/seed{s}.pt").read_bytes()).digest() for s in (0, 1)]
    assert states[0] != states[1]
    warm = json.loads((d / "reports/metrics/warmup-two_digit.json").read_text())
    assert warm["seeds"] == [0, 1] and len(warm["per_seed"]["steps"]) == 2


def test_starts_compares_candidates_on_the_sft_side_first_and_shares_the_pipelines_chains(tiny_repo):
    """`rlvr starts` trains each candidate's chains as the pipeline does and scores them on the
    validation problems only (never the held-out test set). The chosen start is the one whose SFT
    never-solved count is closest to the target; the results and the figure are written where the
    report reads them."""
    from rlvr.io.params import load_params
    from rlvr.tools.starts import run_starts

    d, _ = tiny_repo
    for variant in ("grpo_end", "grpo", "dapo"):
        run_stage("grpo", variant, progress=False)
    run_stage("passk", None, progress=False)
    params = load_params(d / "params.yaml")
    out = run_starts(params, progress=False)
    assert out["pipeline_start"] == "two_digit" and out["sft_side_choice"] in ("two_digit", "two_digit_slips")
    starts = json.loads((d / "reports/starts/starts.json").read_text())
    assert (d / "reports/starts/starts-passk.png").stat().st_size > 1000
    validation = json.loads((d / "data/two_digit/heldout.json").read_text())["validation"]
    start = starts["starts"]["two_digit"]["counts"]
    assert starts["problems"] == len(validation) == len(start["sft/seed0"]) == len(start["grpo/seed1"])
    never = {c: starts["starts"][c]["sft"]["never_solved"] for c in starts["candidates"]}
    target = params.starts.target_never_solved
    assert abs(never[starts["sft_side_choice"]] - target) == min(abs(v - target) for v in never.values())
    # every candidate scored at every temperature too, so the narrowing map can be drawn from it
    assert starts["temperatures"] == params.passk.temperatures == [1.0, 0.6]
    at_06 = starts["starts"]["two_digit"]["counts_by_temperature"]["0.6"]
    assert set(at_06) == set(start) and len(at_06["grpo/seed1"]) == len(validation)


def test_passk_scores_the_start_and_headline_variants_at_every_temperature(tiny_repo):
    """The pass@k stage: every model at the first temperature (the counts everything reads today),
    the start and `headline` also at the others and greedily; their numbers in passk.json, a panel
    per temperature; and the report's narrowing section reads them (the map not yet measured)."""
    from rlvr.report.document import markdown
    from rlvr.report.layout import ReportData, build

    d, raw = tiny_repo
    for variant in ("grpo_end", "grpo", "dapo"):
        run_stage("grpo", variant, progress=False)
    run_stage("passk", None, progress=False)
    counts = json.loads((d / "reports/passk-counts.json").read_text())
    assert counts["temperatures"] == [1.0, 0.6]
    at_06 = counts["by_temperature"]["0.6"]
    headline = ["grpo/seed0", "grpo/seed1", "grpo_end/seed0", "grpo_end/seed1"]  # one GRPO seed a chain
    assert sorted(at_06) == sorted(counts["greedy"]) == [*headline, "sft/seed0", "sft/seed1"]
    assert set(counts["counts"]) > set(at_06)  # dapo and the contrast: at the first temperature only
    metrics = json.loads((d / "reports/metrics/passk.json").read_text())
    assert set(metrics["by_temperature"]) == {"0.6"} and set(metrics["greedy"]) == {"sft", "grpo_end", "grpo"}
    assert len(metrics["by_temperature"]["0.6"]["variants"]["grpo_end"]["crossover_per_chain"]) == 2
    shown = json.loads((d / "reports/headline/passk.json").read_text())  # the start and the controlled end
    assert shown == {
        "acc_start": metrics["sft"]["pass_at_1"],
        "passk_start": metrics["sft"]["pass_at_n"],
        "acc_end": metrics["variants"]["grpo_end"]["pass_at_1_rl"],
        "passk_end": metrics["variants"]["grpo_end"]["pass_at_n_rl"],
    }
    assert (d / "reports/headline/sft-two_digit.json").is_file()
    assert not (d / "reports/headline/warmup-two_digit.json").exists()  # a warm-up has no headline
    assert (d / "reports/figures/passk-temperatures.png").stat().st_size > 1000
    page = markdown(build(ReportData([], [], {"passk.json": metrics}, problems=counts)), "figs")
    assert "T = 0.6" in page and "greedy" in page and "not yet measured: run `rlvr starts`" in page


def test_the_sft_side_choice_is_by_never_solved_then_pass_at_64():
    from rlvr.tools.starts import sft_side_choice

    sft = {
        "a": {"never_solved": 2.0, "pass_at_n": 0.99},
        "b": {"never_solved": 7.5, "pass_at_n": 0.97},
        "c": {"never_solved": 8.0, "pass_at_n": 0.985},
    }
    assert sft_side_choice(sft, 5, 0.983) == "b"  # 2.5 from 5; a and c are 3 away
    del sft["b"]
    assert sft_side_choice(sft, 5, 0.983) == "c"  # a tie at 3, broken by pass@64 (0.002 from 0.983)


def test_the_pipelines_start_is_matched_to_the_candidate_whose_recipe_it_trains(tiny_raw_params):
    """The pipeline's start may train a chosen candidate's recipe on chains the choice never ran:
    the candidate is found by every setting but its chains and warm-up name, and any other setting
    that differs means no candidate."""
    from rlvr.io.params import parse_params
    from rlvr.tools.starts import recipe_of

    raw = tiny_raw_params
    raw["starts"]["runs"]["member"] = {**raw["sft"]["two_digit"], "seeds": [1], "warmup": "member"}
    raw["starts"]["candidates"] = ["two_digit_slips", "member"]
    assert recipe_of(parse_params(raw), "two_digit") == "member"
    raw["starts"]["runs"]["member"]["lr"] = 0.5
    assert recipe_of(parse_params(raw), "two_digit") is None


@pytest.mark.parametrize(
    "start, recipe, says",
    [
        ("b", None, "is `b`, the same."),
        ("a", "b", "is `a`, trained on `b`'s recipe on chains this choice did not use."),
        ("a", None, "is `a`: they differ. The committed results keep the pipeline's start"),
    ],
)
def test_the_starts_section_says_whether_the_pipeline_trains_the_chosen_start(start, recipe, says):
    from rlvr.report.sections import starts_blocks

    starts = {
        "targets": {"never_solved": 5, "pass_at_n": 0.983},
        "made": "`rlvr starts`",
        "problems": 300,
        "n": 64,
        "rule": "the rule",
        "sft_side_choice": "b",
        "pipeline_start": start,
        "pipeline_recipe": recipe,
        "variant": "grpo",
        "candidates": [],
        "starts": {},
    }
    text = starts_blocks(starts, None)[1].text
    assert f"Chosen: `b`; the pipeline's start (`passk.sft`) {says}" in text


def test_a_stage_closes_with_two_short_lines_not_its_record():
    """What a person reads when a stage ends: a few headline numbers and the files written; ids,
    lists and tables stay in the files and MLflow."""
    from pathlib import Path

    from rlvr.pipeline.run import summary

    result = {"mlflow_run_id": "abc", "acc": 0.523456, "per_seed": [1, 2], "ok": True, "steps": 12}
    for k in range(10):
        result[f"m{k}"] = float(k)
    written = [Path("data/x/sft"), Path("reports/metrics/sft-x.json"), Path("reports/runs/sft-x.json")]
    lines = summary("sft@x", result, written).splitlines()
    assert lines == [
        "rlvr: sft@x done: acc 0.5235 · steps 12 · m0 0 · m1 1 · m2 2 · m3 3 (+6 more)",
        "rlvr: wrote reports/metrics/sft-x.json, reports/runs/sft-x.json (every number: rlvr ui)",
    ]
    assert summary("check", {}, []) == "rlvr: check done"


def test_the_end_paths_title_counts_what_the_claims_count():
    """grpo-end-paths.png's "ends below its start in N of M chains" is passk.json's pairing (the
    estimate the narrowing claims use), not the paths' exact ends, which can disagree by a chain."""
    from rlvr.pipeline.stages.report import narrowed

    passk = {
        "sft": {"seeds": [1, 2, 3], "per_seed": {"pass_at_n": [0.98, 0.97, 0.99]}},
        "variants": {"e": {"seeds": [1, 2, 3], "per_seed": {"pass_at_n_rl": [0.97, 0.975, 0.985]}}},
    }
    assert narrowed({"passk.json": passk}, "e") == (2, 3)
    assert narrowed({"passk.json": passk}, "other") is None
    passk["variants"]["e"]["seeds"] = [3, 2, 1]  # not paired chain by chain: no count
    assert narrowed({"passk.json": passk}, "e") is None


def test_the_progress_bar_names_the_seed_just_finished_by_its_key_metrics():
    from rlvr.pipeline.seeds import latest

    summary = {"eval_acc_final": 0.8375, "eval_acc_start": 0.5, "note": "x", "kl_k3_nats_max": 0.01234}
    keys = ("eval_acc_start", "eval_acc_final", "missing", "kl_k3_nats_max", "note")
    assert (
        latest("seed3-g1", summary, keys)
        == "seed3-g1: eval_acc_start 0.5, eval_acc_final 0.838, kl_k3_nats_max 0.0123"
    )
    assert latest("seed3", summary, keys, shown=1) == "seed3: eval_acc_start 0.5"
