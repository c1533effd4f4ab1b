"""Evaluation shifts (registry "shift"): how a batch of in-context regression prompts is rewritten
at evaluation time, from Garg et al. (2022) and limits_of_icl's evaluation notebook. A shift either
rewrites the inputs (the context points' and the query's: labels are then recomputed from each
task's weights) or swaps the task the prompts are drawn from.

Input shifts, `(key, xs [B, n, d], dims) -> (context_x [B, n, d], query_x [B, d])` (the context is
every point but the last, the query the last):
  scaled_query         query_x = scale · x_q
  opposite_quadrants   the context in one orthant per task (|x| ⊙ s, s a random sign pattern); the
                       query in the same orthant with `num_flipped` of its active coordinates'
                       signs flipped (query_orthant "random": the query in a uniformly random
                       orthant, as limits_of_icl's code does whatever num_flipped is)
  random_quadrants     `num_constrained` random context points moved into that orthant
  orthogonal_query     the query made orthogonal to `num_orthogonal` random context points (0: all
                       of them, at most d − 1), keeping its norm
  orthogonal_subspaces the context in a random ⌊d/2⌋-dimensional subspace, the query in its
                       orthogonal complement (Garg's orthogonal_train_test)
  overlapping_query    the query is one of the context points (Garg's overlapping_train_test)
  subspace             every input x ← x T with T = U diag(λ) Uᵀ (U a random rotation), λ = 1 on
                       d − num_dim directions and 0 on the rest, scaled so E ‖x T‖² = d
  skewed               the same with λ_i = i^(−exponent): covariance eigenvalues ∝ i^(−2·exponent)
                       (Garg's skewed covariance, eigenvalues ∝ 1/i, is exponent 0.5)
  scale_x              every input × scale (Garg's scale-x)
Task shifts (the prompts come from another registered task at the run's shape):
  noisy_labels (noisy_linear_regression: noise_std, renormalize), affine (affine_regression:
  bias_std), sparse (sparse_linear_regression: sparsity), uniform_w (uniform_linear_regression),
  scale_y (linear_regression with labels × scale: Garg's scale-y).

Glossary: B tasks, n points (n − 1 context + 1 query), d dims (the first `dims` active).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from src.registry import NoOptions, registry
from src.settings import require_int, require_number, require_one_of
from src.tasks.pairs import PairPrompt

SHIFTS = registry("shift")


class Shift(NamedTuple):
    """A built shift: an input rewrite, or a task (registry name, options) to draw prompts from."""

    inputs: Callable | None = None
    task: tuple[str, dict] | None = None


def shifted_prompts(shift: Shift, key, prompt: PairPrompt, scale: float = 1.0) -> PairPrompt:
    """The prompts' inputs rewritten by an input shift, its context before its query, and the labels
    recomputed from the prompts' task vectors w [B, d] (times `scale`); weights and dims kept."""
    xs = prompt.xs
    context, query = shift.inputs(key, xs, xs.shape[-1])
    shifted = jnp.concatenate([context[:, :-1], query[:, None]], axis=1)
    return prompt._replace(xs=shifted, ys=scale * jnp.einsum("bnd,bd->bn", shifted, prompt.w))


def _active(xs, dims) -> jax.Array:
    return jnp.arange(xs.shape[-1]) < dims


def _signs(key, shape) -> jax.Array:
    return jnp.where(jax.random.bernoulli(key, 0.5, shape), 1.0, -1.0)


def _random_rotation(key, d: int) -> jax.Array:
    q, r = jnp.linalg.qr(jax.random.normal(key, (d, d)))
    return q * jnp.sign(jnp.diagonal(r))


def transformation(key, eigenvalues: jax.Array) -> jax.Array:
    """T = U diag(λ) Uᵀ (U random orthogonal), scaled so ‖T‖_F² = d: E ‖x T‖² = d for x ~ N(0, I)."""
    d = eigenvalues.shape[0]
    u = _random_rotation(key, d)
    t = (u * eigenvalues) @ u.T
    return t * jnp.sqrt(d / jnp.sum(eigenvalues**2))


def _transform_all(key, xs, dims, eigenvalues):
    """Every input of every task through one T per task, on the active coordinates."""
    b, n, d = xs.shape
    t = jax.vmap(lambda k: transformation(k, eigenvalues))(jax.random.split(key, b))  # [B, d, d]
    moved = jnp.where(_active(xs, dims), jnp.einsum("bnd,bde->bne", xs, t), 0.0)
    return moved, moved[:, -1]


