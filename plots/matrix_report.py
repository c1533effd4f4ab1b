"""The matrix study's report (scripts/matrix.py): every sequence mixer x every analysis of von
Oswald et al.'s question, read from what the registered analyses wrote into each run
(analysis/alignment.json, analysis/icl_curve.csv, analysis/robustness.json), mean and standard
deviation over seeds. Writes report/MATRIX.md, report/matrix_results.json and the heat-map
report/figures/matrix/heatmap.png.

The columns (one number per run, then over seeds):
  loss_vs_gd      the model's loss at the query / one tuned GD step's, on the same eval prompts
  align_cos       mean cosine of the model's sensitivity ∂ŷ/∂x_q with GD's (1: GD's direction)
  l2_pred_diff    mean |ŷ_model − ŷ_GD|
  icl_vs_gd       the ICL curve: the model's error / one tuned GD step's, averaged over 1 .. N examples
  label_noise, random_pairs, order_random, ood_alpha2, length_1.5x
                  the robustness stresses: the model's error under each / its clean error at the query
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from plots.provenance import header, study_fields
from plots.report_index import write_index
from plots.style import new_figure, png_bytes
from src.jobs.declared import StudyRun
from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text
from src.rundir import RunDirError, names
from src.stats import over_seeds

REPORT, RESULTS, FIG_DIR = "MATRIX.md", "matrix_results.json", "figures/matrix"
STRESSES = ("label_noise", "random_pairs", "order_random", "ood_alpha2", "length_1.5x")
COLUMNS = ("loss_vs_gd", "align_cos", "l2_pred_diff", "icl_vs_gd") + STRESSES
# the direction in which a column is nearer one GD step or more robust (the heat-map's light end)
BETTER_HIGH = {"align_cos"}
WORDS = {
    "loss_vs_gd": "loss / GD",
    "align_cos": "sensitivity cos",
    "l2_pred_diff": "|ŷ − ŷ_GD|",
    "icl_vs_gd": "ICL curve / GD",
    "label_noise": "label noise",
    "random_pairs": "random pairs",
    "order_random": "random order",
    "ood_alpha2": "inputs x2",
    "length_1.5x": "length 1.5x",
}


def _chunks_line(jobs) -> str:
    """The chunk each mixer with a chunked form was trained with (scripts/matrix.py balances it to
    the prompt's tokens), as a sentence; "" when none has one."""
    chunks = {}
    for job in jobs:
        options = getattr(getattr(job.settings.model, "seq_mixer", None), "options", None)
        if getattr(options, "chunk", None) is not None:
            chunks[job.cell] = options.chunk
    if not chunks:
        return ""
    listed = ", ".join(f"{mixer} {chunk}" for mixer, chunk in sorted(chunks.items()))
    return (
        f" Mixers with a chunked form ran it in chunks balanced to the prompt's tokens ({listed}), not "
        "their defaults (16; Mamba-2 64), which pad: the same map in another float rounding, faster."
    )


def icl_vs_gd(run, gd: np.ndarray) -> float | None:
    """The model's error / one tuned GD step's (scripts.matrix.gd_curve), averaged over 1 .. N examples; the
    model's from analysis/icl_curve.csv."""
    if not run.exists(names.ICL_CURVE_CSV):
        return None
    model = {
        int(r["n_examples"]): float(r["mean"])
        for r in csv.DictReader(io.StringIO(run.file(names.ICL_CURVE_CSV).read_text()))
        if r["predictor"] == "model"
    }
    ratios = [model[k] / gd[k] for k in model if 1 <= k < len(gd) and gd[k] > 0]
    return float(np.mean(ratios)) if ratios else None


def run_row(job, gd: np.ndarray) -> dict:
    """One run's numbers for every column (None where an analysis is missing or not applicable);
    `gd`: gd_curve of its settings."""
    run = job.run
    row = {"mixer": job.cell, "seed": job.seed, "run": str(job.path)}
    try:
        align = run.load_json(names.ALIGNMENT)
        stress = run.load_json(names.ROBUSTNESS)
    except RunDirError:
        return row
    row.update(
        {
            k: align.get(k)
            for k in ("model_loss", "gd_loss", "least_squares_loss", "zero_loss", "align_cos", "l2_pred_diff", "eta")
        }
    )
    row["loss_vs_gd"] = align["model_loss"] / align["gd_loss"] if align.get("gd_loss") else None
    row["icl_vs_gd"] = icl_vs_gd(run, gd)
    clean = stress.get("clean_last")  # the error at the query, no stress
    row["clean_error"] = clean
    for key in STRESSES:
        value = stress.get(key)
        row[key] = value / clean if isinstance(value, float) and clean else None
    return row


def summarise(rows: list[dict]) -> dict:
    """mixer -> column -> over_seeds (mean, std, n, values)."""
    out = {}
    for mixer in dict.fromkeys(r["mixer"] for r in rows):
        mine = [r for r in rows if r["mixer"] == mixer]
        out[mixer] = {
            c: over_seeds([r.get(c) for r in mine])
            for c in COLUMNS + ("model_loss", "gd_loss", "least_squares_loss", "zero_loss", "clean_error")
        }
    return out


def heatmap(summary: dict):
    """Mixers (rows) x analyses (columns), each column's colour scaled from its best mixer (light)
    to its worst (dark), the mean over seeds written in each cell."""
    mixers = by_loss(summary)
    values = np.array([[summary[m][c]["mean"] for c in COLUMNS] for m in mixers], dtype=float)
    shade = np.full_like(values, np.nan)
    for j, column in enumerate(COLUMNS):
        col = values[:, j]
        finite = np.isfinite(col)
        if finite.any():
            low, high = np.min(col[finite]), np.max(col[finite])
            scaled = (col - low) / (high - low) if high > low else np.zeros_like(col)
            shade[:, j] = 1 - scaled if column in BETTER_HIGH else scaled
    fig = new_figure(1.0 + 0.95 * len(COLUMNS), 1.2 + 0.32 * len(mixers), constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    ax.imshow(np.ma.masked_invalid(shade), cmap="Blues", vmin=-0.15, vmax=1.15, aspect="auto")
    for i in range(len(mixers)):
        for j in range(len(COLUMNS)):
            v = values[i, j]
            text = "n/a" if not math.isfinite(v) else (f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}")
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=7,
                color="white" if math.isfinite(shade[i, j]) and shade[i, j] > 0.6 else "black",
            )
    ax.set_xticks(range(len(COLUMNS)), [WORDS[c] for c in COLUMNS], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(mixers)), mixers, fontsize=8)
    ax.set_title(
        "Sequence mixers on von Oswald et al.'s regression (mean over seeds); each column shaded "
        "from its best mixer (light) to its worst (dark)",
        fontsize=8,
    )
    return fig


