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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from plots.dynamics_report import write_report
from src.cli import OneLineParser, UsageError, fail, int_at_least
from src.launch import TODO_STATES, Job, announce, normalise, plan, run_jobs, use_compilation_cache
from src.linattn_cli import RUNNER, settings_from_argv
from src.provenance import git_commit

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
    parser = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test, ~1 min)")
    parser.add_argument("--runs-dir", "--runs_dir", dest="runs_dir", default=None,
                        help="run directories (default: runs/dynamics, quick: runs/dynamics_quick)")
    parser.add_argument("--report-dir", "--report_dir", dest="report_dir", default=None,
                        help="report (default: report; quick: report/quick)")
    parser.add_argument("--jobs", type=int_at_least(1), default=2, help="runs in parallel")
    parser.add_argument("--overwrite", action="store_true",
                        help="retrain runs made with other settings or code (otherwise refused)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    runs_dir = Path(args.runs_dir or ("runs/dynamics_quick" if args.quick else "runs/dynamics"))
    report_dir = Path(args.report_dir or ("report/quick" if args.quick else "report"))
    try:
        for flag, path in (("--runs-dir", runs_dir), ("--report-dir", report_dir)):
            if path.exists() and not path.is_dir():
                raise UsageError(f"{flag}={str(path)!r} is a file; accepted: a directory path")
        jobs = make_jobs(runs_dir, args.quick)
        stale = [j for j in jobs if j.state == "stale"]
        if stale and not args.overwrite:
            raise UsageError(f"--runs-dir={str(runs_dir)!r} holds {len(stale)} run(s) made with other "
                             f"settings or code (e.g. {stale[0].path}); accepted: another --runs-dir, "
                             "or --overwrite to retrain them")
    except UsageError as err:
        return fail(PROG, err)
    use_compilation_cache(runs_dir)
    head = git_commit()          # before this command writes anything tracked
    start = time.monotonic()
    todo = [j for j in jobs if j.state in TODO_STATES]
    workers = max(1, min(args.jobs, len(todo)))
    say = lambda message: print(message, flush=True)
    announce(say, PROG, "runs", jobs, todo, workers, runs_dir)
    try:
        report = run_jobs(todo, workers=workers, runs_dir=runs_dir, say=say)
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; finished runs are kept in {runs_dir}; rerun to continue",
              file=sys.stderr)
        return 130
    if report.failed:
        print(f"{PROG}: {len(report.failed)} runs failed: "
              + ", ".join(j.name for j in report.failed), file=sys.stderr)
        return 1
    written = write_report(jobs, report_dir, quick=args.quick, seconds=time.monotonic() - start,
                           command=" ".join([PROG] + list(argv or sys.argv[1:])), head=head)
    print(f"{PROG}: wrote {', '.join(str(p) for p in written)} ({time.monotonic() - start:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
