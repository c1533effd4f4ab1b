"""The task-diversity study (Raventós et al., NeurIPS 2023, at a CPU's scale): a transformer
pretrained on noisy linear regression whose task vectors come from a finite pool of M, for M from
2 up to fresh tasks every step, evaluated on prompts from its pool and from the Gaussian prior
beside the two Bayes estimators: dMMSE (the posterior mean over the pool) and ridge (the posterior
mean under the prior). Below some M the model should track dMMSE, above it ridge, also on tasks it
was never shown. `make task_diversity` runs it.

    python -m scripts.task_diversity             # configs/task_diversity.yaml, pools 2^1 .. 2^13 and fresh, 3 seeds
    python -m scripts.task_diversity --quick     # pools 2 and fresh, 60 steps, 1 seed (a smoke test)
    python -m scripts.task_diversity --pools 4,64,0   # any pool sizes (0: fresh tasks every step)

Each run is configs/task_diversity.yaml (the workbench's own settings schema, src.jobs.study.read_settings)
with its train.num_tasks and seed, made by the job engine (finished runs are reused); the report is
report/TASK_DIVERSITY.md, report/task_diversity_results.json and
report/figures/task_diversity/error_pool.png (quick: under report/quick; plots/task_diversity_report.py).
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from plots.task_diversity_report import write_report
from src.flags import UsageError, fail, seed_list
from src.process import guarded
from src.jobs.engine import Job
from src.jobs.study import cell_jobs, finish_study, read_settings, study_dirs, study_parser

PROG = "python -m scripts.task_diversity"
CONFIG = "configs/task_diversity.yaml"
POOLS = (2, 8, 32, 128, 512, 2048, 8192, 0)     # 0: fresh tasks every step (an effectively infinite pool)
SEEDS = (0, 1, 2)
QUICK = {"steps": 60, "log_every": 30, "checkpoint_every": 60, "eval_size": 200}
QUICK_POOLS = (2, 0)


def pool_sizes(text: str | None, quick: bool) -> tuple[int, ...]:
    """--pools: a comma list of integers >= 0 (UsageError, one line)."""
    if text is None:
        return QUICK_POOLS if quick else POOLS
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        sizes = ()
    if not sizes or any(size < 0 for size in sizes):
        raise UsageError(f"--pools={text!r} is not accepted; accepted: a comma list of integers >= 0 "
                         "(0: fresh tasks every step)")
    return sizes


def make_jobs(runs_dir: Path, pools: Sequence[int], seeds: Sequence[int], quick: bool,
              config: str = CONFIG) -> list[Job]:
    """Run pool<M>_seed<s> (poolfresh for M = 0) of the config with train.num_tasks = M."""
    base = read_settings(config)
    cells = {f"pool{size or 'fresh'}": replace(base, train=replace(base.train, num_tasks=size, **(QUICK if quick else {})))
             for size in pools}
    return cell_jobs(runs_dir, cells, seeds)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = study_parser(PROG, __doc__, "pools 2 and fresh, 60 steps, seed 0 (a smoke test)")
    parser.add_argument("--pools", default=None, help="comma list of pool sizes, 0 for fresh tasks "
                                                      f"(default: {','.join(map(str, POOLS))})")
    parser.add_argument("--seeds", default=None, help=f"comma list (default: {','.join(map(str, SEEDS))})")
    args = parser.parse_args(argv)
    try:
        runs_dir, report_dir = study_dirs(args, "task_diversity")
        pools = pool_sizes(args.pools, args.quick)
        seeds = seed_list(args.seeds) if args.seeds else (SEEDS[:1] if args.quick else SEEDS)
    except UsageError as err:
        return fail(PROG, err)
    return finish_study(PROG, argv, args, runs_dir, report_dir,
                        lambda: make_jobs(runs_dir, pools, seeds, args.quick), write_report)


if __name__ == "__main__":
    sys.exit(guarded(main))
