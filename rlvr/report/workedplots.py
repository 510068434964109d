"""The worked examples' figures (stage `worked`): group advantages, the KL estimators, training
memory, the signal probability of a group, the pass@k toy and the simulated GRPO run. Drawn from the
worked metrics dict alone, so they can be redrawn from reports/metrics/worked.json; the canvas and
the save helper are rlvr.report.plots'.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlvr.report.plots import legend_below, new_figure, save


def worked_figures(metrics: dict, paths: dict[str, Path]) -> list[Path]:
    """The worked examples' PNGs, drawn from the metrics dict alone (so they can be redrawn from the
    JSON). paths: figure name (e.g. "worked-a2-group-advantages.png") -> where to write it."""
    written = []

    def keep(fig, name):
        written.append(save(fig, paths[name]))

    def panel(xlabel: str, ylabel: str, title: str):
        """One labelled panel of a small figure (5.5 x 4 in)."""
        ax = new_figure((5.5, 4)).subplots()
        ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
        return ax

    def keep_panel(ax, name):
        legend_below(ax.figure)
        keep(ax.figure, name)

    a2 = metrics["A2"]
    fig = new_figure((11, 3.4))
    axes = fig.subplots(1, 3, sharey=True)
    x = np.arange(1, a2["group_size"] + 1)
    for ax, k, r, a in zip(axes, a2["correct_counts"], a2["rewards_by_group"], a2["advantages_by_group"]):
        ax.bar(x - 0.2, r, 0.4, label="reward $r_i$", color="tab:gray")
        ax.bar(
            x + 0.2,
            a,
            0.4,
            label=r"advantage $\hat A_i$",
            color=["tab:green" if v > 0 else "tab:red" for v in a],
        )
        ax.axhline(0, color="black", lw=0.6)
        if not any(a):
            ax.text(0.5, 0.88, "every advantage is 0:\nno gradient", transform=ax.transAxes, ha="center")
        ax.set_title(f"{k} of {a2['group_size']} correct")
        ax.set_xlabel("response i")
        ax.set_xticks(x)
    legend_below(fig)
    axes[0].set_ylabel("reward / advantage")
    fig.suptitle(f"group-relative advantages, G = {a2['group_size']}")
    keep(fig, "worked-a2-group-advantages.png")

    a7 = metrics["A7"]
    d = np.array(a7["deltas"])
    fig = new_figure((10, 3.8))
    ax_b, ax_v = fig.subplots(1, 2)
    ax_b.loglog(d, np.abs(a7["bias_k2_nats"]), "o-", color="C1", label="|bias| of k2")
    ax_b.loglog(
        d,
        np.abs(a7["k2_bias_over_delta_cubed_limit"]) * d**3,
        "k--",
        lw=0.8,
        label=r"$|E_\pi z^3|\,\delta^3/6$",
    )
    exact = max(a7["max_abs_bias_k1_nats"], a7["max_abs_bias_k3_nats"])
    ax_b.set_title(f"k2 bias (k1, k3 exact: |bias| <= {exact:.0e})", fontsize=9)
    for i, k in enumerate(("k1", "k2", "k3")):
        ax_v.loglog(d, a7[f"var_{k}"], "o-", ms=3, color=f"C{i}", label=f"variance of {k}")
    ax_v.set_title("variance under pi")
    for ax in (ax_b, ax_v):
        ax.set_xlabel(r"$\delta$ (pi_ref = pi (1 + $\delta$ z))")
        ax.set_ylabel("nats" if ax is ax_b else "nats squared")
    fig.suptitle("KL estimators k1, k2, k3 against the exact KL as the reference moves away")
    legend_below(fig)
    keep(fig, "worked-a7-kl-estimators.png")

    a8 = metrics["A8"]
    ax = panel(
        "parameters (billions)", "weights + optimiser state (GB = 1e9 B)", "training memory by model size"
    )
    for key, label in (
        ("ppo_gb", "PPO-RLHF (policy, critic, ref, RM)"),
        ("grpo_gb", "GRPO (policy, ref)"),
        ("grpo_beta0_gb", r"GRPO, $\beta$ = 0 (policy only)"),
    ):
        ax.loglog(a8["model_sizes_billion"], a8[key], "o-", label=label)
    keep_panel(ax, "worked-a8-memory.png")

    b5 = metrics["B5"]
    grid = np.linspace(0.001, 0.999, 400)
    ax = panel(
        "p (chance one sample is correct)",
        "P(group has mixed rewards)",
        "a group gives signal only if its rewards differ",
    )
    for G in b5["group_sizes"]:
        ax.plot(grid, 1 - grid**G - (1 - grid) ** G, label=f"G = {G}")
    ax.axvline(b5["mc_p"], color="gray", lw=0.6, ls=":")
    ax.plot([b5["mc_p"]], [b5["mc_signal_probability"]], "kx", label="Monte Carlo")
    keep_panel(ax, "worked-b5-signal-probability.png")

    b10 = metrics["B10"]
    ax = panel("k (samples per problem)", "pass@k (two-problem mean)", "toy pass@k: base vs after RL")
    ax.semilogx(b10["ks"], b10["pass_at_k_base"], label="base")
    ax.semilogx(b10["ks"], b10["pass_at_k_rl"], label="after RL")
    if b10["crossover_k"] is not None:
        ax.axvline(b10["crossover_k"], color="gray", ls=":", label=f"crossover k = {b10['crossover_k']}")
    keep_panel(ax, "worked-b10-passk-toy.png")

    b14 = metrics["B14"]
    it = np.arange(b14["iterations"])
    fig = new_figure((11, 4))
    ax_c, ax_h = fig.subplots(1, 2)
    ax_c.plot(it, b14["mean_accuracy"], label="mean accuracy")
    ax_c.plot(it, b14["share_all_correct"], lw=0.8, label="share of all-correct groups")
    ax_c.plot(it, b14["share_all_wrong"], lw=0.8, label="share of all-wrong groups")
    ax_c.set_xlabel("iteration")
    ax_c.set_ylabel("share")
    ax_c.set_title("accuracy and groups with no signal")
    legend_below(fig)
    image = ax_h.imshow(
        np.array(b14["p_per_prompt"]).T, aspect="auto", origin="lower", vmin=0, vmax=1, cmap="viridis"
    )
    ax_h.set_xlabel("iteration")
    ax_h.set_ylabel("prompt j (harder upward)")
    ax_h.set_title("success rate p_j of each prompt")
    fig.colorbar(image, ax=ax_h, label="p_j")
    fig.suptitle(f"A simulated GRPO run on {b14['prompts']} prompts of graded difficulty")
    keep(fig, "worked-b14-demo.png")
    return written
