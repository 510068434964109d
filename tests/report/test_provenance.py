"""`rlvr provenance` on a tiny fake repository: a git checkout with a hand-written dvc.lock of three
chained stages (data@x -> sft@x -> passk, passk reading sft@x's checkpoint through a folder dep)."""

import hashlib
import json
import subprocess

import pytest
import yaml

from rlvr.cli import main
from rlvr.pipeline.provenance import ProvenanceError, explain, footer, format_explain, unexplained

FIGURE = "reports/figures/passk-curves.png"
CKPT = "data/ckpt/x/sft.pt"  # DVC-cached (git-ignored), inside the folder passk depends on


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


MADE = {  # where passk ran: its run record's `made`
    "git_commit": "2b521db0ab6d0e0f6c3e8b1a2f4c5d6e7f8091a2",
    "git_dirty": True,
    "host": "lab-box",
    "tracking_uri": "sqlite:////home/lab/rlvr/mlflow.db",
    "started_utc": "2026-12-02T07:18:39+00:00",
}
FILES = {
    "data/x/sft.jsonl": '{"prompt": "1+1=", "answer": "2"}\n',
    CKPT: "weights",
    "reports/metrics/sft-x.json": '{"eval_acc": 0.5}',
    FIGURE: "png bytes",
    "reports/metrics/passk.json": '{"pass_at_1": 0.5}',
    "reports/runs/passk.json": json.dumps({"mlflow_run_id": "run123", "made": MADE}),
    "rlvr/sft.py": "# sft\n",
    "rlvr/passk.py": "# passk\n",
    "params.yaml": "seed: 0\n",
}


def entry(path: str) -> dict:
    return {"path": path, "hash": "md5", "md5": md5(FILES[path]), "size": len(FILES[path])}


LOCK = {
    "schema": "2.0",
    "stages": {
        "data@x": {
            "cmd": "python -m rlvr.pipeline data --run x",
            "deps": [entry("rlvr/sft.py")],
            "params": {"params.yaml": {"seed": 0, "sft.x.noise": {"kind": "slips", "alpha": 1.4}}},
            "outs": [entry("data/x/sft.jsonl")],
        },
        "sft@x": {
            "cmd": "python -m rlvr.pipeline sft --run x",
            "deps": [entry("data/x/sft.jsonl"), entry("rlvr/sft.py")],
            "params": {"params.yaml": {"seed": 0, "sft.x": {"epochs": 12, "lr": 0.003}}},
            "outs": [entry(CKPT), entry("reports/metrics/sft-x.json")],
        },
        "passk": {
            "cmd": "python -m rlvr.pipeline passk",
            "deps": [
                {"path": "data/ckpt", "hash": "md5", "md5": "0123456789abcdef0123456789abcdef.dir"},
                entry("rlvr/passk.py"),
            ],
            "params": {"params.yaml": {"passk": {"n": 64}}},
            "outs": [entry(FIGURE), entry("reports/metrics/passk.json"), entry("reports/runs/passk.json")],
        },
    },
}


def git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    for path, text in FILES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    (tmp_path / "data/ckpt/.gitignore").write_text("/x\n")
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(LOCK, sort_keys=False))
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "results")
    return tmp_path


def test_upstream_params_are_found_through_a_folder_dep(repo):
    info = explain(repo, FIGURE, check_stale=False)
    assert info["stage"] == "passk" and info["params"] == {"params.yaml": {"passk": {"n": 64}}}
    assert list(info["upstream"]) == ["sft@x", "data@x"]  # nearest first; rlvr/*.py are no stage's outs
    assert info["upstream"]["sft@x"]["params.yaml"]["sft.x"] == {"epochs": 12, "lr": 0.003}
    assert info["upstream"]["data@x"]["params.yaml"]["sft.x.noise"]["alpha"] == 1.4
    assert info["mlflow_runs"] == {"stage": "run123"}
    # the keys the report stage reads are still there
    assert {"path", "stage", "cmd", "params", "deps", "out", "mlflow_runs", "git_commit"} <= set(info)
    assert explain(repo, "data/x/sft.jsonl", check_stale=False)["upstream"] == {}


