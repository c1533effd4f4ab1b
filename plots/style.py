"""The one figure style: white background, no pyplot (no global figure state), PNG bytes
without version metadata (the same figure gives the same bytes), the shared colours, axes
grids and legends. A leaf module (matplotlib only), so analyses, figure templates and the
reproduction's figures all draw with it.
"""

from __future__ import annotations

import io
import math
import os
import sys
import textwrap
from typing import Sequence

import matplotlib
import numpy as np

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

DPI = 110
# The colour of each role, the same in every figure that shows it: the trained model, GD,
# GD++, "predict 0" / a 1-step GD reference, and the paper's or a threshold's value.
TF_COLOR, GD_COLOR, GDPP_COLOR, ZERO_COLOR, PAPER_COLOR = "C0", "C3", "C2", "0.5", "k"
# A colour per model (bar charts) and per condition (line charts).
MODEL_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
LINE_COLORMAP = "tab10"


def new_figure(width: float, height: float, constrained: bool = False) -> Figure:
    """A white Figure on the Agg backend, `width` x `height` inches."""
    return Figure(figsize=(width, height), facecolor="white", layout="constrained" if constrained else None)


def panel_row(count: int, panel_width: float, height: float) -> tuple[Figure, list]:
    """A constrained-layout figure of `count` panels side by side, `panel_width` x `height` inches
    each (one panel's width when `count` is 0), and its axes left to right."""
    fig = new_figure(panel_width * max(count, 1), height, constrained=True)
    return fig, [fig.add_subplot(1, count, i + 1) for i in range(count)]


CHECK_FIGURES = "WORKBENCH_CHECK_FIGURES"  # =1: png_bytes refuses a figure with a problem


def log_scale(ax, axis: str = "y") -> None:
    """A logarithmic `axis` ("x" or "y") whose ticks read as plain numbers (2, 3, 0.5, 10) where
    its range spans less than two decades, not matplotlib's 2×10⁰; wider ranges keep 10ⁿ."""
    from matplotlib.ticker import LogFormatter

    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    low, high = ax.get_ylim() if axis == "y" else ax.get_xlim()
    if low > 0 and high / low < 100:
        target = ax.yaxis if axis == "y" else ax.xaxis
        target.set_major_formatter(LogFormatter(labelOnlyBase=False))
        target.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def figure_problems(figure: Figure) -> list[str]:
    """What a reader would miss in `figure`, drawn: no title (a suptitle, or a title on every
    visible panel), a visible panel with data but no x or y label, tick labels written a×10ⁿ,
    and any text (titles, labels, tick labels, legends) falling outside the canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    agg = FigureCanvasAgg(figure)
    agg.draw()  # lays out the text, constrained layouts included
    renderer = agg.get_renderer()
    canvas = figure.bbox
    visible = [
        ax for ax in figure.axes if ax.get_visible() and ax.axison and not hasattr(ax, "_colorbar")
    ]  # a colour bar is labelled by its own label
    problems = []
    suptitle = figure._suptitle.get_text().strip() if figure._suptitle is not None else ""
    if not suptitle and not all(ax.get_title().strip() for ax in visible):
        problems.append("no title: neither a suptitle nor a title on every panel")
    names = [ax.get_title() or f"panel {i}" for i, ax in enumerate(visible)]
    for name, ax in zip(names, visible):
        has_data = bool(ax.lines or ax.collections or ax.patches or ax.images)
        if has_data and not ax.get_xlabel().strip() and not ax.images:
            problems.append(f"{name}: no x label")
        if has_data and not ax.get_ylabel().strip() and not ax.images:
            problems.append(f"{name}: no y label")
        ticks = [
            t.get_text()
            for axis in (ax.xaxis, ax.yaxis)
            for minor in (False, True)
            for t in axis.get_ticklabels(minor=minor)
        ]
        if any("\\times10" in t for t in ticks):
            problems.append(f"{name}: tick labels like 2×10⁰ (plots.style.log_scale writes plain numbers)")
    parts = [(name, ax.get_tightbbox(renderer)) for name, ax in zip(names, visible)]
    texts = [*figure.texts, *([figure._suptitle] if figure._suptitle is not None else [])]
    parts += [
        (f"text {t.get_text()[:40]!r}", t.get_window_extent(renderer))
        for t in texts
        if t.get_visible() and t.get_text().strip()
    ]
    parts += [("a legend", legend.get_window_extent(renderer)) for legend in figure.legends]
    for name, box in parts:  # drawn text only: titles, labels, tick labels, legends
        if box is not None and (
            box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1
        ):
            problems.append(f"{name}: outside the canvas")
    return problems


def png_bytes(figure: Figure) -> bytes:
    """The figure as PNG bytes: white background, no version metadata. With
    WORKBENCH_CHECK_FIGURES=1 (the figures test) a figure with a `figure_problems` is refused
    (=warn: they are printed to stderr)."""
    check = os.environ.get(CHECK_FIGURES)
    if check in ("1", "warn"):
        problems = figure_problems(figure)
        title = figure._suptitle.get_text() if figure._suptitle is not None else ""
        if problems and check == "1":
            raise ValueError(f"figure {title[:60]!r}: " + "; ".join(problems))
        if problems:
            print(f"FIGURE PROBLEMS {title[:60]!r}: " + "; ".join(problems), file=sys.stderr)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, facecolor="white", metadata={"Software": None})
    return buffer.getvalue()


def wrapped_title(figure: Figure, *lines: str, fontsize: int = 9) -> None:
    """A suptitle whose lines are wrapped to the figure's width."""
    width = max(40, int(figure.get_size_inches()[0] * 13))
    figure.suptitle("\n".join(textwrap.fill(line, width) for line in lines if line), fontsize=fontsize)


