"""The report of scripts.task_diversity: report/TASK_DIVERSITY.md, report/task_diversity_results.json
and report/figures/task_diversity/error_pool.png.

The study's step (scripts/task_diversity.py: evaluate) evaluates each finished run on EVAL_PROMPTS
prompts of its pool (drawn as in training, fresh inputs and noise) and on its eval set (fresh tasks
from the prior), beside dMMSE over the run's pool and ridge under the prior (baselines/bayes.py, the
task's noise σ, prior τ = 1). Error: squared error / d, averaged over the prompt's points, then over
seeds. Distance (Raventós et al.'s ΔdMMSE, Δridge): the squared difference / d of the model's
predictions from an estimator's, on the same prompts, averaged likewise. The model "tracks" the
estimator whose predictions are nearer its own on prior prompts (errors alone mislead where dMMSE
and ridge err alike, at large pools); the threshold is the smallest pool size from which it tracks
ridge at every larger size run."""

from __future__ import annotations

import math
from pathlib import Path


from plots.provenance import header, study_fields
from plots.report_index import write_index
from plots.style import new_figure, png_bytes
from src.jobs.declared import StudyRun
from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text
from src.stats import over_seeds

REPORT, RESULTS, FIG_DIR = "TASK_DIVERSITY.md", "task_diversity_results.json", "figures/task_diversity"
ESTIMATORS = ("model", "dmmse", "ridge")


def mean_error(rows, size: int, prompts: str, estimator: str) -> dict:
    return over_seeds(
        [
            r["errors"][prompts][estimator]
            for r in rows
            if r["num_tasks"] == size and estimator in r["errors"].get(prompts, {})
        ]
    )


def threshold(rows: list[dict]) -> tuple[int | None, list[str]]:
    """(the smallest finite pool from which the model's predictions on prior prompts are nearer
    ridge's than dMMSE's at every larger pool run, or None; one line per pool size with the numbers)."""
    sizes = sorted({r["num_tasks"] for r in rows if r["num_tasks"]})
    lines, nearer_ridge = [], {}
    for size in sizes:
        m, d, r = (mean_error(rows, size, "prior", e)["mean"] for e in ESTIMATORS)
        to_d, to_r = (mean_error(rows, size, "prior", f"distance_{e}")["mean"] for e in ("dmmse", "ridge"))
        nearer_ridge[size] = to_r < to_d
        lines.append(
            f"- M = {size}: on prior prompts, error: model {m:.4f}, dMMSE {d:.4f}, ridge {r:.4f}; "
            f"the model's distance to dMMSE {to_d:.4f}, to ridge {to_r:.4f}: nearer "
            f"{'ridge' if nearer_ridge[size] else 'dMMSE'}"
        )
    found = next((s for i, s in enumerate(sizes) if all(nearer_ridge[t] for t in sizes[i:])), None)
    return found, lines


