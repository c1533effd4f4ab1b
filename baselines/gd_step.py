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

from src.gd_paper.config import ModelConfig, TaskConfig
from src.gd_paper.metrics import Reference, loss
from src.gd_paper.models.attention_only import layer_name
from src.gd_paper.models.layouts import layout_of
from src.gd_paper.models.lsa import is_raw_dot_product
from src.registry import registry
from src.tasks.pairs import PairPrompt

# Reference grid: 0.001 ... 25 in steps of 0.1.
ETA_GRID = np.arange(0.001, 25.0, 0.1)


def gd_weights(tasks: PairPrompt, eta: float, steps: int = 1) -> jax.Array:
    """W after `steps` GD steps from 0 with step size eta: [B, d]."""
    n = tasks.context_x.shape[1]
    w = jnp.zeros_like(tasks.query_x)
    for _ in range(steps):
        residual = jnp.einsum("bnd,bd->bn", tasks.context_x, w) - tasks.context_y  # [B, N]
        grad = jnp.einsum("bn,bnd->bd", residual, tasks.context_x) / n
        w = w - eta * grad
    return w


def gd_predictions(tasks: PairPrompt, eta: float, steps: int = 1) -> jax.Array:
    """ŷ_GD = W_K x_q: [B]."""
    return jnp.einsum("bd,bd->b", gd_weights(tasks, eta, steps), tasks.query_x)


# The same step at every point of the prompts (Garg et al.'s per-point protocol: ŷ_i from the pairs
# before i, ŷ_0 = 0): ŷ_i = η (mean_{j<i} y_j x_j)·x_i, the last point's equal to gd_predictions at the
# query to float32 rounding (tests/test_gd_step.py; the sums run in another order, so not bit for bit).


def prefix_masks(n: int) -> jax.Array:
    """[n, n] float: row i keeps pairs j < i."""
    return jnp.asarray(np.tril(np.ones((n, n)), k=-1), jnp.float32)


def averaging(prompt: PairPrompt) -> jax.Array:
    """ŷ_i = (mean_{j<i} y_j x_j)·x_i [B, n]: one GD step at η = 1 at every point (Garg et al.'s
    averaging estimator)."""
    xs, ys = prompt.xs, prompt.ys
    masks = prefix_masks(xs.shape[1])
    counts = jnp.maximum(masks.sum(-1), 1.0)
    w = jnp.einsum("ij,bj,bjd->bid", masks, ys, xs) / counts[None, :, None]
    return jnp.einsum("bid,bid->bi", w, xs)


def gd_at_every_point(prompt: PairPrompt, eta: float) -> jax.Array:
    """One GD step at step size `eta` at every point [B, n]."""
    return eta * averaging(prompt)


def tune_eta_at_every_point(prompt: PairPrompt, grid=np.linspace(0.05, 3.0, 60)) -> float:
    """The η of gd_at_every_point with the lowest mean squared error over all points of a batch."""
    base = averaging(prompt)
    errors = [float(jnp.mean((eta * base - prompt.ys) ** 2)) for eta in grid]
    return float(grid[int(np.argmin(errors))])


def gd_sensitivity(tasks: PairPrompt, eta: float, steps: int = 1) -> jax.Array:
    """∂ŷ_GD/∂x_q = W_K (W_K does not depend on x_q): [B, d]."""
    return gd_weights(tasks, eta, steps)


@partial(jax.jit, static_argnames="steps")
def _grid_losses(tasks: PairPrompt, grid: jax.Array, steps: int) -> jax.Array:
    return jax.lax.map(lambda eta: loss(gd_predictions(tasks, eta, steps), tasks.query_y), grid)


def eta_scan(tasks: PairPrompt, grid: np.ndarray = ETA_GRID, steps: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Loss of `steps`-step GD for every η in `grid` on `tasks`: (grid, losses)."""
    losses = np.asarray(_grid_losses(tasks, jnp.asarray(grid, dtype=jnp.float32), steps))
    return np.asarray(grid), losses


def tune_eta(tasks: PairPrompt, grid: np.ndarray = ETA_GRID, steps: int = 1) -> tuple[float, float]:
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
    if (
        layout_of(model).tokens_per_pair != 1
        or model.num_heads != 1
        or not all(is_raw_dot_product(m) for m in model.mixers)
    ):
        raise ValueError(
            "the GD construction needs a single-head linear model on concatenated tokens (model 'lsa1' or 'lsa_rec')"
        )
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
    layers = 1 if model.shared_weights else model.num_layers
    params = {}
    for index in range(layers):
        prefix = f"transformer/{layer_name(model, index)}"
        for proj, matrix in layer.items():
            params[f"{prefix}/{proj}"] = {"w": jnp.asarray(matrix)}
    return params


@jax.jit
def gd_reference(tasks: PairPrompt, eta: float) -> Reference:
    """One GD step with step size `eta`: predictions [B] and sensitivities [B, d]."""
    return Reference(gd_predictions(tasks, eta), gd_sensitivity(tasks, eta))


class OneStepGD:
    """The reference every attention-only run is scored against: one GD step, η tuned."""

    tune_eta = staticmethod(tune_eta)
    reference = staticmethod(gd_reference)


@registry("baseline").register(
    "gd_one_step", doc="one step of GD from W0 = 0 with a tuned η (the attention-only runs' reference, SPEC §2)"
)
def build_one_step_gd(options) -> OneStepGD:
    return OneStepGD()