# --- options -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaleOptions:
    scale: float = 2.0

    def check(self) -> None:
        require_number("scale", self.scale, 0.0, open_low=True)


@dataclass(frozen=True)
class FlipOptions:
    num_flipped: int = 1
    query_orthant: str = "flipped"  # flipped | random (limits_of_icl's code)

    def check(self) -> None:
        require_int("num_flipped", self.num_flipped, 0, 1 << 16)
        require_one_of("query_orthant", self.query_orthant, ("flipped", "random"))


@dataclass(frozen=True)
class ConstrainOptions:
    num_constrained: int = 1

    def check(self) -> None:
        require_int("num_constrained", self.num_constrained, 0, 1 << 20)


@dataclass(frozen=True)
class OrthogonalOptions:
    num_orthogonal: int = 0  # 0: every context point (at most d − 1)

    def check(self) -> None:
        require_int("num_orthogonal", self.num_orthogonal, 0, 1 << 20)


@dataclass(frozen=True)
class SubspaceOptions:
    num_dim: int = 1  # directions removed

    def check(self) -> None:
        require_int("num_dim", self.num_dim, 0, 1 << 16)


@dataclass(frozen=True)
class SkewOptions:
    exponent: float = 0.5

    def check(self) -> None:
        require_number("exponent", self.exponent, 0.0)


@dataclass(frozen=True)
class NoiseOptions:
    noise_std: float = 0.5
    renormalize: bool = True  # limits_of_icl's renormalize_ys

    def check(self) -> None:
        require_number("noise_std", self.noise_std, 0.0)


@dataclass(frozen=True)
class BiasOptions:
    bias_std: float = 1.0

    def check(self) -> None:
        require_number("bias_std", self.bias_std, 0.0)


@dataclass(frozen=True)
class SparsityOptions:
    sparsity: int = 1

    def check(self) -> None:
        require_int("sparsity", self.sparsity, 1, 1 << 16)


# --- input shifts ------------------------------------------------------------------------------


@SHIFTS.register("scaled_query", ScaleOptions, doc="the query scaled by `scale` (limits_of_icl)")
def scaled_query(o: ScaleOptions) -> Shift:
    return Shift(lambda key, xs, dims: (xs, o.scale * xs[:, -1]))


@SHIFTS.register(
    "opposite_quadrants",
    FlipOptions,
    doc="context in one orthant, the query there with num_flipped signs flipped (limits_of_icl)",
)
def opposite_quadrants(o: FlipOptions) -> Shift:
    def rewrite(key, xs, dims):
        k_sign, k_flip = jax.random.split(key)
        b, n, d = xs.shape
        pattern = _signs(k_sign, (b, 1, d))
        context = jnp.abs(xs) * pattern
        if o.query_orthant == "random":
            return context, xs[:, -1]
        scores = jnp.where(_active(xs, dims), jax.random.uniform(k_flip, (b, d)), -1.0)
        k = min(max(o.num_flipped, 1), d)  # more than d flips: every active sign
        kth = -jnp.sort(-scores, axis=-1)[:, k - 1 : k]
        flip = (scores >= kth) & (scores >= 0) & (o.num_flipped > 0)
        return context, jnp.where(flip, -1.0, 1.0) * context[:, -1]

    return Shift(rewrite)


@SHIFTS.register(
    "random_quadrants",
    ConstrainOptions,
    doc="num_constrained random context points moved into one orthant (limits_of_icl)",
)
def random_quadrants(o: ConstrainOptions) -> Shift:
    def rewrite(key, xs, dims):
        k_sign, k_pick = jax.random.split(key)
        b, n, d = xs.shape
        pattern = _signs(k_sign, (b, 1, d))
        rank = jnp.argsort(jnp.argsort(jax.random.uniform(k_pick, (b, n - 1)), -1), -1)
        chosen = jnp.concatenate([rank < o.num_constrained, jnp.zeros((b, 1), bool)], axis=1)
        return jnp.where(chosen[..., None], jnp.abs(xs) * pattern, xs), xs[:, -1]

    return Shift(rewrite)


