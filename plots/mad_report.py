"""The MAD study's report (scripts/mad.py): report/MAD.md, mad_results.json and figures/mad/ (the
accuracy of every mixer on every task; ours beside MAD's for the five models MAD's table holds),
beside MAD's scores (Poli et al. 2024, as the DeltaNet paper tabulates them; shared/ANCHORS.md)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from plots.provenance import header, study_fields
from plots.report_index import write_index
from plots.style import label_cells, new_figure, png_bytes
from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text
from src.jobs.declared import StudyRun

REPORT, RESULTS, FIG_DIR = "MAD.md", "mad_results.json", "figures/mad"
PAPER = "Poli et al. 2024 (ICML), Mechanistic Design and Scaling of Hybrid Architectures (MAD)"
TASK_LABELS = {
    "in_context_recall": "in-context recall",
    "fuzzy_recall": "fuzzy recall",
    "noisy_recall": "noisy recall",
    "selective_copying": "selective copying",
    "compression": "compression",
    "memorization": "memorization",
}
# MAD's score per model and task (x100: the mean accuracy over the task's difficulty grid)
MAD_SCORES = {
    "attention": {
        "compression": 51.6,
        "fuzzy_recall": 29.8,
        "in_context_recall": 94.1,
        "memorization": 85.2,
        "noisy_recall": 86.8,
        "selective_copying": 99.6,
    },
    "hyena": {
        "compression": 45.2,
        "fuzzy_recall": 7.9,
        "in_context_recall": 81.7,
        "memorization": 89.5,
        "noisy_recall": 78.8,
        "selective_copying": 93.1,
    },
    "mamba": {
        "compression": 52.7,
        "fuzzy_recall": 6.7,
        "in_context_recall": 90.4,
        "memorization": 89.5,
        "noisy_recall": 90.1,
        "selective_copying": 86.3,
    },
    "gated_linear_attn": {
        "compression": 38.8,
        "fuzzy_recall": 6.9,
        "in_context_recall": 80.8,
        "memorization": 63.3,
        "noisy_recall": 81.6,
        "selective_copying": 88.6,
    },
    "delta_net": {
        "compression": 42.2,
        "fuzzy_recall": 35.7,
        "in_context_recall": 100.0,
        "memorization": 52.8,
        "noisy_recall": 100.0,
        "selective_copying": 100.0,
    },
}
MAD_SEQUENCES = {"memorization": 200 * 256}  # sequence passes of MAD's training (200 epochs of its set)
MAD_DEFAULT_SEQUENCES = 200 * 12_800


def _score(value) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{100 * value:.1f}"


def task_table(task: str, cells: dict) -> list[str]:
    lines = [
        f"### {TASK_LABELS[task]}",
        "",
        "| mixer | accuracy, per token | per class (macro) | MAD's score | rate | weight decay | state floats "
        "| train s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mixer, c in sorted(cells.items(), key=lambda kv: -(kv[1]["macro_accuracy"] or 0)):
        paper = MAD_SCORES.get(mixer, {}).get(task)
        lines.append(
            f"| {c['label']} | {_score(c['accuracy'])} | {_score(c['macro_accuracy'])} | "
            f"{'—' if paper is None else f'{paper:.1f}'} | {c['learning_rate']:g} | {c['weight_decay']:g} | "
            f"{c['state_floats'] if c['state_floats'] is not None else 'n/a'} | {c['seconds']:.0f} |"
        )
    return lines + [""]


def overview_table(tasks: dict, mixers: list[str], labels: dict, chance: dict) -> list[str]:
    order = [t for t in TASK_LABELS if t in tasks]
    lines = [
        "| mixer | " + " | ".join(TASK_LABELS[t] for t in order) + " |",
        "|---|" + "---|" * len(order),
    ]
    for mixer in mixers:
        row = []
        for task in order:
            c = tasks[task].get(mixer)
            paper = MAD_SCORES.get(mixer, {}).get(task)
            ours = "—" if c is None else _score(c["macro_accuracy"])
            row.append(ours if paper is None else f"{ours} ({paper:.1f})")
        lines.append(f"| {labels.get(mixer, mixer)} | " + " | ".join(row) + " |")
    lines.append(
        "| *chance (a uniform guess among the targets)* | " + " | ".join(_score(chance.get(t)) for t in order) + " |"
    )
    return lines + [""]


def reading(tasks: dict, labels: dict, chance: dict) -> list[str]:
    """Per task: the mixers that solve it (per-token accuracy >= 90 %) and those within 10 points of chance."""
    lines = ["Per task, the mixers at 90 % or more, and those within 10 points of a uniform guess:", ""]
    for task in TASK_LABELS:
        if task not in tasks:
            continue
        cells = tasks[task]
        solved = [labels.get(m, m) for m, c in cells.items() if (c["accuracy"] or 0) >= 0.9]
        level = chance.get(task, 0.0)
        guessing = [labels.get(m, m) for m, c in cells.items() if (c["accuracy"] or 0) < level + 0.1]
        lines.append(
            f"- {TASK_LABELS[task]} (chance {100 * level:.1f} %): solved by {len(solved)} of {len(cells)}"
            f"{': ' + ', '.join(solved) if solved else ''}; near chance: {', '.join(guessing) or 'none'}"
        )
    return lines + [""]


def figure_heatmap(tasks: dict, mixers: list[str], labels: dict):
    order = [t for t in TASK_LABELS if t in tasks]
    grid = np.array([[tasks[t].get(m, {}).get("macro_accuracy") or np.nan for t in order] for m in mixers], float)
    fig = new_figure(1.3 * len(order) + 2.5, 0.38 * len(mixers) + 1.6)
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    label_cells(ax, 100 * grid, "{:.0f}", grid < 0.6, 7)
    ax.set_xticks(range(len(order)), [TASK_LABELS[t] for t in order], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(mixers)), [labels.get(m, m) for m in mixers], fontsize=8)
    ax.set_title("MAD tasks at baseline settings: accuracy per class (macro, %)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.tight_layout()
    return fig


def figure_beside_mad(tasks: dict, labels: dict):
    """For each task, ours (bars) against MAD's score (dots) for the five models of MAD's table."""
    order = [t for t in TASK_LABELS if t in tasks]
    models = list(MAD_SCORES)
    fig = new_figure(2.4 * len(order) + 1, 3.2)
    axes = [fig.add_subplot(1, len(order), i + 1) for i in range(len(order))]
    for ax, task in zip(axes, order):
        x = np.arange(len(models))
        ours = [100 * (tasks[task].get(m, {}).get("macro_accuracy") or np.nan) for m in models]
        ax.bar(x, ours, color="C0", label="ours (baseline setting)")
        ax.plot(x, [MAD_SCORES[m][task] for m in models], "o", color="C3", label="MAD (grid mean)")
        ax.set_xticks(x, [labels.get(m, m) for m in models], rotation=60, ha="right", fontsize=7)
        ax.set_ylim(0, 105)
        ax.set_title(TASK_LABELS[task], fontsize=8)
    axes[0].set_ylabel("accuracy (%)")
    axes[0].legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    return fig


def _budget_lines(tasks: dict, settings: dict) -> list[str]:
    batch = settings.get("train", {}).get("batch_size", 0)
    parts = []
    for task in TASK_LABELS:
        cells = tasks.get(task)
        if not cells:
            continue
        steps = next(iter(cells.values()))["steps"]
        ours = steps * batch
        theirs = MAD_SEQUENCES.get(task, MAD_DEFAULT_SEQUENCES)
        parts.append(
            f"{TASK_LABELS[task]} {steps} steps x {batch} = {ours:,} sequences "
            f"({ours / theirs:.3g} of MAD's {theirs:,})"
        )
    return ["Budget per run: " + "; ".join(parts) + "."] if parts else []


def write_report(
    run: StudyRun,
    labels: dict,
    tasks: dict,
    found: list[dict],
    ranked: dict,
    chance: dict,
    settling: dict | None = None,
) -> list[Path]:
    """MAD.md, mad_results.json and the figures from the study's aggregates (scripts/mad.py):
    `tasks` {task: {mixer: cell}}, `found` the claims checked, `ranked` the orderings beside MAD's;
    `labels` {mixer spelling: its name}; `chance` {task: a uniform guess's accuracy}; `settling`
    {task: the grid's longer run of one mixer}."""
    report_dir = run.report_dir
    settling = settling or {}
    mixers = list(dict.fromkeys(j.mixer for j in run.jobs if not j.tags.get("settling")))
    figures = []
    if tasks:
        for name, fig in (
            ("accuracy.png", figure_heatmap(tasks, mixers, labels)),
            ("beside_mad.png", figure_beside_mad(tasks, labels)),
        ):
            atomic_write_bytes(report_dir / FIG_DIR / name, png_bytes(fig))
            figures.append(f"{FIG_DIR}/{name}")
    atomic_write_json(
        report_dir / RESULTS,
        {
            **study_fields(run),
            "tasks": tasks,
            "checks": found,
            "settling": settling,
            "orderings": ranked,
            "chance": chance,
            "figures": figures,
        },
    )
    settings = run.jobs[0].expected if run.jobs else {}
    train, model = settings.get("train", {}), settings.get("model", {})
    rates = sorted({j.learning_rate for j in run.jobs})
    decays = sorted({j.weight_decay for j in run.jobs})
    lines = header("MAD's token tasks on every mixer (Poli et al. 2024)", run)
    lines += [
        f"Beside {PAPER}. Every task at MAD's baseline setting (src/tasks/mad.py; MAD's configs/tasks/*.yml), every "
        f"mixer in MAD's block [mixer, SwiGLU] x 2 at width {model.get('width')} (MAD: 128), "
        f"{model.get('n_head')} heads, "
        "layer norm, rotary positions inside attention and none elsewhere, AdamW with warm-up and cosine decay, "
        f"batch {train.get('batch_size')} (MAD: 128) of fresh sequences (MAD: 200 epochs over a fixed set), "
        f"the best of learning rates {', '.join(f'{r:g}' for r in rates)} and weight decay "
        f"{', '.join(f'{d:g}' for d in decays)} "
        "(MAD: the best of 1e-4, 5e-4, 1e-3 x 0, 0.1). Accuracy on 512 fresh test sequences, per token and per class "
        "(macro: MAD's torchmetrics default); recall tasks train on every next token and score only the values whose "
        "key was shown earlier in the sequence.",
        "",
    ]
    lines += _budget_lines(tasks, settings) + [""]
    lines += [
        "Where we differ from MAD's code: every batch is fresh (MAD trains 200 epochs over a fixed set, so its "
        "models may also fit that set); fuzzy recall's final probe is scored only where its key appeared earlier in "
        "the sequence (MAD's generator can draw the probe's slot after its loop ends and still scores the final "
        "value, whose key was never shown: 2.4 % of test sequences at the baseline by a NumPy port of its "
        "definition, tests/test_mad.py); one learning rate for every mixer, where MAD takes the best of six "
        "rate-decay pairs, so a mixer that fails here may succeed at another rate (configs/mad_rates.yaml trains "
        "two). Memorization draws its fact table as MAD does (default_rng(12345), the same 127 facts).",
        "",
    ]
    lines += [
        "MAD's score is the mean over a task's difficulty grid (its baseline and harder settings: larger "
        "vocabularies, longer sequences, fewer training sequences, more noise), so at the baseline setting our "
        "numbers should lie at or above it where training has converged; the comparison that carries over is the "
        "ordering of the mixers.",
        "",
        "## Accuracy per class (macro, %), MAD's score in brackets",
        "",
    ]
    lines += overview_table(tasks, mixers, labels, chance)
    lines += reading(tasks, labels, chance) + ["## The claims", ""]
    for c in found:
        value = c["value"]
        shown = "n/a" if value is None else f"{value:.3f}"
        status = (
            "cannot tell (every model at the ceiling)"
            if c.get("saturated")
            else "holds"
            if c["holds"]
            else "does not hold"
        )
        lines.append(f"- **{status}**: {c['claim']}: {shown}" + (f" ({c['detail']})" if c.get("detail") else ""))
        if c.get("budget") and not c["holds"]:
            lines.append(f"  - the budget it would take: {c['budget']}")
    if settling:
        lines += ["", "## Longer runs", ""]
        lines += [
            "One mixer trained longer on a task at its baseline, the grid's other settings unchanged (configs/mad.yaml "
            "`settling`, `make mad_settling`): per-token accuracy on the same 512 test sequences at each log step.",
            "",
            "| task | mixer | steps | sequences | accuracy per token at log steps (%) | final, per class (%) "
            "| train s |",
            "|---|---|---|---|---|---|---|",
        ]
        for task, r in settling.items():
            curve = ", ".join(f"{step}: {100 * acc:.1f}" for step, acc, _ in r["curve"])
            macro = "—" if r["macro_accuracy"] is None else f"{100 * r['macro_accuracy']:.1f}"
            seconds = "—" if r["seconds"] is None else f"{r['seconds']:.0f}"
            lines.append(
                f"| {TASK_LABELS[task]} | {labels.get(r['mixer'], r['mixer'])} | {r['steps']} | {r['sequences']:,} | "
                f"{curve} | {macro} | {seconds} |"
            )
    lines += ["", "## Orderings beside MAD's (the five models of its table)", ""]
    lines += ["| task | ours, best first | MAD, best first | Kendall's τ |", "|---|---|---|---|"]
    for task, o in ranked.items():
        lines.append(
            f"| {TASK_LABELS[task]} | {', '.join(labels.get(m, m) for m in o['ours_order'])} | "
            f"{', '.join(labels.get(m, m) for m in o['mad_order'])} | {o['tau']:+.2f} |"
        )
    lines += ["", "## Every task", ""]
    for task in TASK_LABELS:
        if task in tasks:
            lines += task_table(task, tasks[task])
    lines += [
        "## Left to the GPU queue",
        "",
        "The jobs `mad_a` and `mad_b` (scripts/device/gpu_queue_jobs.py, configs/gpu/mad_a.yaml and mad_b.yaml) "
        "train the five models of MAD's table on the six tasks at MAD's width and batch (128, 128) for 5,000 steps "
        "(1/4 of MAD's 200 epochs; memorization its full 200 epochs) at 1e-3; configs/paper/mad.yaml is MAD's "
        "whole protocol (its three rates x two decays and every task's difficulty grid), for a GPU of one's own "
        "(`python -m scripts.mad --config configs/paper/mad.yaml`).",
        "",
    ]
    lines += ["## Figures", ""] + [f"- `{f}`" for f in figures] + [""]
    atomic_write_text(report_dir / REPORT, "\n".join(lines))
    return [report_dir / REPORT, report_dir / RESULTS, write_index(report_dir, run.head)] + [
        report_dir / f for f in figures
    ]
