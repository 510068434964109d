"""rlvr-repro: RL with verifiable rewards and GRPO, reproduced end to end on a CPU."""

__version__ = "0.1.0"
