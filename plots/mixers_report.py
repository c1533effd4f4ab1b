"""The report of scripts.mixers (Zoology / miniseq): report/MIXERS.md, report/mixers_results.json and
report/figures/mixers/*.png (mqar_steps: MQAR accuracy against training steps; mqar_width where the
grid has several widths; boolean_examples where it has the boolean tasks) from the runs'
metrics_summary.json and metrics.jsonl, with the study's checks evaluated on them.

MQAR accuracy: exact match of the argmax token at the query positions on the fixed eval set;
boolean accuracy: sign ŷ at every prediction point (chance 0.5). A table cell is the mean over
seeds, "± std" (sample, ddof 1) when there are several.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from plots.provenance import header
from plots.report_index import write_index
from plots.style import new_figure, png_bytes
from src import rundir as names
from src.stats import mean_std_rows, over_seeds
from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text

REPORT, RESULTS, FIG_DIR = "MIXERS.md", "mixers_results.json", "figures/mixers"
CELL = ("task", "width", "kappa", "seed")       # what a row and its reference row share
RATE_FIELDS = ("run", "mixer", "task", "width", "kappa", "seed", "learning_rate", "accuracy")   # a swept run


@dataclass(frozen=True)
class Check:
    """A claim about the study's rows: every row whose fields equal `where` (and are at least
    `minimum`) has `metric` in [low, high]; with `reference`, the metric minus that of the row
    of the same cell (task, width, κ, seed) whose fields equal `reference`."""
    claim: str
    where: dict
    metric: str
    low: float = -math.inf
    high: float = math.inf
    minimum: dict = field(default_factory=dict)
    reference: dict | None = None


def _matches(row: dict, where: dict, minimum: dict | None = None) -> bool:
    return (all(row.get(k) == v for k, v in where.items())
            and all(row.get(k) is not None and row[k] >= v for k, v in (minimum or {}).items()))


def evaluate(check: Check, rows: Sequence[dict]) -> dict:
    """{claim, bounds, values [{run, value}], worst, status}: status "pass" when every matched
    row is within the bounds, "FAIL" when one is not, "n/a" when no row (or reference) matched."""
    values = []
    for row in rows:
        if not _matches(row, check.where, check.minimum) or row.get(check.metric) is None:
            continue
        value = float(row[check.metric])
        if check.reference is not None:
            ref = next((r for r in rows if _matches(r, {**{k: row[k] for k in CELL}, **check.reference})
                        and r.get(check.metric) is not None), None)
            if ref is None:
                continue
            value -= float(ref[check.metric])
        values.append({"run": row["run"], "value": value})
    inside = [check.low <= v["value"] <= check.high for v in values]
    bounds = ("difference " if check.reference is not None else "") + (
        f"in [{check.low:g}, {check.high:g}]" if math.isfinite(check.low) and math.isfinite(check.high)
        else f">= {check.low:g}" if math.isfinite(check.low) else f"<= {check.high:g}")
    worst = None
    if values:   # the value furthest past (or closest to) the bounds
        worst = min((v["value"] for v in values),
                    key=lambda x: min(x - check.low, check.high - x))
    return {"claim": check.claim, "metric": check.metric, "bounds": bounds, "relative": check.reference is not None,
            "values": values, "worst": worst, "status": "n/a" if not values else "pass" if all(inside) else "FAIL"}


# the zoology block (src.models.sequence.with_block) in a report's Model line
ZOOLOGY_BLOCK = ("Zoology's block (`block: zoology`): layer norm, no MLP (its torch.nn.Identity state mixer, "
                 "which in its pre-norm residual form adds h += LN(h)), learned positions for attention only (no "
                 "table for the other mixers: figure 2's max_position_embeddings = 0), dropout 0.1 on the "
                 "embeddings and on attention's softmax weights in training, attention projections with biases, "
                 "the read-out tied to the embedding table")


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
        per_point = by_position if not job.pairs else None      # boolean rows: every point is scored
        rows.append({"run": job.name, "mixer": job.mixer, "task": job.task, "width": job.width,
                     "kappa": job.pairs or None, "seed": job.seed, "heads": job.heads, "steps": job.steps,
                     "learning_rate": job.learning_rate, "batch_size": job.batch_size,
                     "vocab_size": job.vocab_size or None, "seq_len": job.seq_len or None,
                     "accuracy": summary.get("eval_accuracy"), "status": summary.get("status"),
                     "last_point_accuracy": per_point[-1] if per_point else None,
                     "mean_point_accuracy": float(np.mean(per_point)) if per_point else None,
                     "train_seconds": summary.get("train_seconds"), "parameters": summary.get("parameters"),
                     "accuracy_by_position": by_position,
                     "curve": [[m["step"], m["eval_accuracy"]] for m in run.read_metrics()
                               if m.get("eval_accuracy") is not None] if job.pairs else None})
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


def _cell(rows: list[dict], metric: str, **where) -> dict:
    return over_seeds([r[metric] for r in rows if _matches(r, where)])


def _check_value(value: float, relative: bool) -> str:
    """A check's value: signed when it is a difference from the reference mixer."""
    return f"{value:+.3f}" if relative else f"{value:.3f}"


