"""The report of scripts.lengthgen (Lin et al., AAAI 2025), drawn from the per-run analyses the study ran
(analysis.length_gen to 8x, analysis.recency and analysis.prompt_tests at 4x,
analysis.inductive_bias at the trained length): report/LENGTHGEN.md, report/lengthgen_results.json
and report/figures/lengthgen/{ood_length,avg_attention_score,lost_in_mid,baseline_all_dup}.png.
A claim (within 2x, the attention's recency) is counted only over seeds whose model is trained
enough to judge (analysis.length_gen.judge); the others are named.

Errors are each task's own: squared error / d for regression (the zero predictor scores 1),
1 − accuracy of sign ŷ for the boolean task (chance 0.5). "n" is the number of in-context
examples before the prediction; the trained length L covers n = 0 … L − 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from plots.provenance import header, study_fields
from plots.report_index import write_index
from plots.style import panel_row, png_bytes
from src.jobs.declared import StudyRun
from src import rundir as names
from src.stats import NOT_TRAINED, STD_LABEL, TRAINED_BELOW, format_pm, over_seeds
from src.tasks.objectives import objective_of
from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text

REPORT, RESULTS, FIG_DIR = "LENGTHGEN.md", "lengthgen_results.json", "figures/lengthgen"
FACTOR, PROBE_FACTOR = 8, 4


def _model_curve(run_dir) -> list[float]:
    rows = run_dir.file(names.LENGTH_GEN_CSV).read_text().strip().splitlines()[1:]
    return [float(r.split(",")[2]) for r in rows if r.startswith("model,")]


def _baseline_curves(run_dir) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for row in run_dir.file(names.LENGTH_GEN_CSV).read_text().strip().splitlines()[1:]:
        predictor, _, mean, _ = row.split(",")
        if predictor != "model":
            out.setdefault(predictor, []).append(float(mean))
    return out


def collect(jobs: Sequence, problems: dict) -> tuple[dict, list[dict], dict]:
    """({task: {position: record}}, result rows, {task: baseline curves}) of the finished runs;
    `problems`: run name -> why its analyses could not run."""
    cells: dict = {}
    rows, baselines = [], {}
    for job in jobs:
        run = job.run
        if not (run.path.is_dir() and run.is_trained()):
            continue
        problem = problems.get(job.name)
        record = cells.setdefault(job.task, {}).setdefault(
            job.position,
            {
                "seeds": [],
                "curves": [],
                "length_gen": [],
                "recency": [],
                "prompt_tests": [],
                "inductive_bias": [],
                "problems": [],
            },
        )
        if problem:
            record["problems"].append(f"seed {job.seed}: {problem}")
            continue
        curve = _model_curve(run)
        record["seeds"].append(job.seed)
        record["curves"].append(curve)
        record["length_gen"].append(json.loads(run.file(names.LENGTH_GEN_JSON).read_text()))
        if run.exists(names.RECENCY_JSON):  # not for a mixer without softmax weights
            record["recency"].append(json.loads(run.file(names.RECENCY_JSON).read_text()))
        record["prompt_tests"].append(json.loads(run.file(names.PROMPT_TESTS_JSON).read_text()))
        if run.exists(names.INDUCTIVE_BIAS_JSON):
            record["inductive_bias"].append(json.loads(run.file(names.INDUCTIVE_BIAS_JSON).read_text()))
        rows += [
            {"encoding": job.position, "task": job.task, "n_examples": n, "seed": job.seed, "error": e}
            for n, e in enumerate(curve)
        ]
        curves = _baseline_curves(run)  # the longest (a learned table stops early)
        if len(next(iter(curves.values()), [])) > len(next(iter(baselines.get(job.task, {}).values()), [])):
            baselines[job.task] = curves
    return cells, rows, baselines


def summarise(record: dict) -> dict:
    """Over seeds: the in-distribution error, the error and the within-2x count at 2x/4x/8x, the
    last layer's attention mass on the last 20% (at 4x, else at L), duplication and serial
    position at the trained length."""
    gens = record["length_gen"]
    out = {
        "in_distribution": over_seeds([g["in_distribution_error"] for g in gens]),
        "stopped_at": gens[0]["stopped_at"] if gens else None,
        "untrained_seeds": [s for s, g in zip(record["seeds"], gens) if not g.get("trained_enough", True)],
    }
    for m in ("2", "4", "8"):
        cells = [g["multiples"][m] for g in gens]
        out[f"error_{m}x"] = over_seeds([c["error"] for c in cells if c is not None])
        judged = [c for c in cells if c is not None and c["within_2x"] is not None]
        out[f"within_{m}x"] = (sum(c["within_2x"] for c in judged), len(judged))
        out[f"evaluated_{m}x"] = sum(c is not None for c in cells)
    tails = []
    for rec in record["recency"]:
        lengths = [c for c in rec["lengths"].values() if "last_20pct" in c]
        if rec.get("trained_enough", True):
            tails.append(lengths[-1]["last_20pct"][-1] if lengths else None)
    out["last_20pct"] = over_seeds(tails)
    out["recency_read"] = bool(record["recency"])
    biases = record["inductive_bias"]
    out["closest_learner"] = [b["closest"] for b in biases if b.get("closest")]
    tests = record["prompt_tests"]
    out["duplication"] = {
        r: over_seeds([t["duplication"][r] for t in tests]) for r in (tests[0]["duplication"] if tests else {})
    }
    trained = str(tests[0]["trained_points"]) if tests else None
    out["serial"] = (
        {p: over_seeds([t["serial_position"][trained][p] for t in tests]) for p in ("start", "middle", "end")}
        if tests
        else {}
    )
    return out


def figure_curves(cells: dict, baselines: dict, trained: int):
    tasks = list(cells)
    fig, axes = panel_row(len(tasks), 6.0, 4.2)
    for ax, task in zip(axes, tasks):
        for j, (position, record) in enumerate(cells[task].items()):
            if not record["curves"]:
                continue
            length = min(len(c) for c in record["curves"])
            mean = np.mean([c[:length] for c in record["curves"]], axis=0)
            ax.plot(np.arange(length), mean, color=f"C{j % 10}", lw=1.5, label=position)
        for style, name in (("--", "least_squares"), (":", "knn")):
            if name in baselines.get(task, {}):
                ax.plot(baselines[task][name], color="k", ls=style, lw=1, label=name)
        for m in (1, 2, 4, 8):
            ax.axvline(m * trained - 1, color="0.7", lw=0.8)
        ax.set_yscale("log")
        ax.set_ylim(bottom=1e-3)  # least squares is ~1e-13 past n = d: shown at the floor
        ax.set_xlabel("in-context examples n (grey: 1x, 2x, 4x, 8x the trained length)")
        ax.set_ylabel(objective_of(task).describes)
        ax.set_title(task, fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, ncol=2)
    return fig


def figure_recency(cells: dict):
    tasks = list(cells)
    fig, axes = panel_row(len(tasks), 5.0, 3.6)
    for ax, task in zip(axes, tasks):
        for j, (position, record) in enumerate(cells[task].items()):
            profiles = []
            for rec in record["recency"]:
                lengths = [c for c in rec["lengths"].values() if "profile" in c]
                if lengths:
                    profiles.append(lengths[-1]["profile"][-1])
            if profiles:
                bins = len(profiles[0])
                ax.plot(
                    (np.arange(bins) + 0.5) / bins,
                    np.mean(profiles, axis=0),
                    marker="o",
                    ms=3,
                    color=f"C{j % 10}",
                    label=position,
                )
        ax.axhline(1.0, color="0.5", ls=":", lw=1)
        ax.set_xlabel("normalised key position")
        ax.set_ylabel("attention per key / uniform (last layer)")
        ax.set_title(f"{task}: prediction token, {PROBE_FACTOR}x length (learned: 1x)", fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, ncol=2)
        else:
            ax.text(0.5, 0.5, "no softmax weights to read", ha="center", transform=ax.transAxes)
    return fig


def figure_serial(summaries: dict):
    tasks = list(summaries)
    fig, axes = panel_row(len(tasks), 6.0, 3.6)
    for ax, task in zip(axes, tasks):
        positions = [p for p, s in summaries[task].items() if s.get("serial")]
        for k, place in enumerate(("start", "middle", "end")):
            means = [summaries[task][p]["serial"][place]["mean"] for p in positions]
            ax.bar(np.arange(len(positions)) + 0.27 * (k - 1), means, 0.27, label=place)
        ax.set_xticks(np.arange(len(positions)), positions, rotation=30, fontsize=7)
        ax.set_ylabel("error at the query")
        ax.set_title(f"{task}: informative block at start / middle / end (trained length)", fontsize=9)
        ax.legend(fontsize=7)
    return fig


def figure_inductive_bias(cells: dict):
    """Per task: each row's error at the query (mean over its trained seeds) as copies of the
    last informative example fill the prompt, with least squares, averaging and 3-NN on the
    same prompts (the learners' curves are the same for every run of a task: one eval set)."""
    tasks = list(cells)
    fig, axes = panel_row(len(tasks), 6.0, 4.0)
    styles = {"least_squares": ("--", "k"), "averaging": (":", "0.3"), "knn": ("-.", "0.5")}
    for ax, task in zip(axes, tasks):
        learners, block = None, None
        for j, (position, record) in enumerate(cells[task].items()):
            runs = [b for b in record["inductive_bias"] if b.get("trained_enough")]
            if not runs:
                continue
            block = runs[0]["block"]
            copies = sorted(int(r) for r in runs[0]["errors"])
            mean = np.mean([[b["errors"][str(r)]["model"] for r in copies] for b in runs], axis=0)
            ax.plot([block + r for r in copies], mean, color=f"C{j % 10}", lw=1.5, marker="o", ms=2, label=position)
            # the learners the analysis compared with (analysis.inductive_bias: its mean_gap's keys)
            learners = learners or (copies, runs[0]["errors"], list(runs[0]["mean_gap"]))
        if learners:
            copies, errors, names_of_learners = learners
            for name in names_of_learners:
                style, colour = styles[name]
                ax.plot(
                    [block + r for r in copies],
                    [errors[str(r)][name] for r in copies],
                    ls=style,
                    color=colour,
                    lw=1.2,
                    label=name,
                )
            ax.legend(fontsize=7, ncol=2)
        else:
            ax.text(0.5, 0.5, "no trained runs", ha="center", transform=ax.transAxes)
        ax.set_xlabel("in-context examples" + (f": {block} informative, then copies of the last" if block else ""))
        ax.set_ylabel(objective_of(task).describes)
        ax.set_title(f"{task}: inductive bias under duplication (trained seeds)", fontsize=9)
    return fig


def _table(task: str, summaries: dict) -> list[str]:
    lines = [
        f"### {task}",
        "",
        "| encoding | in-distribution (n = L−1) | 2x | 4x | 8x | within 2x at 2x / 4x / 8x "
        "(seeds) | last-20% attention | duplication r=0 → r=20 | serial start / middle / end | "
        "closest learner under copies (seeds) |",
        "|---" * 10 + "|",
    ]
    for position, s in summaries.items():
        if not s:
            continue
        within = " / ".join(
            f"{s[f'within_{m}x'][0]}/{s[f'within_{m}x'][1]}"
            if s[f"within_{m}x"][1]
            else ("not trained" if s[f"evaluated_{m}x"] else "n/a")
            for m in ("2", "4", "8")
        )
        if s["untrained_seeds"]:
            within += f" (seeds {', '.join(map(str, s['untrained_seeds']))}: {NOT_TRAINED})"
        tail = (
            format_pm(s["last_20pct"], 2)
            if s["last_20pct"].get("n")
            else NOT_TRAINED
            if s["recency_read"]
            else "n/a (no softmax weights)"
        )
        closest = (
            ", ".join(f"{name} {s['closest_learner'].count(name)}" for name in dict.fromkeys(s["closest_learner"]))
            or "—"
        )
        dup = s["duplication"]
        dup_text = (
            f"{format_pm(dup['0'], 3)} → {format_pm(dup['20'], 3)}"
            if dup.get("20", {}).get("n")
            else f"{format_pm(dup.get('0', {}), 3)} → n/a (table)"
        )
        serial = " / ".join(f"{s['serial'][p]['mean']:.3f}" for p in ("start", "middle", "end"))
        lines.append(
            f"| {position} | {format_pm(s['in_distribution'], 3)} | {format_pm(s['error_2x'], 3)} | "
            f"{format_pm(s['error_4x'], 3)} | {format_pm(s['error_8x'], 3)} | {within} | "
            f"{tail} | {dup_text} | {serial} | {closest} |"
        )
    return lines


def figure_files(cells: dict, baselines: dict, summaries: dict, trained: int, report_dir: Path) -> list[str]:
    """Draws the study's four figures under report_dir/FIG_DIR; their paths relative to report_dir."""
    figures = []
    for name, fig in (
        ("ood_length.png", figure_curves(cells, baselines, trained)),
        ("avg_attention_score.png", figure_recency(cells)),
        ("lost_in_mid.png", figure_serial(summaries)),
        ("baseline_all_dup.png", figure_inductive_bias(cells)),
    ):
        atomic_write_bytes(report_dir / FIG_DIR / name, png_bytes(fig))
        figures.append(f"{FIG_DIR}/{name}")
    return figures


def setup_lines(settings: dict, trained: int) -> list[str]:
    """The model, the errors and what counts as trained, ending with a blank line."""
    model = settings["model"]
    return [
        f"- Model: {model['preset']} ({model['n_layer']} layers, width {model['width']}, {model['n_head']} heads, "
        f"{model['seq_mixer']['name']}, {model['norm']['name']}, {model['state_mixer']['name']} state mixer"
        f"{'' if model.get('biases', True) else ', no biases'}); the row `mamba`: a Mamba model of the "
        f"same width and depth (state 16, expand 2, no position encoding); d = {model['n_dims']}; "
        f"trained to L = {trained} points "
        f"(curriculum 11 → {trained}); evaluated to {FACTOR}x L on "
        f"{settings['train']['eval_size']} fixed eval tasks; mean ± {STD_LABEL}",
        "- Errors: squared error / d for linear regression (zero predictor 1), 1 − accuracy "
        'for conjunction (chance 0.5). "within 2x": the error at n = mL − 1 is at most twice '
        "the error at n = L − 1, counted over seeds. last-20%: attention mass of the prediction "
        "token on the last 20% of the prompt, last layer, at 4x L (uniform: 0.2). Duplication: "
        "the last of 2d examples repeated r times; serial: 2d informative examples among "
        "copies of one example, L points. Closest learner: of least squares, averaging and 3-NN, "
        "the one whose predictions at the query are nearest the model's (mean squared "
        "difference) as copies of the last example fill the prompt (min(2d, L − 2) informative "
        "examples, then copies up to L − 1; errors in `baseline_all_dup.png`), counted over seeds.",
        f"- Claims only on trained models: a seed whose in-distribution error is not at most "
        f"{TRAINED_BELOW} x the best constant prediction's (zero for regression, the majority label "
        f'for conjunction) is marked "{NOT_TRAINED}" and left out of the within-2x counts, the '
        "attention column and the closest learner.",
        "",
    ]


def task_tables(summaries: dict, baselines: dict, trained: int) -> list[str]:
    """Each task's table, then least squares' error on the same tasks at 1, 2, 4 and 8 L where recorded."""
    lines = []
    for task in summaries:
        lines += _table(task, summaries[task]) + [""]
        least = baselines.get(task, {}).get("least_squares")
        if least:
            at = [m * trained - 1 for m in (1, 2, 4, 8) if m * trained - 1 < len(least)]
            lines += ["least squares on the same tasks: " + ", ".join(f"n={n}: {least[n]:.3f}" for n in at), ""]
    return lines


def write_report(run: StudyRun, problems: dict | None = None) -> list[Path]:
    jobs, report_dir = run.jobs, run.report_dir
    cells, rows, baselines = collect(jobs, problems or {})
    summaries = {
        task: {p: summarise(r) if r["curves"] else {} for p, r in by_position.items()}
        for task, by_position in cells.items()
    }
    settings = jobs[0].expected
    trained = settings["curriculum"]["points"]["end"]
    figures = figure_files(cells, baselines, summaries, trained, report_dir)
    problems = [f"{task}/{p}: {x}" for task, by_p in cells.items() for p, r in by_p.items() for x in r["problems"]]
    atomic_write_json(
        report_dir / RESULTS,
        {
            **study_fields(run),
            "trained_points": trained,
            "results": rows,
            "baselines": baselines,
            "summary": summaries,
            "figures": figures,
            "problems": problems,
        },
    )
    title = "Position encodings and length generalisation (Lin et al., AAAI 2025)"
    lines = header(title, run)
    lines += setup_lines(settings, trained) + task_tables(summaries, baselines, trained)
    if problems:
        lines += ["## Runs whose analyses could not run", ""] + [f"- {p}" for p in problems] + [""]
    lines += ["## Figures", ""] + [f"- `{f}`" for f in figures] + [""]
    atomic_write_text(report_dir / REPORT, "\n".join(lines))
    return [report_dir / REPORT, report_dir / RESULTS, write_index(report_dir, run.head)] + [
        report_dir / f for f in figures
    ]
