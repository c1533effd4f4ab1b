"""Prompts built from repeated examples, for a `gpt2`-family run (Lin et al., AAAI 2025, §5): the
duplication test and the serial-position ("lost in the middle") test.


  duplication      2d distinct examples, the last of them repeated r more times, then the
                   query: the task's error at the query vs r (0, 5, 10, 15, 20)
  serial position  an informative block of 2d distinct examples placed at the start, middle or
                   end of a prompt otherwise filled with copies of one example, then the query
                   (`lost_in_mid.png`): at the trained number of points and at `factor` × it

    python -m analysis.prompt_tests --run runs/<exp> [--factor 4]

Every prompt is drawn from the same eval functions (the run's eval seed), so the cells differ
only in the arrangement. Error: squared error / d (regression) or 1 − accuracy (boolean). A
learned absolute table skips prompts longer than it and says so. Writes
analysis/prompt_tests.json, analysis/duplication.png and analysis/lost_in_mid.png.

Glossary: B eval tasks, n points of a prompt, d input dimension.
"""

from __future__ import annotations

import sys

import numpy as np

from analysis.common import analysis_command, on_request, pairs_of, register_analysis
from analysis.icl_curve import factor_flag, run_identity, load_run, points_limit
from plots.style import new_figure, png_bytes
from src import rundir as names
from src.process import guarded
from src.rundir import RunDir

MODULE = "analysis.prompt_tests"
REPEATS = (0, 5, 10, 15, 20)
PLACEMENTS = ("start", "middle", "end")


def duplication_indices(block: int, repeats: int) -> np.ndarray:
    """Point indices of a duplication prompt: 0..block−1, then block−1 `repeats` more times,
    then the query `block`: [block + repeats + 1]."""
    return np.array(list(range(block)) + [block - 1] * repeats + [block])


def serial_indices(block: int, points: int, placement: str) -> np.ndarray:
    """Point indices of a serial-position prompt of `points` points: the informative examples
    1..block at `placement`, copies of example 0 elsewhere, the query block + 1 last."""
    fill = points - 1 - block
    if fill < 0:
        raise ValueError(f"{points} points cannot hold a block of {block} and a query")
    before = {"start": 0, "middle": fill // 2, "end": fill}[placement]
    return np.array([0] * before + list(range(1, block + 1)) + [0] * (fill - before) + [block + 1])


def query_error(settings, model, params, state, batch, indices: np.ndarray) -> float:
    """The task's error at the last point of the prompt batch[:, indices], mean over tasks."""
    from src.tasks.objectives import objective_of

    picked = batch._replace(xs=batch.xs[:, indices], ys=batch.ys[:, indices], weights=batch.weights[:, indices])
    prediction = pairs_of(settings).predictor(model, params, state, len(indices), picked.xs.shape[0])(picked)
    return float(np.mean(np.asarray(objective_of(settings.task.name).point_errors(prediction, picked))[:, -1]))


def prompt_tests(settings, model, params, state, factor: int = 4) -> dict:
    d = settings.curriculum.dims.end
    trained = settings.curriculum.points.end
    limit = points_limit(settings)
    block = min(2 * d, trained - 2)
    lengths = list(dict.fromkeys((trained, factor * trained)))
    batch = pairs_of(settings).prompts(max(block + 2, *lengths))
    too_long = lambda n: limit is not None and n > limit
    duplication = {
        str(r): None
        if too_long(block + r + 1)
        else query_error(settings, model, params, state, batch, duplication_indices(block, r))
        for r in REPEATS
    }
    serial = {
        str(n): None
        if too_long(n)
        else {p: query_error(settings, model, params, state, batch, serial_indices(block, n, p)) for p in PLACEMENTS}
        for n in lengths
    }
    note = (
        (
            f"prompts longer than the learned position table (n_positions={settings.model.max_tokens // 2}) "
            "are skipped (null)"
        )
        if limit is not None
        else None
    )
    return {
        **run_identity(settings, trained, block),
        "duplication": duplication,
        "serial_position": serial,
        "note": note,
    }


def duplication_figure(out: dict, title: str):
    fig = new_figure(4.5, 3.2, constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    cells = [(int(r), e) for r, e in out["duplication"].items() if e is not None]
    ax.plot([r for r, _ in cells], [e for _, e in cells], marker="o")
    ax.set_xlabel("extra copies of the last in-context example")
    ax.set_ylabel("error at the query")
    ax.set_title(f"{title}: {out['mixer']} + {out['position']}", fontsize=9)
    return fig


def serial_figure(out: dict, title: str):
    fig = new_figure(4.5, 3.2, constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    cells = {n: c for n, c in out["serial_position"].items() if c is not None}
    width = 0.8 / max(len(cells), 1)
    for i, (n, cell) in enumerate(cells.items()):
        ax.bar(
            np.arange(len(PLACEMENTS)) + i * width,
            [cell[p] for p in PLACEMENTS],
            width,
            color=f"C{i}",
            label=f"{n}-point prompt",
        )
    ax.set_xticks(np.arange(len(PLACEMENTS)) + width * (len(cells) - 1) / 2, PLACEMENTS)
    ax.set_xlabel(f"where the {out['block']} informative examples sit")
    ax.set_ylabel("error at the query")
    ax.set_title(f"{title}: {out['mixer']} + {out['position']}", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def run(run_dir: RunDir, factor: int = 4) -> dict:
    settings, model, params, state = load_run(run_dir)
    out = prompt_tests(settings, model, params, state, factor)
    run_dir.write_json(names.PROMPT_TESTS_JSON, out)
    run_dir.write_bytes(names.DUPLICATION_PNG, png_bytes(duplication_figure(out, run_dir.name)))
    run_dir.write_bytes(names.SERIAL_POSITION_PNG, png_bytes(serial_figure(out, run_dir.name)))
    return out


def _flags(parser) -> None:
    factor_flag(parser, 4, "the serial-position test also at this multiple of the trained points")


def _print(args, run_dir: RunDir) -> None:
    out = run(run_dir, args.factor)
    print(
        "duplication (extra copies: error) "
        + ", ".join(f"{r}: {'skipped' if e is None else f'{e:.3f}'}" for r, e in out["duplication"].items())
    )
    for n, cell in out["serial_position"].items():
        print(
            f"serial position, {n} points: "
            + ("skipped" if cell is None else ", ".join(f"{p} {e:.3f}" for p, e in cell.items()))
        )
    if out["note"]:
        print(f"  {out['note']}")
    print(f"-> {run_dir.file(names.SERIAL_POSITION_PNG)}")


register_analysis(
    "prompt_tests",
    run,
    "duplicated and lost-in-the-middle prompts (Lin et al.; on request)",
    on_request,
    files=[names.PROMPT_TESTS_JSON, names.DUPLICATION_PNG, names.SERIAL_POSITION_PNG],
)


main = analysis_command(MODULE, __doc__, _flags, _print)


if __name__ == "__main__":
    sys.exit(guarded(main))
