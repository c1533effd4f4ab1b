"""Figures of the reproduction (`scripts.reproduce`): one function per experiment, result
dict -> Figure.

White background, labelled axes with units, mean ± std over seeds as bands (curves)
or error bars (points), legends. Writing is the caller's job (`png_bytes` + an
atomic write).
"""

from __future__ import annotations

import numpy as np

from plots.style import GD_COLOR, GDPP_COLOR, PAPER_COLOR, TF_COLOR, ZERO_COLOR, axes_grid, new_figure
from src.stats import STD_LABEL

SEED_NOTE = "mean ± " + STD_LABEL.replace("over seeds", "over seeds {seeds}")
LOSS_LABEL = "loss ½(ŷ − y_q)² (squared label units)"
STEP_LABEL = "training step (Adam updates)"


def _band(ax, x, curve: dict, color: str, label: str) -> None:
    mean, std = np.asarray(curve["mean"]), np.asarray(curve["std"])
    ax.plot(x, mean, color=color, label=label, lw=1.6)
    ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.25, lw=0)


def _loss_vs_one_gd_step(
    ax, x, curve: dict, model_label: str, gd_loss: float, paper_loss: float, paper_label: str, title: str
) -> None:
    """Eval loss over training (band over seeds) against one tuned GD step and the paper's value."""
    _band(ax, x, curve, TF_COLOR, model_label)
    ax.axhline(gd_loss, color=GD_COLOR, ls="--", label=f"1 step of GD, tuned η ({gd_loss:.4f})")
    ax.axhline(paper_loss, color=PAPER_COLOR, ls=":", label=paper_label)
    ax.set_yscale("log")
    ax.set_xlabel(STEP_LABEL)
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title(title)
    ax.legend(fontsize=8)


def _finish(figure, title: str) -> None:
    figure.suptitle(title, fontsize=11)
    figure.set_layout_engine("constrained")


def one_step_gd(r: dict):
    fig = new_figure(11, 7.5)
    axes = axes_grid(fig, 2, 2)
    c = r["curves"]
    x = c["step"]
    _loss_vs_one_gd_step(
        axes[0, 0],
        x,
        c["eval_loss"],
        "trained lsa1 (1 LSA layer)",
        r["gd_loss"],
        r["paper"]["gd_loss"],
        "paper: GD ≈ 0.206",
        "eval loss",
    )
    for ax, key, title, ylabel in (
        (axes[0, 1], "align_cos", "cosine of sensitivities ∂ŷ/∂x_q", "align_cos (cosine, unitless)"),
        (axes[1, 0], "model_diff", "‖s_TF − s_GD‖", "model_diff (label units per input unit)"),
        (axes[1, 1], "l2_pred_diff", "|ŷ_TF − ŷ_GD|", "l2_pred_diff (label units)"),
    ):
        _band(ax, x, c[key], TF_COLOR, "trained lsa1 vs 1 step of GD")
        if key == "align_cos":
            ax.axhline(0.99, color=PAPER_COLOR, ls=":", label="paper: ≥ 0.99")
        ax.set_xlabel(STEP_LABEL)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=8)
    _finish(fig, f"One linear self-attention layer learns one step of GD ({SEED_NOTE.format(seeds=r['seeds'])})")
    return fig


def _k_final_losses(ax, r: dict, ks: list[str]) -> None:
    """The final eval loss against K: the trained recurrent LSA (mean ± std), K steps of GD, GD++, one step."""
    kk = [int(k) for k in ks]
    mean = [r[k]["tf_loss"]["mean"] for k in ks]
    std = [r[k]["tf_loss"]["std"] for k in ks]
    ax.errorbar(
        kk,
        mean,
        yerr=std,
        color=TF_COLOR,
        marker="o",
        capsize=4,
        label="trained recurrent LSA (K layers, shared weights)",
    )
    ax.plot(
        kk,
        [r[k]["gdk_loss"] for k in ks],
        color=GD_COLOR,
        marker="s",
        ls="--",
        label="K steps of GD (η tuned for K steps)",
    )
    ax.plot(kk, [r[k]["gdpp_loss"] for k in ks], color=GDPP_COLOR, marker="^", ls="--", label="GD++ (K layers, fitted)")
    ax.axhline(r[ks[0]]["gd1_loss"], color=ZERO_COLOR, ls=":", label="1 step of GD")
    ax.margins(y=0.3)  # room for the legend
    ax.set_xticks(kk)
    ax.set_xlabel("K (number of layers / GD steps)")
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title("final eval loss")
    ax.legend(fontsize=8)