def axes_grid(figure: Figure, rows: int, cols: int):
    """rows x cols white axes with a light grid and plain tick labels: [rows, cols] array."""
    axes = figure.subplots(rows, cols, squeeze=False)
    for ax in axes.flat:
        ax.set_facecolor("white")
        ax.grid(True, alpha=0.3)
        ax.ticklabel_format(axis="both", style="plain", useOffset=False)
    return axes


def label_cells(ax, values, fmt: str, light, fontsize: int) -> None:
    """Write every finite value of `values` [rows, columns] in its cell of an imshow grid, as
    `fmt` (a str.format pattern), in white where `light` [rows, columns] holds, black elsewhere."""
    for (row, column), value in np.ndenumerate(np.asarray(values, float)):
        if math.isfinite(value):
            color = "white" if light[row][column] else "black"
            ax.text(column, row, fmt.format(value), ha="center", va="center", fontsize=fontsize, color=color)


def panels(figure: Figure, count: int, sharey: bool = False):
    """`count` white panels, at most 3 a row; the figure is resized to fit: [count] axes."""
    cols = min(count, 3)
    rows = math.ceil(count / cols)
    figure.set_size_inches(max(6.5, 4.8 * cols), 3.9 * rows + 0.8)
    axes = figure.subplots(rows, cols, squeeze=False, sharey=sharey).ravel()
    for ax in axes[count:]:
        ax.set_visible(False)
    for ax in axes[:count]:
        ax.set_facecolor("white")
    return axes[:count]


def model_colors(models: Sequence[str]) -> dict:
    """{model: colour}, in the order given."""
    return {m: MODEL_PALETTE[i % len(MODEL_PALETTE)] for i, m in enumerate(models)}


def line_colors(count: int) -> list:
    """`count` colours of the line colormap (repeating after 10)."""
    cmap = matplotlib.colormaps[LINE_COLORMAP]
    return [cmap(i % 10) for i in range(count)]


def line_legend(figure: Figure, colors: dict, extra: Sequence[tuple[str, dict]] = ()) -> None:
    """One legend below all panels: a colour per condition, then line-style keys."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, marker="o", markersize=4) for c in colors.values()]
    labels = [str(k) for k in colors]
    for label, style in extra:
        handles.append(Line2D([], [], **style))
        labels.append(label)
    figure.legend(
        handles, labels, loc="outside lower center", fontsize=7, ncols=max(1, min(3, len(labels))), frameon=False
    )