@SHIFTS.register(
    "orthogonal_query",
    OrthogonalOptions,
    doc="the query orthogonal to num_orthogonal random context points, same norm (limits_of_icl)",
)
def orthogonal_query(o: OrthogonalOptions) -> Shift:
    def rewrite(key, xs, dims):
        b, n, d = xs.shape
        count = min(n - 1, d - 1) if o.num_orthogonal == 0 else min(o.num_orthogonal, n - 1, d - 1)
        order = jnp.argsort(jax.random.uniform(key, (b, n - 1)), -1)[:, :count]
        basis = jnp.take_along_axis(xs[:, :-1], order[..., None], axis=1)  # [B, k, d]
        q, _ = jnp.linalg.qr(jnp.swapaxes(basis, 1, 2))  # [B, d, k]
        query = xs[:, -1]
        inside = jnp.einsum("bdk,bk->bd", q, jnp.einsum("bdk,bd->bk", q, query))
        away = query - inside
        norm = jnp.linalg.norm(query, axis=-1, keepdims=True)
        return xs, away * norm / jnp.maximum(jnp.linalg.norm(away, axis=-1, keepdims=True), 1e-12)

    return Shift(rewrite)


@SHIFTS.register(
    "orthogonal_subspaces", NoOptions, doc="context in a random d/2 subspace, the query in its complement (Garg et al.)"
)
def orthogonal_subspaces(o) -> Shift:
    def rewrite(key, xs, dims):
        b, n, d = xs.shape
        u = jax.vmap(lambda k: _random_rotation(k, d))(jax.random.split(key, b))  # [B, d, d]
        half = jnp.arange(d) < d // 2
        project = lambda keep: jnp.einsum("bde,be,bfe->bdf", u, keep.astype(xs.dtype), u)
        inside = jnp.broadcast_to(half, (b, d))
        context = jnp.einsum("bnd,bdf->bnf", xs, project(inside)) * math.sqrt(d / max(d // 2, 1))
        query = jnp.einsum("bd,bdf->bf", xs[:, -1], project(~inside)) * math.sqrt(d / max(d - d // 2, 1))
        return context, query

    return Shift(rewrite)


@SHIFTS.register("overlapping_query", NoOptions, doc="the query is one of the context points (Garg et al.)")
def overlapping_query(o) -> Shift:
    def rewrite(key, xs, dims):
        b, n, d = xs.shape
        pick = jax.random.randint(key, (b,), 0, n - 1)
        return xs, xs[jnp.arange(b), pick]

    return Shift(rewrite)


@SHIFTS.register(
    "subspace",
    SubspaceOptions,
    doc="every input in a random subspace of d - num_dim dimensions (limits_of_icl; Garg's half subspace)",
)
def subspace(o: SubspaceOptions) -> Shift:
    def rewrite(key, xs, dims):
        d = xs.shape[-1]
        keep = max(1, d - o.num_dim)
        return _transform_all(key, xs, dims, (jnp.arange(d) < keep).astype(xs.dtype))

    return Shift(rewrite)


@SHIFTS.register("skewed", SkewOptions, doc="every input through U diag(i^-exponent) U^T (limits_of_icl; Garg)")
def skewed(o: SkewOptions) -> Shift:
    def rewrite(key, xs, dims):
        d = xs.shape[-1]
        return _transform_all(key, xs, dims, (jnp.arange(1, d + 1, dtype=xs.dtype)) ** (-o.exponent))

    return Shift(rewrite)


@SHIFTS.register("scale_x", ScaleOptions, doc="every input scaled by `scale` (Garg et al.)")
def scale_x(o: ScaleOptions) -> Shift:
    return Shift(lambda key, xs, dims: (o.scale * xs, o.scale * xs[:, -1]))


# --- task shifts -------------------------------------------------------------------------------


@SHIFTS.register("noisy_labels", NoiseOptions, doc="labels + N(0, noise_std^2), renormalised (limits_of_icl)")
def noisy_labels(o: NoiseOptions) -> Shift:
    return Shift(task=("noisy_linear_regression", {"noise_std": o.noise_std, "renormalize": o.renormalize}))


@SHIFTS.register("affine", BiasOptions, doc="y = x.w + b, b ~ N(0, bias_std^2) (limits_of_icl)")
def affine(o: BiasOptions) -> Shift:
    return Shift(task=("affine_regression", {"bias_std": o.bias_std}))


@SHIFTS.register("sparse", SparsityOptions, doc="w with `sparsity` non-zero coordinates (limits_of_icl)")
def sparse(o: SparsityOptions) -> Shift:
    return Shift(task=("sparse_linear_regression", {"sparsity": o.sparsity}))


@SHIFTS.register("uniform_w", NoOptions, doc="w ~ U(-sqrt 3, sqrt 3)^d (limits_of_icl)")
def uniform_w(o) -> Shift:
    return Shift(task=("uniform_linear_regression", {}))


@SHIFTS.register("scale_y", ScaleOptions, doc="labels scaled by `scale` (Garg et al.)")
def scale_y(o: ScaleOptions) -> Shift:
    return Shift(task=("linear_regression", {"scale": o.scale}))
