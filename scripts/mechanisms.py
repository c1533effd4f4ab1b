"""The mechanisms study (limits_of_icl): every attention mechanism at one size, 3 seeds, under
every stress test of the workbench. `make mechanisms` runs it.

    python -m scripts.mechanisms            # configs/mechanisms.yaml, 3 seeds
    python -m scripts.mechanisms --quick    # 150 steps, 1 seed (a smoke test)
    python -m scripts.mechanisms --config configs/paper/mechanisms.yaml   # the paper's scale (a GPU study)

Each run is configs/mechanisms.yaml (read as `python -m runners.train` reads it) with its
mechanism and seed, made by the job engine (src/jobs/: finished runs are reused); the report is
report/MECHANISMS.md, report/mechanisms_results.json and report/figures/mechanisms/*.png (quick:
under report/quick).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from plots.mechanisms_report import write_report
from src.flags import UsageError, fail
from src.process import guarded
from src.formats.limits_of_icl import read_config
from src.jobs.engine import Job, plan
from src.jobs.study import finish_study, study_dirs, study_parser
from src.registry import choice, registry

PROG = "python -m scripts.mechanisms"
CONFIG = "configs/mechanisms.yaml"
SEEDS = (0, 1, 2)
# the mechanisms of limits_of_icl (its attention_type names) and plain causal linear attention; any
# other registered sequence mixer (the ICL benchmark's, Mamba) with --mechanisms
MECHANISMS = ("softmax_causal", "local", "mqa", "rela", "favor", "rebased", "linear")
QUICK = {"steps": 150, "log_every": 50, "checkpoint_every": 150, "eval_size": 300}


@dataclass
class MechanismJob(Job):
    mechanism: str = ""
    seed: int = 0


def make_jobs(
    runs_dir: Path, mechanisms: Sequence[str], seeds: Sequence[int], quick: bool, config: str = CONFIG
) -> list[Job]:
    base, _ = read_config(config)
    jobs = []
    for mechanism in mechanisms:
        for seed in seeds:
            train = replace(base.train, seed=seed, **(QUICK if quick else {}))
            settings = replace(
                base, model=replace(base.model, seq_mixer=choice("seq_mixer", mechanism)), train=train
            ).validate()
            jobs.append(
                MechanismJob(
                    f"{mechanism}_seed{seed}",
                    settings,
                    runs_dir / f"{mechanism}_seed{seed}",
                    cost=settings.train.steps,
                    mechanism=mechanism,
                    seed=seed,
                )
            )
    return plan(jobs)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = study_parser(PROG, __doc__, "150 steps, seed 0 (a smoke test)")
    parser.add_argument(
        "--mechanisms", default=None, help=f"comma list of seq_mixer names (default: {', '.join(MECHANISMS)})"
    )
    parser.add_argument(
        "--config",
        default=CONFIG,
        help=f"every run's config file, read as runners.train reads it (default: {CONFIG}; "
        "configs/paper/mechanisms.yaml is the paper's scale)",
    )
    args = parser.parse_args(argv)
    try:
        runs_dir, report_dir = study_dirs(args, "mechanisms")
        known = registry("seq_mixer").names()
        mechanisms = [m.strip() for m in (args.mechanisms or ",".join(MECHANISMS)).split(",") if m.strip()]
        unknown = [m for m in mechanisms if m not in known]
        if unknown or not mechanisms:
            raise UsageError(
                f"--mechanisms={args.mechanisms!r} is not accepted; accepted: a comma list of {', '.join(known)}"
            )
    except UsageError as err:
        return fail(PROG, err)
    seeds = SEEDS[:1] if args.quick else SEEDS
    return finish_study(
        PROG,
        argv,
        args,
        runs_dir,
        report_dir,
        lambda: make_jobs(runs_dir, mechanisms, seeds, args.quick, args.config),
        write_report,
    )


if __name__ == "__main__":
    sys.exit(guarded(main))
