"""Studies declared as data: a study is its grid (the cells a study varies, each a run's settings,
times seeds and learning rates) and a report function; `study_command` makes the command line,
and every study runs the same way: flags checked, jobs planned under the runs-directory lock,
missing runs trained, then the report written from the finished runs.

    def cells(flags, runs_dir) -> list[Cell]:   # the grid, seeds apart, from the study's flags
        base = read_config(flags.config)
        return [Cell(m, with_mixer(base, m), {"mechanism": m}) for m in mechanisms(flags)]

    STUDY = Study("mechanisms", __doc__, "150 steps, seed 0 (a smoke test)", cells, write_report,
                  seeds=lambda flags: (0,) if flags.quick else (0, 1, 2), flags=add_flags)
    main = study_command(STUDY)                # python -m scripts.mechanisms (src/jobs/study.py)
    jobs = cell_runs(cells(flags), seeds, runs_dir)   # the same grid, for another study to reuse

Each cell x seed is one run, `<cell>_seed<seed>`, trained with train.seed = seed; with several
learning rates, each cell x rate x seed, `<cell>_lr<rate>_seed<seed>`. A study whose cells are
whole runs (their seeds in their settings, as the dynamics paper's grid) says seeds=None; such a
cell may live elsewhere than runs_dir/<name> (its `path`: cells get the runs directory). The
report function gets a StudyRun: the jobs (each cell's tags read as the job's attributes:
job.mechanism), the report directory, --quick, the study's seconds, its command and the git state
at its start.
"""

from __future__ import annotations

from argparse import Namespace
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from src.jobs.engine import Job, plan
from src.settings import Settings


@dataclass(frozen=True)
class Cell:
    """One point of a study's grid: the run name's stem, its settings (its seed and learning rate
    apart, unless the study's seeds are None) and what the report reads of it."""

    name: str
    settings: Settings
    tags: Mapping[str, Any] = field(default_factory=dict)
    cost: float | None = None  # relative cost (default: the settings' train.steps)
    analyses: tuple[str, ...] | None = None  # the analyses its runs make at the end (None: all that apply)
    path: Path | None = None  # where its run lives, when not runs_dir/<run name> (seeds None only)


@dataclass
class CellJob(Job):
    """A run of a declared study: its cell, seed and learning rate, and the cell's tags, which read as
    the job's own attributes (job.mechanism, job.width)."""

    cell: str = ""
    seed: int | None = None  # its settings' train.seed
    learning_rate: float | None = None  # its settings' train.learning_rate
    tags: Mapping[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str):
        tags = self.__dict__.get("tags") or {}
        if name in tags:
            return tags[name]
        raise AttributeError(f"{type(self).__name__} {self.__dict__.get('name')!r} has no {name!r}")


@dataclass(frozen=True)
class StudyRun:
    """What a study's report function reads: its planned and trained jobs and how the study ran."""

    jobs: Sequence[Job]
    report_dir: Path
    quick: bool
    seconds: float  # the study's wall time (training what was missing)
    command: str  # the command as typed
    head: dict  # the git state when the study started (src.provenance.git_commit)
    flags: Namespace | None = None  # the study's parsed flags


@dataclass(frozen=True)
class Study:
    """A study as data (module docstring). `check(flags)`, `seeds(flags)`, `learning_rates(flags)`
    and `cells(flags, runs_dir)` raise UsageError (one line) for a bad flag, before any work."""

    name: str  # its command python -m scripts.<name>, its runs runs/<name> (quick: runs/<name>_quick)
    doc: str  # the command's help: its first paragraph is --help's description
    quick_help: str  # what --quick makes
    cells: Callable[[Namespace, Path], Sequence[Cell]]
    report: Callable[[StudyRun], list[Path]]
    seeds: Callable[[Namespace], Sequence[int] | None] = lambda flags: (0,)
    learning_rates: Callable[[Namespace], Sequence[float]] = lambda flags: ()
    flags: Callable[[Any], None] = lambda parser: None  # adds the study's own flags to its parser
    check: Callable[[Namespace], Any] = lambda flags: None  # the study's flags checked before any work
    runs_name: Callable[[Namespace], str] | None = None  # the runs directory's name (default: `name`)
    prepare: Callable[[Namespace], None] = lambda flags: None  # fills flags whose defaults depend on others
    parser: Callable[[], Any] | None = None  # the command's own parser (default: study_parser's and `flags`)
    prog: str = ""  # default: python -m scripts.<name>


def quick_seeds(seeds: Sequence[int]) -> Callable[[Namespace], Sequence[int]]:
    """A Study's `seeds`: all of `seeds`, or the first under --quick."""
    return lambda flags: seeds[:1] if flags.quick else seeds


def quick_cells(cells: Callable[[bool], Sequence[Cell]]) -> Callable[[Namespace, Path], Sequence[Cell]]:
    """A Study's `cells` from a grid that depends on --quick alone: `cells(quick)`."""
    return lambda flags, runs_dir: cells(flags.quick)


def grid_jobs(study: Study, flags: Namespace, runs_dir: Path) -> list[CellJob]:
    """The study's runs: every cell x learning rate x seed (module docstring), validated and planned."""
    return cell_runs(study.cells(flags, runs_dir), study.seeds(flags), runs_dir, study.learning_rates(flags))


def cell_runs(
    cells: Sequence[Cell], seeds: Sequence[int] | None, runs_dir: Path, learning_rates: Sequence[float] = ()
) -> list[CellJob]:
    """Every cell x learning rate x seed as a run under runs_dir (module docstring), its settings
    validated; planned (src/jobs/engine.plan)."""
    jobs = []
    for cell in cells:
        for rate in tuple(learning_rates) or (None,):
            for seed in (None,) if seeds is None else seeds:
                jobs.append(_job(cell, rate, seed, runs_dir))
    return plan(jobs)


def _job(cell: Cell, rate: float | None, seed: int | None, runs_dir: Path) -> CellJob:
    train, name = cell.settings.train, cell.name
    if rate is not None:
        train, name = replace(train, learning_rate=rate), f"{name}_lr{rate:g}"
    if seed is not None:
        train, name = replace(train, seed=seed), f"{name}_seed{seed}"
    settings = replace(cell.settings, train=train).validate()
    return CellJob(
        name,
        settings,
        runs_dir / name if cell.path is None or seed is not None or rate is not None else cell.path,
        cost=float(settings.train.steps if cell.cost is None else cell.cost),
        analyses=cell.analyses,
        cell=cell.name,
        seed=getattr(settings.train, "seed", None),
        learning_rate=getattr(settings.train, "learning_rate", None),
        tags=dict(cell.tags),
    )


def prog_of(study: Study) -> str:
    return study.prog or f"python -m scripts.{study.name}"
