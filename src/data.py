"""In-context linear regression tasks and the two token constructions (SPEC §1, §3).

Everything here is a pure, jittable function of a PRNG key and static sizes.

Glossary of shapes:
  B  tasks in a batch           N  context pairs per task
  d  input dimension            T  tokens per sequence (N+1 concat, 2N+1 interleaved)
  D  token width (d+1 concat, d+pe_size interleaved)
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from src.config import ModelConfig, TaskConfig


class Tasks(NamedTuple):
    """A batch of raw regression tasks."""
    context_x: jax.Array  # [B, N, d]
    context_y: jax.Array  # [B, N]
    query_x: jax.Array    # [B, d]
    query_y: jax.Array    # [B]
    w: jax.Array          # [B, d]


class Batch(NamedTuple):
    tokens: jax.Array   # [B, T, D]
    targets: jax.Array  # [B], the query label y_q
    tasks: Tasks


def sample_tasks(key: jax.Array, batch_size: int, task: TaskConfig, alpha: float = 1.0) -> Tasks:
    """Draw B tasks: w ~ N(0, s^2 I), x ~ U(-alpha*a/2, alpha*a/2)^d, y = w.x (no noise).

    `alpha` scales the input range for out-of-distribution tests (SPEC §6).
    """
    key_w, key_x, key_q = jax.random.split(key, 3)
    n, d = task.num_context, task.d
    half = alpha * task.input_range / 2.0
    w = jax.random.normal(key_w, (batch_size, d)) * task.weight_scale
    context_x = jax.random.uniform(key_x, (batch_size, n, d), minval=-half, maxval=half)
    query_x = jax.random.uniform(key_q, (batch_size, d), minval=-half, maxval=half)
    context_y = jnp.einsum("bnd,bd->bn", context_x, w)
    query_y = jnp.einsum("bd,bd->b", query_x, w)
    return Tasks(context_x, context_y, query_x, query_y, w)


def concat_tokens(tasks: Tasks) -> jax.Array:
    """Tokens e_i = [x_i, y_i], query token [x_q, 0]: [B, N+1, d+1]."""
    context = jnp.concatenate([tasks.context_x, tasks.context_y[..., None]], axis=-1)
    query = jnp.concatenate([tasks.query_x, jnp.zeros_like(tasks.query_y)[..., None]], axis=-1)
    return jnp.concatenate([context, query[:, None, :]], axis=1)


def sinusoidal_encoding(num_positions: int, size: int) -> np.ndarray:
    """Fixed sinusoidal positional encoding [T, size]: sin on even, cos on odd channels."""
    position = np.arange(num_positions, dtype=np.float64)[:, None]
    freq = np.exp(np.arange(0, size, 2) * (-math.log(10000.0) / size))
    pe = np.zeros((num_positions, size), dtype=np.float64)
    pe[:, 0::2] = np.sin(position * freq)
    pe[:, 1::2] = np.cos(position * freq)
    return pe.astype(np.float32)


def interleaved_tokens(tasks: Tasks, pe_size: int) -> jax.Array:
    """Tokens x_1, ȳ_1, ..., x_N, ȳ_N, x_q with ȳ_i = [0,...,0, y_i] ∈ R^d, each
    concatenated with a sinusoidal positional encoding: [B, 2N+1, d+pe_size]."""
    b, n, d = tasks.context_x.shape
    y_tokens = jnp.zeros_like(tasks.context_x).at[..., -1].set(tasks.context_y)  # [B, N, d]
    pairs = jnp.stack([tasks.context_x, y_tokens], axis=2).reshape(b, 2 * n, d)  # [B, 2N, d]
    seq = jnp.concatenate([pairs, tasks.query_x[:, None, :]], axis=1)            # [B, 2N+1, d]
    if pe_size == 0:
        return seq
    pe = jnp.asarray(sinusoidal_encoding(2 * n + 1, pe_size))
    return jnp.concatenate([seq, jnp.broadcast_to(pe, (b, 2 * n + 1, pe_size))], axis=-1)


def make_tokens(tasks: Tasks, model: ModelConfig) -> jax.Array:
    """The token sequence the given model reads: [B, T, D]."""
    if model.tokens == "concat":
        return concat_tokens(tasks)
    return interleaved_tokens(tasks, model.pe_size)


def num_context_tokens(task: TaskConfig, model: ModelConfig) -> int:
    """Tokens that serve as keys and values (all but the query token)."""
    return task.num_context if model.tokens == "concat" else 2 * task.num_context


def sample_batch(key: jax.Array, batch_size: int, task: TaskConfig, model: ModelConfig,
                 alpha: float = 1.0) -> Batch:
    """Tasks, their tokens for `model`, and the query targets."""
    tasks = sample_tasks(key, batch_size, task, alpha)
    return Batch(make_tokens(tasks, model), tasks.query_y, tasks)


def take_tasks(tasks: Tasks, index: slice | np.ndarray) -> Tasks:
    """The sub-batch `index` of every field."""
    return Tasks(*(field[index] for field in tasks))
