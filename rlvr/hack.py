"""Chapter A's reward-hacking exercise: GRPO against a substring verifier that can be gamed.

The policy is paid 1 if the right digit appears anywhere in its response, and has room for several
digits (`hack.max_new_tokens`). Listing many digits then beats committing to one, so the training
reward can rise while the exact-match accuracy does not follow. Beside the hacked reward we always
measure exact match and the chapter's fix, a verifier that parses the answer the response commits
to (its last number). Samples are kept from the start, middle and end of training: reading them is
how such hacks are found.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from rlvr.grpo import Groups, fill_columns, mean_ci, train_grpo
from rlvr.tokenizer import Tokenizer
from rlvr.verifiers import digit_counts, final_answer_reward, response_text, substring_reward


def hack_metrics(tok: Tokenizer, samples: dict, sample_steps: set[int], rows_per_table: int):
    """The per-step columns of the hack run, and a side effect: sample tables at chosen steps."""

    def metrics(batch: Groups, step: int) -> dict:
        resp = batch.tokens[:, batch.prompt_len:]  # (B, T)
        G = batch.rewards.shape[1]
        total, distinct = digit_counts(resp, tok)  # (B,), (B,)
        final = final_answer_reward(resp, batch.answers, G, tok)  # (B,)
        if step in sample_steps:
            samples[step] = [{"prompt": tok.decode(batch.tokens[i, :batch.prompt_len].tolist(), skip_special=True)
                              .split(".")[-1], "answer": batch.answers[i // G], "response": response_text(resp[i], tok),
                              "substring_reward": float(batch.rewards.view(-1)[i]),
                              "exact": float(batch.correct.view(-1)[i])}
                             for i in range(0, min(len(resp), rows_per_table * G), G)]
        return {"final_answer_acc": float(final.mean()), "digits_per_response": float(total.mean()),
                "distinct_digits_per_response": float(distinct.mean())}

    return metrics


def run_hack(params, out_dir, metrics_path, samples_path, curves_dir, figure_path, progress: bool = True) -> dict:
    """`hack`: train on the substring reward for every seed; per-step curves, samples, a figure."""
    from rlvr.config import ConfigError, params_hash, to_dict
    from rlvr.runtime import read_jsonl, save_checkpoint, set_determinism, write_json, write_tsv
    from rlvr.sft import checkpoint, load_model, problems_of
    from rlvr.tracking import stage_run

    cfg = params.hack
    if cfg is None:
        raise ConfigError("hack: missing section in params.yaml (the hack stage reads it)")
    grpo_cfg = params.variant(cfg.variant)
    task = replace(params.task(grpo_cfg.task), max_new_tokens=cfg.max_new_tokens)
    data = Path("data") / grpo_cfg.sft
    train = problems_of(read_jsonl(data / "sft.jsonl"), grpo_cfg.task)
    grpo_cfg = replace(grpo_cfg, steps=cfg.steps, temperature=cfg.temperature)
    tok = Tokenizer()
    reward = lambda resp, answers, n: substring_reward(resp, answers, n, tok)  # noqa: E731
    stage_params = {"threads": params.threads, "seeds": params.grpo_seeds, "hack": to_dict(cfg),
                    "variant": to_dict(grpo_cfg)}
    phash = params_hash(stage_params)
    sample_steps = {1, (cfg.steps + 1) // 2, cfg.steps}
    finals, tables = {}, {}
    with stage_run("hack", stage_params, {"task": grpo_cfg.task, "variant": f"hack:{cfg.variant}"}, phash) as mlrun:
        for seed in params.grpo_seeds:
            set_determinism(seed, params.threads)
            policy, _ = load_model(data / "sft.pt", tok)
            samples: dict[int, list] = {}
            with mlrun.child(f"hack/seed{seed}", {"seed": seed, "task": grpo_cfg.task, "params.hash": phash}) as child:
                curve = train_grpo(policy, grpo_cfg, task, train, train, tok, torch.Generator().manual_seed(seed),
                                   reward_fn=reward, progress=progress, desc=f"hack seed {seed}",
                                   batch_metrics=hack_metrics(tok, samples, sample_steps, cfg.sample_rows),
                                   on_step=lambda r: child.log_step(r["step"], {k: v for k, v in r.items() if k != "step"}))
                steps = curve[1:]
                first, last = steps[: cfg.window], steps[-cfg.window:]
                avg = lambda rows, k: sum(r[k] for r in rows) / len(rows)  # noqa: E731
                finals[seed] = {f"{k}_{w}": avg(rows, k) for w, rows in (("start", first), ("end", last))
                                for k in ("reward_mean", "accuracy", "final_answer_acc", "digits_per_response",
                                          "distinct_digits_per_response", "response_len_mean")}
                finals[seed]["reward_gain"] = finals[seed]["reward_mean_end"] - finals[seed]["reward_mean_start"]
                finals[seed]["accuracy_gain"] = finals[seed]["accuracy_end"] - finals[seed]["accuracy_start"]
                finals[seed]["reward_minus_accuracy_end"] = finals[seed]["reward_mean_end"] - finals[seed]["accuracy_end"]
                finals[seed]["digits_per_response_peak"] = max(r["digits_per_response"] for r in steps)
                finals[seed]["reward_minus_accuracy_peak"] = max(r["reward_mean"] - r["accuracy"] for r in steps)
                child.log_metrics(finals[seed])
            tables[seed] = {str(k): v for k, v in sorted(samples.items())}
            save_checkpoint(Path(out_dir) / f"seed{seed}.pt", checkpoint(policy, tok, hack=cfg.variant, seed=seed))
            write_tsv(Path(curves_dir) / f"seed{seed}.tsv", fill_columns(curve))
        keys = sorted(finals[params.grpo_seeds[0]])
        summary = {k: mean_ci([finals[s][k] for s in params.grpo_seeds]) for k in keys}
        metrics = {**{k: v[0] for k, v in summary.items()}, "ci95": {k: [v[1], v[2]] for k, v in summary.items()},
                   "per_seed": {k: [finals[s][k] for s in params.grpo_seeds] for k in keys},
                   "seeds": params.grpo_seeds, "seeds_digits_rose": sum(finals[s]["digits_per_response_end"] >
                                                                         finals[s]["digits_per_response_start"]
                                                                         for s in params.grpo_seeds),
                   "mlflow_run_id": mlrun.run_id, "params_hash": phash}
        write_json(samples_path, {"steps": sorted(sample_steps), "samples": tables})
        write_json(metrics_path, metrics)
        plot_hack(Path(curves_dir), params.grpo_seeds, Path(figure_path))
        mlrun.log_metrics({k: v[0] for k, v in summary.items()})
        mlrun.log_artifact(samples_path)
        mlrun.log_artifact(figure_path)
    return {k: metrics[k] for k in ("reward_mean_end", "accuracy_end", "digits_per_response_end")}


def plot_hack(curves_dir: Path, seeds: list[int], figure_path: Path) -> None:
    """Hacked reward vs exact and final-answer accuracy over steps, and digits per response."""
    import csv

    from matplotlib.backends.backend_agg import FigureCanvasAgg  # slow import, only this stage draws
    from matplotlib.figure import Figure

    from rlvr.runtime import atomic_write

    fig = Figure(figsize=(9, 3.6))
    FigureCanvasAgg(fig)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for seed in seeds:
        with open(curves_dir / f"seed{seed}.tsv") as f:
            rows = [r for r in csv.DictReader(f, delimiter="\t") if r["reward_mean"] != ""]
        step = [int(r["step"]) for r in rows]
        col = lambda k: [float(r[k]) for r in rows]  # noqa: E731
        kw = {"alpha": 0.8, "lw": 1.2}
        left.plot(step, col("reward_mean"), color="tab:red", label="substring reward" if seed == seeds[0] else None, **kw)
        left.plot(step, col("accuracy"), color="tab:blue", label="exact accuracy" if seed == seeds[0] else None, **kw)
        left.plot(step, col("final_answer_acc"), color="tab:green", ls="--",
                  label="final-answer accuracy" if seed == seeds[0] else None, **kw)
        right.plot(step, col("digits_per_response"), color="tab:purple", label="digits" if seed == seeds[0] else None, **kw)
        right.plot(step, col("distinct_digits_per_response"), color="tab:orange",
                   label="distinct digits" if seed == seeds[0] else None, **kw)
    left.set(xlabel="GRPO step", ylabel="rate", title="hacked reward vs true accuracy", ylim=(0, 1.02))
    right.set(xlabel="GRPO step", ylabel="per response", title="digits per response")
    for ax in (left, right):
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    atomic_write(figure_path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
