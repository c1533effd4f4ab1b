"""Recency of dynamic YaRN on the length study's stronger models. Lin et al. (AAAI 2025) report that
dynamic YaRN puts most of the prediction token's attention on the last ~20 % of a long prompt;
the length study (2 layers, width 32, 1,500 steps) measured 0.17 of the mass there at 4x, the
uniform share being 0.2. This redoes the measurement on the strongest protocol of the length
sweep (configs/sweeps/lengthgen/w64_decay_6k.yaml: width 64, 4 heads, 6,000 steps), per layer
and per head, at the trained length L and at 4x L.

    python -m scripts.yarn_recency             # 3 seeds of dynamic_yarn on linear regression
    python -m scripts.yarn_recency --quick     # 60 steps, seed 0 (a smoke test)

Dynamic YaRN equals RoPE within the trained length (scale s = max(1, T / L) = 1), so one training
run serves both: every run is read with its own encoding and again as RoPE on the same weights,
which isolates what dynamic YaRN's rescaling does to attention at 4x. Runs are the length
study's (scripts/lengthgen.py's jobs) in runs/yarn_recency; the report is report/YARN_RECENCY.md,
report/yarn_recency_results.json and report/figures/yarn_recency/tail_mass.png.

Glossary: L layers, B eval tasks, H heads, T tokens (2 x points).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

from analysis.recency import TAIL, tail_mass_by_head
from src.jobs.declared import Study, StudyRun, cell_runs, quick_seeds, quick_cells
from src.jobs.study import run_as_command, study_command

CONFIG = "configs/sweeps/lengthgen/w64_decay_6k.yaml"
SEEDS = (0, 1, 2)
# the trained encoding, then the same weights read as RoPE -> the figure's label
READ_AS = {"dynamic_yarn": "dynamic_yarn (trained)", "rope": "the same weights as rope"}
ENCODINGS = tuple(READ_AS)
FACTOR = 4
RESULTS, REPORT, FIGURE = "yarn_recency_results.json", "YARN_RECENCY.md", "figures/yarn_recency/tail_mass.png"


def study_cells(quick: bool) -> list:
    """The length study's cell of dynamic YaRN on linear regression, under the stronger models' config."""
    from scripts import lengthgen

    return lengthgen.length_cells(["dynamic_yarn"], ["linear_regression"], quick, None, CONFIG)


def make_jobs(runs_dir: Path, seeds: Sequence[int], quick: bool):
    return cell_runs(study_cells(quick), seeds, runs_dir)


def measure(run) -> dict:
    """One run: its in-distribution error and whether it is trained enough to judge; then for each
    encoding and length (L, FACTOR x L): the last point's error and the tail mass per layer and head."""
    import jax
    from analysis.icl_curve import load_run
    from analysis.length_gen import judge
    from analysis.recency import attention_weights
    from src.registry import choice
    from src.systems.gpt2 import make_model
    from src.systems.gpt2_prompts import eval_batch
    from src.tasks.objectives import objective_of

    settings, model, params, state = load_run(run)
    trained = settings.curriculum.points.end
    out = {**judge(settings, model, params, state, eval_batch(settings, n_points=trained)), "cells": {}}
    objective = objective_of(settings.task.name)
    for encoding in ENCODINGS:
        read = replace(settings, model=replace(settings.model, position=choice("position", encoding)))
        for points in (trained, FACTOR * trained):
            batch = eval_batch(read, n_points=points)
            prediction = jax.jit(make_model(read).apply)(params, state, batch.xs, batch.ys)
            error = float(np.mean(np.asarray(objective.point_errors(prediction, batch))[:, points - 1]))
            weights = attention_weights(read, params, state, batch.xs, batch.ys)
            out["cells"][f"{encoding}@{points}"] = {
                "encoding": encoding,
                "points": points,
                "error_last": error,
                "tail_mass": tail_mass_by_head(weights).round(6).tolist(),
            }
    return out


def figure(results: dict, lengths: Sequence[int]):
    from plots.style import new_figure

    cells = results["mean_tail"]
    layers, heads = np.asarray(next(iter(cells.values()))).shape
    fig = new_figure(3.2 * len(lengths), 2.6 * layers, constrained=True)
    width = 0.8 / len(ENCODINGS)
    for row in range(layers):
        for col, points in enumerate(lengths):
            ax = fig.add_subplot(layers, len(lengths), row * len(lengths) + col + 1)
            for i, encoding in enumerate(ENCODINGS):
                mean = np.asarray(cells[f"{encoding}@{points}"])[row]
                std = np.asarray(results["std_tail"][f"{encoding}@{points}"])[row]
                ax.bar(
                    np.arange(heads) + (i - (len(ENCODINGS) - 1) / 2) * width,
                    mean,
                    width,
                    yerr=std,
                    color=f"C{i}",
                    label=READ_AS[encoding],
                )
            ax.axhline(TAIL, color="0.4", ls=":", lw=1, label=f"uniform ({TAIL})")
            ax.set_xticks(range(heads))
            ax.set_xlabel("head")
            ax.set_ylim(0, 1)
            ax.set_title(f"layer {row}, {points} points", fontsize=9)
            if col == 0:
                ax.set_ylabel(f"mass on the last {TAIL:.0%}")
            if row == 0 and col == 0:
                ax.legend(fontsize=6)
    fig.suptitle("prediction token's attention on the last 20 % of the prompt (mean ± std over seeds)", fontsize=9)
    return fig


