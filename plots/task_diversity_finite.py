"""The finite-size test of the task-diversity study (`python -m scripts.task_diversity --finite-size`,
`make task_diversity_finite`): report/TASK_DIVERSITY_FINITE.md, report/task_diversity_finite_results.json
and report/figures/task_diversity/finite_size.png.

Raventós et al. find the threshold by finite-size scaling: below it, longer training pulls the model
back toward dMMSE, so its distance to ridge (on prompts from the prior) first falls, then rises
(turning at t* ∝ M^0.47); above it the distance keeps falling. Each run here trains 10× the
study's steps and keeps a checkpoint every KEEP_FRACTION of them; at each kept checkpoint the
model is evaluated as the study evaluates its finished runs (scripts/task_diversity.py: evaluate).

The rule, per pool size M: the distance to ridge **rises** when its value at the last checkpoint is
at least RISE × its lowest value at an earlier checkpoint (M is below the threshold of our model at
this budget: the early ridge-like phase was transient); else it **does not rise**. Our model's
threshold at this budget is the smallest M run from which no larger M's distance rises; the study's
switch (from 5,000 steps) is a threshold if it is at or above that M's switch, a transient if not.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from plots.provenance import header, study_fields
from plots.report_index import write_index
from plots.style import new_figure, png_bytes
from src.jobs.declared import StudyRun
from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text

REPORT, RESULTS, FIGURE = (
    "TASK_DIVERSITY_FINITE.md",
    "task_diversity_finite_results.json",
    "figures/task_diversity/finite_size.png",
)
RISE = 1.10  # the last distance this many times the earlier minimum: it rises
STEPS_FACTOR = 10  # the finite-size runs train this many times the study's steps
KEEP_FRACTION = 10  # ... keeping a checkpoint every 1/KEEP_FRACTION of them


def rises(distances: Sequence[float]) -> bool | None:
    """The module's rule: the last distance ≥ RISE × the lowest earlier one (None: < 3 points)."""
    if len(distances) < 3:
        return None
    return distances[-1] >= RISE * min(distances[:-1])


def threshold_at_budget(verdicts: dict[int, bool | None]) -> int | None:
    """The smallest pool size from which no larger one's distance to ridge rises (None: every
    size rises, or none was judged)."""
    sizes = sorted(m for m, v in verdicts.items() if v is not None)
    return next((m for i, m in enumerate(sizes) if not any(verdicts[t] for t in sizes[i:])), None)


def figure(curves: dict[int, dict]):
    fig = new_figure(8, 3.6, constrained=True)
    left, right = fig.subplots(1, 2)
    for size, c in sorted(curves.items()):
        left.plot(c["step"], c["distance_ridge"], "o-", ms=3, label=f"M = {size}")
        right.plot(c["step"], c["distance_dmmse"], "o-", ms=3, label=f"M = {size}")
    for ax, what in ((left, "ridge"), (right, "dMMSE")):
        ax.set_xlabel("training step")
        ax.set_ylabel(f"model's distance to {what} / d (prior prompts)", fontsize=8)
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    fig.suptitle("Finite-size test: does the distance to ridge rise with training?", fontsize=10)
    return fig


def answer_text(found: int | None, study_switch: int | None, steps: int, sizes: Sequence[int]) -> str:
    """The study's answer: our model's threshold at this budget (`found`, or None: above every size run)
    and whether the study's switch is a threshold or a transient."""
    if found is None:
        return "no pool size run stops rising: the threshold of our model at this budget is above every M run" + (
            ""
            if study_switch is None or study_switch > max(sizes, default=0)
            else f", so the study's switch at M = {study_switch} was a transient "
            "(longer training pulls it back toward dMMSE)"
        )
    if study_switch is None:
        return f"our model's threshold at {steps:,} steps is M = {found}"
    return f"our model's threshold at {steps:,} steps is M = {found}; the study's switch at M = {study_switch} " + (
        "is a threshold (at or above it)"
        if study_switch >= found
        else "was a transient (below it: longer training pulls those pools back toward dMMSE)"
    )


def setup_lines(jobs: Sequence, steps: int, quick: bool, answer: str) -> list[str]:
    """The runs, the rule and the answer, ending with a blank line."""
    kept = max((j.settings.train.keep_every for j in jobs), default=0)
    return [
        f"- The task-diversity study's model and task (configs/task_diversity.yaml) at {steps:,} steps "
        f"({'a smoke test' if quick else f'{STEPS_FACTOR}× the study' + chr(39) + 's'}), one seed, checkpoints "
        f"kept every {kept:,} steps; at "
        "each, the model's distance to ridge and to dMMSE on prompts from the prior (squared difference / d).",
        f"- Rule: a pool size's distance to ridge rises when its last value is at least {RISE}× its lowest "
        "earlier value (Raventós et al.: below the threshold, longer training pulls the model back toward "
        "dMMSE).",
        "",
        "## Answer",
        "",
        f"{answer[0].upper()}{answer[1:]}.",
        "",
    ]


def table_rows(curves: dict[int, dict], verdicts: dict[int, bool | None]) -> list[str]:
    """The table of each pool size's checkpoints, distances and verdict."""
    rows = [
        "| M | steps | distance to ridge: first → lowest → last | distance to dMMSE: first → last | rises |",
        "|---|---|---|---|---|",
    ]
    for size, c in sorted(curves.items()):
        r, d = c["distance_ridge"], c["distance_dmmse"]
        ridge = f"{r[0]:.4f} → {min(r):.4f} → {r[-1]:.4f}" if r else "—"
        dmmse = f"{d[0]:.4f} → {d[-1]:.4f}" if d and None not in (d[0], d[-1]) else "—"
        word = {True: "yes", False: "no", None: "not judged (< 3 checkpoints)"}[verdicts[size]]
        rows.append(f"| {size} | {', '.join(f'{s:,}' for s in c['step'])} | {ridge} | {dmmse} | {word} |")
    return rows


def write_report(run: StudyRun, curves: dict[int, dict], study_switch: int | None = None) -> list[Path]:
    """The report of `curves` (pool size -> scripts.task_diversity.curve of its finished run)."""
    jobs, report_dir = run.jobs, run.report_dir
    verdicts = {m: rises(c["distance_ridge"]) for m, c in curves.items()}
    found = threshold_at_budget(verdicts)
    steps = max((j.settings.train.steps for j in jobs), default=0)
    figures = []
    if any(c["step"] for c in curves.values()):
        atomic_write_bytes(report_dir / FIGURE, png_bytes(figure(curves)))
        figures.append(FIGURE)
    answer = answer_text(found, study_switch, steps, list(curves))
    atomic_write_json(
        report_dir / RESULTS,
        {
            **study_fields(run),
            "steps": steps,
            "rule": f"rises: last ≥ {RISE} × min",
            "curves": {str(m): c for m, c in sorted(curves.items())},
            "rises": {str(m): v for m, v in sorted(verdicts.items())},
            "threshold_at_budget": found,
            "study_switch": study_switch,
            "figures": figures,
        },
    )
    title = "Task diversity, finite-size test: threshold or transient (Raventós et al. 2023)"
    out = header(title, run)
    out += setup_lines(jobs, steps, run.quick, answer) + table_rows(curves, verdicts)
    out += ["", "## Figures", ""] + [f"- `{f}`" for f in figures] + [""]
    atomic_write_text(report_dir / REPORT, "\n".join(out))
    return [report_dir / REPORT, report_dir / RESULTS, write_index(report_dir, run.head)] + [
        report_dir / f for f in figures
    ]


def log2_or_none(size: int | None) -> float | None:
    return math.log2(size) if size else None
