"""What the post-run analyses share: the command-line frame and loading a run (flag types
are src.cli's).

Every analysis is `python -m <module> --run runs/<exp> [flags]`. Flags are checked
first (a bad one: exit 2, one line naming flag, value and accepted range); a
missing input file ends the program with exit 2 and one line naming the file and
the command that creates it. Outputs are written only after all work is done,
each one atomically, so a failed analysis leaves no partial file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from typing import Any, Callable, NamedTuple, Sequence

from src.flags import OneLineParser, dry_run, summary
from src.gd_paper.models.attention_only import Model
from src.read_side import PredictsPairs, ScoredAgainstGD, has, read_side, systems_with
from src.registry import registry
from src.rundir import MissingArtifact, RunDir, RunDirError, names
from src.settings import Settings


class AnalysisError(Exception):
    """A problem with the inputs of an analysis; the message is one line."""


def make_parser(module: str, description: str) -> OneLineParser:
    parser = OneLineParser(
        prog=f"python -m {module}", description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--run", required=True, help="a finished run directory, e.g. runs/<exp>")
    return parser


def run_cli(prog: str, work: Callable[[], None]) -> int:
    """Run `work()`; a missing artifact or bad input becomes one stderr line and exit 2."""
    try:
        work()
    except (RunDirError, AnalysisError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as err:
        print(f"{prog}: error: a JSON file of the run is unreadable ({err}); rerun the runner", file=sys.stderr)
        return 2
    return 0


class LoadedRun(NamedTuple):
    settings: Settings
    model: Model
    params: dict


def load_run(run: RunDir) -> LoadedRun:
    """Settings, model and parameters of a finished run scored against GD (the paper's system: config.json +
    params.npz, through the system's read side): MissingArtifact / CorruptArtifact / WrongSystem
    (one line) when unusable."""
    settings = settings_with(run, ScoredAgainstGD)
    return LoadedRun(settings, *read_side(ScoredAgainstGD, settings).restore(run))


def settings_with(run: RunDir, capability: type) -> Settings:
    """The run's validated Settings; WrongSystem (one line) unless its system has `capability`."""
    return run.load_settings(*systems_with(capability))


def pairs_of(settings) -> PredictsPairs:
    """The read side of a run that predicts (x, y) pairs (src/read_side.py)."""
    return read_side(PredictsPairs, settings)


def for_capability(capability: type, when: Callable[[Any], bool] | None = None) -> Callable[[Any], bool]:
    """An `applies` predicate: runs whose system has `capability` (src/read_side.py) and, with
    `when`, whose settings pass it."""

    def applies(settings) -> bool:
        return has(capability, settings) and (when is None or bool(when(settings)))

    return applies


def tuned_eta(run: RunDir) -> float:
    """GD's step size tuned for this run at α = 1 (metrics_summary.json `gd_eta`)."""
    eta = run.load_json(names.SUMMARY).get("gd_eta")
    if not isinstance(eta, (int, float)) or not math.isfinite(eta) or eta <= 0:
        raise AnalysisError(
            f"{run.file(names.SUMMARY)} has no valid gd_eta ({eta!r}); recreate it with: {run.producer(names.SUMMARY)}"
        )
    return float(eta)


def regression_task(settings) -> bool:
    """A run whose task has real-valued labels (a regression estimator such as GD's step, or
    Gaussian label noise, applies to it)."""
    from src.tasks.objectives import objective_of

    return objective_of(settings.task.name).continuous_labels


class Analysis(NamedTuple):
    """A registered per-run analysis: `run(run_dir)` writes its files, `outputs(settings)` names
    those a finished run must have (it is complete when they exist), `files` every file it can write
    (fnmatch patterns; the one list src.rundir's `producer` reads to say which command recreates a
    missing file) and `module` the module whose `python -m ... --run RUN` writes them."""

    run: Callable[[RunDir], Any]
    outputs: Callable[[Any], list[str]]
    module: str
    files: tuple[str, ...]


def on_request(settings) -> bool:
    """The `applies` of an analysis run only by its own command, never at the end of training."""
    return False


def register_analysis(
    name: str,
    run: Callable,
    doc: str,
    applies: Callable[[Any], bool],
    outputs: Sequence[str] | Callable[[Any], list[str]] = (),
    files: Sequence[str] = (),
) -> None:
    """Register `run(run_dir)` as the per-run analysis `name` (registry "analysis"), written by the
    module that defines `run`; `files` defaults to a fixed `outputs` list."""
    listed = outputs if callable(outputs) else (lambda settings, fixed=tuple(outputs): list(fixed))
    written = tuple(files) or (() if callable(outputs) else tuple(outputs))
    # the module's own name, also when it runs as __main__ (python -m analysis.x, runpy): its spec's
    module = getattr(getattr(run, "__globals__", {}).get("__spec__"), "name", None) or run.__module__
    analysis = Analysis(run, listed, module, written)
    registry("analysis").register(name, applies=applies, doc=doc)(lambda options: analysis)


def main_frame(
    module: str,
    description: str,
    add_flags: Callable[[OneLineParser], None],
    work: Callable[[argparse.Namespace, RunDir], None],
    argv: Sequence[str] | None,
) -> int:
    """Parse flags (exit 2 on a bad one), then run `work(args, RunDir(args.run))`. `description`:
    the module's docstring (its first paragraph opens --help)."""
    parser = make_parser(module, summary(description))
    add_flags(parser)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if dry_run(parser.prog, f"analyse {args.run}"):
        return 0

    def analysed():
        from analysis.budget import full
        from src.batched import shown

        with full() if getattr(args, "full", False) else contextlib.nullcontext(), shown(parser.prog):
            work(args, finished(RunDir(args.run)))

    code = run_cli(parser.prog, analysed)
    return diverged_note(parser.prog, RunDir(args.run)) if code == 0 else code


def analysis_command(
    module: str,
    description: str,
    add_flags: Callable[[OneLineParser], None],
    work: Callable[[argparse.Namespace, RunDir], None],
) -> Callable[..., int]:
    """An analysis's `main(argv=None) -> exit code`: `main_frame` with these."""

    def main(argv: Sequence[str] | None = None) -> int:
        return main_frame(module, description, add_flags, work, argv)

    return main


def finished(run: RunDir) -> RunDir:
    """`run`, when it finished (its metrics_summary.json is written last, after its parameters):
    MissingArtifact (one line) for a run still training, stopped or killed before its end."""
    if run.path.is_dir() and run.exists(names.CONFIG) and not run.exists(names.SUMMARY):
        raise MissingArtifact(
            f"{run.path} has not finished (no {names.SUMMARY}: it is still training, or "
            "was stopped before its end); accepted: a finished run (continue this one with "
            "the command that started it and --resume)"
        )
    return run


DIVERGED_EXIT = 3


def diverged_note(prog: str, run: RunDir) -> int:
    """0 for a run that trained normally; for a diverged one a one-line note that the numbers
    are those of its last good parameters, and exit code DIVERGED_EXIT (outputs are written)."""
    try:
        summary = run.load_json(names.SUMMARY) if run.exists(names.SUMMARY) else {}
    except RunDirError:
        return 0  # nothing to say about an unreadable summary here (src.rundir flags it)
    if not isinstance(summary, dict) or summary.get("status") != "diverged":
        return 0
    message = summary.get("message") or "diverged"
    print(
        f"{prog}: note: {run.path} diverged ({message}); the outputs describe its last good "
        f"parameters, not a trained model (exit {DIVERGED_EXIT})",
        file=sys.stderr,
    )
    return DIVERGED_EXIT
