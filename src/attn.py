"""Multi-head self-attention with linear or softmax scoring (SPEC §3).

Queries come from one set of tokens, keys and values from another (in this
project: every token queries, only the context tokens are keys/values). No
biases anywhere. Linear scoring uses the raw dot product (no 1/sqrt(k), no
1/N); softmax scoring uses softmax(q.k / sqrt(k)).

Glossary of shapes:
  B  batch      Tq  query tokens     S  key/value tokens
  D  width      H   heads            k  key size (= value size)
"""
from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np


class Attention(hk.Module):
    """h_q -> W_O concat_heads( Σ_s score(W_Q h_q, W_K h_s) W_V h_s ).

    Parameter names (Haiku): `query/w` [D, H*k], `key/w` [D, H*k],
    `value/w` [D, H*k], `linear/w` [H*k, D].
    """

    def __init__(self, num_heads: int, key_size: int, model_size: int, softmax: bool,
                 w_init: hk.initializers.Initializer, name: str | None = None):
        super().__init__(name=name)
        self.num_heads = num_heads
        self.key_size = key_size
        self.model_size = model_size
        self.softmax = softmax
        self.w_init = w_init

    @hk.transparent
    def _project(self, x: jax.Array, name: str) -> jax.Array:
        y = hk.Linear(self.num_heads * self.key_size, with_bias=False, w_init=self.w_init,
                      name=name)(x)
        return y.reshape(*x.shape[:-1], self.num_heads, self.key_size)  # [B, T, H, k]

    def __call__(self, query_tokens: jax.Array, kv_tokens: jax.Array,
                 return_weights: bool = False):
        """query_tokens [B, Tq, D], kv_tokens [B, S, D] -> update [B, Tq, D]
        (and, if `return_weights`, the attention weights [B, H, Tq, S])."""
        q = self._project(query_tokens, "query")  # [B, Tq, H, k]
        k = self._project(kv_tokens, "key")       # [B, S, H, k]
        v = self._project(kv_tokens, "value")     # [B, S, H, k]
        scores = jnp.einsum("bthk,bshk->bhts", q, k)  # [B, H, Tq, S]
        if self.softmax:
            weights = jax.nn.softmax(scores / np.sqrt(self.key_size).astype(scores.dtype), axis=-1)
        else:
            weights = scores
        mixed = jnp.einsum("bhts,bshk->bthk", weights, v)  # [B, Tq, H, k]
        mixed = mixed.reshape(*mixed.shape[:2], self.num_heads * self.key_size)
        update = hk.Linear(self.model_size, with_bias=False, w_init=self.w_init,
                           name="linear")(mixed)  # [B, Tq, D]
        if return_weights:
            return update, weights
        return update