def test_dirty_flags_follow_git_and_dvc_hashes(repo):
    info = explain(repo, FIGURE, check_stale=False)
    assert info["dirty"] == {"file": False, "code": False, "code_changes": []}
    assert explain(repo, CKPT, check_stale=False)["dirty"]["file"] is False

    (repo / FIGURE).write_text("other png bytes")
    (repo / CKPT).write_text("other weights")
    (repo / "rlvr/passk.py").write_text("# passk, edited\n")
    dirty = explain(repo, FIGURE, check_stale=False)["dirty"]
    assert dirty["file"] is True and dirty["code"] is True
    assert dirty["code_changes"] == ["rlvr/passk.py"]
    assert explain(repo, CKPT, check_stale=False)["dirty"]["file"] is True  # md5 vs dvc.lock
    assert explain(repo, "data/x/sft.jsonl", check_stale=False)["dirty"]["file"] is False


def test_an_output_that_links_outside_the_repository_is_never_read(repo, tmp_path_factory):
    """A DVC-cached output replaced by a link to a file outside the checkout: provenance says it
    cannot tell, and reads (hashes) nothing outside."""
    from rlvr.pipeline.provenance import file_dirty

    outside = tmp_path_factory.mktemp("elsewhere") / "secret.bin"
    outside.write_bytes(b"not ours")
    outside.chmod(0)  # reading it would raise: the check must not get that far
    (repo / CKPT).unlink()
    (repo / CKPT).symlink_to(outside)
    assert file_dirty(repo, CKPT, entry(CKPT)) is None
    assert file_dirty(repo, "../" * 8 + "etc/passwd", entry(CKPT)) is None


def test_text_output_names_the_upstream_stages_and_params(repo):
    text = format_explain(explain(repo, FIGURE, check_stale=False))
    assert "stage     passk" in text and 'passk={"n": 64}' in text
    assert "  sft@x: " in text and "  data@x: " in text
    assert 'sft.x={"epochs": 12, "lr": 0.003}' in text
    assert "as above: seed" in text.splitlines()[-3]  # data@x repeats sft@x's seed: named, not repeated
    assert "file: as committed" in text and "code: clean" in text and "stage=run123" in text


