"""The settings the maths takes: one frozen dataclass per params.yaml section it reads.

`ModelConfig` shapes TinyLM (`rlvr.model`), `TaskConfig` a task (`rlvr.tasks`), `UniformNoise` and
`SlipNoise` the imperfect author of the SFT labels (`rlvr.noise`), `SFTConfig` one SFT run
(`rlvr.sft`), `GRPOConfig` one GRPO variant (`rlvr.grpo`), `WorkedConfig` the chapters' worked
examples (`rlvr.worked`). Every field's type carries its rule (`rlvr.fields`): a choice is a
`Literal`, a range an annotation beside the field. Nothing here imports torch, so reading params
costs no torch import (the check, data and report stages never load it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from rlvr.fields import AtLeast, Count, NonNegative, Positive, Probability, Section, Seed, Seeds, require

TaskName = Literal["single_digit", "two_digit"]
Advantage = Literal["group", "mean_only", "rloo", "batch_std", "reinforce_pp", "passk"]
KLEstimator = Literal["k1", "k2", "k3"]
Ratio = Literal["token", "sequence", "cispo"]
Aggregation = Literal["seq_mean", "token_mean", "seq_sum_const"]

TASKS: tuple[str, ...] = get_args(TaskName)
ADVANTAGES: tuple[str, ...] = get_args(Advantage)
KL_ESTIMATORS: tuple[str, ...] = get_args(KLEstimator)
RATIOS: tuple[str, ...] = get_args(Ratio)
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)


@dataclass(frozen=True)
class ModelConfig(Section):
    """TinyLM shape (the default ~0.4 M parameters trains on a 2-core CPU)."""

    d_model: Count  # residual width
    n_layer: Count  # transformer blocks
    n_head: Count  # attention heads; must divide d_model
    max_len: Count  # positions: longest prompt + response the model can see

    def validate(self, path: str) -> None:
        require(self.d_model % self.n_head == 0, f"{path}.n_head", self.n_head, f"must divide {path}.d_model")


@dataclass(frozen=True)
class TaskConfig(Section):
    """One arithmetic task. The problem set is fixed by the name; the split and lengths are params."""

    heldout: Annotated[int, AtLeast(0)]  # problems held out of SFT and GRPO (the evaluation set)
    validation: Annotated[int, AtLeast(0)]  # problems held out of training and test: where starts stop
    max_new_tokens: Count  # response cap when sampling: answer digits + <eos>


@dataclass(frozen=True)
class UniformNoise(Section):
    """Each label is replaced, with probability `rate`, by an answer drawn uniformly from the task's
    range of sums: every problem gets the same error rate, so a fitted policy solves each about as
    often as any other."""

    kind: Literal["uniform"]
    rate: Probability  # probability a training label is replaced by a random answer


@dataclass(frozen=True)
class SlipNoise(Section):
    """A learner's slips on addition facts: for each units-digit fact u + v the label's author writes
    a wrong units digit (the same wrong digit every time: its misremembered fact) with a rate of its
    own, s_uv ~ Beta(alpha, beta), drawn once per fact. A problem is as hard as its units fact, so a
    fitted policy has a spread of per-problem solve rates, some near 0 (two_digit only)."""

    kind: Literal["slips"]
    alpha: Positive  # Beta shape of the per-fact slip rates (< 1: mass near rate 0)
    beta: Positive  # Beta shape (< 1: mass near rate 1, facts the author nearly always gets wrong)


@dataclass(frozen=True)
class SFTConfig(Section):
    """One SFT run: its model, data corruption, optimisation, and how accuracy is measured.

    The run trains once per seed in `seeds`: seed s is the start of chain s (SFT seed s -> GRPO seed s
    of every variant starting here -> its pass@k counts). The rows (and their noise) are one draw
    shared by every chain; a chain's seed sets the initialisation, the data order and the sampling.
    """

    task: TaskName  # which task's training split to fit
    seeds: Seeds  # one SFT run per seed: the chains every variant starting here is paired with
    model: ModelConfig | None  # this run's TinyLM shape; null: the top-level `model`
    noise: UniformNoise | SlipNoise  # how training labels are corrupted (`kind` picks the model)
    repeats: Count  # copies of each training problem, each with its own noise draw
    warmup: str  # the clean warm-up (`warmups`) this run starts from: clean_epochs on the true answers
    clean_epochs: Annotated[int, AtLeast(0)]  # warm-up passes on the true answers, before the noisy ones
    epochs: Count  # passes over the (repeated) SFT set with its noisy labels; with a target, the cap
    batch_size: Count  # sequences per optimiser step
    lr: Positive  # AdamW peak learning rate
    schedule: Literal["cosine", "constant"]  # cosine: 5% warm-up, decay to 10%; constant: lr every step
    weight_decay: NonNegative  # AdamW decoupled weight decay
    grad_clip: Positive  # max global grad norm
    eval_max_prompts: Count  # cap on train prompts used for train-set accuracy
    # The controlled start: the noisy epochs stop where the validation value reaches `target`: the
    # expected sampled accuracy (pass@1 at T = 1, computed exactly) on the task's validation split,
    # or on the train prompts where the task has none (chapter A's own measure). null: train all.
    target: Probability | None
    check_every: Count  # steps between validation checks far from the target
    near: Probability  # within this of the target, every step is checked (a step can jump past it)
    # A chain whose step cap comes before its target (stuck on a plateau) is drawn again from a fresh
    # initialisation and data order, up to this many times; it is reported missed only after the last.
    redraws: Annotated[int, AtLeast(0)]

    def validate(self, path: str) -> None:
        require(
            self.target is None or 0 < self.target < 1,
            f"{path}.target",
            self.target,
            "a controlled start's validation accuracy must lie strictly between 0 and 1",
        )


@dataclass(frozen=True)
class GRPOConfig(Section):
    """One GRPO variant: `grpo.defaults` with the variant's overrides applied.

    Each field's name in TRL's `GRPOConfig` and in verl, for readers who know one of them, is in
    docs/variants.md ("Every knob, and its name elsewhere"): the one place that table is kept.
    """

    task: TaskName  # the task trained and evaluated on (must be the SFT run's task)
    sft: str  # which SFT run (params `sft.<name>`) to start from
    seeds: Seeds  # the chains: GRPO from each of these SFT seeds' checkpoints
    grpo_seeds: Count  # GRPO seeds per chain (nested: start variance apart from GRPO's own)
    steps: Count  # optimiser iterations (each: sample, score, mu inner epochs)
    prompts_per_step: Count  # P: distinct prompts per step
    group_size: Annotated[int, AtLeast(2)]  # G: samples per prompt (a group needs siblings)
    temperature: Positive  # sampling temperature for rollouts (the loss uses the tempered log-probs)
    lr: Positive  # Adam learning rate
    grad_clip: Positive  # max global grad norm
    beta: NonNegative  # KL coefficient; DeepSeekMath 0.04, R1-Zero 0.001, TRL default 0
    kl_estimator: KLEstimator  # Schulman (2020)
    kl_in_reward: bool  # beta * KL_hat per token subtracted from the reward (verl, OpenRLHF), not a loss term
    entropy_coeff: NonNegative  # weight of a bonus on the mean token entropy in the loss (PPO: 0.01); 0 = off
    clip_eps_low: NonNegative  # ratio lower clip: 1 - clip_eps_low
    clip_eps_high: NonNegative  # ratio upper clip: 1 + clip_eps_high (DAPO clip-higher: 0.28)
    ratio: Ratio  # token (PPO) | sequence (GSPO) | cispo (clipped, detached IS weight)
    advantage: Advantage  # group | mean_only (Dr. GRPO) | rloo | batch_std | reinforce_pp | passk
    aggregation: Aggregation  # seq_mean (GRPO) | token_mean (DAPO) | seq_sum_const (Dr. GRPO)
    inner_epochs: Count  # mu: gradient steps per batch of rollouts
    dynamic_sampling: bool  # DAPO: keep only mixed-reward groups, resample to fill P
    max_gen_rounds: Count  # cap on sampling rounds per step under dynamic sampling
    overlong_buffer: Annotated[int, AtLeast(0)]  # DAPO soft overlong penalty window in tokens (0 = off)
    overlong_penalty: NonNegative  # penalty at the length cap, ramped over the buffer
    eval_every: Count  # steps between held-out evaluations (exact expected accuracy; and the last step)
    # The controlled end: training stops at the first check where the expected sampled accuracy
    # (pass@1 at T = 1, exact) on the task's validation split reaches `target`; `steps` is then the
    # cap, and a run the cap stops first is reported "not reached" (never drawn again). null: train
    # every step (a fixed budget).
    target: Probability | None
    check_every: Count  # steps between validation checks far from the target
    near: Probability  # within this of the target, every step is checked

    @property
    def penalises_kl(self) -> bool:
        """Whether the KL to the reference model enters training (as a loss term or in the reward):
        beta > 0. With beta = 0 the reference's log-probs are never computed during training."""
        return self.beta > 0

    def validate(self, path: str) -> None:
        require(
            self.eval_every <= self.steps,
            f"{path}.eval_every",
            self.eval_every,
            f"must be at most {path}.steps ({self.steps}): held-out checks every this many steps",
        )
        require(
            self.clip_eps_low <= 1,
            f"{path}.clip_eps_low",
            self.clip_eps_low,
            "must be at most 1: the ratio's lower clip 1 - clip_eps_low is a ratio, never below 0 "
            "(1: no lower clip)",
        )
        require(
            self.target is None or self.check_every <= self.steps,
            f"{path}.check_every",
            self.check_every,
            f"must be at most {path}.steps ({self.steps}), the cap of its controlled end",
        )
        require(
            self.target is None or 0 < self.target < 1,
            f"{path}.target",
            self.target,
            "a controlled end's validation accuracy must lie strictly between 0 and 1",
        )
        require(
            not (self.kl_in_reward and not self.penalises_kl),
            f"{path}.kl_in_reward",
            self.kl_in_reward,
            f"puts beta * KL in the reward, so it needs {path}.beta > 0 (it is 0)",
        )
        require(
            not (self.advantage == "reinforce_pp" and self.ratio == "sequence"),
            f"{path}.advantage",
            self.advantage,
            f"gives every token its own advantage; {path}.ratio sequence needs one per response "
            "(use ratio token or cispo)",
        )


