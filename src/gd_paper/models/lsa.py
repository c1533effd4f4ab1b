"""Multi-head self-attention of the attention-only family, with a registered scoring
(registry "scoring", SPEC §3): `linear` (the raw dot product, LSA) or `softmax`.

Queries come from one set of tokens, keys and values from another (in this
project: every token queries, only the context tokens are keys/values). No
biases anywhere. Linear scoring uses the raw dot product (no 1/sqrt(k), no
1/N); softmax scoring uses softmax(q.k / sqrt(k)).

Glossary of shapes:
  B  batch      Tq  query tokens     S  key/value tokens
  D  width      H   heads            k  key size (= value size)
"""

from __future__ import annotations

from typing import Callable

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from src.registry import registry

SCORINGS = registry("scoring")


def is_raw_dot_product(scoring: str) -> bool:
    """Whether the scoring leaves q.k unchanged (what the GD construction needs)."""
    return SCORINGS.get(scoring).build is build_linear


@SCORINGS.register("linear", doc="raw dot products q.k: linear self-attention (LSA)")
def build_linear(options) -> Callable[[jax.Array, int], jax.Array]:
    """(scores [B, H, Tq, S], key_size) -> weights: the scores themselves."""
    return lambda scores, key_size: scores


@SCORINGS.register("softmax", doc="softmax over the keys of q.k / sqrt(key size)")
def build_softmax(options) -> Callable[[jax.Array, int], jax.Array]:
    return lambda scores, key_size: jax.nn.softmax(scores / np.sqrt(key_size).astype(scores.dtype), axis=-1)


def on_rows(tokens: jax.Array, matrix: jax.Array) -> jax.Array:
    """tokens [B, T, D] @ matrix [D, E] computed on the rows [B·T, D]: the same products as the
    3-D form, bit for bit on the CPUs of tests/golden, and XLA's CPU backward of the 2-D form
    is faster (docs/workbench.md)."""
    rows = tokens.reshape(-1, tokens.shape[-1]) @ matrix
    return rows.reshape(*tokens.shape[:-1], matrix.shape[-1])


class Attention(hk.Module):
    """h_t -> Σ_heads Σ_s score_h(h_t, h_s) · h_sᵀ W_V,h W_O,h.

    Parameters (Haiku names, as a plain projection layer would have them):
    `query/w` [D, H*k], `key/w` [D, H*k], `value/w` [D, H*k], `linear/w` [H*k, D].

    The scores (W_Q h_t)·(W_K h_s) equal h_tᵀ (W_Q,h W_K,hᵀ) h_s, and the output is
    linear in the mixed tokens, so each head is evaluated through two D×D products,
    `bilinear` = W_Q,h W_K,hᵀ and `readout` = W_V,h W_O,h, instead of projecting
    every token. Same function, same parameters; about 5x fewer FLOPs when only
    the query token is updated (the last layer), and fewer for full layers too.
    """

    def __init__(
        self,
        num_heads: int,
        key_size: int,
        model_size: int,
        scoring: str,
        w_init: hk.initializers.Initializer,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.num_heads = num_heads
        self.key_size = key_size
        self.model_size = model_size
        self.score_to_weights = SCORINGS.get(scoring).build(None)
        self.w_init = w_init

    @hk.transparent
    def _weight(self, name: str, rows: int, cols: int) -> jax.Array:
        with hk.name_scope(name):
            return hk.get_parameter("w", [rows, cols], init=self.w_init)

    def __call__(self, query_tokens: jax.Array, kv_tokens: jax.Array, return_weights: bool = False):
        """query_tokens [B, Tq, D], kv_tokens [B, S, D] -> update [B, Tq, D]
        (and, if `return_weights`, the attention weights [B, H, Tq, S])."""
        width, heads, k = query_tokens.shape[-1], self.num_heads, self.key_size
        w_q = self._weight("query", width, heads * k).reshape(width, heads, k)
        w_k = self._weight("key", width, heads * k).reshape(width, heads, k)
        w_v = self._weight("value", width, heads * k).reshape(width, heads, k)
        w_o = self._weight("linear", heads * k, self.model_size).reshape(heads, k, self.model_size)
        bilinear = jnp.einsum("dhk,ehk->hde", w_q, w_k)  # [H, D, D]
        readout = jnp.einsum("dhk,hkf->hdf", w_v, w_o)  # [H, D, D]
        if heads == 1:  # the common case: plain contractions, the products on [B·Tq, D] rows
            q = on_rows(query_tokens, bilinear[0])  # [B, Tq, D]
            scores = jnp.einsum("btd,bsd->bts", q, kv_tokens)[:, None]  # [B, 1, Tq, S]
        else:
            q = jnp.einsum("btd,hde->bhte", query_tokens, bilinear)  # [B, H, Tq, D]
            scores = jnp.einsum("bhte,bse->bhts", q, kv_tokens)  # [B, H, Tq, S]
        weights = self.score_to_weights(scores, k)
        if heads == 1:
            update = on_rows(jnp.einsum("bts,bsd->btd", weights[:, 0], kv_tokens), readout[0])
        else:
            mixed = jnp.einsum("bhts,bsd->bhtd", weights, kv_tokens)  # [B, H, Tq, D]
            update = jnp.einsum("bhtd,hdf->btf", mixed, readout)  # [B, Tq, D]
        if return_weights:
            return update, weights
        return update
