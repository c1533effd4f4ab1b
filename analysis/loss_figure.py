"""The training-loss figure of a run, for the systems whose originals draw one: the GPT-2
system's `<attention_type>_loss.png` (limits_of_icl's `{attention_type}_loss.jpg`) and the dynamics
system's figs/loss.png (the dynamics paper's `--show`). Every per-step loss of the run's last checkpoint
is drawn (the dynamics system's test losses too), against steps (epochs), log scale, with the
curriculum's boundaries dashed (the original's "Curriculum Step Boundary" lines).

    python -m analysis.loss_figure --run runs/<exp>
"""

from __future__ import annotations

import sys
from typing import Sequence

import numpy as np

from analysis.common import AnalysisError, analysis_command, register_analysis
from plots.style import log_scale, new_figure, png_bytes
from src.rundir import RunDir, names

MODULE = "analysis.loss_figure"


def figure(
    losses: dict[str, np.ndarray],
    unit: str,
    title: str,
    marks: Sequence[int] = (),
    ylabel: str = "loss (the system's own: mean squared error)",
):
    """The losses against steps; `marks`: steps drawn as dashed lines (curriculum boundaries)."""
    fig = new_figure(6.5, 4.2, constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    for i, (name, values) in enumerate(losses.items()):
        label = "training loss" if name == "loss" else name.replace("_", " ")
        ax.plot(np.arange(1, len(values) + 1), values, lw=1.2 if i == 0 else 0.9, label=label)
    for i, step in enumerate(marks):
        ax.axvline(step, color="0.5", ls="--", lw=0.6, label="curriculum step boundary" if i == 0 else None)
    log_scale(ax)
    ax.set_xlabel(f"training {unit}")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    if len(losses) > 1 or len(marks):
        ax.legend(fontsize=8)
    return fig


def run(run_dir: RunDir) -> str:
    """Draw the figure from checkpoint.npz's per-step losses; returns the file written."""
    settings = run_dir.load_settings()
    target = settings.loss_figure_file()
    if target is None:
        raise AnalysisError(
            f"{run_dir.path} is a run of system {settings.system!r}, which draws no "
            "loss figure; accepted: a run of gpt2, or of dynamics with --show"
        )
    arrays = run_dir.load_arrays(names.CHECKPOINT)
    losses = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("per_step/") and k.endswith("loss")}
    if "loss" not in losses:
        raise AnalysisError(
            f"{run_dir.file(names.CHECKPOINT)} holds no per-step loss; recreate it "
            f"with: {run_dir.producer(names.CHECKPOINT)}"
        )
    unit = settings.unit
    losses = {"loss": losses.pop("loss"), **losses}
    run_dir.write_bytes(
        target,
        png_bytes(
            figure(
                losses,
                unit,
                f"{run_dir.name}: {settings.describe()}",
                settings.loss_figure_marks(),
                settings.loss_figure_label(),
            )
        ),
    )
    return target


register_analysis(
    "loss_figure",
    run,
    "the training loss over steps (gpt2; dynamics with --show)",
    lambda settings: settings.loss_figure_file() is not None,
    lambda settings: [settings.loss_figure_file()],
    files=[names.LOSS_PNG, f"{names.FIGS}/*_loss.png"],
)


main = analysis_command(
    MODULE, __doc__, lambda parser: None, lambda args, run_dir: print(f"-> {run_dir.file(run(run_dir))}")
)


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