def reading(summary: dict, zero_loss: float) -> list[str]:
    """What the table says, computed: the mixers below one GD step's loss, within 10 % above it,
    those that did not learn (loss within 1 % of predicting 0), and mixers whose numbers are equal
    in every column (the same model under two names)."""
    mean = lambda m, c: summary[m][c]["mean"]
    ranked = by_loss(summary)
    below = [m for m in ranked if mean(m, "loss_vs_gd") < 1]
    near = [m for m in ranked if 1 <= mean(m, "loss_vs_gd") < 1.1]
    flat = [m for m in ranked if math.isfinite(zero_loss) and mean(m, "model_loss") >= 0.99 * zero_loss]
    ratios = lambda mixers: ", ".join(f"{m} ({mean(m, 'loss_vs_gd'):.3f})" for m in mixers) or "none"
    lines = [
        f"- Below one GD step's loss (loss / GD, mean over seeds): {ratios(below)}.",
        f"- Within 10 % above it: {ratios(near)}.",
        f"- Did not learn at this protocol (loss within 1 % of predicting 0, {zero_loss:.3f}): "
        f"{', '.join(flat) or 'none'}.",
    ]
    groups: dict = {}
    for m in ranked:
        groups.setdefault(tuple(round(mean(m, c), 12) for c in COLUMNS), []).append(m)
    for same in (g for g in groups.values() if len(g) > 1):
        lines.append(f"- Equal in every column: {', '.join(same)} (the same model under two names at these options).")
    return lines


def by_loss(summary: dict) -> list[str]:
    """The mixers from the lowest loss / GD to the highest (missing ones last): every table's order."""
    return sorted(summary, key=lambda m: _sort_key(summary[m]["loss_vs_gd"]["mean"]))


def _sort_key(value) -> float:
    return value if isinstance(value, float) and math.isfinite(value) else math.inf


def _cell(stats: dict, digits: int = 3) -> str:
    if not stats or not stats["n"] or not math.isfinite(stats["mean"]):
        return "n/a"
    spread = f" ± {stats['std']:.{digits}f}" if stats["n"] > 1 else ""
    return f"{stats['mean']:.{digits}f}{spread}"


