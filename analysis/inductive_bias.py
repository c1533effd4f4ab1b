"""Inductive bias of a run that predicts pairs (`gpt2`; `lm` on its pair tasks) (Lin et al. AAAI 2025 §5, their
`baseline_all_dup.png`):
as copies of one example fill the prompt, which learner does the model behave like?

The prompt is a block of 2d distinct examples (fewer where the trained length L leaves too little
room for copies: min(2d, L − 2, max(d, ⌊L/2⌋))), then the block's last example repeated r = 0, 1, … times up to L − 1
examples, then the query. At each r the error at the query of the model and of three learners
given the same prompt: least squares (unmoved by copies of a consistent example), averaging
(ŵ = mean y_j x_j: pulled towards the copied example) and 3-NN (the copies crowd out the other
neighbours once they are the query's nearest). `closest` names the learner whose predictions
at the query the model's are nearest to (mean squared difference over tasks and r: how it
behaves, not how well it scores); it is stated only when the model is trained
(analysis.length_gen.judge: its error at L − 1 clearly below the best constant's).

    python -m analysis.inductive_bias --run runs/<exp>

Registered (registry "analysis"): it runs at the end of every run that predicts pairs. Writes
analysis/inductive_bias.json and analysis/baseline_all_dup.png. Error: the task's (squared
error / d for regression, 1 − accuracy of sign ŷ for boolean tasks).

Glossary: B eval tasks, n points of a prompt, d input dimension, L trained points.
"""

from __future__ import annotations

import sys
from typing import Sequence

import jax
import numpy as np

from analysis.budget import budget, full_flag, report_cut, tasks_within, thinned
from analysis.common import analysis_command, for_capability, pairs_of, register_analysis
from analysis.icl_curve import run_identity, PREDICTOR_WORDS, baseline_rows, load_run, points_limit
from analysis.length_gen import judge
from analysis.prompt_tests import duplication_indices
from plots.style import new_figure, png_bytes
from src import rundir as names
from src.process import guarded
from src.read_side import PredictsPairs
from src.registry import registry
from src.rundir import RunDir
from src.tasks.objectives import objective_of

MODULE = "analysis.inductive_bias"
LEARNERS = ("least_squares", "averaging", "knn")
AT_EVERY_POINT = ("averaging", "knn")  # cheap at every point: the registry's; least squares solves at the query


