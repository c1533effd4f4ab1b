"""GD++: K steps of GD that also precondition the inputs (von Oswald et al. §3).

Each layer is the constructed LSA layer of `gd_step.py` plus an update of the
input channels of every token t (context and query) by the same attention:

    y_t <- y_t − (η_l/N) Σ_j y_j (x_j·x_t)          (GD step; the query's y-channel holds −ŷ)
    x_t <- x_t − γ_l (1/N) Σ_j x_j (x_j·x_t)        (curvature correction, x <- (I − γ S) x)

with both updates computed from the layer's input. γ = 0 gives K plain GD steps
(with per-layer step sizes). The per-layer (η_l, γ_l) are fitted by Adam on the
task loss with fresh tasks, like a tiny model.

Shapes: B tasks, N context pairs, d input dimension, K layers.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from src.gd_paper.config import TaskConfig
from src.gd_paper.metrics import loss
from src.optim import Optimizer, gradient_step, make_optimizer
from src.tasks.pairs import PairPrompt
from src.tasks.regression import sample_tasks


class GDPlusParams(NamedTuple):
    eta: jax.Array  # [K] step size of each layer
    gamma: jax.Array  # [K] input-preconditioning strength of each layer


def gd_plus_predictions(tasks: PairPrompt, params: GDPlusParams) -> jax.Array:
    """ŷ [B] after K GD++ layers."""
    n = tasks.context_x.shape[1]
    x = tasks.xs  # [B, N+1, d]
    y = jnp.concatenate([tasks.context_y, jnp.zeros_like(tasks.query_y)[:, None]], axis=1)  # [B, N+1]
    for eta, gamma in zip(params.eta, params.gamma):
        context_x, context_y = x[:, :n], y[:, :n]
        gram = jnp.einsum("bjd,btd->bjt", context_x, x)  # x_j·x_t: [B, N, N+1]
        y_new = y - (eta / n) * jnp.einsum("bj,bjt->bt", context_y, gram)
        x_new = x - (gamma / n) * jnp.einsum("bjd,bjt->btd", context_x, gram)
        x, y = x_new, y_new
    return -y[:, -1]


def gd_plus_sensitivity(tasks: PairPrompt, params: GDPlusParams) -> jax.Array:
    """∂ŷ/∂x_q [B, d] (autodiff; tasks are independent)."""

    def total(query_x):
        return jnp.sum(gd_plus_predictions(tasks.with_query_x(query_x), params))

    return jax.grad(total)(tasks.query_x)


def _loss(params: GDPlusParams, tasks: PairPrompt) -> jax.Array:
    return loss(gd_plus_predictions(tasks, params), tasks.query_y)


@partial(jax.jit, static_argnames=("task", "steps", "batch_size", "lr"))
def _fit(
    init: GDPlusParams, key: jax.Array, task: TaskConfig, steps: int, batch_size: int, lr: float
) -> tuple[GDPlusParams, jax.Array]:
    optimizer = make_optimizer(Optimizer("adam", lr), steps)
    step_on = gradient_step(_loss, optimizer)

    def step(carry, index):
        params, opt_state = carry
        tasks = sample_tasks(jax.random.fold_in(key, index), batch_size, task)
        params, opt_state, value = step_on(params, opt_state, tasks)
        return (params, opt_state), value

    (params, _), losses = jax.lax.scan(step, (init, optimizer.init(init)), jnp.arange(steps))
    return params, losses


def fit_gd_plus(
    task: TaskConfig,
    num_layers: int,
    eta_init: float,
    *,
    seed: int = 0,
    steps: int = 2000,
    batch_size: int = 2048,
    lr: float = 1e-2,
) -> tuple[GDPlusParams, np.ndarray]:
    """Fit (η_l, γ_l) for K layers by Adam on the task loss, from η = eta_init, γ = 0.
    Returns the parameters and the training losses [steps]."""
    init = GDPlusParams(jnp.full((num_layers,), eta_init, jnp.float32), jnp.zeros((num_layers,), jnp.float32))
    params, losses = _fit(init, jax.random.key(seed), task, steps, batch_size, lr)
    return params, np.asarray(losses)
