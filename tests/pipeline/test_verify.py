"""`rlvr verify` finds what a stale or hand-edited commit carries (on a copy it tampers with)."""

import json
import shutil
from dataclasses import replace

import pytest
import yaml
from conftest import ROOT, at_head

from rlvr.report.claims import Claim
from rlvr.tools import verify


@pytest.fixture
def results(tmp_path):
    """The committed results and what they are made from, copied: dvc.lock, metrics, report, claims."""
    for rel in (
        "dvc.lock",
        "params.yaml",
        "experiments/claims.yaml",
        "experiments/plan.yaml",
        "reports/report.json",
        "reports/benchmarks.json",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(at_head(rel) if rel.startswith(("reports/", "dvc.lock")) else ROOT / rel, tmp_path / rel)
    shutil.copytree(at_head("reports/metrics"), tmp_path / "reports/metrics")
    return tmp_path


def test_a_hand_edited_verdict_is_found(results):
    path = results / "reports/report.json"
    report = json.loads(path.read_text())
    cid, row = next((c, r) for c, r in report["claims"].items() if r["verdict"] == "reproduced")
    row["verdict"] = "differs"
    path.write_text(json.dumps(report))
    assert verify.claims_problems(results) == [
        f"claim {cid}: report.json says differs, the rule gives reproduced"
    ]


def test_a_claim_on_a_metric_no_stage_writes_is_found(results):
    path = results / "experiments/claims.yaml"
    claims = yaml.safe_load(path.read_text())
    first = next(c for c in claims if "metric" in c)
    first["metric"] = ["nope.json", *first["metric"][1:]]
    path.write_text(yaml.safe_dump(claims, sort_keys=False))
    assert verify.claims_problems(results) == [f"claim {first['id']}: nope.json is not a stage output"]


def test_stale_stages_are_found_but_a_clone_without_the_cache_is_not_stale():
    status = {
        "sft@x": [{"changed deps": {"rlvr/sft.py": "modified", "data/x/sft.jsonl": "deleted"}}],
        "passk": [{"changed deps": {"data/grpo": "modified"}}],  # holds grpo@y's outputs, not fetched
        "grpo@y": [{"changed outs": {"data/grpo/y": "deleted"}}],  # in the DVC cache, not in git
        "data": [{"changed outs": {"data/x/sft.jsonl": "not in cache"}}],  # a clone without the cache
        "report": [{"changed outs": {"reports/report.md": "modified"}}, "changed command"],
        "check": ["always changed"],  # the guard runs on every dvc repro: not stale
    }
    assert verify.stale_problems(status, {"data/x/sft.jsonl", "data/grpo/y", "reports/report.md"}) == [
        "sft@x: dep rlvr/sft.py modified",
        "report: out reports/report.md modified",
        "report: changed command",
    ]


def test_a_benchmarks_file_without_its_machine_is_found(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports/benchmarks.json").write_text(json.dumps({"machine": {"torch": "2.13.0"}}))
    assert verify.benchmark_problems(tmp_path) == [
        "reports/benchmarks.json: machine lacks cpu_count, threads"
    ]


def test_a_figure_without_provenance_is_found(tmp_path):
    from PIL import Image

    (tmp_path / "reports/report-figures").mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(tmp_path / "reports/report-figures/bare.png")
    assert verify.figure_problems(tmp_path) == [
        "reports/report-figures/bare.png: no provenance in its PNG metadata"
    ]


def test_the_cli_fails_naming_the_check(monkeypatch, capsys):
    from rlvr.cli import main

    monkeypatch.setattr(verify, "CHECKS", {"benchmarks": lambda root: ["reports/benchmarks.json: broken"]})
    monkeypatch.setattr(verify, "profiles", lambda root: [])
    assert main(["verify"]) == 2
    out, err = capsys.readouterr()
    assert "FAIL  benchmarks" in out and "rlvr verify: benchmarks: reports/benchmarks.json: broken" in out
    assert err.strip() == "rlvr: error: 1 of 1 checks failed: benchmarks"


def test_a_claim_that_differs_without_a_note_is_found():
    claims = [Claim(id="x", kind="range", metric=["m.json", "k"]), Claim(id="y", kind="cited")]
    records = {"x": {"verdict": "differs"}, "y": {"verdict": "cited"}}
    assert verify.note_problems(claims, records) == [
        "claim x: differs but claims.yaml gives no `note` on why"
    ]
    assert verify.note_problems([replace(claims[0], note="Because.")], records) == []


def test_an_interval_outside_its_feasible_range_is_found():
    c = Claim(id="n", kind="exact", metric=["passk.json", "never"], feasible=[0, 300])
    assert verify.feasible_problems([c], {"n": {"interval": [-10.5, 28.5]}}) == [
        "claim n: interval [-10.5, 28.5] leaves the feasible [0, 300]"
    ]
    assert verify.feasible_problems([c], {"n": {"interval": [0, 28.5]}}) == []
    no_range = replace(c, feasible=None)
    assert verify.feasible_problems([no_range], {}) == ["claim n: no `feasible` range for its metric"]


def test_a_figure_copy_the_report_stage_writes_says_where_and_when_and_an_older_one_is_found(tmp_path):
    """The report stage writes the commit that ran, with where and when, into each figure copy's PNG
    metadata; a copy that names a commit but not where or when it was made is found."""
    from PIL import Image

    from rlvr.pipeline.stages.report import figure_with_metadata

    folder = tmp_path / "reports/report-figures"
    folder.mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(folder / "src.png")
    made = {
        "git_commit": "2b521db",
        "git_dirty": False,
        "host": "box",
        "started_utc": "2026-12-02T07:18:39+00:00",
    }
    info = {
        "stage": "passk",
        "params": {},
        "deps": {},
        "mlflow_runs": {},
        "git_commit": "2b521db",
        "made": made,
    }
    figure_with_metadata(folder / "src.png", folder / "new.png", info, svg=False)
    figure_with_metadata(folder / "src.png", folder / "old.png", {**info, "made": None}, svg=False)
    (folder / "src.png").unlink()
    with Image.open(folder / "new.png") as im:
        assert json.loads(im.text["rlvr:made"]) == made and im.text["rlvr:git_commit"] == "2b521db"
    assert verify.figure_problems(tmp_path) == [
        "reports/report-figures/old.png: its PNG metadata does not say where or when made"
    ]


def test_a_result_made_from_uncommitted_deps_fails_verify_and_other_changes_do_not():
    """`rlvr verify` holds a result to committed code: a run record whose changed files include a
    dep of its stage (or that says the tree differed without naming files) is a problem; changes
    to files the stage does not read are not."""
    from rlvr.tools.verify import uncommitted_deps

    info = {"stage": "passk", "deps": {"rlvr/passk.py": "a", "data/grpo": "b"}}
    clean = {"git_dirty": False, "git_changed": []}
    assert uncommitted_deps({**info, "made": clean}) is None
    docs_only = {"git_dirty": True, "git_changed": ["docs/x.md"]}
    assert uncommitted_deps({**info, "made": docs_only}) is None
    code = {"git_dirty": True, "git_changed": ["docs/x.md", "rlvr/passk.py", "data/grpo/v/seed1.pt"]}
    assert uncommitted_deps({**info, "made": code}) == (
        "stage passk ran with uncommitted changes to its deps rlvr/passk.py, data/grpo/v/seed1.pt"
    )
    assert "does not name" in uncommitted_deps({**info, "made": {"git_dirty": True}})


def test_the_committed_results_name_one_commit_in_dvc_lock_records_figures_and_mlflow():
    """On the committed results: the commit each stage's run record names holds every code dep's
    bytes as dvc.lock hashed them, every figure's embedded record is its stage's run record, and
    (where this checkout has the MLflow store) each stage's run is tagged with that commit."""
    assert verify.commit_problems(ROOT) == []


def test_a_lock_hash_the_records_commit_does_not_hold_and_a_figure_from_another_run_are_found(
    tmp_path, monkeypatch
):
    import hashlib
    import subprocess

    from PIL import Image, PngImagePlugin

    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True, text=True)  # noqa: E731
    git("init", "-q")
    (tmp_path / "rlvr").mkdir()
    (tmp_path / "rlvr/passk.py").write_text("# passk\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "code")
    commit = git("rev-parse", "HEAD").stdout.strip()
    made = {"git_commit": commit, "git_dirty": False, "git_changed": [], "host": "box"}
    (tmp_path / "reports/runs").mkdir(parents=True)
    (tmp_path / "reports/runs/passk.json").write_text(json.dumps({"made": made}))
    figure = tmp_path / "reports/figures/passk-curves.png"
    figure.parent.mkdir()
    info = PngImagePlugin.PngInfo()
    info.add_text("rlvr:stage", "passk")
    info.add_text("rlvr:made", json.dumps({**made, "host": "elsewhere"}))
    Image.new("RGB", (4, 4)).save(figure, pnginfo=info)
    md5 = lambda text: hashlib.md5(text.encode()).hexdigest()  # noqa: E731
    lock = {
        "schema": "2.0",
        "stages": {
            "passk": {
                "cmd": "python -m rlvr.pipeline passk",
                "deps": [{"path": "rlvr/passk.py", "hash": "md5", "md5": md5("# passk, edited\n")}],
                "outs": [
                    {"path": "reports/runs/passk.json", "hash": "md5", "md5": "0" * 32},
                    {"path": "reports/figures/passk-curves.png", "hash": "md5", "md5": "1" * 32},
                ],
            }
        },
    }
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert verify.commit_problems(tmp_path) == [
        f"stage passk: dvc.lock hashed rlvr/passk.py, but {commit[:10]} (its run record's commit) holds "
        "other bytes: rerun the stage from committed code",
        "reports/figures/passk-curves.png: its embedded record is not stage passk's run record (rerun it)",
    ]
    lock["stages"]["passk"]["deps"][0]["md5"] = md5("# passk\n")
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    Image.new("RGB", (4, 4)).save(figure, pnginfo=PngImagePlugin.PngInfo())  # no record: not this check's
    assert verify.commit_problems(tmp_path) == []


def _profile(root, md5_shown: str | None):
    """A profile folder `p` in `root`: params, dvc.yaml, a plan naming ../reports/report.json
    `beside`, and a report.json that showed a file of md5 `md5_shown` (None: showed none)."""
    (root / "reports").mkdir(parents=True, exist_ok=True)
    (root / "reports" / "report.json").write_text('{"counts": {}, "claims": {}}')
    folder = root / "p"
    (folder / "experiments").mkdir(parents=True)
    (folder / "reports").mkdir()
    for name in ("params.yaml", "dvc.yaml"):
        (folder / name).write_text("{}\n")
    (folder / "experiments" / "plan.yaml").write_text("beside: ../reports/report.json\n")
    shown = {} if md5_shown is None else {"beside": {"path": "../reports/report.json", "md5": md5_shown}}
    (folder / "reports" / "report.json").write_text(json.dumps({"counts": {}, "claims": {}, **shown}))
    return folder


def test_a_profile_is_found_and_its_report_must_show_the_other_plan_as_it_is_now(tmp_path):
    from rlvr.io.files import md5

    folder = _profile(tmp_path, None)
    (tmp_path / "empty").mkdir()  # a folder without params.yaml and dvc.yaml is no profile
    assert verify.profiles(tmp_path) == [folder]
    (stale,) = verify.beside_problems(folder)
    assert "does not show ../reports/report.json as it is now" in stale and "dvc repro p/dvc.yaml" in stale
    current = md5(tmp_path / "reports" / "report.json")
    assert verify.beside_problems(_profile(tmp_path / "again", current)) == []
    (tmp_path / "again" / "reports" / "report.json").write_text('{"counts": {}, "claims": {"X": {}}}')
    assert verify.beside_problems(tmp_path / "again" / "p") != []  # the other plan moved since


def test_the_committed_powered_profile_passes_every_check_in_its_folder():
    """The committed powered plan: dvc.yaml, verdicts recomputed from its metrics, provenance, one
    commit and the default plan's verdicts as they are now."""
    folder = ROOT / "powered"
    if not (folder / "reports" / "report.json").is_file():
        pytest.skip("the powered plan has not been run in this checkout")
    for name, check in verify.PROFILE_CHECKS.items():
        if name in ("no stale stage", "one commit"):  # need the workspace's own git state: `rlvr verify`
            continue
        assert check(folder) == [], name


def test_a_profiles_linked_dep_is_read_at_the_commit_as_the_file_it_names(tmp_path):
    folder = tmp_path / "p"
    (folder / "experiments").mkdir(parents=True)
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "claims.yaml").write_text("[]\n")
    (folder / "experiments" / "claims.yaml").symlink_to("../../experiments/claims.yaml")
    assert verify._git_path(folder, "experiments/claims.yaml") == "../experiments/claims.yaml"
    assert verify._git_path(folder, "reports/x.json") == "./reports/x.json"
    assert verify._git_path(folder, "../rlvr/tasks.py") == "../rlvr/tasks.py"