def test_cli_prints_text_by_default_and_json_on_request(repo, monkeypatch, capsys):
    monkeypatch.chdir(repo)
    monkeypatch.setattr(
        "rlvr.pipeline.provenance._mlflow_status", lambda uri, ids: {k: "FINISHED" for k in ids}
    )
    assert main(["provenance", FIGURE, "--no-status"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"path      {FIGURE}") and "stage=run123 (FINISHED)" in out and "sft@x" in out
    assert main(["provenance", FIGURE, "--no-status", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (
        set(info["upstream"]) == {"sft@x", "data@x"} and info["dirty"]["file"] is False
    )  # JSON: keys sorted


def test_an_unknown_path_is_a_one_line_error(repo, capsys, monkeypatch):
    with pytest.raises(
        ProvenanceError, match=r"reports/figures/nope\.png: not an output of any stage"
    ) as err:
        explain(repo, "reports/figures/nope.png", check_stale=False)
    assert "\n" not in str(err.value) and FIGURE in str(err.value)
    monkeypatch.chdir(repo)
    assert main(["provenance", "reports/figures/nope.png", "--no-status"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_commit_is_the_one_that_ran_the_stage_not_the_last_to_touch_dvc_lock(repo):
    """The run record names the code that ran passk; a later commit of dvc.lock does not change it.
    A stage without one falls back to dvc.lock's last commit and says so."""
    (repo / "dvc.lock").write_text((repo / "dvc.lock").read_text() + "# touched\n")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "lock")
    info = explain(repo, FIGURE, check_stale=False)
    assert info["git_commit"] == MADE["git_commit"] and info["git_dirty"] is True and info["made"] == MADE
    assert info["commit_from"] == "run record"
    assert (
        "code: git 2b521db0ab (uncommitted changes), made on lab-box at 2026-12-02T07:18:39+00:00"
        in footer(info)
    )
    other = explain(repo, "reports/metrics/sft-x.json", check_stale=False)
    lock_commit = subprocess.run(
        ["git", "log", "-1", "--format=%H", "--", "dvc.lock"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    assert other["git_commit"] == lock_commit and other["commit_from"] == "dvc.lock" and other["made"] is None
    assert "last to touch dvc.lock" in footer(other) and unexplained(other).startswith(
        "stage sft@x: its run record"
    )


def test_a_clone_without_the_runs_says_where_they_were_logged_and_when(repo, monkeypatch, capsys):
    """In a clone without the MLflow store (no mlflow.db: none is made by looking), provenance names
    the store the runs went to, the host and the time from the run record, not a bare "missing";
    `rlvr verify`'s provenance check agrees: it fails on a stage whose record cannot say, and on one
    that ran from uncommitted code without naming the changed files."""
    from rlvr.tools import verify

    monkeypatch.chdir(repo)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["provenance", FIGURE, "--no-status"]) == 0
    out = capsys.readouterr().out
    assert not (repo / "mlflow.db").exists()
    assert "(missing)" not in out and "made by   git 2b521db0ab (uncommitted changes), made on lab-box" in out
    assert "not in this tracking store: stage; they were logged to sqlite:////home/lab/rlvr/mlflow.db" in out
    assert verify.provenance_problems(repo) == [
        "reports/metrics/passk.json: stage passk ran from uncommitted code its record does not name "
        "(rerun it)",
        "reports/metrics/sft-x.json: stage sft@x: its run record does not say which code ran it, "
        "where or when (rerun it)",
    ]


def test_an_svg_beside_its_png_is_explained_like_the_png(repo, monkeypatch, capsys):
    """Every figure is written as PNG and SVG, both declared outputs of the stage that draws them."""
    svg = FIGURE.removesuffix(".png") + ".svg"
    (repo / svg).write_text("<svg/>")
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    size = len("<svg/>")
    lock["stages"]["passk"]["outs"].append({"path": svg, "hash": "md5", "md5": md5("<svg/>"), "size": size})
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "svg")
    monkeypatch.chdir(repo)
    monkeypatch.setattr(
        "rlvr.pipeline.provenance._mlflow_status", lambda uri, ids: {k: "FINISHED" for k in ids}
    )
    assert main(["provenance", svg, "--no-status"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"path      {svg}") and "stage     passk" in out and "file: as committed" in out


def test_uncommitted_changes_are_named_and_the_deps_among_them_said():
    """A record made from a changed tree names the changed files and whether any is a dep of the
    stage: "none a dep" says the stage's code is the commit's, computed from the stage's deps."""
    from rlvr.pipeline.provenance import code_line

    made = {**MADE, "git_dirty": True, "git_changed": ["docs/x.md", "rlvr/report/plots.py"]}
    info = {"made": made, "deps": {"rlvr/grpo.py": "a", "rlvr/report": "b"}}
    assert (
        "uncommitted changes to docs/x.md, rlvr/report/plots.py; deps of this stage: rlvr/report/plots.py"
        in (code_line(info))
    )
    info["deps"] = {"rlvr/grpo.py": "a"}
    assert "none a dep of this stage: its code is the commit's" in code_line(info)
    assert "uncommitted" not in code_line(
        {"made": {**made, "git_dirty": False, "git_changed": []}, "deps": {}}
    )


def test_a_store_inside_the_checkout_is_recorded_relative_to_it(tmp_path, monkeypatch):
    """Run records name the default store as `sqlite:///mlflow.db`, never this machine's folders; a
    store elsewhere keeps its path, and a server its URI with the password masked."""
    from rlvr.pipeline.store import recorded_uri

    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    assert recorded_uri(f"sqlite:///{tmp_path}/mlflow.db") == "sqlite:///mlflow.db"
    assert recorded_uri(f"sqlite:///{tmp_path}/runs/x.db") == "sqlite:///runs/x.db"
    assert recorded_uri("sqlite:////elsewhere/x.db") == "sqlite:////elsewhere/x.db"
    assert recorded_uri("http://u:secret@host:5000") == "http://u:***@host:5000"


def test_the_reports_copy_of_a_figure_is_explained_as_the_stage_that_drew_it(repo, monkeypatch, capsys):
    """Stage `report` copies reports/figures/<name> into reports/report-figures/ with the original's
    provenance in the copy's PNG metadata; `rlvr provenance` of the copy names the same stage and
    says whose copy it is. A figure the report draws itself is the report's."""
    copy, own = "reports/report-figures/passk-curves.png", "reports/report-figures/grpo-curves.png"
    for path in (copy, own):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("png bytes")
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    folder = {"path": "reports/report-figures", "hash": "md5", "md5": "fedcba9876543210fedcba9876543210.dir"}
    lock["stages"]["report"] = {
        "cmd": "python -m rlvr.pipeline report",
        "deps": [entry(FIGURE)],
        "outs": [folder],
    }
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "report")
    info = explain(repo, copy, check_stale=False)
    assert info["stage"] == "passk" and info["path"] == copy
    assert info["copy"] == {"of": FIGURE, "by": "report", "out": folder["md5"]}
    assert info["git_commit"] == MADE["git_commit"]  # passk's run record: the code that drew it
    assert explain(repo, own, check_stale=False)["stage"] == "report" and "copy" not in explain(
        repo, own, check_stale=False
    )
    monkeypatch.chdir(repo)
    assert main(["provenance", copy, "--no-status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(f"copy      of {FIGURE}, by stage report") and lines[2].startswith(
        "stage     passk"
    )


def test_every_committed_report_figure_and_its_provenance_name_one_stage_and_one_commit():
    """Each PNG in reports/report-figures: the stage and commit its own metadata names are those
    `rlvr provenance` gives for it (figures of commands outside the pipeline aside)."""
    from conftest import ROOT
    from PIL import Image

    checked = 0
    for png in sorted((ROOT / "reports/report-figures").glob("*.png")):
        texts = Image.open(png).info
        if "rlvr:git_commit" not in texts or texts["rlvr:stage"].startswith("made by"):
            continue
        info = explain(ROOT, png.relative_to(ROOT).as_posix(), check_stale=False)
        assert texts["rlvr:stage"].partition(",")[0] == info["stage"], png.name
        assert texts["rlvr:git_commit"] == info["git_commit"], png.name
        checked += 1
    assert checked >= 15


def test_a_figure_the_report_draws_names_the_stages_it_was_drawn_from_not_all_upstream(repo):
    """The report stage depends on everything; one of its figures is drawn from a few stages' outputs,
    which its own metadata names: provenance narrows the upstream to those and theirs."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    figure = "reports/report-figures/b-curves.png"
    meta = PngInfo()
    meta.add_text("rlvr:stage", "report, from sft@x, no-such-stage")
    (repo / figure).parent.mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(repo / figure, pnginfo=meta)
    lock["stages"]["report"] = {
        "cmd": "python -m rlvr.pipeline report",
        "deps": [entry("reports/metrics/passk.json"), entry("reports/metrics/sft-x.json")],
        "outs": [{"path": "reports/report-figures", "hash": "md5", "md5": "ab.dir"}],
    }
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    info = explain(repo, figure, check_stale=False)
    assert info["stage"] == "report" and info["drawn_from"] == ["sft@x"]
    assert list(info["upstream"]) == ["sft@x", "data@x"]  # not passk: the figure was not drawn from it
    text = format_explain(info)
    assert "drawn     from 1 stage(s)' outputs: sft@x" in text and "2 stage(s): those and theirs" in text
    assert explain(repo, FIGURE, check_stale=False)["drawn_from"] == []  # a stage's own figure


def test_the_commit_that_last_changed_the_bytes_is_named_beside_the_code_that_made_them(repo):
    info = explain(repo, FIGURE, check_stale=False)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    assert info["changed_in"] == head and info["git_commit"] == MADE["git_commit"]
    text = format_explain(info)
    assert f"committed git {head[:10]}: the last commit that changed these bytes" in text
    assert explain(repo, CKPT, check_stale=False)["changed_in"] is None  # DVC's, not git's


@pytest.mark.parametrize(
    "status, stale, first",
    [
        ({}, False, None),
        ({"passk": [{"changed deps": {"data/ckpt": "deleted"}}]}, False, "its DVC-cached files are not in"),
        (
            {"passk": [{"changed deps": {"rlvr/passk.py": "modified"}}]},
            True,
            "passk: dep rlvr/passk.py modified",
        ),
        ("dvc status failed: no dvc", None, "dvc status failed: no dvc"),
    ],
)
def test_a_clone_without_the_dvc_cache_is_not_called_stale(repo, monkeypatch, status, stale, first):
    """One definition of stale for `rlvr provenance` and `rlvr verify`: files a clone never pulled
    are said, not counted."""
    from rlvr.pipeline import provenance

    monkeypatch.setattr(provenance, "stage_status", lambda root, name: status)
    info = explain(repo, FIGURE)
    assert info["stale"] is stale
    why = info["stale_why"]
    assert why == [] if first is None else why[0].startswith(first)
    assert format_explain(info).count("stale     ") == 1
