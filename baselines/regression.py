"""Baselines of Garg et al. for in-context regression, as predictions at every point
(registry "baseline"): ŷ_i predicts y_i from the pairs before i, like the model.

  least_squares  minimum-norm least squares on the previous pairs (pseudo-inverse)
  averaging      ŵ = mean_{j<i} y_j x_j
  knn            mean label of the k = 3 nearest previous inputs (fewer when i < k)
  gd_step        one GD step from 0 on the previous pairs, ŵ = η mean_{j<i} y_j x_j, η tuned
                 on a held-out batch (the paper's one-step-GD baseline, per point)
averaging and gd_step are one GD step at every point, written with the paper's query form in
baselines/gd_step.py.
  lasso          ℓ1-regularised least squares (ISTA, alpha) — applies to the sparse task

Every function maps prompts (src/tasks/pairs.py: xs [B, n, d], ys [B, n]) -> ŷ [B, n] (ŷ_0 = 0: no
examples yet), as every baseline reads a PairPrompt.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from baselines.gd_step import averaging, gd_at_every_point, prefix_masks as _prefix_masks, tune_eta_at_every_point
from src.registry import registry
from src.settings import require_int, require_number
from src.tasks.pairs import PairPrompt

BASELINES = registry("baseline")


def least_squares(prompt: PairPrompt):
    """Minimum-norm least squares per prefix (rows j >= i zeroed do not change the solution)."""
    xs, ys = prompt.xs, prompt.ys
    masks = _prefix_masks(xs.shape[1])

    def one_task(x, y):
        def at(mask, x_i):
            w = jnp.linalg.pinv(x * mask[:, None], rtol=1e-6) @ (y * mask)
            return x_i @ w

        return jax.vmap(at)(masks, x)

    return jax.vmap(one_task)(xs, ys)


def least_squares_at(prompt: PairPrompt, query):
    """`least_squares` at one point of each prompt: ŷ [B] at point query [B] (ints) from the pairs
    before it, one solve a prompt instead of one at every prefix."""
    xs, ys = prompt.xs, prompt.ys

    def one_task(x, y, q):
        mask = (jnp.arange(x.shape[0]) < q).astype(x.dtype)
        w = jnp.linalg.pinv(x * mask[:, None], rtol=1e-6) @ (y * mask)
        return x[q] @ w

    return jax.vmap(one_task)(xs, ys, query)


def knn(prompt: PairPrompt, k: int = 3):
    xs, ys = prompt.xs, prompt.ys
    n = xs.shape[1]
    dist = jnp.sum((xs[:, :, None] - xs[:, None, :]) ** 2, axis=-1)  # [B, i, j]
    visible = _prefix_masks(n)[None] > 0
    dist = jnp.where(visible, dist, jnp.inf)
    order = jnp.argsort(dist, axis=-1)[..., :k]  # [B, i, k]
    chosen = jnp.take_along_axis(jnp.broadcast_to(ys[:, None, :], dist.shape), order, axis=-1)
    valid = jnp.take_along_axis(visible.repeat(xs.shape[0], 0), order, axis=-1)
    return jnp.sum(jnp.where(valid, chosen, 0.0), -1) / jnp.maximum(valid.sum(-1), 1)


def lasso(prompt: PairPrompt, alpha: float = 0.01, iterations: int = 300):
    """ISTA on (1/2i)‖X_{<i} w − y_{<i}‖² + alpha ‖w‖₁ per prefix, from w = 0."""
    xs, ys = prompt.xs, prompt.ys
    masks = _prefix_masks(xs.shape[1])

    def at(x, y, mask, x_i):
        count = jnp.maximum(mask.sum(), 1.0)
        xm, ym = x * mask[:, None], y * mask
        step = count / jnp.maximum(jnp.linalg.norm(xm, ord=2) ** 2, 1e-6)

        def update(w, _):
            w = w - step * xm.T @ (xm @ w - ym) / count
            return jnp.sign(w) * jnp.maximum(jnp.abs(w) - step * alpha, 0.0), None

        w, _ = jax.lax.scan(update, jnp.zeros(x.shape[1]), None, length=iterations)
        return x_i @ w

    per_task = lambda x, y: jax.vmap(lambda m, xi: at(x, y, m, xi))(masks, x)
    return jax.vmap(per_task)(xs, ys)


def row_wise(predict, prompt: PairPrompt):
    """A built baseline with every quantity it draws from the whole batch fixed on this batch
    (its `fixed_on`, where it has one: gd_step's η tuned on the batch's first half), so that it
    predicts each prompt on its own and can run a block of prompts at a time (src/batched.py)."""
    fixed_on = getattr(predict, "fixed_on", None)
    return predict if fixed_on is None else fixed_on(prompt)


def _gd_step_predictor(options):
    """One GD step at options.eta, or with η tuned on the batch's first half when it is 0."""

    def fixed_on(prompt):
        eta = options.eta or tune_eta_at_every_point(prompt.first(prompt.xs.shape[0] // 2))
        return lambda rows: gd_at_every_point(rows, eta)

    def predict(prompt):
        return fixed_on(prompt)(prompt)

    predict.fixed_on = fixed_on
    return predict


@dataclass(frozen=True)
class CurveBaseline:
    """Options of a per-point regression baseline (the icl_curve protocol)."""

    k: int = 3  # knn
    alpha: float = 0.01  # lasso
    eta: float = 0.0  # gd_step (0: tune on the batch's first half)

    def check(self) -> None:
        require_int("k", self.k, 1, 4096)
        require_number("alpha", self.alpha, 0.0)
        require_number("eta", self.eta, 0.0)


# what a model of these tasks reads: (x, y) pairs, or context pairs and a query (von Oswald et al.'s
# form of the same prompts, src/tasks/paper_form.py)
PAIR_INPUTS = ("pairs", "query")


def _all_regression(task_name: str) -> bool:
    """x/y-pair tasks with real-valued labels (their objective says so)."""
    objective = _objective(task_name)
    return objective is not None and objective.inputs in PAIR_INPUTS and objective.continuous_labels


def _regression_or_boolean(task_name: str) -> bool:
    """Every x/y-pair task: regression, and boolean (scored by the sign of the prediction)."""
    objective = _objective(task_name)
    return objective is not None and objective.inputs in PAIR_INPUTS


def _objective(task_name: str):
    from src.tasks.objectives import objective_of

    return objective_of(task_name) if task_name in registry("task") else None


def _register(name, doc, predict, applies=_regression_or_boolean):
    BASELINES.register(name, CurveBaseline, applies=applies, doc=doc)(lambda options: predict(options))


_register("least_squares", "minimum-norm least squares on the previous pairs", lambda o: least_squares)
_register("averaging", "w = mean of y_j x_j over the previous pairs", lambda o: averaging)
_register("knn", "mean label of the k nearest previous inputs (k = 3)", lambda o: lambda prompt: knn(prompt, o.k))
_register("gd_step", "one GD step from 0, eta tuned (regression only)", _gd_step_predictor, applies=_all_regression)
_register(
    "lasso",
    "l1-regularised least squares (ISTA); the sparse task",
    lambda o: lambda prompt: lasso(prompt, o.alpha),
    applies=lambda task_name: task_name == "sparse_linear_regression",
)
