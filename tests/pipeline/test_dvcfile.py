"""dvc.yaml is generated, and honest: every stage depends on the code it runs and the params it reads."""

import re
import subprocess
from pathlib import PurePosixPath

import pytest
import yaml
from conftest import ROOT, at_head

from rlvr.io.params import read_yaml
from rlvr.pipeline import dvcfile
from rlvr.pipeline.records import headline_path, record_path
from rlvr.pipeline.specs import STAGES


def committed() -> dict:
    """dvc.yaml as the generator writes it (that the committed file is this: `rlvr verify`)."""
    return yaml.safe_load(dvcfile.render())


def test_every_stage_lists_every_module_it_reaches():
    assert dvcfile.missing_code_deps(committed()) == []


def test_removing_an_import_from_dvc_yaml_is_caught():
    doc = committed()
    deps = doc["stages"]["grpo"]["do"]["deps"]
    deps.remove("rlvr/tasks.py")  # the grpo stage reads its problems through rlvr.tasks
    assert dvcfile.missing_code_deps(doc) == [("grpo", "rlvr/tasks.py")]


def test_imports_inside_functions_count(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text(
        "import os\n\ndef f():\n    from rlvr.tasks import split\n    from rlvr.pipeline import "
        "paths\n    return split\n"
    )
    assert dvcfile._imports(src, "rlvr.mod") == {"rlvr.tasks", "rlvr.pipeline", "rlvr.pipeline.paths"}


def test_grpo_stage_reaches_the_prompt_encoding():
    """The defect this layer fixes: grpo@* listed grpo.py, model.py, verifiers.py and missed the
    modules that encode its prompts."""
    deps = dvcfile.code_deps("grpo")
    for f in (
        "rlvr/tasks.py",
        "rlvr/tokenizer.py",
        "rlvr/io/params.py",
        "rlvr/rollout.py",
        "rlvr/pipeline/stages/grpo.py",
    ):
        assert f in deps


def test_stage_functions_live_only_under_stages():
    out = subprocess.run(
        ["git", "grep", "-n", "def run_", "--", "rlvr/"], cwd=ROOT, capture_output=True, text=True
    )
    runners = ("rlvr/pipeline/", "rlvr/tools/")  # what DVC runs, and what a person runs
    assert [line for line in out.stdout.splitlines() if not line.startswith(runners)] == []


def test_every_stage_is_in_dvc_yaml():
    assert list(committed()["stages"]) == list(STAGES)


@pytest.mark.parametrize("name", ["params.yaml", "dvc.yaml", "dvc.lock"])
def test_dvc_reads_our_yaml_with_the_c_parser_and_it_reads_what_pure_python_reads(name):
    """ruamel.yaml.clib is installed (a pinned dependency): DVC's many reads of dvc.lock per stage
    take a quarter of the time. Both parsers, with ruamel's YAML 1.2 resolver, give the same data."""
    from ruamel.yaml import YAML
    from ruamel.yaml.main import CParser

    fast = YAML(typ="safe")
    assert CParser is not None and fast.Parser is CParser
    text = (at_head(name) if name == "dvc.lock" else ROOT / name).read_text()
    assert fast.load(text) == YAML(typ="safe", pure=True).load(text)


# ------------------------------------------------------------------ the stage graph DVC sees


def _resolve(text: str, raw: dict, key: str | None = None, item: dict | None = None) -> str:
    """A dvc.yaml string with DVC's templating done: ${key}, ${item.x} and params.yaml's ${a.b}."""

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name == "key":
            return key
        node = item if name.startswith("item.") else raw
        for part in name.removeprefix("item.").split("."):
            node = node[part]
        return str(node)

    return re.sub(r"\$\{([^}]+)\}", value, text)


def stage_graph(doc: dict, raw: dict) -> dict[str, dict]:
    """Every stage instance of a dvc.yaml as DVC expands it: name -> {"params", "deps", "outs"}
    (outs with their props, metrics among them)."""
    graph = {}
    for name, entry in doc["stages"].items():
        foreach = entry.get("foreach")
        instances = raw[foreach[2:-1]].items() if foreach else [(None, None)]
        for key, item in instances:
            body = entry.get("do", entry)
            res = lambda t: _resolve(t, raw, key, item)  # noqa: E731
            outs = {}
            for out in body.get("outs", []) + body.get("metrics", []):
                path, props = next(iter(out.items())) if isinstance(out, dict) else (out, {})
                outs[res(path)] = props
            graph[f"{name}@{key}" if key else name] = {
                "params": [res(p) for p in body.get("params", [])],
                "deps": [res(d) for d in body.get("deps", [])],
                "outs": outs,
            }
    return graph


def _overlap(a: str, b: str) -> bool:
    """One path is the other or lies inside it (by components: data/grpo/a_grpo is not in data/grpo/grpo)."""
    pa, pb = PurePosixPath(a).parts, PurePosixPath(b).parts
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def rerun_by(graph: dict[str, dict], key: str) -> set[str]:
    """The stages a change to params.yaml key `key` reruns: those declaring it (or a table above or
    below it), then every stage that depends on an output of one of those, and so on."""
    hit = {
        s
        for s, e in graph.items()
        if any(key == p or key.startswith(p + ".") or p.startswith(key + ".") for p in e["params"])
    }
    frontier = set(hit)
    while frontier:
        outs = [o for s in frontier for o in graph[s]["outs"]]
        frontier = {
            s
            for s, e in graph.items()
            if s not in hit and any(_overlap(d, o) for d in e["deps"] for o in outs)
        }
        hit |= frontier
    return hit


def chapter_b_stages(raw: dict) -> set[str]:
    """The stages of chapter B's task alone: its warm-ups, SFT runs and variants, and pass@k."""
    task_b = raw["sft"][raw["passk"]["sft"]]["task"]
    return (
        {f"sft@{r}" for r, e in raw["sft"].items() if e["task"] == task_b}
        | {f"warmup@{w}" for w, e in raw["warmups"].items() if raw["sft"][e["run"]]["task"] == task_b}
        | {f"grpo@{v}" for v, e in raw["variants"].items() if e["task"] == task_b}
        | {"passk"}
    )


DATA_KEYS = ("task", "noise", "repeats")  # read by `data`, whose other runs' rows come out byte-identical


def _settings(raw: dict, run: str) -> set[str]:
    """Every setting of SFT run `run`: those it states and those it takes from `sft_defaults`."""
    return set(raw["sft_defaults"]) | set(raw["sft"][run])


@pytest.mark.parametrize(
    "key", sorted(_settings(read_yaml(ROOT / "params.yaml"), "single_digit") - set(DATA_KEYS))
)
def test_a_chapter_a_sft_param_reruns_no_chapter_b_stage(key):
    """`dvc exp run -S sft.single_digit.<key>=...` reruns chapter A's SFT and what trains from it,
    never a stage of chapter B (pass@k reads chapter B's checkpoints only). The `data` stage's keys
    rerun it, and it rewrites every run's rows, chapter B's byte for byte: the slow pipeline test
    checks that DVC then leaves chapter B cached."""
    raw = read_yaml(ROOT / "params.yaml")
    rerun = rerun_by(stage_graph(committed(), raw), f"sft.single_digit.{key}")
    assert "sft@single_digit" in rerun and "grpo@a_grpo" in rerun and "hack" in rerun
    assert rerun & chapter_b_stages(raw) == set()


def test_a_stage_reading_every_checkpoint_folder_would_be_caught():
    """The graph test sees a dep on the folder of every variant's checkpoints (chapter A's too)."""
    raw = read_yaml(ROOT / "params.yaml")
    doc = committed()
    deps = doc["stages"]["passk"]["deps"]
    doc["stages"]["passk"]["deps"] = [d for d in deps if not d.startswith("data/grpo/")] + ["data/grpo"]
    assert "passk" in rerun_by(stage_graph(doc, raw), "sft.single_digit.lr")


def test_dvc_metrics_are_the_headlines_and_every_results_file_is_an_output_git_keeps():
    """DVC shows a handful of numbers per stage (reports/headline/); the results with their per-seed
    values and intervals stay outputs that git keeps (not cached), beside their run records."""
    doc = committed()
    declared = [next(iter(m)) for e in doc["stages"].values() for m in e.get("do", e).get("metrics", [])]
    assert declared and all(m.startswith("reports/headline/") for m in declared)
    for name, e in stage_graph(doc, read_yaml(ROOT / "params.yaml")).items():
        outs = {o: props for o, props in e["outs"].items() if not o.startswith("reports/headline/")}
        results = [o for o in outs if str(record_path(o)) in outs and str(record_path(o)) != o]
        headlines = {o for o in e["outs"] if o.startswith("reports/headline/")}
        shown = not name.startswith(("worked", "warmup@"))  # closed forms and warm-ups: nothing to compare
        assert headlines == ({str(headline_path(r)) for r in results} if shown else set()), name
        assert all(outs[r] == outs[str(record_path(r))] == {"cache": False} for r in results), name


def test_the_report_depends_on_every_run_record_its_provenance_names():
    """A stage rerun whose outputs come out byte for byte the same (a refactor) still writes a new
    run record (commit, MLflow run); the report embeds those in its figures, so it must rerun too."""
    graph = stage_graph(committed(), read_yaml(ROOT / "params.yaml"))
    records = {
        out
        for name, e in graph.items()
        if name != "report"
        for out in e["outs"]
        if out.startswith("reports/runs/")
    }
    assert len(records) == len(graph) - 3  # all but check's, data's and the report's own
    assert records <= set(graph["report"]["deps"])


def test_every_output_git_keeps_is_not_ignored_by_git():
    """An output DVC does not cache (`cache: false`) is git's to keep: a fresh clone and the
    workspace `dvc exp run` copies have it only if git does. The guard's marker, every stage's
    first dependency, was once ignored, so no experiment's copy had it."""
    graph = stage_graph(committed(), read_yaml(ROOT / "params.yaml"))
    kept = sorted(
        {o for e in graph.values() for o, props in e["outs"].items() if props.get("cache") is False}
    )
    assert "data/params.checked" in kept
    out = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=ROOT,
        input="\n".join(kept),
        capture_output=True,
        text=True,
    )
    assert out.stdout.split() == []


