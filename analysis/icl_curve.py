"""Error vs number of in-context examples for a run that predicts pairs (the `gpt2`
family; `lm` on its pair tasks), with
every applicable baseline (least squares, averaging, 3-NN, one GD step; Lasso on the sparse
task; for a run trained on a pool of tasks with label noise, dMMSE over its pool and ridge): Garg et al.'s
normalisation, squared error / d (the zero predictor scores 1 on
N(0, I) tasks), mean and 95 % interval (1.96 standard errors) over the fixed eval tasks.

    python -m analysis.icl_curve --run runs/<exp> [--points N] [--full]

`--points` evaluates beyond the trained number of points (a length test) as far as the
model's position table (n_positions) allows; asking for more exits 2 with one line. Where
evaluating every eval task would exceed the analysis budget (analysis/budget.py: the length
study's own configs), the first tasks that fit are read, as the figure's title and stderr say;
`--full` reads every one.
Writes analysis/icl_curve.csv (predictor, n_examples, mean, ci95) and analysis/icl_curve.png.
"""

from __future__ import annotations

import sys

import numpy as np

from analysis.budget import budget, full_flag, report_cut, solve_work, tasks_within
from analysis.common import AnalysisError, analysis_command, for_capability, pairs_of, register_analysis
from plots.style import new_figure, png_bytes
from src import rundir as names
from src.flags import int_at_least
from src.process import guarded
from src.registry import registry
from src.read_side import PredictsPairs, systems_with
from src.rundir import RunDir
from src.tasks.objectives import objective_of

MODULE = "analysis.icl_curve"
CSV, PNG = names.ICL_CURVE_CSV, names.ICL_CURVE_PNG


def curves(settings, model, params, state, n_points: int | None = None, batch=None) -> dict[str, np.ndarray]:
    """predictor -> [E, n] error of the model and of every applicable baseline (the task's
    error: squared error / d for regression, 0/1 error of sign ŷ for boolean tasks), on `batch`
    (default: the run's eval tasks at `n_points`)."""
    from baselines.regression import row_wise
    from src.batched import in_blocks

    pairs = pairs_of(settings)
    batch = pairs.prompts(n_points) if batch is None else batch
    tasks, points, dims = batch.xs.shape
    objective = objective_of(settings.task.name)
    prediction = pairs.predictor(model, params, state, points, tasks)(batch)
    out = {"model": np.asarray(objective.point_errors(prediction, batch))}
    rows = baseline_rows(points, dims, tasks)
    for entry in registry("baseline"):
        if entry.is_applicable(settings.task.name) and hasattr(entry.options, "k"):
            predict = row_wise(entry.build(entry.default_options()), batch)
            guess = in_blocks(predict, rows)(batch)
            out[entry.name] = np.asarray(objective.point_errors(guess, batch))
    for name, guess in bayes_predictions(settings, batch).items():
        out[name] = np.asarray(objective.point_errors(guess, batch))
    return out


def bayes_predictions(settings, batch) -> dict:
    """{name -> ŷ [E, n]} of the Bayes estimators of a run trained on a pool of task vectors
    (train.num_tasks) of a task with label noise: dMMSE over the run's own pool and ridge under
    the prior (baselines/bayes.py); {} for every other run, whose curves stay as recorded."""
    noise = getattr(settings.task.options, "noise_std", None)
    size = pairs_of(settings).pool_size()
    if not size or not noise:
        return {}
    from baselines.bayes import dmmse, ridge
    from src.tasks.pools import task_pool
    from src.batched import block_rows, in_blocks

    tasks, points, dims = batch.xs.shape
    pool = task_pool(pairs_of(settings).sampler(), settings.train.seed, size, dims, points)
    rows = block_rows(3 * 4 * points * (size + points * dims), tasks)  # [n, M] posteriors, [n, d, d] grams
    return {
        "dmmse": in_blocks(lambda prompt: dmmse(prompt, pool, noise), rows)(batch),
        "ridge": in_blocks(lambda prompt: ridge(prompt, noise, 1.0), rows)(batch),
    }


