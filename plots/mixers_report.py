"""The report of scripts.mixers (Zoology / miniseq): report/MIXERS.md, report/mixers_results.json and
report/figures/mixers/*.png (mqar_steps: MQAR accuracy against training steps; mqar_width where the
grid has several widths; boolean_examples where it has the boolean tasks) from the runs'
metrics_summary.json and metrics.jsonl, with the study's checks evaluated on them.

MQAR accuracy: exact match of the argmax token at the query positions on the fixed eval set;
boolean accuracy: sign ŷ at every prediction point (chance 0.5). A table cell is the mean over
seeds, "± std" (sample, ddof 1) when there are several. The checks are plots/mixers_checks.py's, the
figures and the steps table plots/mixers_figures.py's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from plots.mixers_checks import CELL, Check, _cell, evaluate
from plots.mixers_figures import figure_boolean, figure_mqar, figure_steps, steps_table
from plots.provenance import header, study_fields
from plots.report_index import write_index
from plots.style import png_bytes
from src.jobs.declared import StudyRun
from src import rundir as names
from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text

REPORT, RESULTS, FIG_DIR = "MIXERS.md", "mixers_results.json", "figures/mixers"
RATE_FIELDS = ("run", "mixer", "task", "width", "kappa", "seed", "learning_rate", "accuracy")  # a swept run


# the zoology block (src.models.sequence_presets.with_block) in a report's Model line
ZOOLOGY_BLOCK = (
    "Zoology's block (`block: zoology`): layer norm, no MLP (its torch.nn.Identity state mixer, "
    "which in its pre-norm residual form adds h += LN(h)), learned positions for attention only (no "
    "table for the other mixers: figure 2's max_position_embeddings = 0), dropout 0.1 on the "
    "embeddings and on attention's softmax weights in training, attention projections with biases, "
    "the read-out tied to the embedding table"
)


def block_words(jobs: Sequence, ours: str) -> str:
    """The runs' block in a report's words, read from their jobs (scripts.mixers.MixerJob.block, the
    block their settings were built with): `ours` for our block, ZOOLOGY_BLOCK for Zoology's, both
    (joined) where both ran."""
    found = list(dict.fromkeys(job.block for job in jobs)) or ["ours"]
    return "; ".join({"ours": ours, "zoology": ZOOLOGY_BLOCK}[b] for b in found)


def collect(jobs: Sequence) -> list[dict]:
    rows = []
    for job in jobs:
        run = job.run
        if not (run.path.is_dir() and run.exists(names.SUMMARY)):
            continue
        summary = json.loads(run.file(names.SUMMARY).read_text())
        by_position = summary.get("accuracy_by_position") or None
        per_point = by_position if not job.pairs else None  # boolean rows: every point is scored
        rows.append(
            {
                "run": job.name,
                "mixer": job.mixer,
                "task": job.task,
                "width": job.width,
                "kappa": job.pairs or None,
                "seed": job.seed,
                "heads": job.heads,
                "steps": job.steps,
                "learning_rate": job.learning_rate,
                "batch_size": job.batch_size,
                "vocab_size": job.vocab_size or None,
                "seq_len": job.seq_len or None,
                "accuracy": summary.get("eval_accuracy"),
                "status": summary.get("status"),
                "last_point_accuracy": per_point[-1] if per_point else None,
                "mean_point_accuracy": float(np.mean(per_point)) if per_point else None,
                "train_seconds": summary.get("train_seconds"),
                "parameters": summary.get("parameters"),
                "accuracy_by_position": by_position,
                "curve": [
                    [m["step"], m["eval_accuracy"]] for m in run.read_metrics() if m.get("eval_accuracy") is not None
                ]
                if job.pairs
                else None,
            }
        )
    return rows


def best_of_rates(rows: list[dict]) -> list[dict]:
    """One row per (mixer, task, width, κ, seed): where a cell was trained at several learning rates,
    the one of highest accuracy (Zoology's protocol), with `rates_tried` (1 where there was one)."""
    score = lambda row: row["accuracy"] if row["accuracy"] is not None else -math.inf
    best: dict[tuple, dict] = {}
    tried: dict[tuple, int] = {}
    for row in rows:
        key = (row["mixer"], *(row[k] for k in CELL))
        tried[key] = tried.get(key, 0) + 1
        if key not in best or score(row) > score(best[key]):
            best[key] = row
    return [{**row, "rates_tried": tried[key]} for key, row in best.items()]


def _span(rows: list[dict], key: str, mqar: bool) -> str:
    """The values of `key` over the MQAR rows (mqar=True) or the boolean rows, as '1' or '1/4'."""
    values = sorted({r[key] for r in rows if bool(r["kappa"]) == mqar})
    return "/".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values) or "n/a"