def headline_names() -> set[str]:
    """Every name a headline of the pipeline uses: the HEADLINE of each stage with DVC metrics."""
    import importlib

    shown = [n for n, e in committed()["stages"].items() if e.get("do", e).get("metrics")]
    assert "sft" in shown and "warmup" not in shown, shown
    return {name for n in shown for name in importlib.import_module(f"rlvr.pipeline.stages.{n}").HEADLINE}


def metrics_show_width(paths: list[str], names: set[str]) -> int:
    """The width of `dvc metrics show`'s table of `paths` with a column per name: tabulate's plain
    table, called as DVC calls it, every cell a rate or a loss rounded to 5 places (0.12345)."""
    from tabulate import tabulate

    rows = [[path, *["0.12345"] * len(names)] for path in paths]
    table = tabulate(rows, ["Path", *sorted(names)], tablefmt="plain", disable_numparse=True, missingval="-")
    return max(map(len, table.splitlines()))


def test_every_headline_name_is_in_the_vocabulary_and_dvc_metrics_show_fits_200_columns():
    """`dvc metrics show` draws one column per headline name any stage uses, so a stage with a
    wide headline of its own (pass@k per variant, every verdict count) widens everyone's table: the
    names come from one short vocabulary, and all of them with the longest path of both profiles
    fit a 200-column terminal."""
    from rlvr.io.params import load_params
    from rlvr.pipeline import specs
    from rlvr.pipeline.records import NAMES

    names = headline_names()
    assert names <= set(NAMES), names - set(NAMES)
    paths = []
    for profile in ("", "powered/"):
        p = load_params(ROOT / profile / "params.yaml")
        for s in STAGES.values():
            for key in [None] if s.foreach is None else list(getattr(p, s.foreach)):
                paths += [profile + str(h) for h in specs.headlines(s, specs.instance_paths(s.name, key, p))]
    assert metrics_show_width(paths, set(NAMES)) <= 200


