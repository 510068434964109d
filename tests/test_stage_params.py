"""A stage's params hash names its checkpoints, and its MLflow params are the columns runs are
compared by: neither may move when the code that computes them changes, or checkpoints already in
users' caches stop loading and old runs stop lining up with new ones.

`golden/params.yaml` is params.yaml as committed when `golden/stage-params.json` was recorded from
it: for every stage instance, its params hash, the params.yaml keys it declares (what DVC reruns it
for) and what its MLflow run logs (each data child run's too). The copy keeps the record valid when
params.yaml is tuned later. Record it again only for a change that means to move them:
`python tests/test_stage_params.py > tests/golden/stage-params.json`.
"""

import json
from pathlib import Path

from rlvr.pipeline.config import load_params
from rlvr.pipeline.settings import data_run_settings, effective_params
from rlvr.pipeline.specs import STAGES, config_hash, instance_params

GOLDEN = Path(__file__).resolve().parent / "golden"


def record(params_file: Path = GOLDEN / "params.yaml") -> dict:
    """{instance: {"hash", "params", "logged"}} for every stage instance, and {"logged"} for each
    data child run (`data/<sft run>`), computed by the code as it is."""
    params = load_params(params_file)
    out = {}
    for s in STAGES.values():
        for key in [None] if s.foreach is None else list(params.raw[s.foreach]):
            out[s.name if key is None else f"{s.name}@{key}"] = {
                "hash": config_hash(s.name, key, params),
                "params": sorted(instance_params(s.name, key, params)),
                "logged": effective_params(s.name, key, params),
            }
    for run in params.raw["sft"]:
        out[f"data/{run}"] = {"logged": data_run_settings(run, params)}
    return out


def _exact(value) -> str:
    """JSON text: tells 0 from 0.0 (MLflow logs them as different strings) where == would not."""
    return json.dumps(value, sort_keys=True)


def test_every_instance_keeps_its_hash_declared_keys_and_logged_params():
    golden = json.loads((GOLDEN / "stage-params.json").read_text())
    now = record()
    assert sorted(now) == sorted(golden)
    for name, entry in golden.items():
        for field, value in entry.items():
            assert _exact(now[name][field]) == _exact(value), (name, field)


def test_the_hashes_checkpoints_carry_are_pinned():
    """A few, written out: a changed record file cannot move them unnoticed."""
    hashes = {name: entry["hash"] for name, entry in record().items() if "hash" in entry}
    assert hashes["sft@two_digit"] == "eac8137952d7"
    assert hashes["warmup@single_digit"] == "75a51e637170"
    assert hashes["grpo@no_kl"] == "42fb9f350693"
    assert hashes["grpo@grpo"] == "81e542fa0dfb"
    assert hashes["hack"] == "38f950cb73b8"
    assert hashes["passk"] == "3cdb8e350308"


if __name__ == "__main__":
    print(json.dumps(record(), indent=1, sort_keys=True))
