"""Length generalisation of a `gpt2`-family regression run (Lin et al., AAAI 2025):
error vs number of in-context examples out to `factor` × the trained number of points, with
the least-squares / averaging / 3-NN (and one GD step) baselines, and which multiples of the
trained length keep the error within 2× of its in-distribution value.

    python -m analysis.length_gen --run runs/<exp> [--factor 8]

Claims are judged only on a trained model (`judge`): when the in-distribution error is not
clearly below the best constant prediction's (at most 0.75 x), within_2x is null and the
summary says "not trained enough to judge".

The in-distribution reference is the error at n = L − 1 of the same eval tasks cut to exactly L
points (for dynamic YaRN a long prompt rescales every position, so the long pass's point L − 1
differs; for every other encoding the two are the same number).
A learned absolute encoding cannot index past its table: the curve stops there and the summary
says so (`stopped_at`, `reason`), rather than failing or reusing positions. Writes
analysis/length_gen.csv (predictor, n_examples, mean, ci95), analysis/length_gen.json and
analysis/ood_length.png (the original's figure name).
"""

from __future__ import annotations

import math
import sys

from analysis.common import analysis_command, on_request, pairs_of, register_analysis
from analysis.icl_curve import (
    factor_flag,
    check_memory_for,
    curve_csv,
    curves,
    figure,
    load_run,
    points_limit,
    summarise,
)
from plots.style import png_bytes
from src import rundir as names
from src.flags import int_at_least
from src.process import guarded
from src.rundir import RunDir
from src.stats import NOT_TRAINED, TRAINED_BELOW
from src.tasks.objectives import objective_of

MODULE = "analysis.length_gen"
MULTIPLES = (2, 4, 8)
WITHIN = 2.0  # "usable": error within 2x of the in-distribution error


def judge(settings, model, params, state, batch) -> dict:
    """Whether the run learned enough for its length and recency claims to mean anything: its
    error at n = L − 1 (the eval tasks cut to L points) against the best constant prediction's
    (0, +1 or −1: the zero predictor for regression, the majority label for boolean tasks) on
    the same tasks. Trained enough: at most TRAINED_BELOW × the constant's error."""
    import jax.numpy as jnp
    import numpy as np

    trained = pairs_of(settings).trained_shape()[0]
    short = batch._replace(xs=batch.xs[:, :trained], ys=batch.ys[:, :trained], weights=batch.weights[:, :trained])
    objective = objective_of(settings.task.name)
    last_error = lambda prediction: float(
        np.mean(np.asarray(objective.point_errors(prediction, short))[:, trained - 1])
    )
    error = last_error(pairs_of(settings).predictor(model, params, state, trained, short.xs.shape[0])(short))
    constant = min(last_error(jnp.full_like(short.ys, value)) for value in (0.0, 1.0, -1.0))
    ok = bool(math.isfinite(error) and error <= TRAINED_BELOW * constant)
    verdict = (
        "trained"
        if ok
        else f"{NOT_TRAINED}: its error at n = {trained - 1} is {error:.3g}, not below "
        f"{TRAINED_BELOW} x the best constant prediction's {constant:.3g}"
    )
    return {"in_distribution_error": error, "constant_error": constant, "trained_enough": ok, "verdict": verdict}


def usable_lengths(
    model_curve: list[float],
    trained_points: int,
    multiples=MULTIPLES,
    reference: float | None = None,
    judged: bool = True,
) -> dict:
    """{multiple: error at n = multiple × L − 1, and whether it is within WITHIN × `reference`
    (default: the curve's error at n = L − 1, the last trained prediction)}; a multiple past the
    curve is None; `judged` False (an untrained model): within_2x is None, no claim."""
    reference = model_curve[trained_points - 1] if reference is None else reference
    out = {}
    for m in multiples:
        n = m * trained_points - 1
        if n >= len(model_curve):
            out[str(m)] = None
            continue
        error = model_curve[n]
        out[str(m)] = {
            "n_examples": n,
            "error": error,
            "within_2x": bool(math.isfinite(error) and error <= WITHIN * reference) if judged else None,
        }
    return out