def baseline_row_bytes(points: int, dims: int) -> int:
    """Bytes a baseline needs per task (an over-estimate): least squares at every prefix holds
    about ten [n, n, d] arrays (masked copies, the SVD's factors, the pseudo-inverse and what XLA
    keeps beside them), 3-NN [n, n, d] differences. Measured: the length test of 64 tasks at 1,608
    points peaked at 4.26 GiB resident, the process included (make lengthgen_laptop), where three
    arrays estimated 1.6 GiB; ten estimate 4.9 GiB (tests/test_docs_measurements.py)."""
    from src.bounds import FLOAT_BYTES

    return 10 * FLOAT_BYTES * points * points * (dims + 1)


def baseline_rows(points: int, dims: int, tasks: int) -> int:
    """Tasks a baseline predicts at once (src/batched.py)."""
    from src.batched import block_rows

    return block_rows(baseline_row_bytes(points, dims), tasks)


def check_memory_for(settings, points: int, tasks: int, what: str) -> int:
    """The bytes (an estimate) of evaluating `tasks` prompts of `points` points, a block at a
    time (the model's, then each baseline's); AnalysisError (one line) before any work when they
    cannot fit in the memory free."""
    from src.bounds import check_memory, forward_bytes

    pairs, m = pairs_of(settings), settings.model
    model_block = pairs.rows(points, tasks) * forward_bytes(
        tokens=2 * points, width=m.width, layers=m.n_layer, heads=m.n_head
    )
    dims = pairs.trained_shape()[1]
    baseline_block = baseline_rows(points, dims, tasks) * baseline_row_bytes(points, dims)
    needed = 4 * pairs.prompt_bytes(tasks, points, dims) + max(model_block, baseline_block)
    try:
        check_memory(
            needed,
            what,
            accepted="fewer tasks (--eval_size) or points (--factor, --points)",
            parts=f"{tasks} prompts of {points} points, evaluated a block at a time",
        )
    except ValueError as err:
        raise AnalysisError(str(err)) from None
    return needed


def curve_csv(rows: list[dict]) -> str:
    """The CSV text of `summarise` rows: predictor, n_examples, mean, ci95."""
    return "predictor,n_examples,mean,ci95\n" + "".join(
        f"{r['predictor']},{r['n_examples']},{r['mean']:.9g},{r['ci95']:.9g}\n" for r in rows
    )


def points_limit(settings) -> int | None:
    """The most points the run's position encoding can index (a learned table), or None."""
    return pairs_of(settings).points_limit()


def factor_flag(parser, default: int, help: str) -> None:
    """`--factor`: read the run out to this multiple (1 to 64) of its trained number of points."""
    parser.add_argument("--factor", type=int_at_least(1, 64), default=default, help=help)


def run_identity(settings, trained_points: int, block: int) -> dict:
    """The keys that open a length analysis's JSON: which position encoding, mixer and task, the
    trained number of points and the prompt block (points) the test repeats or extends."""
    return {
        "position": settings.model.position.name,
        "mixer": settings.model.mixer_label(),
        "task": settings.task.name,
        "trained_points": trained_points,
        "block": block,
    }


def summarise(errors: dict[str, np.ndarray]) -> list[dict]:
    rows = []
    for name, table in errors.items():
        mean = table.mean(axis=0)
        ci = 1.96 * table.std(axis=0, ddof=1) / np.sqrt(table.shape[0])
        rows += [
            {"predictor": name, "n_examples": i, "mean": float(m), "ci95": float(c)}
            for i, (m, c) in enumerate(zip(mean, ci))
        ]
    return rows


# the predictors' names in words (legends)
PREDICTOR_WORDS = {
    "model": "the trained model",
    "least_squares": "least squares",
    "knn": "3-nearest neighbours",
    "averaging": "averaging (mean of y·x)",
    "gd_step": "one GD step (η tuned)",
    "lasso": "lasso",
    "dmmse": "dMMSE (posterior mean over the run's pool)",
    "ridge": "ridge (posterior mean under the prior)",
}