def test_every_committed_headline_value_is_a_number():
    """`dvc metrics diff` subtracts each metric, so a string (or a list, which `dvc exp show` drops)
    in a committed headline would be a column nobody can compare."""
    import json

    def leaves(node, key=""):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from leaves(v, f"{key}.{k}" if key else k)
        else:
            yield key, node

    files = sorted((ROOT / "reports/headline").glob("*.json"))
    assert files
    bad = [
        (f.name, k, v)
        for f in files
        for k, v in leaves(json.loads(f.read_text()))
        if isinstance(v, bool) or not isinstance(v, int | float)
    ]
    assert not bad, bad


def test_no_committed_run_record_names_a_folder_of_the_machine_that_made_it():
    """Run records say which store the runs went to relative to the checkout (`sqlite:///mlflow.db`),
    never the committer's absolute path."""
    import json

    records = sorted((ROOT / "reports/runs").glob("*.json"))
    assert records
    uris = {r.name: json.loads(r.read_text()).get("made", {}).get("tracking_uri", "") for r in records}
    assert not {n: u for n, u in uris.items() if u.startswith("sqlite:////")}, uris


def test_every_trained_policy_is_a_dvc_model_artifact_that_a_stage_writes():
    """dvc.yaml's `artifacts:` (what DVC's model registry and `Repo.artifacts.read()` list) name one
    model per SFT run and per GRPO variant, each a folder a stage of the pipeline writes."""
    from dvc.repo import Repo

    params = read_yaml(ROOT / "params.yaml")
    with Repo(str(ROOT)) as repo:
        every = repo.artifacts.read()  # {dvc.yaml path: its artifacts}: the pipeline's and each profile's
    declared = every["dvc.yaml"]
    assert set(declared) == {f"sft-{r}" for r in params["sft"]} | {f"grpo-{v}" for v in params["variants"]}
    outs = {o for e in stage_graph(committed(), params).values() for o in e["outs"]}
    for name, artifact in declared.items():
        assert artifact.type == "model" and artifact.path in outs, name