def _check_value(value: float, relative: bool) -> str:
    """A check's value: signed when it is a difference from the reference mixer."""
    return f"{value:+.3f}" if relative else f"{value:.3f}"


def _pm(stats: dict) -> str:
    if stats["n"] == 0:
        return "n/a"
    return f"{stats['mean']:.3f}" + (f" ± {stats['std']:.3f}" if stats["n"] > 1 else "")


def figure_files(rows: list[dict], report_dir: Path) -> list[str]:
    """Draws the figures the rows call for under report_dir/FIG_DIR; their paths relative to report_dir."""
    figures = []
    drawn = [
        ("mqar_steps.png", figure_steps, any(r["kappa"] and r["curve"] for r in rows)),
        ("mqar_width.png", figure_mqar, len({r["width"] for r in rows if r["kappa"]}) > 1),
        ("boolean_examples.png", figure_boolean, any(not r["kappa"] for r in rows)),
    ]
    for name, draw, wanted in drawn:
        if wanted:
            atomic_write_bytes(report_dir / FIG_DIR / name, png_bytes(draw(rows)))
            figures.append(f"{FIG_DIR}/{name}")
    return figures


def setup_lines(jobs: Sequence, rows: list[dict], every: list[dict], swept: int) -> list[str]:
    """The report's seeds, model, MQAR and boolean settings (and the learning-rate sweep where there was
    one), ending with a blank line."""
    seeds = sorted({r["seed"] for r in rows})
    lines = [
        f"- Seeds: {', '.join(map(str, seeds)) or 'none'}; a cell is the mean over them"
        + (" ± the sample std (ddof 1)" if len(seeds) > 1 else "")
        + ".",
        f"- Model: the `lm` family, 2 layers, {block_words(jobs, 'MLP state mixer')}, "
        f"AdamW (lr {_span(rows, 'learning_rate', True)} "
        f"MQAR, {_span(rows, 'learning_rate', False)} boolean; weight decay 0.1, 3% warm-up, cosine), batch "
        f"{_span(rows, 'batch_size', True)}. Accuracy on a fixed eval set (512 sequences): exact match at "
        "the query positions (MQAR), sign ŷ at every point (boolean; chance 0.5).",
        f"- MQAR (Zoology's protocol): V = {_span(rows, 'vocab_size', True)}, T = {_span(rows, 'seq_len', True)}, "
        f"{_span(rows, 'heads', True)} head(s), {_span(rows, 'steps', True)} steps.",
        *(
            [
                f"- Boolean tasks: d = 10, 40 examples, width {_span(rows, 'width', False)}, "
                f"{_span(rows, 'heads', False)} heads, {_span(rows, 'steps', False)} steps."
            ]
            if any(not r["kappa"] for r in rows)
            else []
        ),
    ]
    if swept > 1:
        lines.append(
            f"- Each cell is the best of {swept} learning rates ({_span(every, 'learning_rate', True)}; "
            "Zoology's protocol): the rate each cell chose is in mixers_results.json."
        )
    return lines + [""]