def figure(rows: list[dict]):
    sizes = sorted({r["num_tasks"] for r in rows}, key=lambda s: s or math.inf)
    finite = [s for s in sizes if s]
    x = {s: (math.log2(s) if s else (math.log2(max(finite)) + 2 if finite else 0)) for s in sizes}
    fig = new_figure(9, 6.6, constrained=True)
    axes = fig.subplots(2, 2)
    panels = [(prompts, ESTIMATORS, "squared error / d, mean over points") for prompts in ("pool", "prior")]
    panels += [
        (prompts, ("distance_dmmse", "distance_ridge"), "model's distance to the estimator / d")
        for prompts in ("pool", "prior")
    ]
    for ax, (prompts, series, ylabel) in zip(axes.flat, panels):
        for name, style in zip(series, ("o-", "s--", "^:")):
            points = [(x[s], mean_error(rows, s, prompts, name)) for s in sizes]
            points = [(px, st) for px, st in points if st["n"]]
            if points:
                ax.errorbar(
                    [p[0] for p in points],
                    [p[1]["mean"] for p in points],
                    yerr=[p[1].get("std") or 0 for p in points],
                    fmt=style,
                    ms=4,
                    label=name.replace("distance_", "to "),
                )
        ax.set_xticks([x[s] for s in sizes], [f"2^{int(math.log2(s))}" if s else "∞" for s in sizes], fontsize=7)
        ax.set_xlabel("pretraining pool size M")
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_title(f"prompts from the {'pool' if prompts == 'pool' else 'prior (tasks never seen)'}", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("Task diversity: the model beside dMMSE and ridge (errors, then distances)", fontsize=10)
    return fig


def statement_text(found: int | None) -> str:
    """Where the model switches from dMMSE to ridge, in a sentence (`found`: threshold's pool size)."""
    if found is None:
        return "At no pool size run are the model's predictions nearer ridge's at that size and every larger one."
    return (
        f"From M = {found} on, at every larger pool run, the model's predictions on prior prompts are "
        "nearer ridge's than dMMSE's; below it, nearer dMMSE's."
    )


def error_table(rows: list[dict]) -> list[str]:
    """Each pool size's error of the model, dMMSE and ridge, on pool and on prior prompts."""
    out = [
        "| M | pool: model | pool: dMMSE | pool: ridge | prior: model | prior: dMMSE | prior: ridge |",
        "|---|---|---|---|---|---|---|",
    ]
    for size in sorted({r["num_tasks"] for r in rows}, key=lambda s: s or math.inf):
        cells = []
        for prompts in ("pool", "prior"):
            for estimator in ESTIMATORS:
                stats = mean_error(rows, size, prompts, estimator)
                cells.append(f"{stats['mean']:.4f}" if stats["n"] else "—")
        out.append(f"| {size or '∞'} | " + " | ".join(cells) + " |")
    return out


def distance_table(rows: list[dict]) -> list[str]:
    """Each pool size's distance of the model's predictions to dMMSE's and ridge's, on pool and prior prompts."""
    out = [
        "Distances of the model's predictions (squared difference / d):",
        "",
        "| M | pool: to dMMSE | pool: to ridge | prior: to dMMSE | prior: to ridge |",
        "|---|---|---|---|---|",
    ]
    for size in sorted({r["num_tasks"] for r in rows}, key=lambda s: s or math.inf):
        cells = [
            mean_error(rows, size, prompts, f"distance_{e}")
            for prompts in ("pool", "prior")
            for e in ("dmmse", "ridge")
        ]
        out.append(f"| {size or '∞'} | " + " | ".join(f"{c['mean']:.4f}" if c["n"] else "—" for c in cells) + " |")
    return out


def write_report(run: StudyRun, rows: list[dict]) -> list[Path]:
    """The report of `rows` (scripts.task_diversity.collect: one per finished run of run.jobs)."""
    report_dir = run.report_dir
    found, lines = threshold(rows)
    figures = []
    if rows:
        atomic_write_bytes(report_dir / FIG_DIR / "error_pool.png", png_bytes(figure(rows)))
        figures.append(f"{FIG_DIR}/error_pool.png")
    atomic_write_json(
        report_dir / RESULTS,
        {
            **study_fields(run),
            "results": rows,
            "threshold": found,
            "per_pool": lines,
            "figures": figures,
        },
    )
    title = "Task diversity: dMMSE or ridge (Raventós et al. 2023)"
    out = header(title, run)
    out += [
        "- Noisy linear regression, d = 8, 16 points, σ = 0.5; pretraining tasks from a pool of M vectors "
        "drawn once (training.num_tasks; ∞: fresh every step). Error: squared error / d averaged over the "
        f"points, mean over seeds {sorted({r['seed'] for r in rows})}; dMMSE over the run's own pool, ridge "
        "with the prior's λ = σ². Distance: the squared difference / d of the model's predictions from the "
        "estimator's on the same prompts (Raventós et al.'s ΔdMMSE, Δridge).",
        "",
        "## Where the model switches",
        "",
        statement_text(found),
        "",
        *lines,
        "",
    ]
    out += error_table(rows) + [""] + distance_table(rows)
    out += ["", "## Figures", ""] + [f"- `{f}`" for f in figures] + [""]
    atomic_write_text(report_dir / REPORT, "\n".join(out))
    return [report_dir / REPORT, report_dir / RESULTS, write_index(report_dir, run.head)] + [
        report_dir / f for f in figures
    ]
