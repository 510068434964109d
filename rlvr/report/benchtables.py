"""The report's benchmark section, from reports/benchmarks.json (`rlvr bench`, measured on demand,
not by the pipeline): each figure beside its target, the peers at their best, the pipeline against
its compute floor, the step-cost scaling and where a GRPO seed's time goes. A benchmark not in the
file is left out; a peer that was not measured says why. Reruns of the whole pipeline are not
benchmarks: rlvr.report.reruns shows them.
"""

from __future__ import annotations

from rlvr.report.document import Heading, Para, Table


def _get(d, *keys):
    """d[k1][k2]..., or None where a key is missing (a benchmark not run)."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


NOT_ALONE = "not measured alone: rerun `rlvr bench --peer trl`"  # a peer figure from an older method


def _peer_ratio_specs(
    bench: dict, name: str, keys: tuple[str, ...], note_key: str, label: str, target
) -> list[tuple]:
    """bench_rows specs for one workload's peer ratios, one per prompt form (`label` has a {form}
    slot), from its fair comparisons at bench[name][*keys]; when there are none, one row saying
    why: the peer's note ("not installed", "not run ..."), or NOT_ALONE for figures measured any
    other way (inside a peer's loop, say), which are never shown."""
    if _get(bench, name) is None:
        return []
    records = _get(bench, name, *keys)
    if isinstance(records, dict) and records:
        return [
            (label.format(form=f", {form} prompts"), r["ratio"], "x", target, ">=")
            for form, r in records.items()
        ]
    note = _get(bench, name, note_key)
    return [(label.format(form=""), note if isinstance(note, str) else NOT_ALONE, "", None, ">=")]


def fair_bench(bench: dict | None) -> dict | None:
    """reports/benchmarks.json as the report shows it: a scaling record's TRL seconds only when they
    were measured alone (its `peer_method` names how), else dropped and the note says NOT_ALONE."""
    scaling = (bench or {}).get("scaling")
    if not scaling or "peer_method" in scaling or not any(r.get("trl_seconds") for r in scaling["rows"]):
        return bench
    rows = [{**r, "trl_seconds": None} for r in scaling["rows"]]
    return {**bench, "scaling": {**scaling, "rows": rows, "trl": NOT_ALONE}}


def bench_rows(bench: dict) -> list[list]:
    """`rlvr bench` figures as table rows: benchmark, measured, target, whether the target is met.
    Benchmarks not in the file are left out; a target of None means none was set. A peer ratio
    (TRL, HF generate) comes only from a fair comparison (`peer_rows`: each side alone, at its best);
    one that was not measured so says why ("not installed", "not run ...", "not measured alone")."""
    get = lambda *keys: _get(bench, *keys)  # noqa: E731
    specs = [  # label, measured, unit, target, "<=" or ">="
        (
            "the compute floor: every stage in one warm process, no start-up, no DVC",
            get("pipeline", "floor_seconds"),
            "s",
            None,
            "<=",
        ),
        (
            "fresh clone's `dvc repro --force` over the floor (`rlvr bench --only pipeline`)",
            get("pipeline", "ratio"),
            "x",
            get("pipeline", "target_ratio"),
            "<=",
        ),
        (
            "GRPO matrix (all variants x seeds), wall",
            get("pipeline", "by_kind", "grpo", "wall_seconds"),
            "s",
            get("pipeline", "target_grpo_seconds"),
            "<=",
        ),
        (
            "sampling, 300 prompts x 64",
            get("sampling", "completions_per_second", "median"),
            "completions/s",
            get("sampling", "target_completions_per_second"),
            ">=",
        ),
        *_peer_ratio_specs(
            bench,
            "sampling",
            ("vs_hf_generate",),
            "hf_generate",
            "sampling{form}: ours / HF `generate` at its best, measured alone",
            get("sampling", "target_speedup_vs_hf_generate"),
        ),
        (
            "sampling: share of the fp32 GEMM limit",
            get("sampling", "share_of_gemm_limit"),
            "",
            get("sampling", "target_share_of_gemm_limit"),
            ">=",
        ),
        (
            "peak RSS while sampling",
            get("sampling", "peak_rss_mb"),
            "MB",
            get("sampling", "target_peak_rss_mb"),
            "<=",
        ),
    ]
    for beta in ("0.0", "0.04"):
        shown = "0" if beta == "0.0" else beta
        specs += [
            (
                f"GRPO step, beta = {shown}",
                get("grpo_step", f"beta_{beta}", "step_seconds", "median"),
                "s",
                get("grpo_step", "target_step_seconds", f"beta_{beta}"),
                "<=",
            ),
            *_peer_ratio_specs(
                bench,
                "grpo_step",
                (f"beta_{beta}", "vs_trl"),
                "trl",
                f"GRPO step, beta = {shown}{{form}}: TRL at its best / ours, measured alone",
                get("grpo_step", "target_speedup_vs_trl"),
            ),
            (
                f"GRPO step, beta = {shown}: share of the fp32 GEMM limit",
                get("grpo_step", f"beta_{beta}", "share_of_gemm_limit"),
                "",
                get("grpo_step", "target_share_of_gemm_limit"),
                ">=",
            ),
        ]
    for workload, name in (("grpo_step", "GRPO step, beta = 0"), ("sampling", "sampling")):
        specs += [
            (
                f"{name}, {variant} (`rlvr bench --only compiled`): share of the fp32 GEMM limit",
                get("compiled", workload, key, "share_of_gemm_limit"),
                "",
                get("compiled", workload, "target_share_of_gemm_limit"),
                ">=",
            )
            for key, variant in (("eager", "eager"), ("compiled, warm cache", "torch.compile, warm cache"))
        ] + [
            (
                f"{name} with torch.compile: first call, compiling into an empty cache",
                get("compiled", workload, "compiled, empty cache", "first_call_seconds"),
                "s",
                None,
                "<=",
            ),
        ]
    specs += [
        (
            "pass@k, one model (300 problems x 256, counts from the exact law)",
            get("passk_model", "seconds_per_model", "median"),
            "s",
            get("passk_model", "target_seconds"),
            "<=",
        ),
        (
            "pass@k bands' bootstrap (1000 x 300 problems x 64 k): largest difference from scipy's",
            get("bootstrap", "max_abs_difference"),
            "",
            get("bootstrap", "target_max_abs_difference"),
            "<=",
        ),
        (
            "the same bootstrap: peak memory, ours (scipy.stats.bootstrap's beside it in benchmarks.json)",
            get("bootstrap", "ours_peak_mib"),
            "MiB",
            get("bootstrap", "scipy_peak_mib"),
            "<=",
        ),
        ("SFT throughput", get("sft", "tokens_per_second", "median"), "tokens/s", None, ">="),
        (
            "two experiments back to back (`dvc exp run`, threads from params)",
            get("queue", "back_to_back_seconds"),
            "s",
            None,
            "<=",
        ),
        (
            "the same two queued, `dvc queue start -j 2`, RLVR_THREADS=1",
            get("queue", "queue_j2_seconds"),
            "s",
            get("queue", "back_to_back_seconds"),
            "<=",
        ),
        (
            "grpo@grpo's chains on the local pool (2 workers)",
            get("cluster", "pool", "chains_per_minute"),
            "chains/min",
            None,
            ">=",
        ),
        (
            "the same chains on a local two-node Ray cluster, same 2 cores (against the pool)",
            get("cluster", "ray", "chains_per_minute"),
            "chains/min",
            get("cluster", "pool", "chains_per_minute"),
            ">=",
        ),
    ]
    fmt = lambda v: f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"  # noqa: E731
    rows = []
    for label, value, unit, target, op in specs:
        if value is None:
            continue
        if isinstance(value, str):  # a peer that was not measured, and why
            rows.append([label, value, "–", "–"])
            continue
        met = (
            "–"
            if target is None
            else ("yes" if (value <= target if op == "<=" else value >= target) else "no")
        )
        rows.append(
            [
                label,
                f"{fmt(value)} {unit}".strip(),
                "–" if target is None else f"{op} {fmt(target)} {unit}".strip(),
                met,
            ]
        )
    return rows


PEERS = ("HF `generate`", "TRL GRPOTrainer")
KNOBS = {"prompts_per_call": "{} prompts a call", "generation_batch": "generation batch {}"}


def _peer_comparisons(bench: dict) -> list[tuple[str, str, dict]]:
    """(workload, peer, fair comparison) for every comparison `rlvr bench --peer trl` recorded
    (`rlvr.bench.fair.compare`), in the order the report lists them."""
    out = [
        (f"sampling, {_get(bench, 'sampling', 'completions'):,} completions, 4 tokens", PEERS[0], r)
        for r in (_get(bench, "sampling", "vs_hf_generate") or {}).values()
    ]
    step = _get(bench, "grpo_step") or {}
    for beta in ("0.0", "0.04"):
        workload = (
            f"GRPO step, {step.get('prompts')} prompts x G {step.get('group_size')}, "
            f"{step.get('response_tokens')} tokens, beta = {'0' if beta == '0.0' else beta}"
        )
        out += [(workload, PEERS[1], r) for r in (_get(step, f"beta_{beta}", "vs_trl") or {}).values()]
    return out


def _peer_figure(record: dict) -> str:
    """One side's figure in a comparison: a rate where the record has one, else seconds."""
    if "per_second" in record:
        return f"{record['per_second']:,}/s"
    return f"{record['seconds']['median']:.3g} s"


def peer_rows(bench: dict) -> list[list]:
    """The fair peer comparisons as table rows: workload, prompt form, ours, the peer at its best
    setting, every setting it was swept over, and how many times faster ours is."""
    rows = []
    for workload, peer, r in _peer_comparisons(bench):
        knob = KNOBS.get(r["knob"], r["knob"] + " {}")
        best = r["best"]
        rows.append(
            [
                workload,
                r["prompts"],
                _peer_figure(r["ours"]),
                f"{peer} {_peer_figure(best)} at {knob.format(best[r['knob']])}",
                " · ".join(f"{s[r['knob']]}: {_peer_figure(s)}" for s in r["sweep"]),
                f"{r['ratio']:.3g} x",
            ]
        )
    return rows


def peer_blocks(bench: dict) -> list:
    """The peers at their best, measured alone: how (one sentence, as recorded with the figures)
    and the comparisons; nothing when `rlvr bench --peer trl` recorded none."""
    comparisons = _peer_comparisons(bench)
    if not comparisons:
        return []
    return [
        Heading("Peers at their best, measured alone", 3, "peers"),
        Para(
            comparisons[0][2]["method"] + " Ours runs as the pipeline does (deterministic ops); "
            "chat prompts are the pipeline's template, bare ones the question alone (`37+48=`)."
        ),
        Table(
            ["workload", "prompts", "ours", "peer at its best", "peer's sweep", "ours faster by"],
            peer_rows(bench),
            "peers",
        ),
    ]


FLOOR_KINDS = {  # stage kind -> how the floor table names it, in pipeline order
    "check": "check (the guard)",
    "data": "data",
    "warmup": "SFT warm-ups",
    "sft": "SFT",
    "grpo": "GRPO, every variant",
    "passk": "pass@k",
    "hack": "hack",
    "worked": "worked examples",
    "report": "report",
}


def floor_rows(pipeline: dict) -> list[list]:
    """`rlvr bench --only pipeline` by stage kind, then in total: stages, wall, floor, their ratio."""
    ratio = lambda w, f: f"{w / f:.2f}" if f else "–"  # noqa: E731
    rows = [
        [
            FLOOR_KINDS.get(kind, kind),
            k["stages"],
            f"{k['wall_seconds']:.1f}",
            f"{k['floor_seconds']:.1f}",
            ratio(k["wall_seconds"], k["floor_seconds"]),
        ]
        for kind, k in sorted(
            pipeline["by_kind"].items(),
            key=lambda kv: list(FLOOR_KINDS).index(kv[0]) if kv[0] in FLOOR_KINDS else 99,
        )
    ]
    total = [
        "total",
        sum(k["stages"] for k in pipeline["by_kind"].values()),
        f"{pipeline['wall_seconds']:.1f}",
        f"{pipeline['floor_seconds']:.1f}",
        ratio(pipeline["wall_seconds"], pipeline["floor_seconds"]),
    ]
    return rows + [total]


def floor_blocks(bench: dict) -> list:
    """The pipeline against its compute floor, by stage kind; nothing when it was not measured."""
    pipeline = bench.get("pipeline") or {}
    if "by_kind" not in pipeline:
        return []
    return [
        Heading("The pipeline against its compute floor", 3, "floor"),
        Para(
            f"{pipeline['method']} Commit {pipeline['commit'][:10]}; target: wall / floor <= "
            f"{pipeline['target_ratio']} in total. Per stage: `reports/benchmarks.json` (`pipeline.stages`)."
        ),
        Table(["stages", "count", "wall, s", "floor, s", "wall / floor"], floor_rows(pipeline), "floor"),
        *back_to_back_blocks(pipeline),
    ]


def back_to_back_blocks(pipeline: dict) -> list:
    """`rlvr bench --only pipeline --against REV`: REV measured the same way just before, on the
    same machine; nothing when no commit was named."""
    before = pipeline.get("against")
    if not before:
        return []
    rows = [
        [
            f"`{run['commit'][:10]}`{note}",
            f"{run['wall_seconds']:.1f}",
            f"{run['floor_seconds']:.1f}",
            f"{run['ratio']:.2f}",
        ]
        for run, note in ((before, " (measured first)"), (pipeline, ""))
    ]
    return [
        Para(
            f"Back to back on one machine (`rlvr bench --only pipeline --against {before['commit'][:10]}`): "
            f"the named commit's fresh clone first, then this commit's, each against its own floor."
        ),
        Table(["commit", "wall, s", "floor, s", "wall / floor"], rows, "floor-back-to-back"),
    ]


def machine_line(bench: dict) -> str:
    """Where the benchmarks ran: the last run's CPU, cores, torch threads and load average; each
    benchmark that recorded another machine of its own (`measured_on`); and those that predate
    such records, whose machine the file does not say."""
    m = bench.get("machine", {})
    load = m.get("load_average_1min", {})
    parts = [
        m.get("cpu") or m.get("processor"),
        f"{m['cpu_count']} cores" if "cpu_count" in m else None,
        f"{m['threads']} torch threads" if "threads" in m else None,
        f"torch {m['torch']}" if "torch" in m else None,
        f"1-minute load {load['before']} before, {load['after']} after" if load else None,
    ]
    if not any(parts):
        return ""
    last = m.get("last_run") or []
    runs = {name: e for name, e in sorted(bench.items()) if name != "machine" and isinstance(e, dict)}
    elsewhere = [
        f"`{name}` on {e['measured_on']['cpu']}, {e['measured_on']['date']}"
        for name, e in runs.items()
        if "measured_on" in e and e["measured_on"]["cpu"] != m.get("cpu")
    ]
    unrecorded = [f"`{name}`" for name, e in runs.items() if "measured_on" not in e and name not in last]
    head = f"Last run ({', '.join(f'`{n}`' for n in last)}) on " if last else "Measured on "
    sentences = [head + ", ".join(p for p in parts if p) + "."]
    if elsewhere:
        sentences.append("Measured elsewhere: " + "; ".join(elsewhere) + ".")
    if unrecorded:
        sentences.append(
            "Measured before each benchmark recorded its machine (not said here): "
            + ", ".join(unrecorded)
            + "."
        )
    return " ".join(sentences)


def seed_profile_blocks(profile: dict) -> list:
    """`rlvr bench --only seed_profile`: where one GRPO seed's time goes, by phase of the loop and by
    class of torch op."""
    wall = profile["seconds"]
    threads = "one torch thread" if profile["threads"] == 1 else f"{profile['threads']} torch threads"
    return [
        Heading("Where a GRPO seed's time goes", 3, "seed-profile"),
        Para(
            f"`rlvr bench --only seed_profile`: variant `{profile['variant']}`, {profile['steps']} steps "
            f"evaluated every {profile['eval_every']}, {threads} as in a seed worker, from "
            f"`{profile['start']}`: "
            f"{wall:.1f} s. "
            f"Torch ops took {profile['op_share_of_wall']:.0%} of a profiled run's wall "
            f"({profile['profiled_steps']} "
            "steps); the rest is Python and dispatch."
        ),
        Table(
            ["phase", "seconds", "share"],
            [[r["phase"], f"{r['seconds']:.2f}", f"{r['share']:.0%}"] for r in profile["phases"]],
            "seed-phases",
        ),
        Table(
            ["torch op class", "share of op time"],
            [[r["class"], f"{r['share']:.0%}"] for r in profile["op_classes"]],
            "seed-ops",
        ),
    ]


def scaling_rows(scaling: dict) -> list[list]:
    """`rlvr bench --only scaling`: seconds per GRPO step as one axis moves from the base."""
    return [
        [
            r["axis"],
            r["group_size"],
            r["response_tokens"],
            r["d_model"],
            f"{r['seconds']:.3g}",
            f"{r['trl_seconds']:.3g}" if r.get("trl_seconds") else "–",
        ]
        for r in scaling["rows"]
    ]


def bench_blocks(bench: dict, figure: list) -> list:
    """The benchmarks section: every figure beside its target, the peers, the floor, `figure` (the
    scaling figure's blocks, drawn by the report stage), the scaling table and the seed profile;
    nothing when no benchmark the table knows was measured."""
    table = bench_rows(bench)
    if not table:
        return []
    blocks = [
        Heading("Benchmarks", 2, "benchmarks"),
        Para(
            "`rlvr bench` figures from `reports/benchmarks.json` (measured on demand, not by "
            "the pipeline; "
            "`rlvr bench --peer trl` adds TRL and HF `generate` on the same workloads, each "
            "measured alone). " + machine_line(bench)
        ),
        Table(["benchmark", "measured", "target", "met"], table, "benchmarks"),
        *peer_blocks(bench),
        *floor_blocks(bench),
        *figure,
    ]
    if _get(bench, "scaling", "rows"):
        blocks.append(
            Table(
                ["axis", "G", "response tokens", "d_model", "ours, s/step", "TRL, s/step"],
                scaling_rows(bench["scaling"]),
                "scaling",
            )
        )
    if _get(bench, "seed_profile", "phases"):
        blocks += seed_profile_blocks(bench["seed_profile"])
    return blocks
