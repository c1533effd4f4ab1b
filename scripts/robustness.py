"""The robustness battery (limits_of_icl's notebook, "scaling ICL robustness across mechanisms"):
every mechanism of the mechanisms study, 3 seeds, under every registered evaluation shift with the
least-squares, averaging, 3-NN and Lasso baselines on the same shifted tasks, plus two
training-time curricula on the first mechanism (softmax attention). `make robustness` runs it.

    python -m scripts.robustness            # reuses runs/mechanisms when they are current
    python -m scripts.robustness --quick    # 150 steps, 1 seed, two mechanisms (a smoke test)

The runs are exactly the mechanisms study's (scripts/mechanisms.py: configs/mechanisms.yaml, its
mechanisms and seeds, the same run directories), so a finished `make mechanisms` is reused and
only the battery is computed (`python -m analysis.robustness --run RUN --battery` on each run:
analysis/shifts.json). The curricula part trains softmax attention, seed 0, with label noise
(p 0.25, σ 0.5) placed first and with easy-to-hard order, beside the clean run, and compares them
on the noisy and reordered evaluations. Report: report/ROBUSTNESS.md, report/robustness_results.json
and report/figures/robustness/*.png (quick: under report/quick).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from plots.robustness_report import write_report
from src.gd_paper.config import CurriculumConfig
from src.jobs.declared import Cell, Study, StudyRun, prog_of
from src.jobs.study import run_as_command, study_command
from scripts import mechanisms

QUICK_MECHANISMS = ("softmax_causal", "favor")
# name -> the pairs while training (softmax attention, seed 0)
CURRICULA = {
    "label_noise_noisy_first": CurriculumConfig(
        noise_mode="label_noise", noise_p=0.25, noise_sigma=0.5, noise_placement="noisy_first"
    ),
    "easy2hard": CurriculumConfig(ordering="easy2hard"),
}


def curriculum_cells(clean: Cell, curricula_dir: Path, quick: bool) -> list[Cell]:
    """The whole run `clean` (the first mechanism's first seed) under each curriculum, a run of its
    own under curricula_dir/<curriculum>."""
    mechanism, seed = clean.tags["mechanism"], clean.settings.train.seed
    return [
        Cell(
            f"{mechanism}_{name}_seed{seed}",
            replace(clean.settings, train_curriculum=pairs),
            {"mechanism": mechanism, "curriculum": name},
            path=curricula_dir / name,
        )
        for name, pairs in list(CURRICULA.items())[: 1 if quick else None]
    ]


def study_cells(flags, runs_dir: Path) -> list[Cell]:
    """The mechanisms study's cells x seeds as whole runs, then the curricula's."""
    names = QUICK_MECHANISMS if flags.quick else mechanisms.MECHANISMS
    seeds = mechanisms.SEEDS[:1] if flags.quick else mechanisms.SEEDS
    clean = [
        Cell(
            f"{cell.name}_seed{seed}", replace(cell.settings, train=replace(cell.settings.train, seed=seed)), cell.tags
        )
        for cell in mechanisms.mechanism_cells(names, flags.quick)
        for seed in seeds
    ]
    return clean + curriculum_cells(clean[0], runs_dir.parent / f"{runs_dir.name}_curricula", flags.quick)


QUICK_BATTERY = 200  # tasks per shift in --quick (the study: 1,000), only the report's columns


def battery_then_report(run: StudyRun) -> list[Path]:
    """Every run's battery (analysis/shifts.json, computed where it is missing), then the report."""
    from analysis.robustness import BATTERY_SIZE, run_battery
    from plots.robustness_report import selected
    from src import rundir as names

    for job in run.jobs:
        if not getattr(job, "curriculum", "") and not job.run.exists(names.SHIFTS_JSON):
            print(f"{prog_of(STUDY)}: battery of {job.name}", flush=True)
            labels = {label for label, _ in selected(job.settings.curriculum.dims.end)} if run.quick else None
            run_battery(job.run, QUICK_BATTERY if run.quick else BATTERY_SIZE, labels)
    return write_report(run)


STUDY = Study(
    "robustness",
    __doc__,
    "150 steps, seed 0, softmax_causal and favor (a smoke test)",
    cells=study_cells,
    report=battery_then_report,
    seeds=lambda flags: None,  # the cells are whole runs: the mechanisms study's, then the curricula's
    runs_name=lambda flags: "mechanisms",  # it reads and extends the mechanisms study's runs
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