def figure(rows: list[dict], title: str, trained_points: int, metric: str = "error"):
    fig = new_figure(6.5, 4.2, constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    for i, name in enumerate(dict.fromkeys(r["predictor"] for r in rows)):
        part = [r for r in rows if r["predictor"] == name]
        x = [r["n_examples"] for r in part]
        mean, ci = np.array([r["mean"] for r in part]), np.array([r["ci95"] for r in part])
        ax.plot(
            x,
            mean,
            marker="o" if name == "model" else None,
            lw=2 if name == "model" else 1,
            color=f"C{i}",
            label=PREDICTOR_WORDS.get(name, name.replace("_", " ")),
        )
        ax.fill_between(
            x,
            mean - ci,
            mean + ci,
            color=f"C{i}",
            alpha=0.2,
            lw=0,
            label="shaded: 95 % confidence interval over the eval tasks" if i == 0 else None,
        )
    ax.axvline(trained_points - 1, color="0.5", ls=":", lw=1, label="trained length")
    ax.set_xlabel("in-context examples before the prediction")
    if metric == "error":  # the objective's reported number: regression error or sign accuracy
        ax.set_ylabel("squared error / d (zero predictor: 1)")
        ax.set_ylim(0, 1.6)
    else:
        ax.set_ylabel("error rate, 1 − accuracy of sign ŷ (chance: 0.5)")
        ax.set_ylim(0, 0.8)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return fig


def load_run(run: RunDir):
    """(settings, model, params, state) of a finished run whose system predicts pairs (the GPT-2
    family): settings read and validated by the system, parameters checked against its model by
    the system's read side (src/read_side.py)."""
    settings = run.load_settings(*systems_with(PredictsPairs))  # Missing/CorruptArtifact, WrongSystem: one line
    return (settings, *pairs_of(settings).restore(run))


def run(run_dir: RunDir, n_points: int | None = None) -> list[dict]:
    settings, model, params, state = load_run(run_dir)
    limit = points_limit(settings)
    if n_points is not None and limit is not None and n_points > limit:
        raise AnalysisError(
            f"--points={n_points} is beyond the learned position table; accepted: at most n_positions={limit}"
        )
    pairs = pairs_of(settings)
    (trained, dims), eval_size = pairs.trained_shape(), settings.train.eval_size
    points = n_points or trained
    tasks = tasks_within(eval_size, pairs.prompt_work(points) + solve_work(points, dims), budget(pairs))
    cut = report_cut("icl_curve", tasks, eval_size)
    check_memory_for(settings, points, tasks, "the ICL curve")
    rows = summarise(curves(settings, model, params, state, n_points, pairs.prompts(n_points).first(tasks)))
    png = png_bytes(
        figure(
            rows,
            f"{run_dir.name}: {settings.model.mixer_label()} on "
            f"{settings.task.name}" + (f" (the first {tasks} of {eval_size} eval tasks)" if cut else ""),
            trained,
            objective_of(settings.task.name).metric,
        )
    )
    run_dir.write_text(CSV, curve_csv(rows))
    run_dir.write_bytes(PNG, png)
    return rows


register_analysis(
    "icl_curve",
    run,
    "error vs in-context examples with the baselines (runs that predict pairs: the GPT-2 family, lm on its pair tasks)",
    for_capability(PredictsPairs),
    [CSV, PNG],
)


def _points_flag(parser) -> None:
    parser.add_argument(
        "--points",
        type=int_at_least(1),
        default=None,
        help="evaluate at this many points (default: the trained number)",
    )
    full_flag(parser)


def _print_curve(args, run_dir) -> None:
    rows = run(run_dir, args.points)
    names_seen = list(dict.fromkeys(r["predictor"] for r in rows))
    table = {(r["predictor"], r["n_examples"]): r["mean"] for r in rows}
    print("n  " + "  ".join(f"{n:>13}" for n in names_seen))
    for i in sorted({r["n_examples"] for r in rows}):
        print(f"{i:<2} " + "  ".join(f"{table[(n, i)]:13.3f}" for n in names_seen))
    print(f"-> {run_dir.file(CSV)}")


main = analysis_command(MODULE, __doc__, _points_flag, _print_curve)


if __name__ == "__main__":
    sys.exit(guarded(main))
