"""Every figure the pipeline draws: one function each, and one save helper.

Figures are drawn from what the stages wrote (metrics dicts, curve rows, per-problem counts), never
from live models, so any figure can be redrawn from the committed results. matplotlib is imported
inside the functions (~0.5 s) and only through its object API with an explicit Agg canvas: no pyplot,
no global backend or figure registry.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from rlvr.runtime import atomic_write


def new_figure(figsize: tuple[float, float]):
    """A matplotlib Figure on an Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def save(fig, path: str | Path) -> Path:
    """Lay out and write a figure as PNG, atomically (temp file, then rename)."""
    fig.tight_layout()
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))


def read_tsv(path: str | Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def hack_curves(curves: dict[int, Path], figure_path: Path) -> Path:
    """Hacked reward vs exact and final-answer accuracy over steps, and digits per response.
    curves: seed -> that seed's curve TSV."""
    seeds = list(curves)
    fig = new_figure((9, 3.6))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for seed in seeds:
        rows = [r for r in read_tsv(curves[seed]) if r["reward_mean"] != ""]
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
    return save(fig, figure_path)


def passk_curves(curves: list[dict], n: int, path: Path) -> Path:
    """pass@k curves (log k) of SFT and each variant, bands on SFT and grpo."""
    fig = new_figure((7, 4.5))
    ax = fig.add_subplot()
    for model in dict.fromkeys(r["model"] for r in curves):
        rows = [r for r in curves if r["model"] == model]
        ks = [r["k"] for r in rows]
        style = {"color": "black", "lw": 2.5} if model == "sft" else {"lw": 1.2}
        ax.plot(ks, [r["pass_at_k"] for r in rows], label=model, **style)
        if model in ("sft", "grpo"):  # bands on the two the chapter compares; the rest would clutter
            ax.fill_between(ks, [r["ci95_lo"] for r in rows], [r["ci95_hi"] for r in rows], alpha=0.15,
                            color=ax.lines[-1].get_color())
    ax.set(xscale="log", xlabel="k (samples)", ylabel="pass@k", title=f"pass@k on held-out problems (n = {n})")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return save(fig, path)


def passk_scatter(counts: dict, n: int, path: Path) -> Path:
    """Per-problem correct counts c_i, SFT against GRPO seed 0."""
    fig = new_figure((4.8, 4.5))
    ax = fig.add_subplot()
    rl = counts.get("grpo/seed0")
    if rl is not None:
        ax.scatter(counts["sft"], rl, s=10, alpha=0.5)
        ax.plot([0, n], [0, n], color="grey", lw=0.8)
    ax.set(xlabel="correct of n, SFT", ylabel="correct of n, GRPO (seed 0)", title="per-problem correct counts")
    return save(fig, path)


def _ecdf(ax, rates, **style) -> None:
    x = np.sort(np.asarray(rates, dtype=float))  # (P,)
    ax.step(np.concatenate([[0.0], x]), np.arange(len(x) + 1) / len(x), where="post", **style)


def passk_solve_rates(counts: dict, seeds: dict[str, list[int]], n: int, contrast: str, path: Path) -> Path:
    """Per-problem solve rates c_i / n as ECDFs: the two SFT starts (left), SFT against every variant,
    each problem's rate averaged over the variant's seeds (right). A curve's height at 0 is the share
    of problems never solved; mass near 0 is what 64 samples can miss."""
    fig = new_figure((11, 4.2))
    left, right = fig.subplots(1, 2, sharey=True)
    for name, label, style in (("sft", "SFT (slip noise)", {"color": "black", "lw": 2}),
                               (contrast, f"SFT ({contrast})", {"color": "tab:gray", "lw": 2, "ls": "--"})):
        rates = np.asarray(counts[name]) / n
        _ecdf(left, rates, label=f"{label}: {int((rates == 0).sum())} never solved", **style)
    left.set(title="two SFT starts", xlabel=f"per-problem solve rate (correct of {n})",
             ylabel="share of held-out problems at or below")
    _ecdf(right, np.asarray(counts["sft"]) / n, color="black", lw=2,
          label=f"SFT: {int((np.asarray(counts['sft']) == 0).sum())} never solved")
    for v, v_seeds in seeds.items():
        rates = np.mean([np.asarray(counts[f"{v}/seed{s}"]) for s in v_seeds], axis=0) / n
        _ecdf(right, rates, lw=1, label=f"{v}: {int((rates == 0).sum())} never solved (all seeds)")
    right.set(title="SFT and GRPO variants (seed mean)", xlabel=f"per-problem solve rate (correct of {n})")
    for ax in (left, right):
        ax.set_xlim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    return save(fig, path)


def worked_figures(metrics: dict, paths: dict[str, Path]) -> list[Path]:
    """The worked examples' PNGs, drawn from the metrics dict alone (so they can be redrawn from the
    JSON). paths: figure name (e.g. "worked-a2-group-advantages.png") -> where to write it."""
    written = []

    def keep(fig, name):
        written.append(save(fig, paths[name]))

    a2 = metrics["A2"]
    fig = new_figure((11, 3.4))
    axes = fig.subplots(1, 3, sharey=True)
    x = np.arange(1, a2["group_size"] + 1)
    for ax, k, r, a in zip(axes, a2["correct_counts"], a2["rewards_by_group"], a2["advantages_by_group"]):
        ax.bar(x - 0.2, r, 0.4, label="reward $r_i$", color="tab:gray")
        ax.bar(x + 0.2, a, 0.4, label=r"advantage $\hat A_i$", color=["tab:green" if v > 0 else "tab:red" for v in a])
        ax.axhline(0, color="black", lw=0.6)
        if not any(a):
            ax.text(0.5, 0.5, "every advantage is 0:\nno gradient", transform=ax.transAxes, ha="center")
        ax.set_title(f"{k} of {a2['group_size']} correct")
        ax.set_xlabel("response i")
        ax.set_xticks(x)
    axes[0].legend(loc="upper right", fontsize=8)
    keep(fig, "worked-a2-group-advantages.png")

    a7 = metrics["A7"]
    d = np.array(a7["deltas"])
    fig = new_figure((10, 3.8))
    ax_b, ax_v = fig.subplots(1, 2)
    ax_b.loglog(d, np.abs(a7["bias_k2_nats"]), "o-", label="|bias| of k2")
    ax_b.loglog(d, np.abs(a7["k2_bias_over_delta_cubed_limit"]) * d**3, "k--", lw=0.8,
                label=r"$|E_\pi z^3|\,\delta^3/6$")
    exact = max(a7["max_abs_bias_k1_nats"], a7["max_abs_bias_k3_nats"])
    ax_b.set_title(f"k2 bias (k1, k3 exact: |bias| <= {exact:.0e})", fontsize=9)
    for k in ("k1", "k2", "k3"):
        ax_v.loglog(d, a7[f"var_{k}"], "o-", ms=3, label=k)
    ax_v.set_title("variance under pi")
    for ax in (ax_b, ax_v):
        ax.set_xlabel(r"$\delta$ (pi_ref = pi (1 + $\delta$ z))")
        ax.legend(fontsize=8)
    keep(fig, "worked-a7-kl-estimators.png")

    a8 = metrics["A8"]
    fig = new_figure((5.5, 4))
    ax = fig.subplots()
    for key, label in (("ppo_gb", "PPO-RLHF (policy, critic, ref, RM)"), ("grpo_gb", "GRPO (policy, ref)"),
                       ("grpo_beta0_gb", r"GRPO, $\beta$ = 0 (policy only)")):
        ax.loglog(a8["model_sizes_billion"], a8[key], "o-", label=label)
    ax.set_xlabel("parameters (billions)")
    ax.set_ylabel("weights + optimiser state (GB = 1e9 B)")
    ax.legend(fontsize=8)
    keep(fig, "worked-a8-memory.png")

    b5 = metrics["B5"]
    grid = np.linspace(0.001, 0.999, 400)
    fig = new_figure((5.5, 4))
    ax = fig.subplots()
    for G in b5["group_sizes"]:
        ax.plot(grid, 1 - grid**G - (1 - grid) ** G, label=f"G = {G}")
    ax.axvline(b5["mc_p"], color="gray", lw=0.6, ls=":")
    ax.plot([b5["mc_p"]], [b5["mc_signal_probability"]], "kx", label="Monte Carlo")
    ax.set_xlabel("p (chance one sample is correct)")
    ax.set_ylabel("P(group has mixed rewards)")
    ax.legend(fontsize=8)
    keep(fig, "worked-b5-signal-probability.png")

    b10 = metrics["B10"]
    fig = new_figure((5.5, 4))
    ax = fig.subplots()
    ax.semilogx(b10["ks"], b10["pass_at_k_base"], label="base")
    ax.semilogx(b10["ks"], b10["pass_at_k_rl"], label="after RL")
    if b10["crossover_k"] is not None:
        ax.axvline(b10["crossover_k"], color="gray", ls=":", label=f"crossover k = {b10['crossover_k']}")
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k (two-problem mean)")
    ax.legend(fontsize=8)
    keep(fig, "worked-b10-passk-toy.png")

    b14 = metrics["B14"]
    it = np.arange(b14["iterations"])
    fig = new_figure((11, 4))
    ax_c, ax_h = fig.subplots(1, 2)
    ax_c.plot(it, b14["mean_accuracy"], label="mean accuracy")
    ax_c.plot(it, b14["share_all_correct"], lw=0.8, label="share of all-correct groups")
    ax_c.plot(it, b14["share_all_wrong"], lw=0.8, label="share of all-wrong groups")
    ax_c.set_xlabel("iteration")
    ax_c.legend(fontsize=8)
    image = ax_h.imshow(np.array(b14["p_per_prompt"]).T, aspect="auto", origin="lower", vmin=0, vmax=1,
                        cmap="viridis")
    ax_h.set_xlabel("iteration")
    ax_h.set_ylabel("prompt j (harder upward)")
    ax_h.set_title("p_j")
    fig.colorbar(image, ax=ax_h)
    keep(fig, "worked-b14-demo.png")
    return written
