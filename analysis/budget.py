"""What an analysis of a run that predicts pairs evaluates, within a budget of work: every eval
task where that is cheap (every run of the studies here, every golden run), else the first tasks
whose work fits, at least LEAST_TASKS, said in the analysis's output and on stderr. The budget
is a number of operations by the settings' estimate (src.bounds.forward_work for the model, the
least-squares solves for the baselines), never a time, so the same run gives the same files on
any machine. `--full` on the analysis's command lifts it.

    tasks = tasks_within(eval_size, model_work=prompts * side.prompt_work(n), solve_work=...)

Measured on 2 cores here (make lengthgen_laptop's machine): MODEL_WORK is about 7 s of model
evaluation, SOLVE_WORK about 6 s of least squares at every prefix.
"""
from __future__ import annotations

import contextlib
import contextvars
import sys

MODEL_WORK = 60 * 10**9       # operations of the model's forward passes an analysis spends
SOLVE_WORK = 2 * 10**9        # operations of the least-squares baseline's solves
LEAST_TASKS = 8               # the budget never reads fewer eval tasks than this

_FULL = contextvars.ContextVar("full_analysis", default=False)


@contextlib.contextmanager
def full():
    """Inside: every analysis reads every eval task (the budget lifted: `--full`)."""
    token = _FULL.set(True)
    try:
        yield
    finally:
        _FULL.reset(token)


def solve_work(points: int, dims: int, solves: int | None = None) -> int:
    """Operations of `solves` minimum-norm least-squares solves on up to `points` rows of `dims`
    inputs (default: one at every prefix of a prompt of `points` points): about points x dims x
    min(points, dims) each."""
    return (points if solves is None else solves) * points * dims * min(points, dims)


def tasks_within(eval_size: int, model_work: int, solve_work: int = 0) -> int:
    """Tasks an analysis reads: all `eval_size` where a task's `model_work` and `solve_work`
    (operations) times eval_size fit MODEL_WORK and SOLVE_WORK, else as many as fit, at least
    LEAST_TASKS (all, with `full`)."""
    if _FULL.get():
        return eval_size
    fit = MODEL_WORK // max(1, model_work)
    if solve_work:
        fit = min(fit, SOLVE_WORK // solve_work)
    return min(eval_size, max(LEAST_TASKS, fit))


def thinned(count: int, tasks: int, model_work: int) -> list[int]:
    """Which of `count` prompt variants a task's `tasks` read (each `model_work` operations): all of
    them where they fit MODEL_WORK (or with `full`), else every k-th, the first and last kept."""
    if _FULL.get() or tasks * count * model_work <= MODEL_WORK:
        return list(range(count))
    keep = max(2, MODEL_WORK // max(1, tasks * model_work))
    stride = -(-(count - 1) // (keep - 1))
    return sorted(set(range(0, count, stride)) | {count - 1})


def report_cut(analysis: str, read: int, of: int, what: str = "eval tasks", how: str = "the first") -> str:
    """One line naming what the budget left out, printed to stderr and returned ('' when nothing)."""
    if read >= of:
        return ""
    note = (f"{analysis}: {how} {read} of {of} {what} (the analysis budget, analysis/budget.py; "
            f"python -m analysis.{analysis} --run RUN --full reads every one)")
    print(note, file=sys.stderr, flush=True)
    return note


def full_flag(parser) -> None:
    """--full on an analysis's command (analysis.common.main_frame lifts the budget with it)."""
    parser.add_argument("--full", action="store_true",
                        help="every eval task and prompt variant: the analysis budget lifted (analysis/budget.py)")
