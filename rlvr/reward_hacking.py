"""Chapter A's reward-hacking exercise: GRPO against a substring verifier that can be gamed.

The policy is paid 1 if the right digit appears anywhere in its response, and has room for several
digits (`hack.max_new_tokens`). Listing many digits then beats committing to one, so the training
reward can rise while the exact-match accuracy does not follow. Beside the hacked reward we always
measure exact match and the chapter's fix, a verifier that parses the answer the response commits
to (its last number). Samples are kept from the start, middle and end of training: reading them is
how such hacks are found.
"""

from __future__ import annotations

from rlvr.grpo_stats import Groups
from rlvr.tokenizer import Tokenizer
from rlvr.verifiers import digit_counts, final_answer_reward, response_text


def hack_metrics(tok: Tokenizer, samples: dict, sample_steps: set[int], rows_per_table: int):
    """The per-step columns of the hack run, and a side effect: sample tables at chosen steps."""

    def metrics(batch: Groups, step: int) -> dict:
        resp = batch.tokens[:, batch.prompt_len :]  # (B, T)
        G = batch.rewards.shape[1]
        total, distinct = digit_counts(resp, tok)  # (B,), (B,)
        final = final_answer_reward(resp, batch.answers, G, tok)  # (B,)
        if step in sample_steps:
            samples[step] = [
                {
                    "prompt": tok.decode(
                        batch.tokens[i, : batch.prompt_len].tolist(), skip_special=True
                    ).split(".")[-1],
                    "answer": batch.answers[i // G],
                    "response": response_text(resp[i], tok),
                    "substring_reward": float(batch.rewards.view(-1)[i]),
                    "exact": float(batch.correct.view(-1)[i]),
                }
                for i in range(0, min(len(resp), rows_per_table * G), G)
            ]
        return {
            "final_answer_acc": float(final.mean()),
            "digits_per_response": float(total.mean()),
            "distinct_digits_per_response": float(distinct.mean()),
        }

    return metrics


def hack_summary(curve: list[dict], window: int) -> dict:
    """One seed's numbers: start/end means (first and last `window` steps) of reward, accuracies,
    digits and length; the gains; the reward-accuracy gap at the end and at its peak."""
    steps = curve[1:]  # curve[0] is the evaluation before training
    first, last = steps[:window], steps[-window:]
    avg = lambda rows, k: sum(r[k] for r in rows) / len(rows)  # noqa: E731
    out = {
        f"{k}_{w}": avg(rows, k)
        for w, rows in (("start", first), ("end", last))
        for k in (
            "reward_mean",
            "accuracy",
            "final_answer_acc",
            "digits_per_response",
            "distinct_digits_per_response",
            "response_len_mean",
        )
    }
    out["reward_gain"] = out["reward_mean_end"] - out["reward_mean_start"]
    out["accuracy_gain"] = out["accuracy_end"] - out["accuracy_start"]
    out["reward_minus_accuracy_end"] = out["reward_mean_end"] - out["accuracy_end"]
    out["digits_per_response_peak"] = max(r["digits_per_response"] for r in steps)
    out["reward_minus_accuracy_peak"] = max(r["reward_mean"] - r["accuracy"] for r in steps)
    return out