@dataclass(frozen=True)
class WorkedConfig(Section):
    """The chapters' worked examples (`rlvr.worked`): sampling sizes and the 24-prompt demo's knobs."""

    seed: Seed  # seeds every draw: the k3 samples, the Monte Carlo check, the demo's rewards
    kl_samples: Count  # tokens sampled from pi for the k3 check (chapter A's test size)
    kl_vocab: Annotated[int, AtLeast(2)]  # toy vocabulary of pi and pi_ref (one token has no KL)
    demo_prompts: Annotated[int, AtLeast(3)]  # chapter B's demo pool: easy, mid, hard thirds
    demo_group_size: Annotated[int, AtLeast(2)]  # G: rewards sampled per prompt per iteration in the demo
    demo_iters: Count  # demo policy-gradient iterations (~0.1 s: the shared skill saturates by then)
    demo_lr: Positive  # step size on the logits (w, u); w collects every prompt's gradient
    demo_d_min: float  # difficulty of the easiest prompt, in logits (starts at p = 0.88)
    demo_d_max: float  # difficulty of the hardest prompt, in logits (starts at p = 0.007)

    def validate(self, path: str) -> None:
        require(
            self.demo_d_min < self.demo_d_max,
            f"{path}.demo_d_min",
            self.demo_d_min,
            f"must be < demo_d_max ({self.demo_d_max})",
        )
