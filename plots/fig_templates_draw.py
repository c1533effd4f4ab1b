"""Drawing helpers of the sweep figures (plots/fig_templates.py): grouped bars of mean ± std per
x value and series, a colour per line, one panel per model, and the seeds note under a figure's
title (ERRORBARS: error bars are the sample standard deviation over seeds).
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from plots.style import line_colors, panels
from src.stats import STD_LABEL

ERRORBARS = f"mean over seeds; error bars: {STD_LABEL}"


def grouped_bars(
    ax, stats: pd.DataFrame, x_key: str, series_key: str, x_order: list, series_order: list, colors: dict
) -> dict:
    """Bars of stats['mean'] ± stats['std'] at x positions, one bar per series; returns
    {x value: (left, right)} spans of each group."""
    width = 0.8 / max(1, len(series_order))
    spans = {}
    for i, x in enumerate(x_order):
        spans[x] = (i - 0.4, i + 0.4)
    for j, series in enumerate(series_order):
        sub = stats[stats[series_key] == series].set_index(x_key)
        xs, means, stds = [], [], []
        for i, x in enumerate(x_order):
            if x in sub.index:
                xs.append(i - 0.4 + width * (j + 0.5))
                means.append(sub.loc[x, "mean"])
                stds.append(sub.loc[x, "std"])
        ax.bar(
            xs,
            means,
            width=width * 0.92,
            yerr=stds,
            capsize=3,
            color=colors[series],
            label=str(series),
            edgecolor="black",
            linewidth=0.4,
        )
    ax.set_xticks(range(len(x_order)))
    ax.set_xticklabels(
        [_wrap(str(x)) for x in x_order],
        rotation=20 if len(x_order) > 3 else 0,
        ha="right" if len(x_order) > 3 else "center",
        fontsize=8,
    )
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return spans


def _wrap(text: str, width: int = 22) -> str:
    parts, line, out = text.split(", "), "", []
    for part in parts:
        if line and len(line) + len(part) + 2 > width:
            out.append(line)
            line = part
        else:
            line = f"{line}, {part}" if line else part
    out.append(line)
    return ",\n".join(out)


def line_palette(values: pd.Series) -> dict:
    """A colour per distinct value, in order of appearance."""
    lines = list(dict.fromkeys(values))
    return dict(zip(lines, line_colors(len(lines))))


def model_panels(figure: Figure, data: pd.DataFrame, line_key: str, models: list, colors: dict):
    """One panel per model (shared y axis): yields (ax, model, [(rows of one line, colour)])."""
    for ax, model in zip(panels(figure, len(models), sharey=True), models):
        sub = data[data["model"] == model]
        parts = [(sub[sub[line_key] == line], color) for line, color in colors.items()]
        yield ax, model, [(part, color) for part, color in parts if not part.empty]


def seeds_note(frame: pd.DataFrame) -> str:
    counts = frame.groupby(["model", "_label"], sort=False)["seed"].nunique()
    low, high = int(counts.min()), int(counts.max())
    n = f"n = {low}" if low == high else f"n = {low}–{high}"
    return f"{ERRORBARS} ({n} seeds)"
