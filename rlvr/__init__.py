"""rlvr-repro: RL with verifiable rewards and GRPO, reproduced end to end on a CPU."""