def setup_lines(jobs: Sequence, rows: list[dict]) -> list[str]:
    """The task, the loss and its references (one GD step, least squares, predicting 0) and the columns."""
    seeds = sorted({r["seed"] for r in rows})
    gd = over_seeds([r.get("gd_loss") for r in rows])
    return [
        f"- Task: von Oswald et al.'s in-context linear regression (d = 10, 10 context pairs and a query, "
        "x ~ U(−1/2, 1/2)^d, w ~ N(0, I), no noise) in the GPT-2 family's layout; every mixer at the same size "
        f"and protocol (configs/matrix.yaml); seeds {seeds}; mean ± standard deviation over seeds."
        + _chunks_line(jobs),
        f"- Loss: the paper's ½ mean (ŷ − y_q)² at the query over the {rows and jobs[0].settings.train.eval_size} "
        f"fixed eval prompts. One GD step (η tuned on held-out prompts): {_cell(gd)}; least squares on the "
        f"context: {_cell(over_seeds([r.get('least_squares_loss') for r in rows]), 4)} (N = d: it interpolates); "
        f"predicting 0: {_cell(over_seeds([r.get('zero_loss') for r in rows]))}.",
        "- Columns (plots/matrix_report.py): loss / GD; the cosine of the model's sensitivity ∂ŷ/∂x_q with "
        "GD's and the mean |ŷ − ŷ_GD| (analysis/alignment.py); the model's ICL curve (analysis/icl_curve.py) / "
        "one GD step's with η tuned at every number of examples, averaged over 1..10 examples; "
        "each robustness stress's error / the model's clean error at "
        "the query (analysis/robustness.py: 25 % noisy labels, 20 % random pairs, random order, inputs "
        "scaled by 2, 1.5x the trained length).",
        "",
    ]


def loss_table(summary: dict, ranked: list[str]) -> list[str]:
    """Loss and GD alignment: a row per mixer, in `ranked` order."""
    lines = [
        "## Loss and GD alignment",
        "",
        "| mixer | loss | loss / GD | sensitivity cos | \\|ŷ − ŷ_GD\\| | ICL curve / GD |",
        "|---|---|---|---|---|---|",
    ]
    for mixer in ranked:
        s = summary[mixer]
        lines.append(
            f"| {mixer} | {_cell(s['model_loss'], 4)} | {_cell(s['loss_vs_gd'])} | {_cell(s['align_cos'])} | "
            f"{_cell(s['l2_pred_diff'])} | {_cell(s['icl_vs_gd'])} |"
        )
    return lines


def stress_table(summary: dict, ranked: list[str]) -> list[str]:
    """Each robustness stress's error / the clean error: a row per mixer, in `ranked` order."""
    lines = [
        "## Robustness and length (error under the stress / clean error)",
        "",
        "| mixer | clean error | " + " | ".join(WORDS[k] for k in STRESSES) + " |",
        "|---|---|" + "---|" * len(STRESSES),
    ]
    for mixer in ranked:
        s = summary[mixer]
        lines.append(
            f"| {mixer} | {_cell(s['clean_error'], 4)} | " + " | ".join(_cell(s[k], 2) for k in STRESSES) + " |"
        )
    return lines


def write_report(run: StudyRun, gd_curves: Sequence[np.ndarray]) -> list[Path]:
    """The report of `jobs`; gd_curves[i]: one tuned GD step's error curve on job i's eval prompts
    (scripts.matrix.gd_curve)."""
    jobs, report_dir = run.jobs, run.report_dir
    rows = [run_row(job, gd) for job, gd in zip(jobs, gd_curves, strict=True)]
    summary = summarise(rows)
    figures = []
    if summary:
        atomic_write_bytes(report_dir / FIG_DIR / "heatmap.png", png_bytes(heatmap(summary)))
        figures.append(f"{FIG_DIR}/heatmap.png")
    ranked = by_loss(summary)
    atomic_write_json(
        report_dir / RESULTS,
        {
            **study_fields(run),
            "columns": list(COLUMNS),
            "results": rows,
            "summary": summary,
            "figures": figures,
        },
    )
    title = "The matrix: every sequence mixer on von Oswald et al.'s regression"
    out = header(title, run)
    out += setup_lines(jobs, rows)
    out += ["## Reading", "", *reading(summary, over_seeds([r.get("zero_loss") for r in rows])["mean"]), ""]
    out += loss_table(summary, ranked) + [""] + stress_table(summary, ranked)
    out += ["", "## Figures", ""] + [f"- `{f}`" for f in figures] + [""]
    atomic_write_text(report_dir / REPORT, "\n".join(out))
    return [report_dir / REPORT, report_dir / RESULTS, write_index(report_dir, run.head)] + [
        report_dir / f for f in figures
    ]
