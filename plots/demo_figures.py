"""The figure `make demo` adds to the runs' own: MQAR accuracy over training for several runs of
the ICL benchmark's recipe side by side (read from each run's metrics.jsonl; draw only)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from plots.style import new_figure, png_bytes
from src import rundir as names
from src.files import atomic_write_bytes


def mqar_curves(runs: Sequence[Path], out: Path) -> Path:
    """Eval accuracy vs step of each run (label: its sequence mixer) into `out` (PNG)."""
    fig = new_figure(5.0, 3.2)
    ax = fig.add_subplot(1, 1, 1)
    for run in runs:
        rows = [json.loads(line) for line in (run / names.METRICS).read_text().splitlines() if line.strip()]
        rows = [r for r in rows if "eval_accuracy" in r]
        settings = json.loads((run / names.CONFIG).read_text())["settings"]
        ax.plot([r["step"] for r in rows], [r["eval_accuracy"] for r in rows], marker="o", markersize=3,
                label=settings["model"]["seq_mixer"]["name"])
    ax.set_xlabel("training step")
    ax.set_ylabel("MQAR accuracy (query positions)")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    atomic_write_bytes(out, png_bytes(fig))
    return out
