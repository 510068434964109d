"""HEAD's report table, named by the commit whose results it holds."""

import json
import subprocess

from rlvr.pipeline.committed import committed_report


def git(root, *args: str) -> str:
    run = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True)
    return run.stdout.strip()


def commit_all(root, message: str) -> str:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


def test_the_committed_report_is_named_by_the_commit_that_made_it_not_by_head(tmp_path):
    """Results committed twice (the second rerun moved no number: report.json as it was, a new
    dvc.lock), then a commit of code alone on top: the report table HEAD holds is named by the
    second results commit, the last to change dvc.lock, not by HEAD nor by the first; a profile's
    folder has its own. It is named as git abbreviates it (here 12 digits, the repository's own
    setting)."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "core.abbrev", "12")
    for root, verdict in ((tmp_path, "reproduced"), (tmp_path / "powered", "differs")):
        (root / "reports").mkdir(parents=True)
        (root / "reports/report.json").write_text(json.dumps({"claims": [{"verdict": verdict}]}))
        (root / "dvc.lock").write_text("schema: '2.0'\n")
    first = commit_all(tmp_path, "results")
    for root in (tmp_path, tmp_path / "powered"):
        (root / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    results = commit_all(tmp_path, "results again, every number identical")
    (tmp_path / "code.py").write_text("x = 1\n")
    head = commit_all(tmp_path, "code")

    commit, table = committed_report(tmp_path)
    assert (commit, table) == (results[:12], {"claims": [{"verdict": "reproduced"}]})
    assert not head.startswith(commit) and not first.startswith(commit)
    commit, table = committed_report(tmp_path / "powered")
    assert (commit, table) == (results[:12], {"claims": [{"verdict": "differs"}]})


def test_no_committed_report_is_none(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    commit_all(tmp_path, "code")
    assert committed_report(tmp_path) is None


def test_a_paths_last_commit_is_abbreviated_as_git_does_and_a_new_path_is_uncommitted(tmp_path):
    """The report names the plan's last commit: git's abbreviation of it (here 12 digits, the
    repository's setting), and "uncommitted" whole for a file git has never seen."""
    from rlvr.io.gitinfo import git_commit

    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "core.abbrev", "12")
    (tmp_path / "plan.yaml").write_text("chains: 16\n")
    made = commit_all(tmp_path, "plan")
    (tmp_path / "code.py").write_text("x = 1\n")
    commit_all(tmp_path, "code")
    assert git_commit(tmp_path, "plan.yaml", short=True) == made[:12]
    assert git_commit(tmp_path, "plan.yaml") == made
    assert git_commit(tmp_path, "other.yaml", short=True) == "uncommitted"