def block_size(settings) -> int:
    """The informative examples before the copies: min(2d, L − 2, max(d, ⌊L/2⌋)): Lin et al.'s
    2d where the trained length L leaves room for copies; where it does not (L = 11 at d = 5: 2d
    would leave 2 numbers of copies), half the prompt, at least d examples."""
    points, dims = pairs_of(settings).trained_shape()
    return min(2 * dims, points - 2, max(dims, points // 2))


def prompt_indices(block: int, length: int, copies: Sequence[int] | None = None) -> np.ndarray:
    """[R, length] point indices, one row for each r of `copies` (default: 0 .. length − block − 1):
    row r is the block, r copies of its last example and the query (point `block`), then the
    query repeated to `length` points. Every predictor here is causal, so the padding after the
    query changes nothing at it, and one call with one shape serves every r (one compilation,
    not one per length)."""
    rows = []
    for r in range(length - block) if copies is None else copies:
        row = duplication_indices(block, r)
        rows.append(np.concatenate([row, np.full(length - len(row), block)]))
    return np.stack(rows)


def query_errors(
    settings, model, params, state, batch, indices: np.ndarray, query: np.ndarray | None = None
) -> tuple[dict, dict]:
    """({model and each learner: [R] the error at the query of each prompt row (at position
    query[r] = block + r of row r), mean over tasks}, {each learner: [R] the mean squared
    difference between its prediction at the query and the model's}); indices from
    `prompt_indices` (default query: block + r for every r). Least squares solves at the query only
    (baselines.regression.least_squares_at)."""
    from baselines.regression import least_squares_at
    from src.batched import in_blocks

    objective = objective_of(settings.task.name)
    tasks, (rows, length) = batch.xs.shape[0], indices.shape
    apply = jax.jit(model.apply)
    entries = {name: registry("baseline").get(name) for name in AT_EVERY_POINT}
    learners = {name: jax.jit(entry.build(entry.default_options())) for name, entry in entries.items()}
    solve_at_query = jax.jit(least_squares_at)
    query = length - rows + np.arange(rows) if query is None else np.asarray(query)

    def at_queries(task_xs, task_ys):
        """{predictor: ([t, R] prediction at each row's query, [t, R] its error)} of t tasks'
        R prompts each (the prompts of a few tasks exist at a time, not all tasks' at once)."""
        count = task_xs.shape[0]
        xs = task_xs[:, indices].reshape(count * rows, length, -1)
        ys = task_ys[:, indices].reshape(count * rows, length)
        picked = batch._replace(xs=xs, ys=ys)
        at_query = lambda values: jax.numpy.reshape(values, (count, rows, length))[:, np.arange(rows), query]
        predictions = {"model": apply(params, state, xs, ys), **{n: f(picked) for n, f in learners.items()}}
        queries = np.tile(query, count)  # each prompt's query point
        solved = solve_at_query(picked, queries)  # least squares at the queries only, the rest 0
        predictions["least_squares"] = jax.numpy.zeros_like(ys).at[np.arange(len(queries)), queries].set(solved)
        return {name: (at_query(p), at_query(objective.point_errors(p, picked))) for name, p in predictions.items()}

    prompts = min(pairs_of(settings).rows(length, tasks * rows), baseline_rows(length, batch.xs.shape[2], tasks * rows))
    per_block = max(1, prompts // rows)
    found = {
        name: tuple(np.asarray(a) for a in pair)
        for name, pair in in_blocks(at_queries, per_block, "tasks")(batch.xs, batch.ys).items()
    }
    errors = {name: [float(e) for e in found[name][1].mean(axis=0)] for name in found}
    model_at_query = found["model"][0]
    gaps = {name: [float(g) for g in ((found[name][0] - model_at_query) ** 2).mean(axis=0)] for name in LEARNERS}
    return errors, gaps


def inductive_bias(settings, model, params, state) -> dict:
    """The record: errors and prediction gaps at each r read, the verdict and the closest learner.
    Within the analysis budget (analysis/budget.py): the first tasks whose R prompts fit, at least
    LEAST_TASKS; where even those do not fit, every k-th r (the first and last kept)."""
    pairs = pairs_of(settings)
    trained, eval_size = pairs.trained_shape()[0], settings.train.eval_size
    limit = points_limit(settings)
    longest = trained if limit is None else min(trained, limit)
    block = block_size(settings)
    batch = pairs.prompts(trained)
    count, work, allowed = longest - block, pairs.prompt_work(longest), budget(pairs)
    tasks = tasks_within(eval_size, count * work, allowed)
    copies = thinned(count, tasks, work, allowed)
    cut = " ".join(
        filter(
            None,
            (
                report_cut("inductive_bias", tasks, eval_size),
                report_cut(
                    "inductive_bias",
                    len(copies),
                    count,
                    f"numbers of copies (r = {', '.join(map(str, copies[:2]))}, ..., {copies[-1]})",
                    "evenly spaced",
                ),
            ),
        )
    )
    indices = prompt_indices(block, longest, copies)
    errors, gaps = query_errors(settings, model, params, state, batch.first(tasks), indices, block + np.asarray(copies))
    rows = {str(r): {name: errors[name][i] for name in errors} for i, r in enumerate(copies)}
    verdict = judge(settings, model, params, state, batch.first(tasks_within(eval_size, work, allowed)))
    mean_gap = {name: float(np.mean(gaps[name])) for name in LEARNERS}
    return {
        **run_identity(settings, trained, block),
        "tasks": tasks,
        "errors": rows,
        "prediction_gap": {str(r): {n: gaps[n][i] for n in LEARNERS} for i, r in enumerate(copies)},
        "mean_gap": mean_gap,
        **verdict,
        "closest": min(mean_gap, key=mean_gap.get) if verdict["trained_enough"] else None,
        **({"eval_tasks": eval_size, "budget": cut} if cut else {}),
    }


def figure(out: dict, title: str):
    fig = new_figure(5.0, 3.4, constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    copies = [int(r) for r in out["errors"]]
    n_examples = [out["block"] + r for r in copies]
    styles = {
        "model": ("-", "C0", 2.0),
        "least_squares": ("--", "k", 1.0),
        "averaging": (":", "C1", 1.2),
        "knn": ("-.", "C2", 1.2),
    }
    for name, (style, colour, width) in styles.items():
        ax.plot(
            n_examples,
            [out["errors"][str(r)][name] for r in copies],
            ls=style,
            color=colour,
            lw=width,
            marker="o" if name == "model" else None,
            ms=3,
            label=PREDICTOR_WORDS.get(name, name),
        )
    ax.set_xlabel(f"in-context examples: {out['block']} informative, then copies of the last")
    ax.set_ylabel(f"{objective_of(out['task']).describes} at the query")
    note = "" if out["trained_enough"] else "\n(not trained enough to judge)"  # its own line: a long name fits
    ax.set_title(f"{title}: {out['mixer']} + {out['position']}{note}", fontsize=8)
    ax.legend(fontsize=7)
    return fig


def run(run_dir: RunDir) -> dict:
    settings, model, params, state = load_run(run_dir)
    out = inductive_bias(settings, model, params, state)
    run_dir.write_json(names.INDUCTIVE_BIAS_JSON, out)
    run_dir.write_bytes(names.INDUCTIVE_BIAS_PNG, png_bytes(figure(out, run_dir.name)))
    return out


def _print(args, run_dir: RunDir) -> None:
    out = run(run_dir)
    print(
        f"{out['block']} informative examples, then copies of the last; error at the query "
        "(model / " + " / ".join(LEARNERS) + "):"
    )
    for r, row in out["errors"].items():
        print(f"  +{r:>2} copies: " + " / ".join(f"{row[k]:.3f}" for k in ("model", *LEARNERS)))
    print("closest learner: " + (out["closest"] or f"none stated ({out['verdict']})"))
    print(f"-> {run_dir.file(names.INDUCTIVE_BIAS_PNG)}")


main = analysis_command(MODULE, __doc__, full_flag, _print)


register_analysis(
    "inductive_bias",
    run,
    "the model vs least squares, averaging, 3-NN as copies fill the prompt",
    for_capability(PredictsPairs),
    [names.INDUCTIVE_BIAS_JSON, names.INDUCTIVE_BIAS_PNG],
)


if __name__ == "__main__":
    sys.exit(guarded(main))
