"""The length-generalisation study (seed 002, Lin et al. AAAI 2025): every position encoding on
linear regression (d = 5, trained to 21 points) and on the boolean task `conjunction`, 3 seeds,
evaluated out to 8x the trained length, with the recency, duplication and serial-position
analyses of every run. make lengthgen, or

    PYTHONPATH=. python -m scripts.lengthgen                      # configs/lengthgen.yaml
    PYTHONPATH=. python -m scripts.lengthgen --quick              # 60 steps, 1 seed (smoke test)
    PYTHONPATH=. python -m scripts.lengthgen --positions rope,fire --tasks linear_regression

Each run is `python -m runners.train --config configs/lengthgen.yaml --set ...` made by the job
engine (finished runs are reused); then analysis.length_gen, analysis.recency and
analysis.prompt_tests write into each run (skipped when their outputs are there). The report is
report/LENGTHGEN.md, report/lengthgen_results.json and report/figures/lengthgen/*.png (quick:
under report/quick).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from plots.lengthgen_report import write_report
from src.cli import UsageError, fail, guarded
from src.gpt2_cli import settings_from_argv
from src.launch import Job, finish_study, normalise, plan, study_dirs, study_parser
from src.registry import registry

PROG = "python -m scripts.lengthgen"
CONFIG = "configs/lengthgen.yaml"
SEEDS = (0, 1, 2)
TASKS = {"linear_regression": [], "conjunction": ["--set", "training.train_steps=1000"]}
QUICK = ["--set", "training.train_steps=60", "--set", "training.log_every=30",
         "--set", "training.save_every_steps=60", "--set", "training.eval_size=100"]


@dataclass
class LengthJob(Job):
    position: str = ""
    task: str = ""
    seed: int = 0


def make_jobs(runs_dir: Path, positions: Sequence[str], tasks: Sequence[str], seeds: Sequence[int],
              quick: bool) -> list[Job]:
    jobs = []
    for task in tasks:
        for position in positions:
            for seed in seeds:
                argv = (["--config", CONFIG, "--set", f"model.position={position}",
                         "--set", f"training.task={task}", "--set", f"training.seed={seed}"]
                        + TASKS[task] + (QUICK if quick else []))
                settings = settings_from_argv(argv)
                name = f"{task}_{position}_seed{seed}"
                jobs.append(LengthJob(name, "runners.train", argv, runs_dir / name,
                                      normalise(settings.to_dict()), cost=settings.train.train_steps,
                                      position=position, task=task, seed=seed))
    return plan(jobs)


def _names(flag: str, text: str | None, known: Sequence[str]) -> list[str]:
    names = [n.strip() for n in (text or ",".join(known)).split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UsageError(f"{flag}={text!r} is not accepted; accepted: a comma list of {', '.join(known)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = study_parser(PROG, __doc__, "60 steps, seed 0 (a smoke test)")
    parser.add_argument("--positions", default=None,
                        help="comma list of position encodings (default: all registered)")
    parser.add_argument("--tasks", default=None,
                        help=f"comma list of tasks (default: {','.join(TASKS)})")
    args = parser.parse_args(argv)
    try:
        runs_dir, report_dir = study_dirs(args, "lengthgen")
        positions = _names("--positions", args.positions, registry("position").names())
        tasks = _names("--tasks", args.tasks, list(TASKS))
    except UsageError as err:
        return fail(PROG, err)
    seeds = SEEDS[:1] if args.quick else SEEDS
    return finish_study(PROG, argv, args, runs_dir, report_dir,
                        lambda: make_jobs(runs_dir, positions, tasks, seeds, args.quick), write_report)


if __name__ == "__main__":
    sys.exit(guarded(main))
