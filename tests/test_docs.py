"""Every shell command in README.md and docs/*.md runs in a test, or says why it cannot.

The fast test reads every ```bash block: each command must be in RUN (run below on the tiny
pipeline) or sit in a block marked `<!-- tested in tests/<file> ... -->` (another test runs it) or
`<!-- not run by the tests: <why> -->` (S3, a real server host, a download, an hour of compute).
The slow test builds the tiny pipeline and runs every RUN command in it: a documented command that
fails, or one added without a line here, fails the suite.
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, ctrl_c_as_at_a_terminal, tiny_checkout

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent

# The documented command -> what the tiny pipeline runs instead (None: the same). The tiny pipeline
# has variants grpo, dapo and a_grpo (conftest.tiny_raw), so dr_grpo reads dapo; a sweep's grid
# uses tiny step counts. In the order the slow test runs them: experiments last, they move HEAD's
# workspace.
RUN: dict[str, str | None] = {
    "rlvr check": None,
    "rlvr summary": None,
    "rlvr diff grpo dr_grpo": "rlvr diff grpo dapo",
    "rlvr diff grpo dr_grpo --json": "rlvr diff grpo dapo --json",
    "rlvr provenance reports/figures/passk-curves.png": None,
    "rlvr provenance reports/figures/passk-curves.png --json": None,
    "dvc plots show": None,
    "rlvr ui": "SERVER",
    "rlvr starts": None,
    "rlvr plan": None,
    "dvc metrics show": None,
    "dvc dag grpo@dapo": None,
    "dvc dag --mermaid": None,
    "dvc metrics diff": None,
    "dvc exp run --dry --allow-missing": None,
    "dvc exp run -S sft.single_digit.epochs=100": "dvc exp run -S sft.single_digit.epochs=2",
    "dvc exp diff": None,
    r"dvc exp show --only-changed --drop '^[^:]*/[^:]*$|^params\.yaml$'": None,
    "dvc exp run -S '++variants.grpo.lr=4e-4'": None,
    "dvc exp show --drop '.*' --keep 'Experiment|rev|^reports/headline/grpo-(grpo|dr_grpo).json:acc_end$|"
    "variants.grpo.lr' --csv | column -s, -t": "dvc exp show --drop '.*' --keep "
    "'Experiment|rev|^reports/headline/grpo-(grpo|dapo).json:acc_end$|variants.grpo.lr' "
    "--csv | column -s, -t",
    "dvc exp show --drop '.*' --keep 'Experiment|rev|(params.yaml:)?sft.single_digit.epochs|"
    "^reports/headline/sft-single_digit.json:' --csv | column -s, -t": None,
    "dvc exp run --queue -S '++variants.grpo.beta=0,0.1' -S '++variants.grpo.steps=50,100'": "dvc exp run "
    "--queue -S '++variants.grpo.beta=0,0.1' -S '++variants.grpo.steps=1,2'",
    "RLVR_THREADS=1 dvc queue start -j 2": None,
    "dvc queue status": "QUEUE",
    "rlvr sweep-report": None,
}
MARK = re.compile(r"<!-- (tested in (\S+)[^>]*|not run by the tests: [^>]+) -->\s*\n```(?:bash|sh)\n")


def _strip_comment(line: str) -> str:
    """The command without its trailing `# ...` comment (a # inside quotes is kept)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def shell_commands(text: str) -> list[tuple[str, str | None]]:
    """(command, marker) for every command of every ```bash block; continuation lines joined."""
    out = []
    for m in re.finditer(r"(<!-- [^>]* -->\s*\n)?```(?:bash|sh)\n(.*?)```", text, re.S):
        marker = MARK.match(m.group(0)) if m.group(1) else None
        joined = re.sub(r"\\\n\s*", "", m.group(2))
        for line in joined.splitlines():
            cmd = re.sub(r"\s+", " ", _strip_comment(line)).strip()
            if cmd:
                out.append((cmd, marker.group(1) if marker else None))
    return out


def documented() -> list[tuple[Path, str, str | None]]:
    return [(doc, cmd, mark) for doc in DOCS for cmd, mark in shell_commands(doc.read_text())]


def test_comments_and_continuations_are_read_as_the_shell_would():
    text = "```bash\nrlvr diff a b   # two variants\ndvc exp show --keep 'x#y' \\\n    --csv  # cols\n```\n"
    assert shell_commands(text) == [("rlvr diff a b", None), ("dvc exp show --keep 'x#y' --csv", None)]
    marked = "<!-- not run by the tests: needs S3 -->\n```bash\ndvc push\n```\n"
    assert shell_commands(marked) == [("dvc push", "not run by the tests: needs S3")]


def test_every_documented_command_is_run_by_a_test_or_says_why_not():
    unclassified = [
        f"{doc.relative_to(ROOT)}: {cmd}"
        for doc, cmd, mark in documented()
        if mark is None and cmd not in RUN
    ]
    assert not unclassified, "add each to tests/test_docs.py RUN, or mark its block:\n" + "\n".join(
        unclassified
    )
    for doc, _, mark in documented():
        if mark and mark.startswith("tested in "):
            assert (ROOT / mark.split()[2]).is_file(), f"{doc.name}: {mark} names no file that runs it"
    unused = set(RUN) - {cmd for _, cmd, _ in documented()}
    assert not unused, f"RUN lists commands no doc shows: {sorted(unused)}"


def sh(cmd: str, cwd: Path, env: dict, timeout: int = 600) -> str:
    """Run `cmd` and return what it printed. Its output goes to a file, not a pipe: `dvc queue
    start` leaves daemons that inherit its stdout, and a pipe would wait for them to end."""
    with tempfile.TemporaryFile("w+") as log:
        rc = subprocess.run(
            cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, shell=True, timeout=timeout
        )
        log.seek(0)
        out = log.read()
    assert rc.returncode == 0, f"{cmd} failed ({rc.returncode}):\n{out[-6000:]}"
    return out


def _serve_and_fetch(cmd: str, cwd: Path, env: dict) -> str:
    """Start a server command, wait for the URL it prints, fetch it, stop the server."""
    proc = subprocess.Popen(
        f"exec {cmd} --port 5077",
        cwd=cwd,
        env=env,
        shell=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group: stopping it stops the MLflow server it started
        preexec_fn=ctrl_c_as_at_a_terminal,
    )
    seen = ""
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline().decode()
            seen += line
            url = re.search(r"http://127\.0\.0\.1:5077\S*", seen)
            if url:
                for _ in range(60):
                    try:
                        return urllib.request.urlopen(url.group(0).split("#")[0], timeout=5).read().decode()
                    except OSError:
                        time.sleep(1)
            if proc.poll() is not None:
                break
        raise AssertionError(f"{cmd}: no page served; it printed:\n{seen}")
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C: rlvr ui stops its server and exits
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _wait_for_the_queue(status_cmd: str, d: Path, env: dict, deadline_s: float = 1200) -> str:
    """Poll the queue's status until nothing is Queued or Running; fail with it past the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        status = sh(status_cmd, d, env)
        if not re.search(r"\b(Queued|Running)\b", status):
            return status
        assert time.monotonic() < end, f"the queue still runs after {deadline_s:.0f} s:\n{status}"
        time.sleep(2)


@pytest.mark.slow
def test_every_runnable_command_runs_on_the_tiny_pipeline(tmp_path):
    d = tmp_path / "repo"
    d.mkdir()
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(d),
        "RLVR_THREADS": "1",
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    tiny_checkout(d, env)
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm init", d, env)
    sh("dvc repro -q", d, env)
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm results", d, env)
    for documented_cmd, tiny in RUN.items():
        cmd = tiny or documented_cmd
        if tiny == "SERVER":
            assert "<" in _serve_and_fetch(documented_cmd, d, env)  # an HTML page
        elif tiny == "QUEUE":  # "until none is Queued or Running"
            try:
                status = _wait_for_the_queue(documented_cmd, d, env)
            finally:
                sh("dvc queue stop --kill", d, env)  # no worker outlives the test
            assert "Failed" not in status, status
        else:
            out = sh(cmd, d, env)
            if cmd.startswith("rlvr summary"):
                assert max(map(len, out.splitlines())) <= 100
    assert (d / "reports/sweep/sweep.md").read_text().count("\n|") >= 5  # header, rule, 4 grid points


def test_the_knob_table_has_a_row_for_every_grpo_setting_and_every_choice():
    """docs/variants.md names each GRPOConfig field, and each advantage, ratio and aggregation value,
    in TRL and verl: a new knob without its row fails here."""
    import dataclasses

    from rlvr.configs import ADVANTAGES, AGGREGATIONS, RATIOS, GRPOConfig

    section = (ROOT / "docs/variants.md").read_text().split("## Every knob, and its name elsewhere", 1)[1]
    first_cells = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| `")]
    named = {name.strip(" `") for cell in first_cells for name in cell.split(",")}
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    values = {
        f"{k}: {v}"
        for k, vs in (("advantage", ADVANTAGES), ("ratio", RATIOS), ("aggregation", AGGREGATIONS))
        for v in vs
    }
    assert fields | values <= named, sorted((fields | values) - named)
    assert all(line.count("|") == 5 for line in section.splitlines() if line.startswith("| `"))  # 4 columns


def test_the_documented_diff_output_is_what_the_code_prints_on_the_committed_results():
    """docs/comparing.md shows `rlvr diff grpo dr_grpo` on the committed results; after a pipeline
    rerun that moves them, regenerate the block (`rlvr diff grpo dr_grpo`) with the results."""
    text = (ROOT / "docs/comparing.md").read_text()
    block = text.split("<!-- output of: rlvr diff grpo dr_grpo -->\n```text\n", 1)[1].split("\n```", 1)[0]
    out = subprocess.run(
        [sys.executable, "-m", "rlvr", "diff", "grpo", "dr_grpo"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert (out.stdout + out.stderr).rstrip("\n") == block
