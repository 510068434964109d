"""`rlvr bench --only scaling`: how a GRPO step's cost grows as group size, response length or model
width moves from the base (the others staying); with `--peer trl`, TRL at two group sizes."""

from __future__ import annotations

import statistics
from dataclasses import replace

from rlvr.bench import fair
from rlvr.bench import peer as peers
from rlvr.bench.grpo_step import StepShape, grpo_vs_trl, ours_alone
from rlvr.io.params import Params

SCALING = {"group_size": (4, 8, 16, 64), "response_tokens": (2, 4, 8), "d_model": (64, 128, 256)}
SCALING_BASE = {"group_size": 8, "response_tokens": 4, "d_model": 128}
TRL_SCALING_POINTS = {"group_size": (8, 64)}  # where TRL is measured too


def bench(params: Params, steps: int = 10, peer: bool = False) -> dict:
    """How a GRPO step's cost grows: seconds per step (16 prompts, beta = 0.04) as one of group
    size, response length and model width moves from the base (G 8, 4 tokens, d_model 128) and the
    others stay; with `peer`, TRL at two group sizes, alone in ABAB blocks with ours (chat prompts,
    TRL's default generation batch: the whole step). A user predicts a bigger run from these."""
    if peer:
        peers.require()
    rows = []
    for axis, values in SCALING.items():
        for value in values:
            point = {**SCALING_BASE, axis: value}
            model = replace(params.model, d_model=point["d_model"])
            G, tokens = point["group_size"], point["response_tokens"]
            trl = None
            if peer and value in TRL_SCALING_POINTS.get(axis, ()):
                r = grpo_vs_trl(params, model, StepShape(16, G, tokens, 0.04, "chat"), steps, (16 * G,))
                trl = r["best"]["seconds"]["median"]
            rows.append(
                {
                    "axis": axis,
                    **point,
                    "seconds": statistics.median(ours_alone(params, model, 16, G, tokens, 0.04, steps)),
                    "trl_seconds": trl,
                }
            )
    return {
        "prompts": 16,
        "beta": 0.04,
        "base": SCALING_BASE,
        "steps": steps,
        "rows": rows,
        "trl": peers.note(peer)
        or "measured alone in ABAB blocks at group_size "
        + ", ".join(map(str, TRL_SCALING_POINTS["group_size"]))
        + " (chat prompts, TRL's default generation batch)",
        **({"peer_method": fair.METHOD} if peer else {}),
    }
