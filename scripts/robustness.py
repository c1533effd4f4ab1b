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

import functools
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from plots.robustness_report import write_report
from src.process import guarded
from src.gd_paper.config import CurriculumConfig
from src.jobs.engine import Job, plan
from src.jobs.study import finish_study, parse_study, study_parser
from scripts import mechanisms

PROG = "python -m scripts.robustness"
QUICK_MECHANISMS = ("softmax_causal", "favor")
# name -> the pairs while training (softmax attention, seed 0)
CURRICULA = {
    "label_noise_noisy_first": CurriculumConfig(
        noise_mode="label_noise", noise_p=0.25, noise_sigma=0.5, noise_placement="noisy_first"
    ),
    "easy2hard": CurriculumConfig(ordering="easy2hard"),
}


@dataclass
class CurriculumJob(Job):
    mechanism: str = ""
    seed: int = 0
    curriculum: str = ""


def make_jobs(
    runs_dir: Path, curricula_dir: Path, names: Sequence[str], seeds: Sequence[int], quick: bool
) -> list[Job]:
    jobs = mechanisms.make_jobs(runs_dir, names, seeds, quick)
    clean = next(j for j in jobs if (j.mechanism, j.seed) == (names[0], seeds[0]))  # the curricula's base
    for name, pairs in list(CURRICULA.items())[: 1 if quick else None]:
        settings = replace(clean.settings, train_curriculum=pairs).validate()
        jobs.append(
            CurriculumJob(
                f"{clean.mechanism}_{name}_seed{clean.seed}",
                settings,
                curricula_dir / name,
                cost=settings.train.steps,
                mechanism=clean.mechanism,
                seed=clean.seed,
                curriculum=name,
            )
        )
    return plan(jobs)


QUICK_BATTERY = 200  # tasks per shift in --quick (the study: 1,000), only the report's columns


def battery_then_report(jobs, report_dir, **kwargs) -> list[Path]:
    """Every run's battery (analysis/shifts.json, computed where it is missing), then the report."""
    from analysis.robustness import BATTERY_SIZE, run_battery
    from plots.robustness_report import selected
    from src import rundir as names

    quick = kwargs.get("quick")
    for job in jobs:
        if not getattr(job, "curriculum", "") and not job.run.exists(names.SHIFTS_JSON):
            print(f"{PROG}: battery of {job.name}", flush=True)
            labels = {label for label, _ in selected(job.settings.curriculum.dims.end)} if quick else None
            run_battery(job.run, QUICK_BATTERY if quick else BATTERY_SIZE, labels)
    return write_report(jobs, report_dir, **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = study_parser(PROG, __doc__, "150 steps, seed 0, softmax_causal and favor (a smoke test)")
    argv, args, runs_dir, report_dir = parse_study(parser, argv, "mechanisms")
    names = QUICK_MECHANISMS if args.quick else mechanisms.MECHANISMS
    seeds = mechanisms.SEEDS[:1] if args.quick else mechanisms.SEEDS
    curricula_dir = runs_dir.parent / f"{runs_dir.name}_curricula"
    return finish_study(
        PROG,
        argv,
        args,
        runs_dir,
        report_dir,
        lambda: make_jobs(runs_dir, curricula_dir, names, seeds, args.quick),
        functools.partial(battery_then_report),
    )


if __name__ == "__main__":
    sys.exit(guarded(main))