def _k_loss_curves(ax, r: dict, ks: list[str]) -> None:
    """Each K's eval loss over training, with K steps of GD's and GD++'s losses as lines."""
    for i, k in enumerate(ks):
        color = f"C{(i + 4) % 10}"
        _band(ax, r[k]["curves"]["step"], r[k]["curves"]["eval_loss"], color, f"K={k} recurrent LSA")
        ax.axhline(r[k]["gdk_loss"], color=color, ls="--", lw=1, label=f"{k} steps of GD")
        ax.axhline(r[k]["gdpp_loss"], color=color, ls=":", lw=1, label=f"GD++ K={k}")
    ax.set_yscale("log")
    ax.set_xlabel(STEP_LABEL)
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title("eval loss over training")
    ax.legend(fontsize=7, ncol=2)


def _k_alignment(ax, r: dict, ks: list[str], metric: str, ylabel: str) -> None:
    """The trained model's `metric` against K steps of GD, GD++ and one step of GD, per K."""
    kk = [int(k) for k in ks]
    for j, (ref, label, color, marker) in enumerate(
        (
            ("vs_gdk", "vs K steps of GD", GD_COLOR, "s"),
            ("vs_gdpp", "vs GD++", GDPP_COLOR, "^"),
            ("vs_gd1", "vs 1 step of GD", ZERO_COLOR, "o"),
        )
    ):
        vals = [r[k]["align"][ref][metric] for k in ks]
        ax.errorbar(
            np.asarray(kk) + (j - 1) * 0.08,
            [v["mean"] for v in vals],
            yerr=[v["std"] for v in vals],
            color=color,
            marker=marker,
            ls="none",
            capsize=4,
            label=label,
        )
    ax.set_xticks(kk)
    ax.set_xlim(min(kk) - 0.5, max(kk) + 0.5)
    ax.set_xlabel("K (number of layers / GD steps)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"alignment of the trained model: {metric}")
    ax.legend(fontsize=8)


def k_steps(r: dict):
    ks = sorted(r, key=int)
    fig = new_figure(12, 8)
    axes = axes_grid(fig, 2, 2)
    _k_final_losses(axes[0, 0], r, ks)
    _k_loss_curves(axes[0, 1], r, ks)
    _k_alignment(axes[1, 0], r, ks, "align_cos", "align_cos (cosine, unitless)")
    _k_alignment(axes[1, 1], r, ks, "model_diff", "model_diff ‖s_TF − s_ref‖ (label/input units)")
    seeds = r[ks[0]]["seeds"]
    _finish(fig, f"K recurrent LSA layers vs K steps of GD and GD++ ({SEED_NOTE.format(seeds=seeds)})")
    return fig


def copy_model(r: dict):
    fig = new_figure(15, 4.4)
    fig.set_layout_engine("constrained")  # before the colorbar takes its space
    axes = axes_grid(fig, 1, 3)
    c = r["curves"]
    x = c["step"]
    _loss_vs_one_gd_step(
        axes[0, 0],
        x,
        c["eval_loss"],
        "trained two-layer model (softmax + linear)",
        r["final"]["gd_loss"]["mean"],
        r["paper"]["gd_loss"],
        "paper: ≈ 0.21",
        "eval loss (interleaved tokens x, ȳ, ...)",
    )
    ax = axes[0, 1]
    for key, label, color in (
        ("copy_own", "own token j (incl. residual)", "C7"),
        ("copy_next", "next token j+1", "C1"),
        ("copy_prev", "previous token j−1", "C2"),
        ("copy_other", "all other tokens (mean)", "C4"),
    ):
        if key in c:
            _band(ax, x, c[key], color, label)
    ax.set_yscale("log")
    ax.set_xlabel(STEP_LABEL)
    ax.set_ylabel("mean ‖∂ layer-1 output_j / ∂ input token‖_F (unitless)")
    ax.set_title("first-layer copy sensitivities")
    ax.legend(fontsize=8)
    ax = axes[0, 2]
    if r.get("attention_map") is not None:
        attention = np.asarray(r["attention_map"])
        ax.grid(False)
        image = ax.imshow(attention, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        fig.colorbar(image, ax=ax, label="attention weight (fraction, rows sum to 1)")
        rows, cols = attention.shape
        ax.set_xticks(range(0, cols, 2), [f"x{i + 1}" for i in range(cols // 2)], fontsize=7)
        ax.set_yticks(range(0, rows, 2), [f"x{i + 1}" for i in range((rows - 1) // 2)] + ["x_q"], fontsize=7)
        ax.set_xlabel("key token (x_i at even positions, ȳ_i after it)")
        ax.set_ylabel("query token")
        ax.set_title(
            f"layer-1 attention, mean over eval tasks (seed {r.get('attention_map_seed')})\n"
            f"x_i → ȳ_i {r['attention_partner']['mean']:.2f}, "
            f"all → one fixed pair {r['attention_fixed_pair']['mean']:.2f}",
            fontsize=9,
        )
    _finish(fig, f"Token construction: the first layer copies neighbours ({SEED_NOTE.format(seeds=r['seeds'])})")
    return fig


def _lsa_gd_zero(ax, x: list, rows: list[dict], lsa_label: str, gd_label: str, marker: dict) -> None:
    """The trained lsa1's loss (mean, seeds' std as bars), one GD step's and predicting 0's, at `x`
    (one row of the study per point); `marker` adds matplotlib marker options (e.g. size)."""
    ax.errorbar(
        x,
        [row["tf_loss"]["mean"] for row in rows],
        yerr=[row["tf_loss"]["std"] for row in rows],
        color=TF_COLOR,
        marker="o",
        **marker,
        capsize=3,
        label=lsa_label,
    )
    ax.plot(x, [row["gd_loss"] for row in rows], color=GD_COLOR, marker="s", **marker, ls="--", label=gd_label)
    ax.plot(x, [row["zero_loss"] for row in rows], color=ZERO_COLOR, ls=":", label="predict 0")


def ood(r: dict):
    fig = new_figure(11, 4.2)
    axes = axes_grid(fig, 1, 2)
    for ax, key, xlabel, train_x in (
        (axes[0, 0], "alpha", "α (input range scale: x ~ U(−α/2, α/2), ×a)", r["train_alpha"]),
        (axes[0, 1], "weight_scale", "weight std (w ~ N(0, σ_w² I), σ_w)", r["train_weight_scale"]),
    ):
        rows = r[key]
        x = [row["x"] for row in rows]
        _lsa_gd_zero(ax, x, rows, "trained lsa1", "1 step of GD (η tuned at training distribution)", {"ms": 4})
        ax.axvline(train_x, color=PAPER_COLOR, lw=0.8, ls="-.", label="training distribution")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(LOSS_LABEL)
        ax.legend(fontsize=8)
    axes[0, 0].set_title("input range scaled at test time")
    axes[0, 1].set_title("task weight scale changed at test time")
    _finish(fig, f"Out of distribution: trained lsa1 vs GD ({SEED_NOTE.format(seeds=r['seeds'])})")
    return fig


def distractors(r: dict):
    fig = new_figure(6.5, 4.4)
    ax = axes_grid(fig, 1, 1)[0, 0]
    rows = r["rows"]
    x = [row["k"] for row in rows]
    _lsa_gd_zero(ax, x, rows, "trained lsa1 (trained on clean tasks)", "1 step of GD (η tuned on clean tasks)", {})
    ax.set_xticks(x)
    ax.set_xlabel(f"random pairs in the context (of N = {r['num_context']}; label σ = {r['sigma']:g})")
    ax.set_ylabel(LOSS_LABEL)
    ax.legend(fontsize=8)
    _finish(fig, f"Distractor pairs at test time ({SEED_NOTE.format(seeds=r['seeds'])})")
    return fig


NONLINEAR_COLORS = {
    "features_gd": GDPP_COLOR,
    "gd_raw": GD_COLOR,
    "kernel_ridge": PAPER_COLOR,
    "kernel_gd_step": "#8c564b",
}
NONLINEAR_LABELS = {
    "mlp_lsa": "transformer: MLP block + LSA",
    "features_gd": "GD on learned features",
    "gd_raw": "1 GD step on raw x",
    "kernel_ridge": "RBF kernel ridge",
    "kernel_gd_step": "1 GD step, RBF kernel",
}


def nonlinear(r: dict):
    """Loss over training of the two trained models against the fixed baselines, and the
    learners' predictions along x for a few sine tasks."""
    fig = new_figure(13.0, 4.2)
    examples = r["examples"]
    axes = axes_grid(fig, 1, 1 + len(examples))[0]
    ax = axes[0]
    for model, color in (("mlp_lsa", TF_COLOR), ("features_gd", GDPP_COLOR)):
        curve = r["curves"][model]
        _band(ax, curve["step"], curve["eval_loss"], color, NONLINEAR_LABELS[model])
    for name in ("gd_raw", "kernel_gd_step", "kernel_ridge"):
        value = r["baselines"][name]["loss"]
        ax.axhline(value, color=NONLINEAR_COLORS[name], ls="--", label=f"{NONLINEAR_LABELS[name]} ({value:.4f})")
    ax.axhline(r["zero_loss"], color=ZERO_COLOR, ls=":", label=f"predict 0 ({r['zero_loss']:.4f})")
    ax.set_yscale("log")
    ax.set_xlabel(STEP_LABEL)
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title("eval loss")
    ax.legend(fontsize=7)
    for i, (ax, ex) in enumerate(zip(axes[1:], examples)):
        ax.plot(ex["x"], ex["truth"], color="black", lw=2.2, label="target function")
        ax.scatter(ex["context_x"], ex["context_y"], color="black", zorder=5, s=18, label="context pairs")
        ax.plot(ex["x"], ex["predictions"]["mlp_lsa"], color=TF_COLOR, lw=1.5, label=NONLINEAR_LABELS["mlp_lsa"])
        for name in ("features_gd", "kernel_ridge", "gd_raw"):
            ax.plot(
                ex["x"],
                ex["predictions"][name],
                color=NONLINEAR_COLORS[name],
                lw=1.1,
                ls="--",
                label=NONLINEAR_LABELS[name],
            )
        ax.set_xlabel("query x")
        ax.set_title(f"task {i + 1} (seed {r['seeds'][0]} models)")
        if i == 0:
            ax.set_ylabel("prediction ŷ(x_q)")
            ax.legend(fontsize=7)
    _finish(fig, f"Non-linear (sine) regression ({SEED_NOTE.format(seeds=r['seeds'])}; {r['eval_size']} eval tasks)")
    return fig


FIGURES = {
    "one_step_gd": (
        "fig1_one_step_gd.png",
        one_step_gd,
        "lsa1 eval loss over training vs the tuned one-step GD loss, and align_cos, "
        "model_diff, l2_pred_diff vs GD over training.",
    ),
    "k_steps": (
        "fig2_k_steps_gdpp.png",
        k_steps,
        "Recurrent LSA with K layers vs K-step GD and GD++: final loss, loss over training, "
        "and alignment (align_cos, model_diff) with K-step GD and with GD++.",
    ),
    "copy": (
        "fig3_copy_construction.png",
        copy_model,
        "Two-layer model on interleaved tokens: loss over training vs one-step GD, the "
        "first layer's own/next/previous/other-token sensitivities over training, and its "
        "attention map (mean over eval tasks) after training.",
    ),
    "ood": (
        "fig4_ood.png",
        ood,
        "Trained lsa1 and one-step GD (η tuned in distribution) when the input range α or the "
        "weight scale changes at test time; 'predict 0' for scale.",
    ),
    "distractors": (
        "fig5_distractors.png",
        distractors,
        "Loss of trained lsa1 and one-step GD vs the number of random (distractor) pairs among the 10 context pairs.",
    ),
    "nonlinear": (
        "fig6_sine_regression.png",
        nonlinear,
        "Sine regression: eval loss over training of the transformer with an MLP block and "
        "of GD on learned features, against one GD step on raw x and RBF kernel baselines; "
        "the learners' predictions along x for three tasks.",
    ),
}