def test_the_powered_profile_is_the_same_pipeline_run_in_its_folder_with_the_repositorys_code():
    """powered/dvc.yaml is what `rlvr pipeline --write --profile powered` writes: the same stages,
    its data paths its own folder's, every code dep the repository's (../rlvr/...), none missing."""
    folder = dvcfile.profile_folder("powered")
    doc = yaml.safe_load(dvcfile.render(folder / "params.yaml"))
    assert (folder / "dvc.yaml").read_text() == dvcfile.render(folder / "params.yaml")
    assert list(doc["stages"]) == list(committed()["stages"])
    deps = doc["stages"]["grpo"]["do"]["deps"]
    assert "../rlvr/tasks.py" in deps and "rlvr/tasks.py" not in deps
    assert "data/params.checked" in doc["stages"]["data"]["deps"]  # its own folder's marker
    assert dvcfile.missing_code_deps(doc, "..") == []
    deps.remove("../rlvr/tasks.py")
    assert dvcfile.missing_code_deps(doc, "..") == [("grpo", "rlvr/tasks.py")]


def test_an_unknown_profile_is_one_line_naming_the_folder(capsys):
    from rlvr.cli import main

    assert main(["pipeline", "--profile", "nonesuch"]) != 0
    err = capsys.readouterr().err.strip()
    assert "nonesuch/params.yaml" in err and len(err.splitlines()) == 1
