"""Kernel baselines for in-context regression, the non-linear counterparts of one GD step (von
Oswald et al.'s non-linear regression compares a transformer with GD on features; these are GD
and least squares on a fixed, infinite feature map instead of a learned one).

RBF kernel k(x, x') = exp(−‖x − x'‖² / (2σ²)) on a task's own context pairs:
  kernel_gd_step  one step of functional GD from f = 0 on ½·mean_i (f(x_i) − y_i)² in the RKHS:
                  ŷ = (η/N) Σ_i y_i k(x_i, x_q)              hyper-parameters (σ, η)
  kernel_ridge    kernel ridge regression ŷ = k_qᵀ (K + λ N I)⁻¹ y   hyper-parameters (σ, λ)
Hyper-parameters are chosen by a grid scan on held-out tasks (`tune_eta`, the name of the
gd_one_step baseline's method, returns them with their loss); `reference(tasks, hyper)` gives
predictions [B] and their sensitivities ∂ŷ/∂x_q [B, d]. Every predictor reads a PairPrompt
(src/tasks/pairs.py: its last point the query).
Shapes: B tasks, N context pairs, d input dimension.
"""

from __future__ import annotations

import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from src.gd_paper.metrics import Reference, loss
from src.registry import registry
from src.tasks.pairs import PairPrompt

BANDWIDTHS = np.geomspace(0.05, 20.0, 28)  # σ, in units of x
ETAS = np.geomspace(1e-3, 1e2, 31)  # η of the functional GD step
RIDGES = np.geomspace(1e-6, 1.0, 13)  # λ (per pair: the system is K + λ N I)


def rbf(a: jax.Array, b: jax.Array, bandwidth) -> jax.Array:
    """[B, N, d], [B, M, d] -> [B, N, M]."""
    sq = jnp.sum(jnp.square(a[:, :, None, :] - b[:, None, :, :]), -1)
    return jnp.exp(-sq / (2.0 * bandwidth**2))


def kernel_gd_predictions(prompt: PairPrompt, bandwidth, eta) -> jax.Array:
    context_x, context_y, query_x = prompt.context_x, prompt.context_y, prompt.query_x
    k_q = rbf(context_x, query_x[:, None, :], bandwidth)[..., 0]  # [B, N]
    return eta / context_x.shape[1] * jnp.sum(context_y * k_q, -1)


def kernel_ridge_predictions(prompt: PairPrompt, bandwidth, ridge) -> jax.Array:
    context_x, context_y, query_x = prompt.context_x, prompt.context_y, prompt.query_x
    n = context_x.shape[1]
    gram = rbf(context_x, context_x, bandwidth) + ridge * n * jnp.eye(n)  # [B, N, N]
    alpha = jnp.linalg.solve(gram, context_y[..., None])[..., 0]  # [B, N]
    k_q = rbf(context_x, query_x[:, None, :], bandwidth)[..., 0]
    return jnp.sum(alpha * k_q, -1)


def _with_sensitivity(predict, tasks, a, b) -> Reference:
    def one(query_x):  # the sum over tasks of ŷ: its gradient is every task's ∂ŷ/∂x_q
        return jnp.sum(predict(tasks.with_query_x(query_x), a, b))

    return Reference(predict(tasks, a, b), jax.grad(one)(tasks.query_x))


@partial(jax.jit, static_argnums=0)
def _grid_losses(predict, tasks, grid: jax.Array) -> jax.Array:
    return jax.lax.map(lambda h: loss(predict(tasks, h[0], h[1]), tasks.query_y), grid)


class KernelBaseline:
    def __init__(self, predict, second_grid):
        self.predict, self.second_grid = predict, second_grid

    def tune_eta(self, tasks) -> tuple[tuple[float, float], float]:
        """The grid's (σ, second hyper-parameter) with the lowest loss on `tasks`, and that loss."""
        grid = np.array(list(itertools.product(BANDWIDTHS, self.second_grid)), np.float32)
        losses = np.asarray(_grid_losses(self.predict, tasks, jnp.asarray(grid)))
        best = int(np.nanargmin(losses))
        return (float(grid[best, 0]), float(grid[best, 1])), float(losses[best])

    def reference(self, tasks, hyper) -> Reference:
        return jax.jit(partial(_with_sensitivity, self.predict))(tasks, *hyper)


@registry("baseline").register(
    "kernel_gd_step", doc="one functional GD step in an RBF kernel's RKHS from f = 0; bandwidth and step size tuned"
)
def build_kernel_gd_step(options) -> KernelBaseline:
    return KernelBaseline(kernel_gd_predictions, ETAS)


@registry("baseline").register(
    "kernel_ridge", doc="RBF kernel ridge regression on the context pairs; bandwidth and ridge tuned"
)
def build_kernel_ridge(options) -> KernelBaseline:
    return KernelBaseline(kernel_ridge_predictions, RIDGES)
