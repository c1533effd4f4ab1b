"""Non-linear regression (von Oswald et al.'s sine-wave experiment): the transformer with an MLP
block (`mlp_lsa`) against GD on learned features (`features_gd`, trained the same way) and
against predictors with fixed features, all on the same eval tasks:

  zero            predicting 0
  gd_raw          one GD step on the raw inputs, η tuned (the linear mechanism without features)
  kernel_gd_step  one functional GD step with an RBF kernel, bandwidth and η tuned
  kernel_ridge    RBF kernel ridge regression, bandwidth and ridge tuned

Hyper-parameters are tuned on held-out tasks drawn from eval_seed + 1. Besides the losses, the
mean distance |ŷ_TF − ŷ_X| of the transformer's predictions to every other learner's says which
one it behaves like (the paper: the transformer's predictions track "MLP + GD").
Loss is the paper's ½ mean (ŷ − y_q)². Shapes: E eval tasks, G grid points of a figure's x axis.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from analysis.common import settings_with
from src.gd_paper.study.seed_runs import curves, half_sq_se, statuses, summary, zero_loss
from baselines.gd_step import tune_eta as tune_gd_eta, gd_predictions
from baselines.kernel import build_kernel_gd_step, build_kernel_ridge
from src.gd_paper.metrics import loss
from src.rundir import RunDir
from src.stats import over_seeds
from src.read_side import LearnsFunctions, read_side

GD_ETAS = np.geomspace(1e-4, 25.0, 400)  # raw-input GD: x spans ±5, so η is small
EXAMPLE_TASKS = 3  # functions drawn in the figure
GRID = 200  # query points per drawn function
MODELS = ("mlp_lsa", "features_gd")


def load_predictor(run: RunDir):
    """ŷ(tasks) -> [B] of a finished run of the `nonlinear` system, through its read side."""
    side = read_side(LearnsFunctions, settings_with(run, LearnsFunctions))
    return side.predictor(*side.restore(run))


def fixed_baselines(settings, tasks) -> dict:
    """Tuned on held-out tasks, scored on the eval `tasks`: {name: {loss, hyper, prediction}}."""
    held_out = read_side(LearnsFunctions, settings).prompts(seed=settings.train.eval_seed + 1)
    out = {}
    eta, _ = tune_gd_eta(held_out, GD_ETAS)
    prediction = gd_predictions(tasks, eta)
    out["gd_raw"] = {"hyper": {"eta": eta}, "prediction": prediction}
    for name, build, second in (
        ("kernel_gd_step", build_kernel_gd_step, "eta"),
        ("kernel_ridge", build_kernel_ridge, "ridge"),
    ):
        baseline = build(None)
        hyper, _ = baseline.tune_eta(held_out)
        out[name] = {
            "hyper": {"bandwidth": hyper[0], second: hyper[1]},
            "prediction": baseline.reference(tasks, hyper).prediction,
        }
    for record in out.values():
        record["loss"] = float(loss(record["prediction"], tasks.query_y))
        record["loss_se"] = half_sq_se(record["prediction"], tasks.query_y)
    return out


def nonlinear(runs: dict[str, Sequence[RunDir]]) -> dict:
    """runs: {"mlp_lsa": [one run per seed], "features_gd": [the same seeds]} -> results."""
    first = runs["mlp_lsa"][0]
    settings = settings_with(first, LearnsFunctions)
    tasks = read_side(LearnsFunctions, settings).prompts()
    fixed = fixed_baselines(settings, tasks)
    predictors = {model: [load_predictor(r) for r in group] for model, group in runs.items()}
    predictions, finals = {}, {}
    for model, group in predictors.items():
        predictions[model] = [np.asarray(predict(tasks)) for predict in group]
        finals[model] = over_seeds([float(loss(p, tasks.query_y)) for p in predictions[model]])
    transformer = predictions["mlp_lsa"]
    distance = {
        "features_gd": over_seeds([np.mean(np.abs(a - b)) for a, b in zip(transformer, predictions["features_gd"])])
    }
    for name, record in fixed.items():
        reference = np.asarray(record["prediction"])
        distance[name] = over_seeds([np.mean(np.abs(a - reference)) for a in transformer])
    return {
        "task": settings.task.name,
        "task_options": dict(settings.task.options.__dict__),
        "seeds": [summary(r).get("seed") for r in runs["mlp_lsa"]],
        "steps": summary(first).get("steps"),
        "eval_size": settings.train.eval_size,
        "batch_size": settings.train.batch_size,
        "learning_rate": settings.train.learning_rate,
        "schedule": (
            "constant learning rate"
            if settings.train.warmup_fraction is None
            else f"{100 * settings.train.warmup_fraction:g} % linear warm-up then cosine decay"
        ),
        "status": {path: state for g in runs.values() for path, state in statuses(g).items()},
        "zero_loss": zero_loss(tasks),
        "final": finals,  # model -> over_seeds of eval loss
        "baselines": {n: {k: v for k, v in r.items() if k != "prediction"} for n, r in fixed.items()},
        "distance_to_transformer": distance,  # learner -> over_seeds of mean |ŷ_TF − ŷ|
        "curves": {m: curves(g, ("eval_loss",)) for m, g in runs.items()},
        "examples": examples(settings, {m: g[0] for m, g in predictors.items()}, fixed),
    }


def grid_tasks(settings, key: jax.Array, grid: np.ndarray):
    """One random function and its N context pairs, queried at every grid point: prompts of G
    tasks (the same function and context) and the function's values on the grid [G]."""
    from src.tasks.pairs import query_prompt

    options = settings.task.options
    key_f, key_x = jax.random.split(key)
    f = options.function(key_f, 1)
    half = options.input_range / 2.0
    context_x = jax.random.uniform(key_x, (1, options.num_context, options.d), minval=-half, maxval=half)
    query_x = jnp.asarray(grid, jnp.float32).reshape(-1, 1) * jnp.ones((1, options.d))
    values = f(query_x[None])[0]
    g = len(grid)
    return query_prompt(jnp.repeat(context_x, g, 0), jnp.repeat(f(context_x), g, 0), query_x, values), values


def examples(settings, predictors: dict, fixed: dict) -> list[dict]:
    """Predictions of each learner (model -> its first seed's predictor) along x for a few random
    functions (the figure's panels)."""
    half = settings.task.options.input_range / 2.0
    grid = np.linspace(-half, half, GRID)
    gd_eta = fixed["gd_raw"]["hyper"]["eta"]
    ridge = build_kernel_ridge(None)
    ridge_hyper = (fixed["kernel_ridge"]["hyper"]["bandwidth"], fixed["kernel_ridge"]["hyper"]["ridge"])
    out = []
    for i in range(EXAMPLE_TASKS):
        tasks, values = grid_tasks(settings, jax.random.fold_in(jax.random.key(settings.train.eval_seed), 7 + i), grid)
        out.append(
            {
                "x": grid.tolist(),
                "truth": np.asarray(values).tolist(),
                "context_x": np.asarray(tasks.context_x[0, :, 0]).tolist(),
                "context_y": np.asarray(tasks.context_y[0]).tolist(),
                "predictions": {
                    **{m: np.asarray(p(tasks)).tolist() for m, p in predictors.items()},
                    "gd_raw": np.asarray(gd_predictions(tasks, gd_eta)).tolist(),
                    "kernel_ridge": np.asarray(ridge.reference(tasks, ridge_hyper).prediction).tolist(),
                },
            }
        )
    return out
