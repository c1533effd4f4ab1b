"""Garg et al.'s (2022) non-linear in-context regression tasks (registry "task", objective
"regression"), at the same shapes and curriculum as src/tasks/garg.py:

  relu_2nn_regression  y = sqrt(2 / h) · scale · ReLU(x W1) W2, W1 ~ N(0, 1)^{d×h}, W2 ~ N(0, 1)^h
                       per task (h = `hidden`, 100): a random two-layer ReLU network, scaled so
                       that E y² = E (x·w)² = d on N(0, I) inputs
  decision_tree        a complete binary tree of depth `depth` (4) per task: every internal node
                       reads one coordinate drawn uniformly from [0, d) and goes right when it is
                       > 0; each leaf holds a value ~ N(0, 1) (nodes numbered 0, 1, 2, …: the
                       children of node i are 2i + 1 and 2i + 2)

A batch is a PairPrompt whose `w` is zero (these tasks have no weight vector).
Glossary: B tasks, n points, d dims, h hidden units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp

from src.registry import registry
from src.settings import require_int, require_number, require_one_of
from src.tasks.garg import DATA, sample_inputs
from src.tasks.pairs import PairPrompt

TASKS = registry("task")


@dataclass(frozen=True)
class Relu2nnOptions:
    objective: ClassVar[str] = "regression"
    data: str = "gaussian"  # src/tasks/garg.py DATA
    scale: float = 1.0
    hidden: int = 100  # h, the network's hidden units

    def check(self) -> None:
        require_one_of("data", self.data, DATA)
        require_number("scale", self.scale, 0.0, open_low=True)
        require_int("hidden", self.hidden, 1, 65536)


@dataclass(frozen=True)
class DecisionTreeOptions:
    objective: ClassVar[str] = "regression"
    data: str = "gaussian"
    depth: int = 4

    def check(self) -> None:
        require_one_of("data", self.data, DATA)
        require_int("depth", self.depth, 1, 16)


def _inputs(key, batch_size, n_points, n_dims, dims, data, alpha):
    xs = alpha * sample_inputs(key, (batch_size, n_points, n_dims), data)
    return jnp.where(jnp.arange(n_dims) < dims, xs, 0.0)


def _batch(xs, ys, points, dims) -> PairPrompt:
    b, n, d = xs.shape
    weights = (jnp.arange(n) < points).astype(jnp.float32)[None].repeat(b, 0)
    return PairPrompt(xs, ys, weights, jnp.zeros((b, d)), jnp.asarray(dims, jnp.float32))


def relu_2nn(xs, w1, w2, scale: float) -> jax.Array:
    """[B, n] labels of the networks (w1 [B, d, h], w2 [B, h]) at xs [B, n, d]."""
    hidden = w1.shape[-1]
    return scale * math.sqrt(2.0 / hidden) * jnp.einsum("bnh,bh->bn", jax.nn.relu(xs @ w1), w2)


def tree_predict(xs, coords, values, depth: int) -> jax.Array:
    """[B, n] leaf values reached by xs [B, n, d] in the trees (coords, values [B, 2^(depth+1) − 1])."""
    node = jnp.zeros(xs.shape[:2], jnp.int32)
    for _ in range(depth):
        coord = jnp.take_along_axis(coords, node, axis=1)  # [B, n]
        right = jnp.take_along_axis(xs, coord[..., None], axis=2)[..., 0] > 0
        node = 2 * node + 1 + right.astype(jnp.int32)
    return jnp.take_along_axis(values, node, axis=1)


def relu_2nn_sampler(options: Relu2nnOptions, n_points: int = 11, n_dims: int = 5):
    def sample(key, batch_size: int, dims, points, alpha: float = 1.0) -> PairPrompt:
        k_x, k_1, k_2 = jax.random.split(key, 3)
        xs = _inputs(k_x, batch_size, n_points, n_dims, dims, options.data, alpha)
        w1 = jax.random.normal(k_1, (batch_size, n_dims, options.hidden))
        w2 = jax.random.normal(k_2, (batch_size, options.hidden))
        return _batch(xs, relu_2nn(xs, w1, w2, options.scale), points, dims)

    return sample


def decision_tree_sampler(options: DecisionTreeOptions, n_points: int = 11, n_dims: int = 5):
    nodes = 2 ** (options.depth + 1) - 1

    def sample(key, batch_size: int, dims, points, alpha: float = 1.0) -> PairPrompt:
        k_x, k_c, k_v = jax.random.split(key, 3)
        xs = _inputs(k_x, batch_size, n_points, n_dims, dims, options.data, alpha)
        coords = jax.random.randint(k_c, (batch_size, nodes), 0, n_dims)
        values = jax.random.normal(k_v, (batch_size, nodes))
        return _batch(xs, tree_predict(xs, coords, values, options.depth), points, dims)

    return sample


TASKS.register(
    "relu_2nn_regression", Relu2nnOptions, doc="Garg et al.: y from a random 2-layer ReLU network (100 hidden units)"
)(relu_2nn_sampler)
TASKS.register(
    "decision_tree", DecisionTreeOptions, doc="Garg et al.: y from a random depth-4 decision tree on the signs of x"
)(decision_tree_sampler)
