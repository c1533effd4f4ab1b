"""The direct forward pass of the training-dynamics study's attention models (ATTN_M, ATTN_S of
src/models/dynamics.py) with the original's --softmax (Zhang et al., ICML 2025; its net.py), and
the full-batch loss computed from the sequences themselves. System `dynamics` uses it only when
`train.softmax` is on: a softmax model's loss is no quadratic of the set's moments.

Per head h the score of key token m for the query x̃_q is s_h,m = x̃_mᵀ W_KQ,h x̃_q (the
original's x_q · (W_kq,h x_m): its W_kq,h is our W_KQ,hᵀ; ATTN_S: (W_Q,h x̃_q) · (W_K,h x̃_m)),
over ALL T tokens, the query itself included (its y is 0), no causal mask, no 1/√ scaling:

    ŷ = Σ_h Σ_m a_h,m (v_h · x̃_m),   a_h = softmax_m(s_h)   (softmax=False: a_h = s_h, the
                                                               moments path's ŷ)

`prefixes` (the original's --vary_len training loss): every prefix of n = 2..T tokens, its last
token's y set to 0, queried with that token (a key of itself, as above) and predicted by ŷ / n;
the loss is the mean over the prefixes of each prefix's mean squared error. `per_length` divides
ŷ of the whole sequence by T (--vary_len's test sets).

Shapes: P sequences, T tokens, E = D + 1 token entries, H heads. values [H, E] (v_h), maps
[H, E, E] (W_KQ,h, the key's index first, as DynamicsModel.kq), tokens [P, T, E], targets [P].
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

CHUNK_ELEMENTS = 1 << 24  # the most scores (sequences × heads × queries × keys) computed at once


def predict(values: jax.Array, maps: jax.Array, tokens: jax.Array, softmax: bool) -> jax.Array:
    """ŷ [P] of the last token of each sequence (the query), reading all T tokens."""
    queried = jnp.einsum("hjk,pk->phj", maps, tokens[:, -1])  # W_KQ,h x̃_q  [P, H, E]
    scores = jnp.einsum("pmj,phj->phm", tokens, queried)  # [P, H, T]
    weights = jax.nn.softmax(scores, axis=-1) if softmax else scores
    reads = jnp.einsum("hi,pmi->phm", values, tokens)  # v_h · x̃_m  [P, H, T]
    return jnp.einsum("phm,phm->p", weights, reads)


def prefix_predict(values: jax.Array, maps: jax.Array, tokens: jax.Array, softmax: bool) -> jax.Array:
    """ŷ / n [P, T-1] of every prefix of n = 2..T tokens, its last token's y set to 0 (queries
    n, keys m <= n: the prefix's tokens, the query among them with its y hidden)."""
    length = tokens.shape[1]
    hidden = tokens.at[:, :, -1].set(0.0)  # each token as a query
    queried = jnp.einsum("hjk,pnk->phnj", maps, hidden)  # [P, H, T, E]
    scores = jnp.einsum("pmj,phnj->phnm", tokens, queried)  # [P, H, T(query), T(key)]
    own = jnp.einsum("pnj,phnj->phn", hidden, queried)  # the query as its own key
    reads = jnp.einsum("hi,pmi->phm", values, tokens)  # [P, H, T]
    own_reads = jnp.einsum("hi,pni->phn", values, hidden)
    query, key = jnp.arange(length)[:, None], jnp.arange(length)[None, :]
    scores = jnp.where(key == query, own[..., None], scores)
    reads = jnp.where(key == query, own_reads[..., None], reads[:, :, None, :])
    if softmax:
        weights = jax.nn.softmax(jnp.where(key <= query, scores, -jnp.inf), axis=-1)
    else:
        weights = jnp.where(key <= query, scores, 0.0)
    out = jnp.einsum("phnm,phnm->pn", weights, reads)[:, 1:]
    return out / jnp.arange(2, length + 1, dtype=out.dtype)


def errors(values, maps, tokens, targets, softmax: bool, prefixes: bool = False, per_length: bool = False) -> jax.Array:
    """Squared error of each sequence [P] (prefixes: its mean over the prefixes)."""
    if prefixes:  # prefix n's target: token n's y (the query's: `targets`)
        y = jnp.concatenate([tokens[:, 1:-1, -1], targets[:, None]], axis=1)
        return jnp.mean((prefix_predict(values, maps, tokens, softmax) - y) ** 2, axis=1)
    out = predict(values, maps, tokens, softmax)
    return ((out / tokens.shape[1] if per_length else out) - targets) ** 2


def chunk_size(heads: int, length: int, prefixes: bool) -> int:
    """Sequences per chunk: at most CHUNK_ELEMENTS scores at once."""
    return max(1, CHUNK_ELEMENTS // (heads * length * (length if prefixes else 1)))


def loss(
    values, maps, tokens, targets, softmax: bool = True, prefixes: bool = False, per_length: bool = False
) -> jax.Array:
    """The mean squared error over the P sequences (the original's nn.MSELoss; prefixes: the mean
    over prefixes). Sets larger than one chunk are scanned chunk by chunk (zero-padded, the pads
    weighted 0), each chunk's pass recomputed in the backward pass, so memory holds one chunk's
    scores."""
    size, length = tokens.shape[:2]
    chunk = chunk_size(values.shape[0], length, prefixes)
    error = lambda v, w, x, y: errors(v, w, x, y, softmax, prefixes, per_length)
    if size <= chunk:
        return jnp.mean(error(values, maps, tokens, targets))
    count = -(-size // chunk)
    pad = count * chunk - size
    xs = (
        jnp.pad(tokens, ((0, pad), (0, 0), (0, 0))).reshape(count, chunk, *tokens.shape[1:]),
        jnp.pad(targets, (0, pad)).reshape(count, chunk),
        (jnp.arange(count * chunk) < size).reshape(count, chunk),
    )
    part = jax.checkpoint(lambda v, w, x, y, keep: jnp.sum(jnp.where(keep, error(v, w, x, y), 0.0)))

    def step(total, chunk_data):
        return total + part(values, maps, *chunk_data), None

    total, _ = jax.lax.scan(step, jnp.zeros((), tokens.dtype), xs)
    return total / size
