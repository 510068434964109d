"""Arithmetic tasks: problems, train/held-out splits, prompts and answers.

`single_digit` is chapter A's task: "a + b =" with a, b in 0..9 and a + b <= 9 (55 problems, one
token answers). `two_digit` is chapter B's: "37+48=" with both operands in 10..99 (8100 problems,
multi-token answers), a seeded held-out (test) split that SFT and GRPO never see, and a validation
split, disjoint from both, on which a start's stopping point is chosen.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from rlvr.configs import TASKS
from rlvr.fields import ConfigError


@dataclass(frozen=True)
class Problem:
    a: int
    b: int
    task: str

    @property
    def prompt(self) -> str:
        return f"{self.a} + {self.b} =" if self.task == "single_digit" else f"{self.a}+{self.b}="

    @property
    def answer(self) -> str:
        return str(self.a + self.b)


def all_problems(task: str) -> list[Problem]:
    """Every problem of a task, in a fixed order."""
    if task == "single_digit":
        return [Problem(a, b, task) for a in range(10) for b in range(10) if a + b <= 9]
    if task == "two_digit":
        return [Problem(a, b, task) for a in range(10, 100) for b in range(10, 100)]
    raise ConfigError(f"task {task!r}: unknown; known tasks: {', '.join(TASKS)}")


def answer_range(task: str) -> tuple[int, int]:
    """Inclusive range of possible sums: where a corrupted SFT label is drawn from."""
    return (0, 9) if task == "single_digit" else (20, 198)


def split(
    task: str, heldout: int, seed: int, validation: int = 0
) -> tuple[list[Problem], list[Problem], list[Problem]]:
    """(train, heldout, validation): one seeded shuffle; its first `heldout` problems are the test
    set, the next `validation` the validation set (where a start's stopping point is chosen), the rest
    train. Each is sorted back into the task's order. The test set does not depend on `validation`."""
    problems = all_problems(task)
    if not 0 <= heldout + validation < len(problems):
        raise ConfigError(
            f"tasks.{task}: heldout + validation = {heldout + validation}: must lie in "
            f"[0, {len(problems) - 1}] (task {task} has {len(problems)} problems)"
        )
    order = list(range(len(problems)))
    random.Random(f"split:{task}:{seed}").shuffle(order)
    parts = order[:heldout], order[heldout : heldout + validation], order[heldout + validation :]
    held, val, train = ([problems[i] for i in sorted(part)] for part in parts)
    return train, held, val


def problem_rows(problems: list[Problem]) -> list[dict]:
    """Problems as JSONL rows (the held-out file)."""
    return [{"a": p.a, "b": p.b, "prompt": p.prompt, "answer": p.answer} for p in problems]


def problems_of(rows: list[dict], task: str) -> list[Problem]:
    """The distinct problems in JSONL rows, in a fixed order."""
    seen = sorted({(r["a"], r["b"]) for r in rows})
    return [Problem(a, b, task) for a, b in seen]


@cache
def longest_tokens(task: str) -> tuple[int, int]:
    """(longest prompt, longest answer with its <eos>) over a task's problems, in tokens. Cached: every
    stage checks params, and tokenizing 8,100 problems twice took ~0.3-0.7 s a process."""
    from rlvr.tokenizer import Tokenizer

    tok = Tokenizer()
    problems = all_problems(task)
    return (
        max(len(tok.prompt_ids(p.prompt)) for p in problems),
        max(len(tok.response_ids(p.answer)) for p in problems),
    )


def check_params(params) -> None:
    """What params.yaml must satisfy beyond its types, given the tasks: every held-out split leaves
    problems to train on, every answer fits `max_new_tokens`, and every model's `max_len` holds the
    longest prompt plus its response. `rlvr check` and every stage run this before any work, on the
    whole of params.yaml (`rlvr.io.params.Params`)."""
    for name, task in params.tasks.items():
        problems = all_problems(name)
        if not 0 <= task.heldout + task.validation < len(problems):
            raise ConfigError(
                f"tasks.{name}.heldout + validation = {task.heldout + task.validation}: must lie "
                f"in [0, {len(problems) - 1}] (task {name} has {len(problems)} problems)"
            )
        longest = longest_tokens(name)[1]
        if task.max_new_tokens < longest:
            raise ConfigError(
                f"tasks.{name}.max_new_tokens = {task.max_new_tokens}: an answer and its <eos> "
                f"take up to {longest} tokens"
            )
    hack_room = {params.hack.sft: params.hack.max_new_tokens}
    for run, cfg in params.sft.items():
        model, where = (cfg.model, f"sft.{run}.model") if cfg.model else (params.model, "model")
        prompt = longest_tokens(cfg.task)[0]
        need = prompt + max(params.tasks[cfg.task].max_new_tokens, hack_room.get(run, 0))
        if model.max_len < need:
            raise ConfigError(
                f"{where}.max_len = {model.max_len}: run {run} needs {need} positions "
                f"(prompt {prompt} + response {need - prompt})"
            )
