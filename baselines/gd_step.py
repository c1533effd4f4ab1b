"""Gradient descent on the in-context least-squares loss, the baseline every model is
compared with (SPEC §2, §3).

L(W) = 1/(2N) Σ_i (W x_i − y_i)², started from W0 = 0. One step gives
ŷ_GD = (η/N) Σ_i y_i x_iᵀ x_q. The step size η is chosen by a grid scan on
held-out tasks. `gd_params` builds the linear self-attention weights that *are*
this GD step in the concatenated-token transformer.

Shapes: B tasks, N context pairs, d input dimension.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from src.config import ModelConfig, TaskConfig
from src.data import Tasks
from src.transformer import layer_name

# Reference grid: 0.001 ... 25 in steps of 0.1.
ETA_GRID = np.arange(0.001, 25.0, 0.1)


def gd_weights(tasks: Tasks, eta: float, steps: int = 1) -> jax.Array:
    """W after `steps` GD steps from 0 with step size eta: [B, d]."""
    n = tasks.context_x.shape[1]
    w = jnp.zeros_like(tasks.query_x)
    for _ in range(steps):
        residual = jnp.einsum("bnd,bd->bn", tasks.context_x, w) - tasks.context_y  # [B, N]
        grad = jnp.einsum("bn,bnd->bd", residual, tasks.context_x) / n
        w = w - eta * grad
    return w


def gd_predictions(tasks: Tasks, eta: float, steps: int = 1) -> jax.Array:
    """ŷ_GD = W_K x_q: [B]."""
    return jnp.einsum("bd,bd->b", gd_weights(tasks, eta, steps), tasks.query_x)


def gd_sensitivity(tasks: Tasks, eta: float, steps: int = 1) -> jax.Array:
    """∂ŷ_GD/∂x_q = W_K (W_K does not depend on x_q): [B, d]."""
    return gd_weights(tasks, eta, steps)


def loss(predictions: jax.Array, targets: jax.Array) -> jax.Array:
    """The paper's loss, ½ mean (ŷ − y)²."""
    return 0.5 * jnp.mean((predictions - targets) ** 2)


@partial(jax.jit, static_argnames="steps")
def _grid_losses(tasks: Tasks, grid: jax.Array, steps: int) -> jax.Array:
    return jax.lax.map(lambda eta: loss(gd_predictions(tasks, eta, steps), tasks.query_y), grid)


def eta_scan(tasks: Tasks, grid: np.ndarray = ETA_GRID, steps: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Loss of `steps`-step GD for every η in `grid` on `tasks`: (grid, losses)."""
    losses = np.asarray(_grid_losses(tasks, jnp.asarray(grid, dtype=jnp.float32), steps))
    return np.asarray(grid), losses


def tune_eta(tasks: Tasks, grid: np.ndarray = ETA_GRID, steps: int = 1) -> tuple[float, float]:
    """The grid η with the lowest loss on `tasks`, and that loss."""
    grid, losses = eta_scan(tasks, grid, steps)
    best = int(np.nanargmin(losses))
    return float(grid[best]), float(losses[best])


def gd_params(task: TaskConfig, model: ModelConfig, eta: float) -> dict:
    """LSA weights that implement one GD step per layer (SPEC §3).

    W_Q = W_K = [[I_d, 0], [0, 0]] (keep x, drop y), W_V e = [0, −y],
    W_O = (η/N) diag(0, ..., 0, 1). For a recurrent model the one shared layer
    applied K times is K steps of GD; for a stacked model every layer gets it.
    Returns a Haiku params tree for `build_model(task, model)`.
    """
    if model.tokens != "concat" or model.num_heads != 1 or model.softmax_layers:
        raise ValueError("the GD construction needs a single-head linear model on "
                         "concatenated tokens (model 'lsa1' or 'lsa_rec')")
    d, n = task.d, task.num_context
    width = d + 1
    key_size = model.key_size or width
    if key_size != width:
        raise ValueError(f"the GD construction needs key_size = d+1 = {width}, got {key_size}")
    keep_x = np.zeros((width, width), np.float32)
    keep_x[:d, :d] = np.eye(d)
    value = np.zeros((width, width), np.float32)
    value[d, d] = -1.0
    out = np.zeros((width, width), np.float32)
    out[d, d] = eta / n
    layer = {"query": keep_x, "key": keep_x, "value": value, "linear": out}
    layers = 1 if model.recurrent else model.num_layers
    params = {}
    for index in range(layers):
        prefix = f"transformer/{layer_name(model, index)}"
        for proj, matrix in layer.items():
            params[f"{prefix}/{proj}"] = {"w": jnp.asarray(matrix)}
    return params
