"""Quick heatmaps of saved attention weights, one figure per layer and head.

    python -m plots.attention_quick --run runs/<exp>     (the original's name)
    python -m analysis.attention_heatmap --run runs/<exp>

Reads attn/layer{L}_head{H}.npy ([tasks, queries, keys], saved with
--save_attention) and writes figs/attention_layer{L}_head{H}.png: the weights of
one task (task 0 of the eval set; the key labels of its corrupted pairs in red)
next to the mean over all saved tasks. Signed weights, diverging colormap
centred at 0 with limits ±max|w| of each panel. Keys are the context tokens;
queries are every token for earlier layers and the query token alone for the
last layer.
"""

from __future__ import annotations

import sys
from typing import Sequence

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from analysis.common import main_frame, settings_with  # noqa: E402
from src.read_side import ExposesAttention  # noqa: E402
from plots.style import new_figure, png_bytes, wrapped_title  # noqa: E402
from src import rundir as names  # noqa: E402
from src.gd_paper.models.layouts import Layout, layout_of  # noqa: E402
from src.rundir import RunDir  # noqa: E402

MODULE = "plots.attention_quick"  # the command users know (plots/attention_quick.py)
MAX_TICKS = 42  # label every token up to this many keys/queries


def attention_figure(
    weights: np.ndarray,
    layer: int,
    head: int,
    layout: Layout,
    num_pairs: int,
    corrupted: np.ndarray | None = None,
    title: str = "",
):
    """Heatmaps of weights [tasks, queries, keys]: task 0 and the task mean, side by side.

    corrupted: [N] bool for task 0 (True = corrupted pair) or None."""
    weights = np.asarray(weights, dtype=np.float64)
    _, num_queries, num_keys = weights.shape
    keys = layout.token_labels(num_pairs)
    if len(keys) != num_keys:
        keys = [str(k) for k in range(num_keys)]
    queries = ["query"] if num_queries == 1 else (keys + ["query"])[:num_queries]
    if len(queries) != num_queries:
        queries = [str(q) for q in range(num_queries)]
    per_key = layout.tokens_per_pair if num_keys == layout.tokens_per_pair * num_pairs else 1

    width = min(6.5, 1.6 + 0.3 * num_keys)
    height = min(5.5, 1.7 + 0.3 * num_queries)
    figure = new_figure(2 * width + 0.6, height + 0.5, constrained=True)
    marked = corrupted is not None and bool(np.any(corrupted)) and num_keys <= MAX_TICKS
    first = f"layer {layer} head {head}: task 0" + (" (red keys: corrupted)" if marked else "")
    panels = (
        (weights[0], first),
        (weights.mean(axis=0), f"layer {layer} head {head}: mean over {weights.shape[0]} tasks"),
    )
    # softmax weights: a sequential map from 0; signed ones (linear attention): diverging around 0
    sequential = bool(np.min(weights) >= 0)
    for index, (matrix, panel_title) in enumerate(panels):
        ax = figure.add_subplot(1, 2, index + 1)
        limit = float(np.max(np.abs(matrix))) or 1e-12
        image = ax.imshow(
            matrix,
            cmap="viridis" if sequential else "RdBu_r",
            vmin=0.0 if sequential else -limit,
            vmax=limit,
            aspect="auto",
            interpolation="nearest",
        )
        figure.colorbar(image, ax=ax, label="attention weight")
        ax.set_xlabel("key token")
        ax.set_ylabel("query token")
        ax.set_title(panel_title, fontsize=9)
        if num_keys <= MAX_TICKS:
            ax.set_xticks(range(num_keys), keys, fontsize=7, rotation=90)
            if index == 0 and corrupted is not None:
                for k, label in enumerate(ax.get_xticklabels()):
                    if corrupted[k // per_key]:
                        label.set_color("red")
        if num_queries <= MAX_TICKS:
            ax.set_yticks(range(num_queries), queries, fontsize=7)
    if title:
        wrapped_title(figure, title, fontsize=10)
    return figure


def run(run_dir: RunDir) -> list[str]:
    """Render figs/attention_layer{L}_head{H}.png for every saved layer/head; returns names."""
    settings = settings_with(run_dir, ExposesAttention)
    m = settings.model
    heads = [(layer, head) for layer in range(m.num_layers) for head in range(m.num_heads)]
    paths = {key: run_dir.require(names.attention_file(*key)) for key in heads}
    mask = run_dir.load_npy(names.NOISE_MASK) if run_dir.exists(names.NOISE_MASK) else None
    pngs = {}
    for (layer, head), path in paths.items():
        weights = np.load(path, allow_pickle=False)
        corrupted = mask[0] if mask is not None and mask.ndim == 2 and len(mask) else None
        figure = attention_figure(
            weights,
            layer,
            head,
            layout_of(m),
            settings.task.num_context,
            corrupted,
            title=f"{run_dir.name} ({m.name}): attention weights, layer {layer} head {head}",
        )
        pngs[names.attention_figure(layer, head)] = png_bytes(figure)
    for name, data in pngs.items():
        run_dir.write_bytes(name, data)
    return list(pngs)


def main(argv: Sequence[str] | None = None) -> int:
    def work(args, run_dir):
        for name in run(run_dir):
            print(f"-> {run_dir.file(name)}")

    return main_frame(MODULE, __doc__, lambda parser: None, work, argv)


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