def check_lines(results: list[dict], quick: bool) -> list[str]:
    """The checks' table and, for each failed check, what every one of its runs gave (none without checks)."""
    if not results:
        return []
    lines = [
        "## Checks" + (" (a --quick smoke test: not expected to pass)" if quick else ""),
        "",
        "| check | bounds | worst value | result |",
        "|---|---|---|---|",
    ]
    for r in results:
        worst = "n/a" if r["worst"] is None else _check_value(r["worst"], r["relative"])
        lines.append(f"| {r['claim']} | {r['metric']} {r['bounds']} | {worst} | {r['status']} |")
    lines.append("")
    failed = [
        f"- FAIL, {r['claim']}: "
        + ", ".join(  # what every run of a failed check gave
            f"{v['run']} {_check_value(v['value'], r['relative'])}" for v in r["values"]
        )
        for r in results
        if r["status"] == "FAIL"
    ]
    return lines + failed + ([""] if failed else [])


def mqar_tables(rows: list[dict]) -> list[str]:
    """One table per κ: a row per mixer, a column per width."""
    mixers = list(dict.fromkeys(r["mixer"] for r in rows))
    widths = sorted({r["width"] for r in rows if r["kappa"]})
    lines = []
    for kappa in sorted({r["kappa"] for r in rows if r["kappa"]}):
        lines += [
            f"## MQAR, κ = {kappa}",
            "",
            "| mixer | " + " | ".join(f"width {w}" for w in widths) + " |",
            "|---" * (len(widths) + 1) + "|",
        ]
        for mixer in mixers:
            lines.append(
                f"| {mixer} | "
                + " | ".join(_pm(_cell(rows, "accuracy", kappa=kappa, mixer=mixer, width=w)) for w in widths)
                + " |"
            )
        lines.append("")
    return lines


def boolean_table(rows: list[dict]) -> list[str]:
    """The boolean tasks' table: a row per mixer, last point / mean over points per task (none without them)."""
    tasks = sorted({r["task"] for r in rows if not r["kappa"]})
    if not tasks:
        return []
    lines = [
        "## Boolean tasks",
        "",
        "| mixer | " + " | ".join(f"{t}: last point / mean over points" for t in tasks) + " |",
        "|---" * (len(tasks) + 1) + "|",
    ]
    for mixer in dict.fromkeys(r["mixer"] for r in rows):
        cells = [
            f"{_pm(_cell(rows, 'last_point_accuracy', task=t, mixer=mixer))} / "
            f"{_pm(_cell(rows, 'mean_point_accuracy', task=t, mixer=mixer))}"
            for t in tasks
        ]
        lines.append(f"| {mixer} | " + " | ".join(cells) + " |")
    return lines + [""]


def write_report(run: StudyRun, checks: Sequence[Check] = ()) -> list[Path]:
    jobs, report_dir = run.jobs, run.report_dir
    every = collect(jobs)
    rows = best_of_rates(every)
    results = [evaluate(check, rows) for check in checks]
    figures = figure_files(rows, report_dir)
    swept = max((r["rates_tried"] for r in rows), default=1)
    atomic_write_json(
        report_dir / RESULTS,
        {
            **study_fields(run),
            "results": rows,
            "checks": results,
            "figures": figures,
            "every_rate": [{k: r[k] for k in RATE_FIELDS} for r in every] if swept > 1 else None,
        },
    )
    title = "Sequence mixers on the ICL benchmark (Zoology / miniseq)"
    lines = header(title, run)
    lines += setup_lines(jobs, rows, every, swept)
    lines += check_lines(results, run.quick) + mqar_tables(rows) + steps_table(rows) + boolean_table(rows)
    lines += ["## Figures", ""] + [f"- `{f}`" for f in figures] + [""]
    atomic_write_text(report_dir / REPORT, "\n".join(lines))
    return [report_dir / REPORT, report_dir / RESULTS, write_index(report_dir, run.head)] + [
        report_dir / f for f in figures
    ]
