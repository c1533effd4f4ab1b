"""The figure `make demo` adds to the runs' own: MQAR accuracy over training for several runs of
the ICL benchmark's recipe side by side (read from each run's metrics.jsonl; draw only)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from plots.style import new_figure, png_bytes
from src import rundir as names
from src.files import atomic_write_bytes


MIXER_WORDS = {
    "attention": "softmax attention",
    "softmax_causal": "softmax attention",
    "linear_attention": "linear attention",
    "gated_linear_attn": "gated linear attention",
}


def mqar_curves(runs: Sequence[Path], out: Path) -> Path:
    """Eval accuracy vs step of each run (label: its sequence mixer) into `out` (PNG)."""
    fig = new_figure(5.4, 3.6, constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    shape = ""
    for run in runs:
        rows = [json.loads(line) for line in (run / names.METRICS).read_text().splitlines() if line.strip()]
        rows = [r for r in rows if "eval_accuracy" in r]
        settings = json.loads((run / names.CONFIG).read_text())["settings"]
        task, model, train = settings.get("task", {}), settings["model"], settings.get("train", {})
        options = task.get("options", {}) if isinstance(task, dict) else {}
        shape = (
            f"κ = {options.get('num_pairs', '?')} pairs, T = {options.get('seq_len', '?')}, "
            f"width {model.get('width', '?')}, {model.get('n_layer', '?')} layers, seed {train.get('seed', '?')}"
        )
        mixer = model["seq_mixer"]["name"]
        ax.plot(
            [r["step"] for r in rows],
            [r["eval_accuracy"] for r in rows],
            marker="o",
            markersize=3,
            label=MIXER_WORDS.get(mixer, mixer),
        )
    fig.suptitle(f"MQAR (the ICL benchmark): held-out accuracy while training\n{shape}", fontsize=9)
    ax.set_xlabel("training step")
    ax.set_ylabel("accuracy at the query positions")
    ax.set_ylim(0, 1.02)
    ax.legend(title="sequence mixer", fontsize=8, title_fontsize=8)
    atomic_write_bytes(out, png_bytes(fig))
    return out
