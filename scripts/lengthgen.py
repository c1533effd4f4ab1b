"""The length-generalisation study (Lin et al., AAAI 2025): every position encoding on
the study's Llama backbone, and its `mamba` row (a Mamba model of the same width and depth, no
position encoding), on linear regression (d = 5, trained to 21 points) and on the boolean task
`conjunction`, 3 seeds, evaluated out to 8x the trained length, with the recency, duplication,
serial-position and inductive-bias analyses of every run. `make lengthgen` runs it.

    python -m scripts.lengthgen                      # configs/lengthgen.yaml
    python -m scripts.lengthgen --quick              # 60 steps, 1 seed (smoke test)
    python -m scripts.lengthgen --positions rope,fire,mamba --tasks linear_regression
    python -m scripts.lengthgen --config configs/paper/lengthgen.yaml   # Lin et al.'s scale (a GPU study)

Each run is configs/lengthgen.yaml (read as `python -m runners.train` reads it) with its
encoding, task and seed, made by the job engine (finished runs are reused); the row `mamba` is
the config's model as family Mamba (the original's `run_pe` list names it beside the
encodings). Then analysis.length_gen, analysis.recency (softmax mixers only) and
analysis.prompt_tests write into each run (skipped when their outputs are there);
analysis.inductive_bias runs with every run. The report is
report/LENGTHGEN.md, report/lengthgen_results.json and report/figures/lengthgen/*.png (quick:
under report/quick).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from plots.lengthgen_report import FACTOR, PROBE_FACTOR, write_report
from src.flags import UsageError, fail, refuse_repeats, seed_list
from src.process import guarded
from src.formats.limits_of_icl import read_config
from src.models.sequence_presets import mamba
from src.jobs.engine import Job, plan
from src.jobs.study import finish_study, study_dirs, study_parser
from src.registry import choice, registry

PROG = "python -m scripts.lengthgen"
CONFIG = "configs/lengthgen.yaml"
SEEDS = (0, 1, 2)
TASKS = {"linear_regression": {}, "conjunction": {"steps": 1000}}  # task -> training changes
QUICK = {"steps": 60, "log_every": 30, "checkpoint_every": 60, "eval_size": 100}
MAMBA = "mamba"  # the row that swaps the backbone (Lin et al.'s run_pe name) instead of the encoding


def row_model(base, position: str):
    """The model of one row: the config's with encoding `position`, or for the row `mamba` a Mamba
    model of the config's width, depth, inputs and trained tokens."""
    if position == MAMBA:
        return mamba(n_dims=base.n_dims, max_tokens=base.max_tokens, width=base.width, n_layer=base.n_layer)
    return replace(base, position=choice("position", position))


@dataclass
class LengthJob(Job):
    position: str = ""
    task: str = ""
    seed: int = 0


def make_jobs(
    runs_dir: Path,
    positions: Sequence[str],
    tasks: Sequence[str],
    seeds: Sequence[int],
    quick: bool,
    mixer: str | None = None,
    config: str = CONFIG,
) -> list[Job]:
    """One run per task, encoding and seed; `mixer` (any registered sequence mixer) replaces the
    config's softmax attention and joins the run names."""
    base, _ = read_config(config)
    if mixer is not None:
        base = replace(base, model=replace(base.model, seq_mixer=choice("seq_mixer", mixer)))
    tag = "" if mixer is None else f"{mixer}_"
    jobs = []
    for task in tasks:
        for position in positions:
            for seed in seeds:
                train = replace(base.train, seed=seed, **{**TASKS[task], **(QUICK if quick else {})})
                model = row_model(base.model, position)
                settings = replace(base, model=model, task=choice("task", task), train=train).validate()
                name = f"{task}_{tag}{position}_seed{seed}"
                jobs.append(
                    LengthJob(
                        name,
                        settings,
                        runs_dir / name,
                        cost=settings.train.steps,
                        position=position,
                        task=task,
                        seed=seed,
                    )
                )
    return plan(jobs)


def analyse(jobs: Sequence[Job]) -> dict[str, str]:
    """Write the analyses each finished run lacks (length_gen to 8x, recency and prompt_tests at
    4x; recency only where the mixer forms softmax weights); returns run name -> why they could
    not run."""
    from analysis import length_gen, prompt_tests, recency
    from analysis.common import AnalysisError
    from src.rundir import names

    problems = {}
    for job in jobs:
        run = job.run
        if not (run.path.is_dir() and run.is_trained()):
            continue
        wanted = [
            (names.LENGTH_GEN_JSON, lambda: length_gen.run(run, FACTOR)),
            (names.PROMPT_TESTS_JSON, lambda: prompt_tests.run(run, PROBE_FACTOR)),
        ]
        if recency.applies(job.settings):
            wanted.insert(1, (names.RECENCY_JSON, lambda: recency.run(run, PROBE_FACTOR)))
        for output, work in wanted:
            if not run.exists(output):
                try:
                    work()
                except AnalysisError as err:
                    problems[job.name] = str(err)
                    break
    return problems


def report(jobs: Sequence[Job], report_dir: Path, **kw) -> list[Path]:
    """The study's analyses, then its report (plots.lengthgen_report draws only)."""
    return write_report(jobs, report_dir, problems=analyse(jobs), **kw)


def _names(flag: str, text: str | None, known: Sequence[str]) -> list[str]:
    names = [n.strip() for n in (text or ",".join(known)).split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UsageError(f"{flag}={text!r} is not accepted; accepted: a comma list of {', '.join(known)}")
    refuse_repeats(flag, text, names)
    return names


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = study_parser(PROG, __doc__, "60 steps, seed 0 (a smoke test)")
    parser.add_argument(
        "--positions",
        default=None,
        help="comma list of position encodings, and mamba for the Mamba backbone (default: all registered, then mamba)",
    )
    parser.add_argument("--tasks", default=None, help=f"comma list of tasks (default: {','.join(TASKS)})")
    parser.add_argument(
        "--mixer",
        default=None,
        help="the sequence mixer of every run (default: the config's softmax_causal; "
        "encodings acting inside softmax attention need a softmax mixer)",
    )
    parser.add_argument(
        "--config",
        default=CONFIG,
        help=f"every run's config file, read as runners.train reads it (default: {CONFIG}; "
        "configs/paper/lengthgen.yaml is Lin et al.'s scale)",
    )
    parser.add_argument("--seeds", default=None, help=f"comma list (default: {','.join(map(str, SEEDS))}; quick: 0)")
    args = parser.parse_args(argv)
    try:
        runs_dir, report_dir = study_dirs(args, "lengthgen")
        seeds = seed_list(args.seeds) if args.seeds else (SEEDS[:1] if args.quick else SEEDS)
        positions = _names("--positions", args.positions, [*registry("position").names(), MAMBA])
        tasks = _names("--tasks", args.tasks, list(TASKS))
        mixer = None if args.mixer is None else _names("--mixer", args.mixer, registry("seq_mixer").names())[0]
    except UsageError as err:
        return fail(PROG, err)
    return finish_study(
        PROG,
        argv,
        args,
        runs_dir,
        report_dir,
        lambda: make_jobs(runs_dir, positions, tasks, seeds, args.quick, mixer, args.config),
        report,
    )


if __name__ == "__main__":
    sys.exit(guarded(main))
