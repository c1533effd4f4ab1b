"""The mechanisms study's report (scripts/mechanisms.py): report/MECHANISMS.md (one table:
mechanism × stress test, mean ± sample std over seeds), report/mechanisms_results.json and
report/figures/mechanisms/{icl_curves,robustness}.png, from each run's
analysis/robustness.json and analysis/icl_curve.csv. Errors are squared error / d.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from plots.provenance import header, study_fields
from plots.report_index import write_index
from plots.style import new_figure, png_bytes
from src.jobs.declared import StudyRun
from src import rundir as names
from src.stats import STD_LABEL, format_pm, over_seeds
from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text

RESULTS, REPORT, FIG_DIR = "mechanisms_results.json", "MECHANISMS.md", "figures/mechanisms"
COLUMNS = [
    ("clean_n2", "clean n = d/2"),
    ("clean_n5", "clean n = d"),
    ("clean_n10", "clean n = 2d"),
    ("label_noise", "label noise p 0.25 σ 0.5"),
    ("random_pairs", "random pairs p 0.2"),
    ("order_random", "random order"),
    ("order_easy2hard", "easy2hard order"),
    ("ood_alpha2", "OOD α = 2"),
    ("length_1.5x", "length 1.5×"),
]


def icl_curve_means(run) -> dict[str, list[float]]:
    """predictor -> its mean error at n = 0, 1, ... (a run's analysis/icl_curve.csv)."""
    lines = run.file(names.ICL_CURVE_CSV).read_text().strip().splitlines()[1:]
    out: dict[str, list[float]] = {}
    for line in lines:
        name, _, mean, _ = line.split(",")
        out.setdefault(name, []).append(float(mean))
    return out


def collect(jobs: Sequence) -> dict:
    """mechanism label -> its runs' records; a job without a `mechanism` label (another system's run
    in the same study) is left to that study's own section."""
    by_mechanism: dict[str, dict] = {}
    for job in jobs:
        if getattr(job, "mechanism", None) is None:
            continue
        run = job.run
        record = by_mechanism.setdefault(job.mechanism, {"seeds": [], "robustness": [], "curves": []})
        record["seeds"].append(job.seed)
        record["robustness"].append(run.load_json(names.ROBUSTNESS))
        record["curves"].append(icl_curve_means(run))
        record.setdefault("train_seconds", []).append(run.load_json(names.SUMMARY)["train_seconds"])
    for record in by_mechanism.values():
        record["summary"] = {key: over_seeds([r.get(key) for r in record["robustness"]]) for key, _ in COLUMNS}
        predictors = record["curves"][0].keys()
        record["curve_mean"] = {n: np.mean([c[n] for c in record["curves"]], axis=0).tolist() for n in predictors}
    return by_mechanism


def figure_curves(results: dict):
    mechanisms = list(results)
    cols = min(4, len(mechanisms))
    rows = math.ceil(len(mechanisms) / cols)
    fig = new_figure(3.6 * cols, 3.0 * rows + 0.6, constrained=True)
    for i, mechanism in enumerate(mechanisms):
        ax = fig.add_subplot(rows, cols, i + 1)
        for j, (name, values) in enumerate(results[mechanism]["curve_mean"].items()):
            ax.plot(
                range(len(values)),
                values,
                lw=2 if name == "model" else 1,
                color=f"C{j}",
                marker="o" if name == "model" else None,
                ms=3,
                label=name,
            )
        ax.set_ylim(0, 1.4)
        ax.set_title(mechanism, fontsize=9)
        ax.set_xlabel("in-context examples")
        ax.set_ylabel("squared error / d")
        if i == 0:
            ax.legend(fontsize=6)
    fig.suptitle("ICL curves per mechanism with the baselines (mean over seeds)", fontsize=10)
    return fig


def figure_robustness(results: dict):
    fig = new_figure(12, 4.5, constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    keys = [k for k, _ in COLUMNS if k.startswith(("label", "random_p", "order", "ood", "length", "clean_n10"))]
    width = 0.8 / max(1, len(results))
    for i, (mechanism, record) in enumerate(results.items()):
        s = record["summary"]
        means = [s[k]["mean"] if s[k]["n"] else np.nan for k in keys]
        stds = [s[k]["std"] if s[k]["n"] else 0 for k in keys]
        ax.bar(np.arange(len(keys)) + i * width, means, width, yerr=stds, capsize=2, label=mechanism)
    ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2, [dict(COLUMNS)[k] for k in keys], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("error at the last point (squared error / d), log scale")
    ax.set_title(f"stress tests per mechanism (mean ± {STD_LABEL})", fontsize=9)
    ax.legend(fontsize=7, ncols=4)
    return fig


TARGET_BELOW_D, TARGET_AT_2D = 0.1, 0.05  # the science target (limits_of_icl, d = 5, 11 points)


def curve_table(results: dict, least: list[float], d: int) -> list[str]:
    """Each mechanism's ICL curve (mean over seeds) beside least squares, with its largest gap
    to least squares below d and its error at n = 2d, against the target (0.1, 0.05)."""
    points = len(least)
    lines = [
        "",
        "## ICL curves (error vs number of in-context examples n; mean over seeds)",
        "",
        "| mechanism | "
        + " | ".join(f"n={n}" for n in range(points))
        + f" | max gap to LS, n < d | n = 2d | target (≤ {TARGET_BELOW_D} below d, ≤ {TARGET_AT_2D} at 2d) |",
        "|---" * (points + 4) + "|",
        "| least squares | " + " | ".join(f"{v:.3f}" for v in least) + " | — | — | — |",
    ]
    for mechanism, record in results.items():
        curve = record["curve_mean"].get("model")
        if not curve:
            continue
        gap = max(curve[n] - least[n] for n in range(min(d, points)))
        at_2d = curve[2 * d] if 2 * d < points else float("nan")
        met = gap <= TARGET_BELOW_D and at_2d <= TARGET_AT_2D
        lines.append(
            f"| {mechanism} | "
            + " | ".join(f"{v:.3f}" for v in curve)
            + f" | {gap:.3f} | {at_2d:.3f} | {'met' if met else 'not met'} |"
        )
    return lines


TITLE = "Attention mechanisms on in-context regression (Garg et al. 2022; limits_of_icl)"


def write_report(
    run: StudyRun,
    *,
    title: str = TITLE,
    report: str = REPORT,
    results_file: str = RESULTS,
    fig_dir: str = FIG_DIR,
    extra: Callable[[dict], list[str]] | None = None,
) -> list[Path]:
    """The report of `jobs` (each with a `mechanism` label and a `seed`); another study of
    mechanism variants names its own files and adds its own section (`extra(results)`: lines)."""
    jobs, report_dir = run.jobs, run.report_dir
    results = collect(jobs)
    eval_size = jobs[0].expected["train"]["eval_size"]
    figures = []
    for name, draw in (("icl_curves.png", figure_curves), ("robustness.png", figure_robustness)):
        atomic_write_bytes(report_dir / fig_dir / name, png_bytes(draw(results)))
        figures.append(f"{fig_dir}/{name}")
    atomic_write_json(
        report_dir / results_file,
        {**study_fields(run), "results": results, "figures": figures},
    )
    lines = header(title, run)
    lines += [
        f"- Error: squared error / d (the zero predictor scores 1), on {eval_size} fixed eval tasks; "
        f"mean ± {STD_LABEL}. Stress tests act at evaluation time on the last point's context.",
        "",
        "| mechanism | " + " | ".join(label for _, label in COLUMNS) + " | training |",
        "|---" * (len(COLUMNS) + 2) + "|",
    ]
    for mechanism, record in results.items():
        cells = [format_pm(record["summary"][k], 3) for k, _ in COLUMNS]
        seconds_per_run = np.mean(record["train_seconds"])
        lines.append(f"| {mechanism} | " + " | ".join(cells) + f" | {seconds_per_run:.0f} s/run |")
    least = next(iter(results.values()))["curve_mean"].get("least_squares")
    if least:
        lines += ["", "Least squares (same eval tasks): " + ", ".join(f"n={i}: {v:.3f}" for i, v in enumerate(least))]
        lines += curve_table(results, least, jobs[0].expected["model"]["n_dims"])
    lines += extra(results) if extra else []
    lines += ["", "## Figures", ""] + [f"- `{f}`" for f in figures] + [""]
    atomic_write_text(report_dir / report, "\n".join(lines))
    return [report_dir / report, report_dir / results_file, write_index(report_dir, run.head)] + [
        report_dir / f for f in figures
    ]
