"""How `rlvr bench --peer trl` compares us with a peer: each side at its best, measured alone.

A comparison is a schedule of timed blocks. Every block runs one side only, in a fresh interpreter
(`in_fresh_process`), so neither side runs inside the other's loop or inherits its state (thread
pools, allocator, TRL's callbacks, our deterministic-ops flag). Blocks alternate, ours, the peer,
ours, the peer, so a machine that drifts slows both alike; each setting of the peer's sweep of its
own knobs gets its own blocks, and the peer's figure is its best setting. Both prompt forms are
measured: the chat template our pipeline trains on, and the bare question a user might send.
"""

from __future__ import annotations

import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from rlvr.tokenizer import Tokenizer

METHOD = (
    "Each side runs alone, every timed block in a fresh process, alternating ours, the peer, ours, "
    "the peer over every setting of a small sweep of the peer's own knobs (HF `generate`: prompts per "
    "call; TRL: its generation batch, default sampling settings), and each ratio is the peer's best "
    "setting's median over ours."
)
ROUNDS = 2  # passes over the peer's sweep: every setting gets this many blocks, each beside one of ours

Block = Callable[[], list[float]]  # one timed block of one side: the seconds of each timed run


class BareTokenizer(Tokenizer):
    """Our vocabulary with the bare question as the prompt (`37+48=`, no chat template)."""

    def prompt_ids(self, user: str) -> list[int]:
        return self.encode(user)


FORMS = ("chat", "bare")  # the chat template (the pipeline's prompts), the bare question


def tokenizer(form: str) -> Tokenizer:
    """The tokenizer whose `prompt_ids` builds prompts of `form` ("chat" or "bare")."""
    if form not in FORMS:
        raise ValueError(f"prompt form {form!r}: unknown; known forms: {', '.join(FORMS)}")
    return Tokenizer() if form == "chat" else BareTokenizer()


def in_fresh_process(fn: Callable, *args):
    """fn(*args) in a new interpreter (`python -m rlvr.bench.fair JOB`), its result sent back: a block
    measured alone. A new interpreter, not a fork: a fork would inherit this process's threads,
    flags and warm caches. fn and args travel pickled, through a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="rlvr-block-") as tmp:
        job = Path(tmp) / "job.pkl"
        job.write_bytes(pickle.dumps((fn, args)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # this code
        run = subprocess.run(
            [sys.executable, "-m", "rlvr.bench.fair", str(job)], env=env, capture_output=True, text=True
        )
        if run.returncode != 0:
            raise RuntimeError(
                f"benchmark block {getattr(fn, '__name__', fn)} failed in its own process "
                f"(exit {run.returncode}):\n{run.stderr[-2000:]}"
            )
        return pickle.loads((Path(tmp) / "result.pkl").read_bytes())


def _run_job(job: Path) -> None:
    """The child's side of `in_fresh_process`: run the pickled call, pickle its result beside it."""
    fn, args = pickle.loads(job.read_bytes())
    (job.parent / "result.pkl").write_bytes(pickle.dumps(fn(*args)))


def alone(fn: Callable[..., list[float]], *args) -> Block:
    """A block that runs fn(*args) in a fresh process (fn and args must pickle)."""
    return lambda: in_fresh_process(fn, *args)


def abab(ours: Block, peer: dict, rounds: int = ROUNDS) -> tuple[list[float], dict, list[str]]:
    """Run the blocks alternately: for each round, for each peer setting, one block of ours, then
    one of the peer at that setting. Returns our seconds (every block's runs), each setting's
    seconds, and the schedule as run ("ours", "peer <setting>", ...)."""
    ours_s: list[float] = []
    peer_s: dict = {setting: [] for setting in peer}
    schedule: list[str] = []
    for _ in range(rounds):
        for setting, block in peer.items():
            schedule.append("ours")
            ours_s += ours()
            schedule.append(f"peer {setting}")
            peer_s[setting] += block()
    return ours_s, peer_s, schedule


def best_setting(sweep: dict) -> object:
    """The setting whose median seconds are lowest: the peer at its best."""
    return min(sweep, key=lambda setting: statistics.median(sweep[setting]))


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def compare(ours: Block, peer: dict, knob: str, rounds: int | None = None, work: int | None = None) -> dict:
    """The fair comparison of ours with a peer swept over `knob` (settings: the keys of `peer`):
    the ABAB schedule run, our seconds, every setting's, the best setting and the ratio (how many
    times faster ours is than the peer at its best). `work`: units per run (completions), to add
    rates per second."""
    rounds = rounds or ROUNDS
    ours_s, peer_s, schedule = abab(ours, peer, rounds)
    best = best_setting(peer_s)
    rate = lambda seconds: {"per_second": round(work / statistics.median(seconds))} if work else {}  # noqa: E731
    return {
        "method": METHOD,
        "knob": knob,
        "rounds": rounds,
        "schedule": schedule,
        "ours": {"seconds": spread(ours_s), **rate(ours_s)},
        "sweep": [{knob: s, "seconds": spread(v), **rate(v)} for s, v in peer_s.items()],
        "best": {knob: best, "seconds": spread(peer_s[best]), **rate(peer_s[best])},
        "ratio": round(statistics.median(peer_s[best]) / statistics.median(ours_s), 2),
        **({"work_per_run": work} if work else {}),
    }


if __name__ == "__main__":
    _run_job(Path(sys.argv[1]))
