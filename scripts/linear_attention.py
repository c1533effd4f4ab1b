"""Why unnormalised linear attention does not learn in the mechanisms study, measured in two
systems. `make linear_attention` runs it.

1. The mechanisms study's model with its earlier protocol (configs/linear_attention.yaml: a 3-layer
   GPT-2 on interleaved x and y tokens, a constant rate for 6,000 steps) with the `linear` mixer summing over the
   context
   (scale: sum, the study's) or averaging over it (scale: mean, von Oswald et al.'s 1/N), at the
   study's learning rate and a tenth of it, beside the ICL benchmark's linear attention (feature
   map, RMSNorm on its output) and ReBased (normalised positive features, a mechanism that learns).
2. The GD paper's own system, where linear attention is one GD step: `lsa1` (x and y in one
   token) and the two-layer model on interleaved tokens (`twolayer`), whose first layer must copy
   each x_i into its y_i token, with that layer softmax (the paper's) or linear.

    python -m scripts.linear_attention            # 3 seeds each
    python -m scripts.linear_attention --quick    # 150 steps, seed 0 (a smoke test)

Each run is a standard run directory made by the job engine (finished runs are reused). The
report is report/LINEAR_ATTENTION.md, report/linear_attention_results.json and
report/figures/linear_attention/*.png (quick: under report/quick): the mechanisms report's tables
for the variants, each variant's error at n = 2d beside one tuned GD step on the same eval tasks,
and the GD paper's models beside their tuned GD step with the copy term of the first layer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from plots.mechanisms_report import write_report
from src.formats.limits_of_icl import read_config
from src import rundir as names
from src.stats import format_pm, over_seeds
from src.jobs.declared import Cell, Study, StudyRun, cell_runs, quick_seeds, quick_cells
from src.jobs.study import run_as_command, study_command
from src.registry import choice
from scripts.mechanisms import QUICK, SEEDS

CONFIG = "configs/linear_attention.yaml"
TITLE = "Linear attention on in-context regression: sum, mean and a normalised output"


@dataclass(frozen=True)
class Variant:
    label: str  # the report's row
    mixer: str
    options: dict
    learning_rate: float


VARIANTS = (
    Variant("linear, sum, lr 1e-3 (the study's)", "linear", {"scale": "sum"}, 1e-3),
    Variant("linear, sum, lr 1e-4", "linear", {"scale": "sum"}, 1e-4),
    Variant("linear, mean, lr 1e-3", "linear", {"scale": "mean"}, 1e-3),
    Variant("linear, mean, lr 1e-4", "linear", {"scale": "mean"}, 1e-4),
    Variant("ICL benchmark's linear_attention, lr 1e-3", "linear_attention", {}, 1e-3),
    Variant("rebased (normalised positive features), lr 1e-3", "rebased", {}, 1e-3),
)
# the GD paper's system: (label, preset, --set overrides)
GD_PAPER = (
    ("lsa1: one linear layer, x and y in one token", "lsa1", ()),
    ("twolayer: softmax copy layer, then linear (the paper's)", "twolayer", ()),
    ("twolayer: linear copy layer, then linear", "twolayer", ("model.mixers=linear,linear",)),
)
GD_QUICK_STEPS = 150


def cell_name(variant: Variant) -> str:
    options = "".join(f"_{v}" for v in variant.options.values())
    return f"{variant.mixer}{options}_lr{variant.learning_rate:g}"


def study_cells(quick: bool) -> list[Cell]:
    """The mechanisms study's model with each variant (its row `mechanism`), then the GD paper's
    models (their row `label`; their runs cost 3x their steps)."""
    from src.gd_paper.presets import preset_settings

    base, _ = read_config(CONFIG)
    cells = []
    for variant in VARIANTS:
        train = replace(base.train, learning_rate=variant.learning_rate, **(QUICK if quick else {}))
        model = replace(base.model, seq_mixer=choice("seq_mixer", variant.mixer, **variant.options))
        cells.append(Cell(cell_name(variant), replace(base, model=model, train=train), {"mechanism": variant.label}))
    for label, model, sets in GD_PAPER:
        settings = preset_settings(model, sets=sets, steps=GD_QUICK_STEPS if quick else None)
        name = f"{model}{'_linear_copy' if sets else ''}"
        cells.append(Cell(name, settings, {"label": label}, cost=3 * settings.train.steps))
    return cells


def make_jobs(runs_dir: Path, seeds: Sequence[int], quick: bool) -> list:
    return cell_runs(study_cells(quick), seeds, runs_dir)


def gd_paper_section(jobs: Sequence) -> list[str]:
    """The GD paper's models beside their tuned GD step: eval loss (½ MSE), the copy term of the
    first layer (∂ output at token j / ∂ token j + 1) against the other tokens, alignment."""
    rows: dict[str, list[dict]] = {}
    for job in jobs:
        if getattr(job, "label", None) is not None and job.run.exists(names.SUMMARY):
            rows.setdefault(job.label, []).append(job.run.load_json(names.SUMMARY))
    if not rows:
        return []
    lines = [
        "",
        "## In the GD paper's system: where x_i and y_i meet",
        "",
        "Eval loss is ½ MSE on the system's 10,000 fixed tasks (d = 10, 10 examples); one GD step "
        "with its step size tuned on them beside it. Copy terms (two-layer models): the mean "
        "∂ first-layer output at token j / ∂ token j + 1 (`copy_next`) against other tokens.",
        "",
        "| model | eval loss | one GD step | align_cos | copy_next | copy_other | seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, summaries in rows.items():
        cell = lambda key: format_pm(over_seeds([s.get(key) for s in summaries]), 4)
        lines.append(
            f"| {label} | {cell('eval_loss')} | {cell('gd_loss')} | {cell('align_cos')} | "
            f"{cell('copy_next')} | {cell('copy_other')} | {len(summaries)} |"
        )
    return lines


def against_gd(results: dict) -> list[str]:
    """Each variant's error at n = 2d against one tuned GD step on the same eval tasks."""
    first = next(iter(results.values()))
    gd = first["curve_mean"].get("gd_step")
    model = first["curve_mean"].get("model")
    if not gd or not model:
        return []
    at = min(len(gd), len(model)) - 1  # the last point: n = 2d at the study's 11 points
    lines = [
        "",
        f"## Against one step of gradient descent (n = {at})",
        "",
        f"One GD step from w = 0 with the step size tuned on held-out tasks scores {gd[at]:.3f} at "
        f"n = {at}; least squares {first['curve_mean']['least_squares'][at]:.3f}.",
        "",
        "| variant | error at n = 2d | ratio to one GD step | matches one GD step (≤ 1.0×) |",
        "|---|---|---|---|",
    ]
    for label, record in results.items():
        value = record["curve_mean"]["model"][at]
        lines.append(f"| {label} | {value:.3f} | {value / gd[at]:.2f}× | {'yes' if value <= gd[at] else 'no'} |")
    return lines


def report(run: StudyRun) -> list:
    return write_report(
        run,
        title=TITLE,
        report="LINEAR_ATTENTION.md",
        results_file="linear_attention_results.json",
        fig_dir="figures/linear_attention",
        extra=lambda results: against_gd(results) + gd_paper_section(run.jobs),
    )


STUDY = Study(
    "linear_attention",
    __doc__,
    "150 steps, seed 0 (a smoke test)",
    cells=quick_cells(study_cells),
    report=report,
    seeds=quick_seeds(SEEDS),
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
