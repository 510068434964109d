"""A controlled stop: train until a validation value reaches a target, then stop there.

The chapters' claims are conditioned on accuracies, not on step counts: "GRPO from a start of 42%",
"after GRPO had lifted pass@1 from 0.53 to 0.83". A recipe (under-training, label noise, a GRPO
learning rate) decides *how* a model gets somewhere; where it stops is what a claim is about, and
one fixed step budget lands runs of one recipe far apart. So both ends of a chain are controlled
the same way: SFT stops at its start's target (`rlvr.sft.fit_noisy`) and chapter B's headline GRPO
at its endpoint's (`rlvr.grpo_loop.train_grpo`), each measured on validation problems that neither
trains on nor is tested on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rlvr.model import TinyLM
from rlvr.passk import exact_pass_at_k
from rlvr.rollout import answer_batch, answer_probability
from rlvr.tasks import Problem
from rlvr.tokenizer import Tokenizer


@dataclass
class StopAtTarget:
    """Stop training where the validation value reaches `target`.

    The value is measured every `every` steps (every step once within `near` of it) and training
    stops at the first check that reaches it: from below (the value rises to it: under-training,
    RL) or from above (it falls to it: fitting noisy labels), whichever side the first check lies
    on unless `from_below` is given (a controlled end is reached from below: a start already past
    its target stops at once). Of that check and the one before it, the model kept is the one
    nearer the target (a step can jump past it). `measure` takes the model and returns the
    validation value; it must not draw from the training generator, so the checks never change
    the data order. `describe`, if given, adds columns to every check (a test-side path drawn
    alongside, never read by the rule). `checks` keeps every (steps done, value, ...)."""

    target: float
    every: int
    near: float
    measure: Callable[[TinyLM], float]
    describe: Callable[[TinyLM], dict] | None = None
    checks: list[dict] = field(default_factory=list)
    from_below: bool | None = None
    chosen: dict | None = None  # the check the model is kept at: {"step", "value", ...}
    stopped: bool = False  # True once a check reached the target
    _previous: tuple[dict, dict] | None = None  # the last check before this one, and the weights then
    _next: int = 0

    def __call__(self, model: TinyLM, steps: int) -> bool:
        """True when training should stop after `steps` steps of the phase (model: its weights now)."""
        if steps < self._next:
            return False
        was_training = model.training
        model.eval()
        check = {"step": steps, "value": self.measure(model)}
        if self.describe is not None:
            check.update(self.describe(model))
        model.train(was_training)
        self.checks.append(check)
        self.chosen = check
        if self.from_below is None:
            self.from_below = check["value"] < self.target
        gap = self.target - check["value"] if self.from_below else check["value"] - self.target
        if gap <= 0:  # reached: this check or the one before, whichever is nearer
            before = self._previous
            if before is not None and abs(before[0]["value"] - self.target) < -gap:
                self.chosen = before[0]
                model.load_state_dict(before[1])
            self.stopped = True
            return True
        self._previous = (check, {k: v.detach().clone() for k, v in model.state_dict().items()})
        self._next = steps + (1 if gap <= self.near else self.every)
        return False

    def at_cap(self, model: TinyLM, steps: int) -> None:
        """The step cap came first: the model is kept as it is, measured once more."""
        if not self.checks or self.checks[-1]["step"] != steps:
            self._next = steps
            self(model, steps)

    @property
    def reached(self) -> bool:
        """Whether training stopped at the target (False: the step cap came first)."""
        return self.stopped


def accuracy_stop(
    target: float,
    every: int,
    near: float,
    val: list[Problem],
    tok: Tokenizer,
    path: dict[str, list[Problem]] | None = None,
    k: int = 64,
    from_below: bool | None = None,
) -> StopAtTarget:
    """The stopping rule of a controlled start or end: the expected sampled accuracy at T = 1 on
    `val`, the validation problems, computed exactly (`answer_probability`): no sampling noise, so a
    stopping point is never chosen on a lucky draw. The problems are encoded once.

    `path`, if given, names the splits whose exact pass@1 and pass@k every check also records
    ({"val": ..., "test": ...} -> val_pass_at_1, val_pass_at_64, test_pass_at_1, ...): the path a
    run takes, drawn beside the rule and never read by it. A split that is `val` itself reuses the
    rule's own forward pass."""
    batch = answer_batch(val, tok)
    last: dict = {}

    def measure(model: TinyLM) -> float:
        p = answer_probability(model, batch, tok)  # (P,)
        last["p"] = p.double().cpu().numpy()
        return float(p.mean())  # the rule's value: the mean as torch computes it, in the model's dtype

    others = {
        name: answer_batch(problems, tok) for name, problems in (path or {}).items() if problems is not val
    }

    def describe(model: TinyLM) -> dict:
        probs = {name: last["p"] for name, problems in path.items() if problems is val}
        for name, b in others.items():
            probs[name] = answer_probability(model, b, tok).double().cpu().numpy()  # (P,)
        out = {}
        for name in path:
            out[f"{name}_pass_at_1"] = float(probs[name].mean())
            out[f"{name}_pass_at_{k}"] = exact_pass_at_k(probs[name], k)
        return out

    return StopAtTarget(target, every, near, measure, describe if path else None, from_below=from_below)