def _pm(stats: dict) -> str:
    if stats["n"] == 0:
        return "n/a"
    return f"{stats['mean']:.3f}" + (f" ± {stats['std']:.3f}" if stats["n"] > 1 else "")


def figure_mqar(rows: list[dict]):
    kappas = sorted({r["kappa"] for r in rows if r["kappa"]})
    fig = new_figure(4.5 * max(len(kappas), 1), 3.6, constrained=True)
    for i, kappa in enumerate(kappas):
        ax = fig.add_subplot(1, len(kappas), i + 1)
        for j, mixer in enumerate(dict.fromkeys(r["mixer"] for r in rows)):
            runs = [r for r in rows if _matches(r, dict(kappa=kappa, mixer=mixer))]
            widths = sorted({r["width"] for r in runs})
            cells = [_cell(runs, "accuracy", width=w) for w in widths]
            ax.plot(widths, [c["mean"] for c in cells], marker="o", color=f"C{j}", label=mixer)
            # every seed as a hollow marker: with two seeds a ± std bar hides a bimodal cell
            ax.scatter([r["width"] for r in runs], [r["accuracy"] for r in runs], s=22,
                       facecolors="none", edgecolors=f"C{j}", linewidths=0.8, zorder=3)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("model width")
        ax.set_ylabel("MQAR accuracy")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"MQAR, κ = {kappa} pairs (line: mean; circles: seeds)", fontsize=9)
        ax.legend(fontsize=7)
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
    fig = new_figure(4.5 * max(len(cells), 1), 3.6, constrained=True)
    for i, (kappa, by_mixer) in enumerate(cells.items()):
        ax = fig.add_subplot(1, len(cells), i + 1)
        for mixer, (runs, steps, mean) in by_mixer.items():
            for r in runs:
                ax.plot(*zip(*r["curve"]), color=colour[mixer], lw=0.6, alpha=0.4)
            ax.plot(steps, mean, color=colour[mixer], lw=1.6, label=mixer)
        ax.axhline(0.97, color="0.5", ls=":", lw=1)
        ax.set_xlabel("training step")
        ax.set_ylabel("MQAR accuracy (eval set)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"MQAR, κ = {kappa}, width {width} (thick: mean; thin: seeds)", fontsize=9)
        ax.legend(fontsize=7)
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
        lines += [f"κ = {kappa}:", "", "| mixer | " + " | ".join(f"step {s:,}" for s in marks) + " |",
                  "|---" * (len(marks) + 1) + "|"]
        lines += [f"| {mixer} | " + " | ".join(f"{m[s]:.3f}" for s in marks) + " |" for mixer, m in means.items()]
        lines.append("")
    return lines


def figure_boolean(rows: list[dict]):
    tasks = sorted({r["task"] for r in rows if not r["kappa"]})
    fig = new_figure(4.5 * max(len(tasks), 1), 3.6, constrained=True)
    for i, task in enumerate(tasks):
        ax = fig.add_subplot(1, len(tasks), i + 1)
        for j, mixer in enumerate(dict.fromkeys(r["mixer"] for r in rows)):
            curves = [r["accuracy_by_position"] for r in rows
                      if _matches(r, {"task": task, "mixer": mixer}) and r["accuracy_by_position"]]
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


def write_report(jobs: Sequence, report_dir: Path, *, quick: bool, seconds: float, command: str,
                 head: dict, checks: Sequence[Check] = ()) -> list[Path]:
    every = collect(jobs)
    rows = best_of_rates(every)
    results = [evaluate(check, rows) for check in checks]
    figures = []
    drawn = [("mqar_steps.png", figure_steps, any(r["kappa"] and r["curve"] for r in rows)),
             ("mqar_width.png", figure_mqar, len({r["width"] for r in rows if r["kappa"]}) > 1),
             ("boolean_examples.png", figure_boolean, any(not r["kappa"] for r in rows))]
    for name, draw, wanted in drawn:
        if wanted:
            atomic_write_bytes(report_dir / FIG_DIR / name, png_bytes(draw(rows)))
            figures.append(f"{FIG_DIR}/{name}")
    swept = max((r["rates_tried"] for r in rows), default=1)
    atomic_write_json(report_dir / RESULTS, {"command": command, "quick": quick, "seconds": seconds,
                                             "results": rows, "checks": results, "figures": figures,
                                             "every_rate": [{k: r[k] for k in RATE_FIELDS} for r in every]
                                             if swept > 1 else None})
    mixers = list(dict.fromkeys(r["mixer"] for r in rows))
    widths = sorted({r["width"] for r in rows if r["kappa"]})
    seeds = sorted({r["seed"] for r in rows})
    lines = header("Sequence mixers on the ICL benchmark (Zoology / miniseq)", quick=quick, head=head,
                   command=command, seconds=seconds, jobs=jobs)
    lines += [f"- Seeds: {', '.join(map(str, seeds)) or 'none'}; a cell is the mean over them"
             + (" ± the sample std (ddof 1)" if len(seeds) > 1 else "") + ".",
             f"- Model: the `lm` family, 2 layers, {block_words(jobs, 'MLP state mixer')}, AdamW (lr {_span(rows, 'learning_rate', True)} "
             f"MQAR, {_span(rows, 'learning_rate', False)} boolean; weight decay 0.1, 3% warm-up, cosine), batch "
             f"{_span(rows, 'batch_size', True)}. Accuracy on a fixed eval set (512 sequences): exact match at "
             "the query positions (MQAR), sign ŷ at every point (boolean; chance 0.5).",
             f"- MQAR (Zoology's protocol): V = {_span(rows, 'vocab_size', True)}, T = {_span(rows, 'seq_len', True)}, "
             f"{_span(rows, 'heads', True)} head(s), {_span(rows, 'steps', True)} steps.",
             *([f"- Boolean tasks: d = 10, 40 examples, width {_span(rows, 'width', False)}, "
                f"{_span(rows, 'heads', False)} heads, {_span(rows, 'steps', False)} steps."]
               if any(not r["kappa"] for r in rows) else []), ""]
    if swept > 1:
        lines[-1:-1] = [f"- Each cell is the best of {swept} learning rates ({_span(every, 'learning_rate', True)}; "
                        "Zoology's protocol): the rate each cell chose is in mixers_results.json."]
    if results:
        lines += ["## Checks" + (" (a --quick smoke test: not expected to pass)" if quick else ""), "",
                  "| check | bounds | worst value | result |", "|---|---|---|---|"]
        for r in results:
            worst = "n/a" if r["worst"] is None else _check_value(r["worst"], r["relative"])
            lines.append(f"| {r['claim']} | {r['metric']} {r['bounds']} | {worst} | {r['status']} |")
        lines.append("")
        failed = [f"- FAIL, {r['claim']}: " + ", ".join(     # what every run of a failed check gave
                  f"{v['run']} {_check_value(v['value'], r['relative'])}"
                  for v in r["values"]) for r in results if r["status"] == "FAIL"]
        lines += failed + ([""] if failed else [])
    for kappa in sorted({r["kappa"] for r in rows if r["kappa"]}):
        lines += [f"## MQAR, κ = {kappa}", "", "| mixer | " + " | ".join(f"width {w}" for w in widths) + " |",
                  "|---" * (len(widths) + 1) + "|"]
        for mixer in mixers:
            lines.append(f"| {mixer} | " + " | ".join(_pm(_cell(rows, "accuracy", kappa=kappa, mixer=mixer, width=w))
                                                      for w in widths) + " |")
        lines.append("")
    lines += steps_table(rows)
    tasks = sorted({r["task"] for r in rows if not r["kappa"]})
    if tasks:
        lines += ["## Boolean tasks", "",
                  "| mixer | " + " | ".join(f"{t}: last point / mean over points" for t in tasks) + " |",
                  "|---" * (len(tasks) + 1) + "|"]
        for mixer in mixers:
            cells = [f"{_pm(_cell(rows, 'last_point_accuracy', task=t, mixer=mixer))} / "
                     f"{_pm(_cell(rows, 'mean_point_accuracy', task=t, mixer=mixer))}" for t in tasks]
            lines.append(f"| {mixer} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Figures", ""] + [f"- `{f}`" for f in figures] + [""]
    atomic_write_text(report_dir / REPORT, "\n".join(lines))
    return [report_dir / REPORT, report_dir / RESULTS, write_index(report_dir)] + [report_dir / f for f in figures]

