"""The tiny pipeline on a real two-node Ray cluster gives the local pool's bytes.

The cluster (a head node and one worker node, one CPU each) runs inside a network namespace of the
test's own with only loopback up (`unshare -n`, as root), so every Ray port is on 127.0.0.1 and
nothing is sent to any other address, and in a PID namespace of its own, so that stopping it stops
only its processes and none outlives the test; where that is refused the test is skipped with the
reason.
`dvc repro` then runs with RAY_ADDRESS set, every chain a Ray task, and every output it writes
(checkpoints, metrics, curves, counts) is byte-identical to the pool's. A second run kills the
worker node mid-stage: the stage finishes with the same bytes or stops in one line, and no Ray
process is left.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import sh, tiny_checkout

pytestmark = pytest.mark.slow  # integration: a Ray cluster and dvc repro

ray = pytest.importorskip("ray", reason="Ray is the optional extra: pip install -e '.[cluster]'")

BIN = Path(sys.executable).parent
PORT = 6390

# In the namespace: loopback up, a head node and a worker node on 127.0.0.1 (one CPU each, no
# dashboard, no usage stats), then the command, then every Ray process of this temp folder stopped.
CLUSTER = """
set -u
ip link set lo up
export RAY_USAGE_STATS_ENABLED=0 RAY_ADDRESS=127.0.0.1:{port}
ray start --head --node-ip-address=127.0.0.1 --port={port} --num-cpus=1 --temp-dir={temp} \
    --include-dashboard=false --disable-usage-stats >{temp}/head.log 2>&1 || exit 90
head=$(pgrep -f "raylet.*{temp}" | tr '\\n' ' ')
ray start --address=127.0.0.1:{port} --node-ip-address=127.0.0.1 --num-cpus=1 \
    >{temp}/worker.log 2>&1 || exit 91
worker=$(pgrep -f "raylet.*{temp}" | tr ' ' '\\n' | grep -v -w -F "$(echo $head | tr ' ' '\\n')" | head -1)
echo "$worker" >{temp}/worker.pid
( {command} )
code=$?
ray stop --force >/dev/null 2>&1
pgrep -f "raylet|gcs_server|ray::" >{temp}/left.pids
exit $code
"""


def in_namespace(command: str, cwd: Path, env: dict, temp: Path) -> subprocess.CompletedProcess:
    script = temp / "cluster.sh"  # a file, not `bash -c`: its text in a command line would match pgrep
    script.write_text(CLUSTER.format(port=PORT, temp=temp, command=command))
    cmd = ["unshare", "-n", "-p", "-f", "--mount-proc", "bash", str(script)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1500)


def outputs(d: Path) -> dict[str, str]:
    """Every output's md5 as dvc.lock records it (folders: DVC's hash of their listing), less what
    names a run or a time: run records and figures (their embedded provenance), and the report."""
    lock = yaml.safe_load((d / "dvc.lock").read_text())["stages"]
    return {
        out["path"]: out["md5"]
        for name, stage in lock.items()
        if name not in ("check", "report")
        for out in stage.get("outs", [])
        if not out["path"].startswith("reports/runs/") and not out["path"].endswith((".png", ".svg"))
    }


@pytest.fixture(scope="module")
def pool_and_cluster(tmp_path_factory):
    """The tiny pipeline repro'd twice from one checkout: on the local pool, and on the cluster."""
    probe = ["unshare", "-n", "-p", "-f", "--mount-proc", "true"]
    if os.geteuid() != 0 or subprocess.run(probe, capture_output=True).returncode:
        pytest.skip("network and PID namespaces of the test's own need root (unshare -n -p)")
    runs = {}
    for kind in ("pool", "cluster"):
        d = tmp_path_factory.mktemp(kind)
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(d)}
        env.pop("MLFLOW_TRACKING_URI", None)
        env.pop("RAY_ADDRESS", None)
        tiny_checkout(d, env)
        sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm init", d, env)
        runs[kind] = (d, env)
    d, env = runs["pool"]
    sh("dvc repro", d, env)
    d, env = runs["cluster"]
    with tempfile.TemporaryDirectory(prefix="rlvr-ray-", dir="/tmp") as temp:  # a short path: Ray's sockets
        done = in_namespace("dvc repro", d, env, Path(temp))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return runs, done.stdout + done.stderr