def tail_over_seeds(pool: dict, keys: Sequence[str]) -> tuple[dict, dict]:
    """(mean, sample std) over the pooled runs of each cell's tail mass per layer and head."""
    mean_tail = {k: np.mean([r["cells"][k]["tail_mass"] for r in pool.values()], axis=0).tolist() for k in keys}
    std_tail = {
        k: (
            np.std([r["cells"][k]["tail_mass"] for r in pool.values()], axis=0, ddof=1)
            if len(pool) > 1
            else np.zeros_like(mean_tail[k])
        ).tolist()
        for k in keys
    }
    return mean_tail, std_tail


def method_lines(lengths: Sequence[int], pool: dict, judged: dict) -> list[str]:
    from src.stats import STD_LABEL

    return [
        f"- Model: {CONFIG} (the length sweep's strongest protocol) with position dynamic_yarn, on "
        f"linear regression trained to L = {lengths[0]} points; read at L and at {FACTOR}x L on the "
        "length study's eval tasks, with its own encoding and again as RoPE on the same weights",
        f"- Tail mass: the prediction token's attention on the last {TAIL:.0%} of the keys, mean over eval "
        f"tasks (uniform: {TAIL}); mean ± {STD_LABEL}, over the {len(pool)} seeds "
        + ("trained enough to judge" if judged else "(none trained enough to judge: no claim)"),
        "- Error: squared error / d at the last point",
        "",
    ]


def layer_table_lines(runs: dict, pool: dict, keys: Sequence[str], layers: int) -> list[str]:
    """Per cell: the error at the last point and the tail mass of each layer, mean over heads."""
    from src.stats import format_pm, over_seeds

    lines = [
        "| read as | points | error at the last point | "
        + " | ".join(f"layer {layer}: mean over heads" for layer in range(layers))
        + " |",
        "|---" * (3 + layers) + "|",
    ]
    for key in keys:
        cell = next(iter(runs.values()))["cells"][key]
        error = over_seeds([r["cells"][key]["error_last"] for r in pool.values()])
        per_layer = [
            over_seeds([float(np.mean(r["cells"][key]["tail_mass"][layer])) for r in pool.values()])
            for layer in range(layers)
        ]
        lines.append(
            f"| {cell['encoding']} | {cell['points']} | {format_pm(error, 3)} | "
            + " | ".join(format_pm(s, 3) for s in per_layer)
            + " |"
        )
    return lines


def head_table_lines(runs: dict, pool: dict, keys: Sequence[str], layers: int, heads: int) -> list[str]:
    """Per cell and layer: the tail mass of each head."""
    from src.stats import format_pm, over_seeds

    lines = [
        "",
        "Per head (mean ± std over seeds):",
        "",
        "| read as | points | layer | " + " | ".join(f"head {h}" for h in range(heads)) + " |",
        "|---" * (3 + heads) + "|",
    ]
    for key in keys:
        cell = next(iter(runs.values()))["cells"][key]
        for layer in range(layers):
            lines.append(
                f"| {cell['encoding']} | {cell['points']} | {layer} | "
                + " | ".join(
                    format_pm(over_seeds([r["cells"][key]["tail_mass"][layer][h] for r in pool.values()]), 3)
                    for h in range(heads)
                )
                + " |"
            )
    return lines


def write_report(run: StudyRun) -> list[Path]:
    from plots.provenance import header, study_fields
    from plots.report_index import write_index
    from plots.style import png_bytes
    from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text

    jobs, report_dir = run.jobs, run.report_dir
    runs = {job.name: measure(job.run) for job in jobs}
    judged = {name: r for name, r in runs.items() if r["trained_enough"]}
    keys = list(next(iter(runs.values()))["cells"])
    pool = judged or runs
    mean_tail, std_tail = tail_over_seeds(pool, keys)
    lengths = sorted({c["points"] for c in next(iter(runs.values()))["cells"].values()})
    results = {
        **study_fields(run),
        "config": CONFIG,
        "tail": TAIL,
        "runs": runs,
        "judged": sorted(judged),
        "mean_tail": mean_tail,
        "std_tail": std_tail,
        "figures": [FIGURE],
    }
    atomic_write_bytes(report_dir / FIGURE, png_bytes(figure(results, lengths)))
    atomic_write_json(report_dir / RESULTS, results)
    layers, heads = np.asarray(mean_tail[keys[0]]).shape
    title = "Recency of dynamic YaRN on the length study's stronger models (Lin et al., AAAI 2025)"
    lines = header(title, run)
    lines += method_lines(lengths, pool, judged)
    lines += layer_table_lines(runs, pool, keys, layers) + head_table_lines(runs, pool, keys, layers, heads)
    lines += ["", "## Figures", "", f"- `{FIGURE}`", ""]
    atomic_write_text(report_dir / REPORT, "\n".join(lines))
    return [report_dir / REPORT, report_dir / RESULTS, report_dir / FIGURE, write_index(report_dir, run.head)]


STUDY = Study(
    "yarn_recency",
    __doc__,
    "60 steps, seed 0 (a smoke test)",
    cells=quick_cells(study_cells),
    report=write_report,
    seeds=quick_seeds(SEEDS),
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