def run(run_dir: RunDir, factor: int = 8, eval_size: int | None = None, announce: bool = False) -> dict:
    """The curve out to `factor` × the trained points on the run's first `eval_size` eval tasks
    (default: all of them), checked against the memory free before any work; `announce`
    prints what it evaluates and the memory it expects."""
    settings, model, params, state = load_run(run_dir)
    objective = objective_of(settings.task.name)
    trained = pairs_of(settings).trained_shape()[0]
    wanted = factor * trained
    limit = points_limit(settings)
    points = wanted if limit is None else min(wanted, limit)
    tasks = settings.train.eval_size if eval_size is None else min(eval_size, settings.train.eval_size)
    needed = check_memory_for(settings, points, tasks, "this length test")
    if announce:
        print(
            f"evaluating {tasks} tasks at up to {points} points, a block at a time: about {needed / 2**30:.1f} GiB",
            flush=True,
        )
    batch = pairs_of(settings).prompts(points)
    if tasks < batch.xs.shape[0]:  # the first `tasks` of the run's eval tasks
        batch = batch.first(tasks)
    rows = summarise(curves(settings, model, params, state, batch=batch))
    model_curve = [r["mean"] for r in rows if r["predictor"] == "model"]
    # the reference: the same eval tasks cut to exactly L points. For every encoding but
    # dynamic_yarn it equals the long curve's point L − 1 (causal); dynamic YaRN rescales all
    # positions by the whole prompt's length, so in one 8x pass even its first L points are read
    # at scale 8.
    verdict = judge(settings, model, params, state, batch)
    reference = verdict["in_distribution_error"]
    summary = {
        "position": settings.model.position.name,
        "mixer": settings.model.mixer_label(),
        "task": settings.task.name,
        "error": objective.describes,
        "trained_points": trained,
        "requested_points": wanted,
        "evaluated_points": points,
        "eval_tasks": tasks,
        "stopped_at": points if points < wanted else None,
        "reason": (
            f"the learned position table covers {limit} points; a learned absolute encoding cannot index past it"
            if points < wanted
            else None
        ),
        **verdict,
        "long_pass_error_at_trained_length": model_curve[trained - 1],
        "multiples": usable_lengths(model_curve, trained, reference=reference, judged=verdict["trained_enough"]),
    }
    run_dir.write_text(names.LENGTH_GEN_CSV, curve_csv(rows))
    run_dir.write_json(names.LENGTH_GEN_JSON, summary)
    title = (
        f"{run_dir.name}: {settings.model.mixer_label()} + {settings.model.position.name}, "
        f"trained on {trained} points" + (f" (stopped at {points}: learned table)" if summary["stopped_at"] else "")
    )
    run_dir.write_bytes(names.LENGTH_GEN_PNG, png_bytes(figure(rows, title, trained, objective.metric)))
    return summary


register_analysis(
    "length_gen",
    run,
    "error beyond the trained length, by multiple of it (Lin et al., AAAI 2025; on request)",
    on_request,
    files=[names.LENGTH_GEN_CSV, names.LENGTH_GEN_JSON, names.LENGTH_GEN_PNG],
)


def _flags(parser) -> None:
    factor_flag(parser, 8, "evaluate out to this multiple of the trained number of points")
    parser.add_argument(
        "--eval_size",
        type=int_at_least(1),
        default=None,
        help="evaluate the first N of the run's eval tasks (default: all; the length study's original evaluates 1,280)",
    )


def _print(args, run_dir: RunDir) -> None:
    summary = run(run_dir, args.factor, args.eval_size, announce=True)
    print(
        f"{summary['mixer']} + {summary['position']}: in-distribution error "
        f"{summary['in_distribution_error']:.3f} at n = {summary['trained_points'] - 1}"
    )
    if not summary["trained_enough"]:
        print(f"  {summary['verdict']}")
    if summary["reason"]:
        print(f"  curve stopped at {summary['stopped_at']} points: {summary['reason']}")
    for m, cell in summary["multiples"].items():
        judged = (
            "" if cell is None or cell["within_2x"] is None else f" ({'within' if cell['within_2x'] else 'beyond'} 2x)"
        )
        print(
            f"  {m}x: "
            + ("not evaluated" if cell is None else f"{cell['error']:.3f} at n = {cell['n_examples']}{judged}")
        )
    print(f"-> {run_dir.file(names.LENGTH_GEN_PNG)}")


main = analysis_command(MODULE, __doc__, _flags, _print)


if __name__ == "__main__":
    sys.exit(guarded(main))
