"""The mixers study's figures (plots/mixers_report.py writes them under report/figures/mixers/):
MQAR accuracy against model width (figure_mqar) and against training steps (figure_steps, with
steps_table, the same curves as a markdown table), and boolean accuracy of sign ŷ against the
number of in-context examples (figure_boolean). Each takes the study's rows (one dict per run,
best rate per cell; MQAR rows carry "curve": [[step, eval accuracy], ...]).
"""

from __future__ import annotations

import numpy as np

from plots.mixers_checks import _cell, _matches
from plots.style import panel_row
from src.stats import mean_std_rows


def _accuracy_axes(ax, xlabel: str, ylabel: str, title: str) -> None:
    """Labels, an accuracy axis from 0 to 1 (a margin each side) and the legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


def figure_mqar(rows: list[dict]):
    kappas = sorted({r["kappa"] for r in rows if r["kappa"]})
    fig, axes = panel_row(len(kappas), 4.5, 3.6)
    for ax, kappa in zip(axes, kappas):
        for j, mixer in enumerate(dict.fromkeys(r["mixer"] for r in rows)):
            runs = [r for r in rows if _matches(r, dict(kappa=kappa, mixer=mixer))]
            widths = sorted({r["width"] for r in runs})
            cells = [_cell(runs, "accuracy", width=w) for w in widths]
            ax.plot(widths, [c["mean"] for c in cells], marker="o", color=f"C{j}", label=mixer)
            # every seed as a hollow marker: with two seeds a ± std bar hides a bimodal cell
            ax.scatter(
                [r["width"] for r in runs],
                [r["accuracy"] for r in runs],
                s=22,
                facecolors="none",
                edgecolors=f"C{j}",
                linewidths=0.8,
                zorder=3,
            )
        ax.set_xscale("log", base=2)
        _accuracy_axes(ax, "model width", "MQAR accuracy", f"MQAR, κ = {kappa} pairs (line: mean; circles: seeds)")
    return fig


def _mean_curve(runs: list[dict]) -> tuple[list[int], np.ndarray]:
    """The steps every run logged and the mean eval accuracy over the runs at each."""
    steps = sorted(set.intersection(*(set(s for s, _ in r["curve"]) for r in runs)))
    return steps, np.mean([[dict(map(tuple, r["curve"]))[s] for s in steps] for r in runs], axis=0)


def curves_by_cell(rows: list[dict]) -> tuple[int | None, dict]:
    """(the largest MQAR width, {κ: {mixer: (its runs there, the steps they all logged, the mean
    eval accuracy at each)}}): what the steps figure draws and the steps table prints."""
    mqar = [r for r in rows if r["kappa"] and r["curve"]]
    width = max((r["width"] for r in mqar), default=None)
    cells = {}
    for kappa in sorted({r["kappa"] for r in mqar}):
        cells[kappa] = {}
        for mixer in dict.fromkeys(r["mixer"] for r in rows):
            runs = [r for r in mqar if _matches(r, dict(kappa=kappa, mixer=mixer, width=width))]
            if runs:
                cells[kappa][mixer] = (runs, *_mean_curve(runs))
    return width, cells


def figure_steps(rows: list[dict]):
    """MQAR accuracy against training steps at the grid's largest width, one panel per κ: the mean
    over seeds as a line, every seed thin."""
    width, cells = curves_by_cell(rows)
    colour = {mixer: f"C{j}" for j, mixer in enumerate(dict.fromkeys(r["mixer"] for r in rows))}
    fig, axes = panel_row(len(cells), 4.5, 3.6)
    for ax, (kappa, by_mixer) in zip(axes, cells.items()):
        for mixer, (runs, steps, mean) in by_mixer.items():
            for r in runs:
                ax.plot(*zip(*r["curve"]), color=colour[mixer], lw=0.6, alpha=0.4)
            ax.plot(steps, mean, color=colour[mixer], lw=1.6, label=mixer)
        ax.axhline(0.97, color="0.5", ls=":", lw=1)
        _accuracy_axes(
            ax,
            "training step",
            "MQAR accuracy (eval set)",
            f"MQAR, κ = {kappa}, width {width} (thick: mean; thin: seeds)",
        )
    return fig


def steps_table(rows: list[dict]) -> list[str]:
    """Markdown: per κ, the mean MQAR accuracy over seeds at the grid's largest width at the first
    logged step past a quarter, half and three quarters of training, and at the end (the accuracy
    against budget)."""
    width, cells = curves_by_cell(rows)
    if not cells:
        return []
    lines = [f"## MQAR accuracy against training steps (width {width}; mean over seeds)", ""]
    for kappa, by_mixer in cells.items():
        means = {mixer: dict(zip(steps, mean)) for mixer, (_, steps, mean) in by_mixer.items()}
        logged = sorted(set.intersection(*(set(m) for m in means.values())))
        marks = sorted({next(s for s in logged if s >= logged[-1] * q / 4) for q in (1, 2, 3, 4)})
        lines += [
            f"κ = {kappa}:",
            "",
            "| mixer | " + " | ".join(f"step {s:,}" for s in marks) + " |",
            "|---" * (len(marks) + 1) + "|",
        ]
        lines += [f"| {mixer} | " + " | ".join(f"{m[s]:.3f}" for s in marks) + " |" for mixer, m in means.items()]
        lines.append("")
    return lines


def figure_boolean(rows: list[dict]):
    tasks = sorted({r["task"] for r in rows if not r["kappa"]})
    fig, axes = panel_row(len(tasks), 4.5, 3.6)
    for ax, task in zip(axes, tasks):
        for j, mixer in enumerate(dict.fromkeys(r["mixer"] for r in rows)):
            curves = [
                r["accuracy_by_position"]
                for r in rows
                if _matches(r, {"task": task, "mixer": mixer}) and r["accuracy_by_position"]
            ]
            if curves:
                mean, std = mean_std_rows(np.asarray(curves, np.float64))
                points = np.arange(len(mean))
                ax.plot(points, mean, color=f"C{j}", label=mixer)
                if len(curves) > 1:
                    ax.fill_between(points, mean - std, mean + std, color=f"C{j}", alpha=0.2, lw=0)
        ax.axhline(0.5, color="0.5", ls=":", lw=1)
        ax.set_xlabel("in-context examples before the prediction")
        ax.set_ylabel("accuracy of sign ŷ")
        ax.set_ylim(0.3, 1.02)
        ax.set_title(task, fontsize=9)
        ax.legend(fontsize=7)
    return fig
