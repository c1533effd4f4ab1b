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

from dataclasses import replace
from pathlib import Path
from typing import Sequence

from plots.lengthgen_report import FACTOR, PROBE_FACTOR, write_report
from src.flags import UsageError, refuse_repeats, seed_list
from src.formats.limits_of_icl import read_config
from src.models.sequence_presets import mamba
from src.jobs.declared import Cell, CellJob, Study, StudyRun, cell_runs
from src.jobs.study import run_as_command, study_command
from src.registry import choice, registry

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


def length_cells(
    positions: Sequence[str], tasks: Sequence[str], quick: bool, mixer: str | None = None, config: str = CONFIG
) -> list[Cell]:
    """One cell per task and encoding; `mixer` (any registered sequence mixer) replaces the config's
    softmax attention and joins the run names."""
    base, _ = read_config(config)
    if mixer is not None:
        base = replace(base, model=replace(base.model, seq_mixer=choice("seq_mixer", mixer)))
    tag = "" if mixer is None else f"{mixer}_"
    cells = []
    for task in tasks:
        train = replace(base.train, **{**TASKS[task], **(QUICK if quick else {})})
        for position in positions:
            settings = replace(base, model=row_model(base.model, position), task=choice("task", task), train=train)
            cells.append(Cell(f"{task}_{tag}{position}", settings, {"position": position, "task": task}))
    return cells


def make_jobs(
    runs_dir: Path,
    positions: Sequence[str],
    tasks: Sequence[str],
    seeds: Sequence[int],
    quick: bool,
    mixer: str | None = None,
    config: str = CONFIG,
) -> list[CellJob]:
    """One run per task, encoding and seed (length_cells x seeds)."""
    return cell_runs(length_cells(positions, tasks, quick, mixer, config), seeds, runs_dir)


def analyse(jobs: Sequence[CellJob]) -> dict[str, str]:
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


def report(run: StudyRun) -> list[Path]:
    """The study's analyses, then its report (plots.lengthgen_report draws only)."""
    return write_report(run, problems=analyse(run.jobs))


def _names(flag: str, text: str | None, known: Sequence[str]) -> list[str]:
    names = [n.strip() for n in (text or ",".join(known)).split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UsageError(f"{flag}={text!r} is not accepted; accepted: a comma list of {', '.join(known)}")
    refuse_repeats(flag, text, names)
    return names


def add_flags(parser) -> None:
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


# the study's default: Lin et al.'s eight encodings and Mamba (--positions takes any registered one)
LIN_POSITIONS = ("alibi", "dynamic_yarn", "fire", "learned", "nope", "rope", "sinusoidal", "yarn", MAMBA)


def grid(flags) -> tuple[list[str], list[str], str | None]:
    """(positions, tasks, mixer) of the flags (UsageError, one line, for a bad one)."""
    known = [*registry("position").names(), MAMBA]
    positions = _names("--positions", flags.positions or ",".join(LIN_POSITIONS), known)
    tasks = _names("--tasks", flags.tasks, list(TASKS))
    mixer = None if flags.mixer is None else _names("--mixer", flags.mixer, registry("seq_mixer").names())[0]
    return positions, tasks, mixer


def cells_of(flags, runs_dir: Path) -> list[Cell]:
    positions, tasks, mixer = grid(flags)
    return length_cells(positions, tasks, flags.quick, mixer, flags.config)


STUDY = Study(
    "lengthgen",
    __doc__,
    "60 steps, seed 0 (a smoke test)",
    cells=cells_of,
    report=report,
    seeds=lambda flags: seed_list(flags.seeds) if flags.seeds else (SEEDS[:1] if flags.quick else SEEDS),
    flags=add_flags,
    check=grid,
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
