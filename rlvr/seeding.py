"""The seeds of a chain's random streams, derived from the chain's own seed (no torch: the stages
that only read params import it too)."""

from __future__ import annotations

import hashlib


def stream_seed(chain: int, purpose: str, index: int = 0) -> int:
    """The seed of one random stream of chain `chain`: a redraw of its start ("redraw", draw), GRPO
    seed `index` of a variant ("grpo"), ... A hash, so no stream shares a seed with the chain's own
    (initialisation, data order) or with another stream."""
    digest = hashlib.sha256(f"{purpose}:{chain}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1  # torch seeds take 63 bits


def draw_seed(chain: int, draw: int) -> int:
    """The seed a chain's start is drawn under (initialisation and data order): the chain's own for
    its first draw, and for a redraw (the step cap came before the target) a stream of its own, so no
    redraw repeats another chain's start."""
    return chain if draw == 0 else stream_seed(chain, "redraw", draw)
