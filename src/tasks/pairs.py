"""The pair prompt: a batch of in-context prompts of (x, y) pairs, the one container that every
pair task, curriculum, evaluation shift, baseline and read side speaks (the token tasks keep
theirs, src/tasks/tokens.py).

A prompt holds n points. A sequence model (Garg et al.'s GPT-2 family, the ICL benchmark's models)
predicts every y_i from the points before it; von Oswald et al.'s models read the first N = n − 1
points as the context and the last as the query: `context_x`, `context_y`, `query_x` and
`query_y` are those views of the same arrays.

    prompt = query_prompt(context_x, context_y, query_x, query_y, w)   # von Oswald et al.'s form
    prompt.xs                                                          # [B, N + 1, d], the query last
    prompt.first(8)                                                    # its first 8 prompts

Glossary of shapes: B prompts, n points (N = n − 1 context pairs, then the query), d input dims.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class PairPrompt(NamedTuple):
    """B prompts of n (x, y) points, each point predicted from the points before it (the last one
    is von Oswald et al.'s query)."""

    xs: jax.Array  # [B, n, d] inputs (zero beyond the current dims)
    ys: jax.Array  # [B, n] labels
    weights: jax.Array  # [B, n] 1 where a point is scored (the curriculum's current points), else 0
    w: jax.Array | None  # [B, d] task vectors; None where a task has none (src/tasks/nonlinear.py)
    dims: jax.Array  # [] the current input dimension (the d of the d-normalised error)

    @property
    def context_x(self) -> jax.Array:
        """[B, N, d] every point but the last."""
        return self.xs[:, :-1]

    @property
    def context_y(self) -> jax.Array:
        """[B, N]."""
        return self.ys[:, :-1]

    @property
    def query_x(self) -> jax.Array:
        """[B, d] the last point's input."""
        return self.xs[:, -1]

    @property
    def query_y(self) -> jax.Array:
        """[B] the last point's label."""
        return self.ys[:, -1]

    def take(self, index) -> "PairPrompt":
        """The prompts `index` (a slice or an index array) of every per-prompt field."""
        return self._replace(
            xs=self.xs[index],
            ys=self.ys[index],
            weights=self.weights[index],
            w=None if self.w is None else self.w[index],
        )

    def first(self, count: int) -> "PairPrompt":
        """The first `count` prompts."""
        return self.take(slice(0, count))

    def with_context(self, context_x: jax.Array, context_y: jax.Array) -> "PairPrompt":
        """The same queries after another context (context_x [B, N, d], context_y [B, N])."""
        return self._replace(
            xs=jnp.concatenate([context_x, self.xs[:, -1:]], axis=1),
            ys=jnp.concatenate([context_y, self.ys[:, -1:]], axis=1),
        )

    def with_query_x(self, query_x: jax.Array) -> "PairPrompt":
        """The same contexts before another query input query_x [B, d] (its label kept)."""
        return self._replace(xs=jnp.concatenate([self.xs[:, :-1], query_x[:, None]], axis=1))


def pair_prompt(xs, ys, w=None, weights=None, dims=None) -> PairPrompt:
    """Prompts of the points xs [B, n, d], ys [B, n]: every point scored (weights 1) and every
    dimension active (dims = d) unless given."""
    xs, ys = jnp.asarray(xs), jnp.asarray(ys)
    weights = jnp.ones(ys.shape, ys.dtype) if weights is None else weights
    dims = jnp.asarray(xs.shape[-1], jnp.float32) if dims is None else jnp.asarray(dims, jnp.float32)
    return PairPrompt(xs, ys, weights, w, dims)


def query_prompt(context_x, context_y, query_x, query_y, w=None) -> PairPrompt:
    """von Oswald et al.'s form, N context pairs (context_x [B, N, d], context_y [B, N]) and a query
    (query_x [B, d], query_y [B]), as prompts of N + 1 points, the query last."""
    xs = jnp.concatenate([context_x, query_x[:, None]], axis=1)
    ys = jnp.concatenate([context_y, query_y[:, None]], axis=1)
    return pair_prompt(xs, ys, w)


def empty_prompt(num_context: int, d: int) -> PairPrompt:
    """One all-zero prompt of N + 1 points (to initialise a model)."""
    return pair_prompt(jnp.zeros((1, num_context + 1, d)), jnp.zeros((1, num_context + 1)), jnp.zeros((1, d)))
