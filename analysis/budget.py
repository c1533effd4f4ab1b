"""What an analysis of a run that predicts pairs evaluates, within a budget of work: every eval
task where that fits (every study's run here, every golden run), else the first tasks that fit,
at least LEAST_TASKS, said on stderr and in the analysis's output. The budget of an analysis is
SHARE of the work the run's training spent, and never less than FLOOR: analyses are never much
longer than the training they describe. Work is counted in operations by the settings' estimate
(src.bounds.forward_work for the model, `solve_work` for least squares), never in seconds, so the
same run gives the same files on any machine. `--full` on an analysis's command lifts it.

    allowed = budget(side)                       # side: the run's read side (PredictsPairs)
    tasks = tasks_within(eval_size, per_task_work, allowed)

Measured on 2 cores here: the model runs about 9 G of these operations a second, least squares
(the SVD behind a pseudo-inverse) about 0.6 G of its nominal ones, hence SOLVE_COST; FLOOR is
about 7 s of model evaluation. The studies' runs need at most 1.4 % of their training's work
(configs/mechanisms.yaml's robustness: 1.8e11 of 1.3e13), limits_of_icl's dummy.yaml 1.0 %.
"""

from __future__ import annotations

import contextvars
import sys

from src.scoped import holding

FLOOR = 60 * 10**9  # operations an analysis may always spend
SHARE = 0.02  # ... or this share of the run's training work, where that is more
SOLVE_COST = 15  # a least-squares solve's nominal operation, in the model's operations
LEAST_TASKS = 8  # the budget never reads fewer eval tasks than this

_FULL = contextvars.ContextVar("full_analysis", default=False)


def full():
    """Inside: every analysis reads every eval task (the budget lifted: `--full`)."""
    return holding(_FULL, True)


def budget(side) -> int:
    """Operations an analysis of the run behind `side` (a PredictsPairs read side) may spend."""
    return max(FLOOR, int(SHARE * side.training_work()))


def solve_work(points: int, dims: int, solves: int | None = None) -> int:
    """Operations (the model's) of `solves` minimum-norm least-squares solves on up to `points`
    rows of `dims` inputs (default: one at every prefix of a prompt of `points` points)."""
    return SOLVE_COST * (points if solves is None else solves) * points * dims * min(points, dims)


def tasks_within(eval_size: int, work: int, allowed: int) -> int:
    """Tasks an analysis reads: all `eval_size` where eval_size x a task's `work` fits `allowed`
    operations, else as many as fit, at least LEAST_TASKS (all, with `full`)."""
    if _FULL.get():
        return eval_size
    return min(eval_size, max(LEAST_TASKS, allowed // max(1, work)))


def thinned(count: int, tasks: int, work: int, allowed: int) -> list[int]:
    """Which of `count` prompt variants (each `work` operations a task) `tasks` tasks read: all
    where they fit `allowed` (or with `full`), else evenly spaced ones, the first and last kept."""
    if _FULL.get() or tasks * count * work <= allowed:
        return list(range(count))
    keep = max(2, allowed // max(1, tasks * work))
    stride = -(-(count - 1) // (keep - 1))
    return sorted(set(range(0, count, stride)) | {count - 1})


def report_cut(analysis: str, read: int, of: int, what: str = "eval tasks", how: str = "the first") -> str:
    """One line naming what the budget left out, printed to stderr and returned ('' when nothing)."""
    if read >= of:
        return ""
    note = (
        f"{analysis}: {how} {read} of {of} {what} (the analysis budget, analysis/budget.py; "
        f"python -m analysis.{analysis} --run RUN --full reads every one)"
    )
    print(note, file=sys.stderr, flush=True)
    return note


def full_flag(parser) -> None:
    """--full on an analysis's command (analysis.common.main_frame lifts the budget with it)."""
    parser.add_argument(
        "--full",
        action="store_true",
        help="every eval task and prompt variant: the analysis budget lifted (analysis/budget.py)",
    )
