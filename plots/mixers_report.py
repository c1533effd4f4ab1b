"""The report of scripts.mixers (seed 001): report/MIXERS.md, report/mixers_results.json and
report/figures/mixers/{mqar_width,boolean_examples}.png from the runs' metrics_summary.json.

MQAR accuracy: exact match of the argmax token at the query positions on the fixed eval set;
boolean accuracy: sign ŷ at every prediction point (chance 0.5).
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from plots.style import new_figure, png_bytes
from src import rundir as names
from utils_log import atomic_write_bytes, atomic_write_json, atomic_write_text

REPORT, RESULTS, FIG_DIR = "MIXERS.md", "mixers_results.json", "figures/mixers"


def collect(jobs: Sequence) -> list[dict]:
    rows = []
    for job in jobs:
        run = job.run
        if not (run.path.is_dir() and run.exists(names.SUMMARY)):
            continue
        summary = json.loads(run.file(names.SUMMARY).read_text())
        rows.append({"mixer": job.mixer, "task": job.task, "width": job.width, "kappa": job.pairs or None,
                     "seed": job.seed, "heads": job.heads, "steps": job.steps,
                     "accuracy": summary.get("eval_accuracy"), "status": summary.get("status"),
                     "train_seconds": summary.get("train_seconds"), "parameters": summary.get("parameters"),
                     "accuracy_by_position": summary.get("accuracy_by_position")})
    return rows


def _span(rows: list[dict], key: str, mqar: bool) -> str:
    """The values of `key` over the MQAR rows (mqar=True) or the boolean rows, as '1' or '1/4'."""
    values = sorted({r[key] for r in rows if bool(r["kappa"]) == mqar})
    return "/".join(str(v) for v in values) or "n/a"


def figure_mqar(rows: list[dict]):
    kappas = sorted({r["kappa"] for r in rows if r["kappa"]})
    fig = new_figure(4.5 * max(len(kappas), 1), 3.6, constrained=True)
    for i, kappa in enumerate(kappas):
        ax = fig.add_subplot(1, len(kappas), i + 1)
        for j, mixer in enumerate(dict.fromkeys(r["mixer"] for r in rows)):
            cells = sorted((r["width"], r["accuracy"]) for r in rows
                           if r["kappa"] and r["kappa"] == kappa and r["mixer"] == mixer)
            ax.plot([w for w, _ in cells], [a for _, a in cells], marker="o", color=f"C{j}", label=mixer)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("model width")
        ax.set_ylabel("MQAR accuracy")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"MQAR, κ = {kappa} pairs", fontsize=9)
        ax.legend(fontsize=7)
    return fig


def figure_boolean(rows: list[dict]):
    tasks = sorted({r["task"] for r in rows if not r["kappa"]})
    fig = new_figure(4.5 * max(len(tasks), 1), 3.6, constrained=True)
    for i, task in enumerate(tasks):
        ax = fig.add_subplot(1, len(tasks), i + 1)
        for j, mixer in enumerate(dict.fromkeys(r["mixer"] for r in rows)):
            for r in rows:
                if r["task"] == task and r["mixer"] == mixer and r["accuracy_by_position"]:
                    ax.plot(np.arange(len(r["accuracy_by_position"])), r["accuracy_by_position"],
                            color=f"C{j}", label=mixer)
        ax.axhline(0.5, color="0.5", ls=":", lw=1)
        ax.set_xlabel("in-context examples before the prediction")
        ax.set_ylabel("accuracy of sign ŷ")
        ax.set_ylim(0.3, 1.02)
        ax.set_title(task, fontsize=9)
        ax.legend(fontsize=7)
    return fig


def write_report(jobs: Sequence, report_dir: Path, *, quick: bool, seconds: float, command: str,
                 head: dict) -> list[Path]:
    rows = collect(jobs)
    figures = []
    for name, fig in (("mqar_width.png", figure_mqar(rows)), ("boolean_examples.png", figure_boolean(rows))):
        atomic_write_bytes(report_dir / FIG_DIR / name, png_bytes(fig))
        figures.append(f"{FIG_DIR}/{name}")
    atomic_write_json(report_dir / RESULTS, {"command": command, "quick": quick, "seconds": seconds,
                                             "results": rows, "figures": figures})
    mixers = list(dict.fromkeys(r["mixer"] for r in rows))
    widths = sorted({r["width"] for r in rows if r["kappa"]})
    lines = [f"# Sequence mixers on the ICL task suite (seed 001){' — QUICK' if quick else ''}", "",
             f"- Date: {dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}; commit "
             f"{(head['commit'] or 'unknown')[:12]}{' (uncommitted changes)' if head['dirty'] else ''}",
             f"- Command: `{command}`; wall time {seconds:.0f} s, in which "
             f"{sum(1 for j in jobs if j.seconds > 0)} of {len(jobs)} runs were trained",
             "- Model: the `lm` family, 2 layers, MLP state mixer, AdamW (lr 3e-3, weight decay 0.1, 3% "
             "warm-up, cosine), batch 64. Accuracy on a fixed eval set (512 sequences): exact match at "
             "the query positions (MQAR), sign ŷ at every point (boolean; chance 0.5).",
             f"- MQAR (Zoology's protocol): V = 256, T = 64, {_span(rows, 'heads', True)} head(s), "
             f"{_span(rows, 'steps', True)} steps.",
             f"- Boolean tasks: d = 10, 40 examples, width 64, {_span(rows, 'heads', False)} heads, "
             f"{_span(rows, 'steps', False)} steps.", ""]
    for kappa in sorted({r["kappa"] for r in rows if r["kappa"]}):
        lines += [f"## MQAR, κ = {kappa}", "", "| mixer | " + " | ".join(f"width {w}" for w in widths) + " |",
                  "|---" * (len(widths) + 1) + "|"]
        for mixer in mixers:
            cells = {r["width"]: r["accuracy"] for r in rows
                     if r["kappa"] and r["kappa"] == kappa and r["mixer"] == mixer}
            lines.append(f"| {mixer} | " + " | ".join(f"{cells[w]:.3f}" if cells.get(w) is not None else "n/a"
                                                      for w in widths) + " |")
        lines.append("")
    tasks = sorted({r["task"] for r in rows if not r["kappa"]})
    if tasks:
        lines += ["## Boolean tasks (width 64)", "",
                  "| mixer | " + " | ".join(f"{t}: last point / mean" for t in tasks) + " |",
                  "|---" * (len(tasks) + 1) + "|"]
        for mixer in mixers:
            cells = []
            for task in tasks:
                r = next((r for r in rows if r["task"] == task and r["mixer"] == mixer), None)
                by = (r or {}).get("accuracy_by_position") or []
                cells.append(f"{by[-1]:.3f} / {np.mean(by):.3f}" if by else "n/a")
            lines.append(f"| {mixer} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Figures", ""] + [f"- `{f}`" for f in figures] + [""]
    atomic_write_text(report_dir / REPORT, "\n".join(lines))
    return [report_dir / REPORT, report_dir / RESULTS] + [report_dir / f for f in figures]
