"""The training-dynamics study (seed 003): make dynamics, or

    PYTHONPATH=. python -m scripts.dynamics            # the seed's sizes
    PYTHONPATH=. python -m scripts.dynamics --quick    # small sizes, for a smoke test

(a) ATTN_M vs the cubic MLP (the seed's defaults); (b) ATTN_S with rank-one heads at D = 4:
the staircase; (c) the rank sweep R in {8, 4, 2, 1} at D = 8; (d) the in-context fraction
sweep c in {0, 0.2, ..., 1} with in-context and in-weight test losses. Every run is a
`python -m runners.linattn` run directory made by the job engine (src/launch.py: finished
runs are reused, changed ones redone); the report is report/DYNAMICS.md,
report/dynamics_results.json and report/figures/dynamics/*.png.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from plots.dynamics_report import write_report
from src.cli import UsageError, fail, guarded
from src.launch import Job, finish_study, normalise, plan, study_dirs, study_parser
from src.linattn_cli import RUNNER, settings_from_argv

PROG = "python -m scripts.dynamics"
# part -> [(run name, the seed's flags)]; --quick divides epochs and set sizes (QUICK_FLAGS).
STUDY = {
    "merged_vs_mlp": [("attnM", ["--model", "attnM", "--head", "8", "--init", "1e-6", "--show"]),
                      ("mlp", ["--model", "mlp", "--cubic_feat", "--head", "8", "--init", "1e-6",
                               "--show"])],
    "staircase": [("attnS_rank1_D4", ["--model", "attnS", "--head", "5", "--init", "1e-2",
                                      "--lr", "0.02", "--trainset_size", "1000", "--epoch", "20001",
                                      "--log_every", "50", "--show"])],
    "rank_sweep": [(f"attnS_D8_R{r}", ["--model", "attnS", "--head", "9", "--KQ_dim", str(r),
                                       "--in_dim", "8", "--seq_len", "32", "--init", "5e-3",
                                       "--trainset_size", "80000", "--epoch", "20001", "--lr", "0.02",
                                       "--log_every", "50"]) for r in (8, 4, 2, 1)],
    "icl_sweep": [(f"attnM_icl{c}", ["--model", "attnM", "--icl", c, "--head", "8", "--testset",
                                     "5000", "--init", "1e-6", "--white_cov", "--lr", "0.0005",
                                     "--epoch", "4001"])
                  for c in ("0", "0.2", "0.4", "0.6", "0.8", "1")],
}
QUICK_FLAGS = ["--trainset_size", "600", "--log_every", "20"]   # appended (argparse keeps the last)
QUICK_EPOCHS = {"merged_vs_mlp": 3001, "staircase": 4001, "rank_sweep": 1001, "icl_sweep": 401}


@dataclass
class StudyJob(Job):
    part: str = ""            # which part of the study the run belongs to


def make_jobs(runs_dir: Path, quick: bool) -> list[StudyJob]:
    jobs = []
    for part, runs in STUDY.items():
        for name, argv in runs:
            if quick:
                argv = argv + QUICK_FLAGS + ["--epoch", str(QUICK_EPOCHS[part])]
                argv += ["--testset", "200"] if "--testset" in argv else []
            argv = argv + ["--quiet"]
            settings = settings_from_argv(argv)
            jobs.append(StudyJob(name, RUNNER, argv, runs_dir / name, normalise(settings.to_dict()),
                                 cost=settings.train.epochs * settings.task.trainset_size, part=part))
    return plan(jobs)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = study_parser(PROG, __doc__, "small sizes (a smoke test, ~1 min)").parse_args(argv)
    try:
        runs_dir, report_dir = study_dirs(args, "dynamics")
    except UsageError as err:
        return fail(PROG, err)
    return finish_study(PROG, argv, args, runs_dir, report_dir,
                        lambda: make_jobs(runs_dir, args.quick), write_report)


if __name__ == "__main__":
    sys.exit(guarded(main))