def test_a_cluster_repro_gives_the_pools_bytes(pool_and_cluster):
    runs, log = pool_and_cluster
    pool, cluster = outputs(runs["pool"][0]), outputs(runs["cluster"][0])
    assert len(pool) > 20 and pool == cluster
    check = yaml.safe_load((runs["cluster"][0] / "dvc.lock").read_text())["stages"]
    assert "sft@two_digit" in check and "Running stage 'grpo@grpo_end'" in log


def test_a_worker_node_killed_mid_stage_loses_nothing(pool_and_cluster):
    """The worker node's raylet is killed once the SFT stage's chains are on the cluster: Ray runs
    its lost tasks again on the head node and the stage's bytes are the pool's; or the stage stops
    in one line. Either way, no Ray process of the cluster is left."""
    runs, _ = pool_and_cluster
    d, env = runs["cluster"]
    kill = (  # once both nodes run a chain (one CPU each, two chains), the worker node's raylet dies
        "(dvc repro -f -s sft@two_digit >repro.log 2>&1; echo $? >repro.code) & "
        "for i in $(seq 1200); do [ $(pgrep -f 'ray::_task' | wc -l) -ge 2 ] && break; sleep 0.05; done; "
        "pgrep -f 'ray::_task' | wc -l >tasks.seen; kill -9 $(cat {temp}/worker.pid); "
        "wait; exit $(cat repro.code)"
    )
    with tempfile.TemporaryDirectory(prefix="rlvr-ray-", dir="/tmp") as temp:
        done = in_namespace(kill.format(temp=temp), d, env, Path(temp))
        stopped = (Path(temp) / "left.pids").read_text().split()  # in the namespace, after `ray stop`
        left = subprocess.run(["pgrep", "-f", temp], capture_output=True, text=True).stdout.split()
    log = (d / "repro.log").read_text()
    assert stopped == [] and left == [], f"Ray processes left: {stopped} in the namespace, {left} outside"
    assert "Running stage 'sft@two_digit'" in log and int((d / "tasks.seen").read_text()) >= 2
    if done.returncode == 0:
        assert outputs(d) == outputs(runs["pool"][0])
    else:
        errors = [line for line in log.splitlines() if line.startswith("rlvr:")]
        assert len(errors) == 1 and "Traceback" not in log, log[-3000:]
        assert sh("git status --porcelain reports/metrics", d, env) == ""  # nothing lost


def test_an_unreachable_cluster_stops_the_repro_at_check_in_one_line(pool_and_cluster):
    """RAY_ADDRESS naming a port where no cluster listens, with a stage to rerun (worked's seed
    changed): `dvc repro` stops at `check` in one line, and that stage's outputs are untouched."""
    runs, _ = pool_and_cluster
    d, env = runs["pool"]
    metrics = d / "reports/metrics/worked.json"
    before = metrics.read_bytes()
    raw = yaml.safe_load((d / "params.yaml").read_text())
    raw["worked"]["seed"] += 1
    (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        cmd = ["unshare", "-n", "bash", "-c", "ip link set lo up; RAY_ADDRESS=127.0.0.1:9 dvc repro"]
        done = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=600)
    finally:
        sh("git checkout params.yaml", d, env)
    errors = [line for line in done.stderr.splitlines() if line.startswith("rlvr:")]
    assert done.returncode != 0 and len(errors) == 1, done.stderr[-3000:]
    assert "RAY_ADDRESS=127.0.0.1:9: no Ray cluster answers there" in errors[0]
    assert "Running stage 'worked'" not in done.stdout and metrics.read_bytes() == before
