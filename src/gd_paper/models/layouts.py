"""Token layouts: how a batch of regression tasks becomes the token sequence a model reads
(SPEC §3). Registry "layout"; every entry builds a `Layout`.

  concat       e_i = [x_i, y_i], query [x_q, 0]                        T = N+1,  D = d+1
  interleaved  x_1, ȳ_1, ..., x_N, ȳ_N, x_q with ȳ_i = [0,...,0, y_i], each token
               concatenated with a sinusoidal position code of size pe_size   T = 2N+1, D = d+pe_size

The query token is always last; the first `num_context_tokens` tokens are the keys/values.
Glossary of shapes: B tasks, N pairs, d input dimension, T tokens, D width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from src.gd_paper.config import ModelConfig, TaskConfig
from src.registry import registry
from src.settings import is_int, require
from src.tasks.pairs import PairPrompt

LAYOUTS = registry("layout")


@dataclass(frozen=True)
class Layout:
    """A token layout for tasks of N pairs in d dimensions."""

    tokens_per_pair: int  # 1 (concat) or 2 (x token, then ȳ token)
    width: Callable[[int], int]  # d -> D
    make: Callable[[PairPrompt], jax.Array]  # prompts -> tokens [B, T, D]

    def num_tokens(self, num_context: int) -> int:
        """T: context tokens plus the query token."""
        return self.tokens_per_pair * num_context + 1

    def num_context_tokens(self, num_context: int) -> int:
        return self.tokens_per_pair * num_context

    def pair_of_token(self, token: int) -> int:
        """The context pair a context token belongs to."""
        return token // self.tokens_per_pair

    def token_labels(self, num_context: int) -> list[str]:
        """Names of the context tokens: e1..eN, or x1, y1, ..., xN, yN."""
        if self.tokens_per_pair == 1:
            return [f"e{i + 1}" for i in range(num_context)]
        return [f"{kind}{i + 1}" for i in range(num_context) for kind in ("x", "y")]


@dataclass(frozen=True)
class ConcatOptions:
    """No options: the token is [x, y]."""


@dataclass(frozen=True)
class InterleavedOptions:
    pe_size: int = 10  # channels of the concatenated sinusoidal position code (even, >= 0)

    def check(self) -> None:
        require(
            is_int(self.pe_size) and 0 <= self.pe_size <= 4096 and self.pe_size % 2 == 0,
            "pe_size",
            self.pe_size,
            "an even integer in [0, 4096]",
        )


def concat_tokens(tasks: PairPrompt) -> jax.Array:
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


def interleaved_tokens(tasks: PairPrompt, pe_size: int) -> jax.Array:
    """Tokens x_1, ȳ_1, ..., x_N, ȳ_N, x_q with ȳ_i = [0,...,0, y_i] ∈ R^d, each
    concatenated with a sinusoidal positional encoding: [B, 2N+1, d+pe_size]."""
    b, n, d = tasks.context_x.shape
    y_tokens = jnp.zeros_like(tasks.context_x).at[..., -1].set(tasks.context_y)  # [B, N, d]
    pairs = jnp.stack([tasks.context_x, y_tokens], axis=2).reshape(b, 2 * n, d)  # [B, 2N, d]
    seq = jnp.concatenate([pairs, tasks.query_x[:, None, :]], axis=1)  # [B, 2N+1, d]
    if pe_size == 0:
        return seq
    pe = jnp.asarray(sinusoidal_encoding(2 * n + 1, pe_size))
    return jnp.concatenate([seq, jnp.broadcast_to(pe, (b, 2 * n + 1, pe_size))], axis=-1)


@LAYOUTS.register("concat", ConcatOptions, doc="e_i = [x_i, y_i]; query [x_q, 0] (lsa1, lsa_rec)")
def build_concat(options: ConcatOptions) -> Layout:
    return Layout(tokens_per_pair=1, width=lambda d: d + 1, make=concat_tokens)


@LAYOUTS.register(
    "interleaved", InterleavedOptions, doc="x_i, ȳ_i tokens + concatenated sinusoidal positions (twolayer)"
)
def build_interleaved(options: InterleavedOptions) -> Layout:
    if not (isinstance(options.pe_size, int) and options.pe_size >= 0 and options.pe_size % 2 == 0):
        raise ValueError(f"pe_size={options.pe_size} must be an even integer >= 0")
    return Layout(
        tokens_per_pair=2,
        width=lambda d: d + options.pe_size,
        make=lambda tasks: interleaved_tokens(tasks, options.pe_size),
    )


def layout_of(model: ModelConfig) -> Layout:
    return LAYOUTS.get(model.layout.name).build(model.layout.options)


def make_tokens(tasks: PairPrompt, model: ModelConfig) -> jax.Array:
    """The token sequence the given model reads: [B, T, D]."""
    return layout_of(model).make(tasks)


def model_width(task: TaskConfig, model: ModelConfig) -> int:
    """D, the token width the model sees."""
    return layout_of(model).width(task.d)


def num_tokens(task: TaskConfig, model: ModelConfig) -> int:
    """T, tokens per sequence (context tokens + one query token)."""
    return layout_of(model).num_tokens(task.num_context)


def num_context_tokens(task: TaskConfig, model: ModelConfig) -> int:
    """Tokens that serve as keys and values (all but the query token)."""
    return layout_of(model).num_context_tokens(task.num_context)
