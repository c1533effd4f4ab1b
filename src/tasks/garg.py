"""Garg et al. (2022) in-context regression tasks with their curriculum over dimensions and
points (limits_of_icl's YAML `curriculum.dims/points`: start, end, inc, interval).

A batch is drawn at the curriculum's END shape (n points, d dims): coordinates at or above
the current dimension are zero and points at or above the current count are masked out of
the loss (weights 0); a causal model never sees them from an earlier point. Everything is a
pure, jittable function of a key and the step.

  linear_regression         y = x·w, w ~ N(0, I_d)
  sparse_linear_regression  w with `sparsity` non-zero coordinates (among the current dims)
  noisy_linear_regression   y = x·w + noise_std · ε
  quadratic_regression      y = (x ⊙ x)·w / √3
  uniform_linear_regression y = x·w with w ~ U(−√3, √3)^d (unit variance; limits_of_icl)
  affine_regression         y = x·w + b, b ~ N(0, bias_std²) per task (limits_of_icl)
  linear_classification     y = sign(x·w) (Garg et al.; the `sign` objective: scored by the 0/1 error of
                            sign ŷ and trained on the squared error of the ±1 labels, where Garg's code
                            trains it on the cross-entropy of sigmoid(ŷ))
  outlier_regression        y = x·w, then each pair is replaced by (x = 1, y = 1) with probability
                            `outlier_prob` (the ICL benchmark's `outlier` regression; the replaced
                            pairs stay in the loss and the error, as there)
noisy_linear_regression with `renormalize` rescales each task's labels to standard deviation √d
over its points (the ICL benchmark's `renormalize_noisy`).
Samplers: gaussian x ~ N(0, I_d); uniform x ~ U(−√3, √3)^d (unit variance); von_oswald
x ~ U(−1/2, 1/2)^d (von Oswald et al.'s input range a = 1, SPEC §1: with linear_regression and
d = 10, 11 points, the GD paper's task in this family's layout, the last point being the query).

Glossary: B tasks, n points, d dims.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import jax
import jax.numpy as jnp

from src.registry import registry
from src.tasks.pairs import PairPrompt
from src.settings import require_int, require_number, require_one_of

TASKS = registry("task")


@dataclass(frozen=True)
class Schedule:
    """start, end, inc, interval: value(step) = min(end, start + inc · (step // interval))."""

    start: int
    end: int
    inc: int = 1
    interval: int = 1000

    def at(self, step):
        return jnp.minimum(self.end, self.start + self.inc * (step // self.interval))

    def changes(self, steps: int) -> list[int]:
        """The steps < `steps` at which the value grows (multiples of interval until it is end)."""
        if self.inc <= 0 or self.end <= self.start:
            return []
        grows = -(-(self.end - self.start) // self.inc)  # ⌈(end − start) / inc⌉
        return [k * self.interval for k in range(1, grows + 1) if k * self.interval < steps]


@dataclass(frozen=True)
class Curriculum:
    dims: Schedule = field(default_factory=lambda: Schedule(5, 5))
    points: Schedule = field(default_factory=lambda: Schedule(11, 11))


@dataclass(frozen=True)
class GargTaskOptions:
    objective: ClassVar[str] = "regression"  # registry "objective": squared error / d
    data: str = "gaussian"  # gaussian | uniform | von_oswald
    sparsity: int = 3  # sparse_linear_regression: non-zero coordinates
    noise_std: float = 0.5  # noisy_linear_regression
    scale: float = 1.0  # y multiplied by this (Garg's `scale`)

    def check(self) -> None:
        require_one_of("data", self.data, DATA)
        require_int("sparsity", self.sparsity, 1, 4096)
        require_number("noise_std", self.noise_std, 0.0)
        require_number("scale", self.scale, 0.0, open_low=True)


@dataclass(frozen=True)
class ClassificationOptions(GargTaskOptions):
    objective: ClassVar[str] = "sign"  # ±1 labels: the 0/1 error of sign ŷ


@dataclass(frozen=True)
class NoisyOptions(GargTaskOptions):
    renormalize: bool = False  # y · √d / std(y) per task (std over its points, ddof 1)


@dataclass(frozen=True)
class AffineOptions(GargTaskOptions):
    bias_std: float = 1.0  # b ~ N(0, bias_std²), one per task

    def check(self) -> None:
        super().check()
        require_number("bias_std", self.bias_std, 0.0)


@dataclass(frozen=True)
class OutlierOptions(GargTaskOptions):
    outlier_prob: float = 0.9  # probability that a pair is replaced by (x = 1, y = 1)

    def check(self) -> None:
        super().check()
        require_number("outlier_prob", self.outlier_prob, 0.0, high=1.0)


# the inputs' distributions (`data`, the module docstring's samplers): name -> (key, shape) -> x
INPUTS = {
    "gaussian": lambda key, shape: jax.random.normal(key, shape),
    "uniform": lambda key, shape: jax.random.uniform(key, shape, minval=-math.sqrt(3), maxval=math.sqrt(3)),
    "von_oswald": lambda key, shape: jax.random.uniform(key, shape, minval=-0.5, maxval=0.5),
}
DATA = tuple(INPUTS)
# von Oswald et al.'s inputs: the GPT-2 family's regression runs on them get the GD paper's alignment
# analysis at the end of training (analysis/alignment.py)
GD_PAPER_INPUTS = ("von_oswald",)


def sample_inputs(key, shape, data: str) -> jax.Array:
    return INPUTS[data](key, shape)


def _weights(key, b, d, dims, kind: str, sparsity: int) -> jax.Array:
    if kind == "uniform_w":
        w = jax.random.uniform(key, (b, d), minval=-math.sqrt(3), maxval=math.sqrt(3))
    else:
        w = jax.random.normal(key, (b, d))
    active = jnp.arange(d) < dims
    if kind == "sparse":
        scores = jnp.where(active, jax.random.uniform(jax.random.fold_in(key, 1), (b, d)), -1.0)
        kth = -jnp.sort(-scores, axis=-1)[:, sparsity - 1 : sparsity]
        w = jnp.where(scores >= kth, w, 0.0)
    return jnp.where(active, w, 0.0)


def make_sampler(kind: str, options: GargTaskOptions, n_points: int, n_dims: int):
    """(key, batch_size, dims, points) -> PairPrompt at shape [B, n_points, n_dims]."""

    def sample(key, batch_size: int, dims, points, alpha: float = 1.0, task_keys=None) -> PairPrompt:
        """task_keys [B]: each prompt's task parameters drawn from its own key (a pool of tasks,
        src/tasks/pools.py); None: from `key`, as always."""
        k_x, k_w, k_e = jax.random.split(key, 3)
        xs = alpha * sample_inputs(k_x, (batch_size, n_points, n_dims), options.data)
        xs = jnp.where(jnp.arange(n_dims) < dims, xs, 0.0)
        if task_keys is None:
            w = _weights(k_w, batch_size, n_dims, dims, kind, options.sparsity)
            bias = jax.random.normal(k_e, (batch_size, 1))
        else:
            w = jax.vmap(lambda k: _weights(k, 1, n_dims, dims, kind, options.sparsity)[0])(task_keys)
            bias = jax.vmap(lambda k: jax.random.normal(jax.random.fold_in(k, 2), (1,)))(task_keys)
        features = xs**2 / math.sqrt(3) if kind == "quadratic" else xs
        ys = options.scale * jnp.einsum("bnd,bd->bn", features, w)
        if kind == "noisy":
            ys = ys + options.noise_std * jax.random.normal(k_e, ys.shape)
        if kind == "classification":
            ys = jnp.sign(ys)
        if kind == "affine":
            ys = ys + options.bias_std * bias
        weights = (jnp.arange(n_points) < points).astype(jnp.float32)[None].repeat(batch_size, 0)
        if getattr(options, "renormalize", False):
            ys = ys * jnp.sqrt(jnp.asarray(dims, jnp.float32)) / _std_over_points(ys, weights)
        if kind == "outlier":
            replaced = jax.random.bernoulli(jax.random.fold_in(key, 2), options.outlier_prob, ys.shape)
            xs = jnp.where(replaced[..., None] & (jnp.arange(n_dims) < dims), 1.0, xs)
            ys = jnp.where(replaced, 1.0, ys)
        return PairPrompt(xs, ys, weights, w, jnp.asarray(dims, jnp.float32))

    return sample


def _std_over_points(ys, weights) -> jax.Array:
    """[B, 1] the sample standard deviation (ddof 1) of each task's labels over its points."""
    count = jnp.sum(weights, axis=1, keepdims=True)
    mean = jnp.sum(ys * weights, axis=1, keepdims=True) / count
    return jnp.sqrt(jnp.sum(weights * (ys - mean) ** 2, axis=1, keepdims=True) / (count - 1))


def _register(name: str, kind: str, doc: str, options: type = GargTaskOptions) -> None:
    TASKS.register(name, options, doc=doc)(
        lambda options, n_points=11, n_dims=5: make_sampler(kind, options, n_points, n_dims)
    )


_register("linear_regression", "linear", "Garg et al.: y = x·w, x, w ~ N(0, I)")
_register("sparse_linear_regression", "sparse", "Garg et al.: w with `sparsity` non-zero coordinates")
_register("noisy_linear_regression", "noisy", "Garg et al.: y = x·w + noise_std · N(0, 1)", NoisyOptions)
_register("quadratic_regression", "quadratic", "Garg et al.: y = (x ⊙ x)·w / sqrt(3)")
_register(
    "outlier_regression",
    "outlier",
    "the ICL benchmark: y = x·w with a fraction outlier_prob of pairs replaced by (x = 1, y = 1)",
    OutlierOptions,
)
_register(
    "linear_classification",
    "classification",
    "Garg et al.: y = sign(x·w), x, w ~ N(0, I) (scored by "
    "sign; trained on the squared error of the +-1 labels, Garg's on cross-entropy)",
    ClassificationOptions,
)
_register("uniform_linear_regression", "uniform_w", "limits_of_icl: y = x·w, w ~ U(-sqrt 3, sqrt 3)^d")
_register("affine_regression", "affine", "limits_of_icl: y = x·w + b, b ~ N(0, bias_std^2) per task", AffineOptions)
