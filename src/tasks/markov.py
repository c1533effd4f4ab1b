"""In-context Markov chains (Edelman et al. 2024, "The Evolution of Statistical Induction Heads"),
a token task of the ICL benchmark's suite (registry "task": `markov_chain`).

Each sequence draws its own chain over k states: transition rows P[i] ~ Dirichlet(α·1) (or, with
`doubly_stochastic`, P = Σ_σ w_σ Π_σ over the k! permutation matrices, w ~ Dirichlet(α·1): rows
and columns sum to 1, so the stationary distribution is uniform and counting tokens says
nothing; for k = 2 this is the paper's symmetric [[a, 1 − a], [1 − a, a]], a ~ U(0, 1)). The
first token is drawn from the chain's stationary distribution π, then T more by P. The model reads
x_0 … x_{T−1} and predicts x_{t+1} at every position t; the batch carries the true next-token
distribution P[x_t], against which the `markov` objective scores a prediction (cross-entropy).

The in-context estimators of the next token at position t (from x_0 … x_t only):
  uniform   1/k
  unigram   (n_j + 1) / (t + 1 + k), n_j = #{s <= t: x_s = j}: add-one counts of the tokens
  bigram    (n_{x_t j} + 1) / (n_{x_t ·} + k), n_{ij} = #{1 <= s <= t: x_{s−1} = i, x_s = j}: the
            posterior mean of P[x_t] under the Dirichlet(1) prior (the Bayes predictor at α = 1)

Glossary: B sequences, T tokens read, k states (the vocabulary).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from src.registry import registry
from src.settings import require, require_int, require_number

MOST_DOUBLY_STATES = 6  # the doubly stochastic mixture sums k! permutations: 720 at k = 6


class MarkovBatch(NamedTuple):
    inputs: jax.Array  # [B, T] int32: x_0 … x_{T−1}
    targets: jax.Array  # [B, T] int32: x_1 … x_T (the drawn next tokens)
    scored: jax.Array  # [B, T] bool: every position
    next_probs: jax.Array  # [B, T, k] float32: P[x_t], the true next-token distribution


@dataclass(frozen=True)
class MarkovOptions:
    objective: ClassVar[str] = "markov"  # registry "objective": cross-entropy against P[x_t]
    num_states: int = 2  # k
    seq_len: int = 100  # T, the tokens the model reads
    alpha: float = 1.0  # the Dirichlet concentration of a transition row (or of the mixture weights)
    doubly_stochastic: bool = False

    @property
    def vocab_size(self) -> int:
        """The model's vocabulary: the k states."""
        return self.num_states

    def tokens(self) -> int:
        return self.seq_len

    def check(self) -> None:
        require_int("num_states", self.num_states, 2, 64)
        require_int("seq_len", self.seq_len, 2, 100_000)
        require_number("alpha", self.alpha, 0.0, open_low=True, high=1e6)
        require(isinstance(self.doubly_stochastic, bool), "doubly_stochastic", self.doubly_stochastic, "true or false")
        if self.doubly_stochastic:
            require_int("num_states", self.num_states, 2, MOST_DOUBLY_STATES)


def permutation_matrices(k: int) -> np.ndarray:
    """[k!, k, k]: every permutation matrix of k states."""
    eye = np.eye(k, dtype=np.float32)
    return np.stack([eye[list(p)] for p in itertools.permutations(range(k))])


def transition_matrices(key, batch: int, options: MarkovOptions) -> jax.Array:
    """[B, k, k] row-stochastic transition matrices (module docstring)."""
    k, alpha = options.num_states, options.alpha
    if options.doubly_stochastic:
        perms = jnp.asarray(permutation_matrices(k))
        weights = jax.random.dirichlet(key, jnp.full((len(perms),), alpha), (batch,))  # [B, k!]
        return jnp.einsum("bp,pij->bij", weights, perms)
    return jax.random.dirichlet(key, jnp.full((k,), alpha), (batch, k))


def stationary(transitions: jax.Array) -> jax.Array:
    """[B, k] the stationary distribution π of each chain: π (I − P + 1 1ᵀ) = 1ᵀ (an irreducible
    chain's unique solution; a reducible one, of probability zero, gives no meaningful π)."""
    k = transitions.shape[-1]
    system = jnp.eye(k) - transitions + jnp.ones((k, k))
    pi = jnp.linalg.solve(jnp.swapaxes(system, -1, -2), jnp.ones(transitions.shape[:-1])[..., None])[..., 0]
    pi = jnp.clip(pi, 0.0, None)
    return pi / jnp.sum(pi, -1, keepdims=True)


def sample_markov(key, batch: int, options: MarkovOptions) -> MarkovBatch:
    """B sequences, each of its own chain (module docstring), drawn on device from `key`."""
    k_chain, k_first, k_steps = jax.random.split(key, 3)
    transitions = transition_matrices(k_chain, batch, options)  # [B, k, k]
    log_p = jnp.log(jnp.maximum(transitions, 1e-30))
    first = jax.random.categorical(k_first, jnp.log(jnp.maximum(stationary(transitions), 1e-30)))  # [B]
    gumbels = jax.random.gumbel(k_steps, (options.seq_len, batch, options.num_states))
    rows = jnp.arange(batch)

    def step(state, gumbel):
        nxt = jnp.argmax(log_p[rows, state] + gumbel, axis=-1).astype(jnp.int32)
        return nxt, nxt

    _, after = jax.lax.scan(step, first.astype(jnp.int32), gumbels)  # [T, B]
    sequence = jnp.concatenate([first[:, None].astype(jnp.int32), after.T], axis=1)  # [B, T + 1]
    inputs = sequence[:, :-1]
    next_probs = jnp.take_along_axis(transitions, inputs[:, :, None], axis=1)  # P[x_t] [B, T, k]
    return MarkovBatch(inputs, sequence[:, 1:], jnp.ones(inputs.shape, bool), next_probs)


def uniform_next(tokens: jax.Array, k: int) -> jax.Array:
    """[B, T, k]: 1/k everywhere."""
    return jnp.full((*tokens.shape, k), 1.0 / k)


def unigram_next(tokens: jax.Array, k: int) -> jax.Array:
    """[B, T, k]: add-one counts of x_0 … x_t."""
    counts = jnp.cumsum(jax.nn.one_hot(tokens, k), axis=1)
    seen = jnp.arange(1, tokens.shape[1] + 1, dtype=counts.dtype)[None, :, None]
    return (counts + 1.0) / (seen + k)


def bigram_next(tokens: jax.Array, k: int) -> jax.Array:
    """[B, T, k]: add-one counts of the transitions out of x_t among x_0 … x_t."""
    hot = jax.nn.one_hot(tokens, k)  # [B, T, k]
    pairs = hot[:, :-1, :, None] * hot[:, 1:, None, :]  # transition s−1 -> s, s = 1..T−1
    counts = jnp.concatenate([jnp.zeros_like(pairs[:, :1]), jnp.cumsum(pairs, axis=1)], axis=1)  # [B, T, k, k]
    from_here = jnp.einsum("btk,btkj->btj", hot, counts)
    return (from_here + 1.0) / (jnp.sum(from_here, -1, keepdims=True) + k)


ESTIMATORS = {"uniform": uniform_next, "unigram": unigram_next, "bigram": bigram_next}


def cross_entropy(true_probs: jax.Array, log_q: jax.Array) -> jax.Array:
    """[...]: −Σ_j p_j log q_j over the last axis (nats)."""
    return -jnp.sum(true_probs * log_q, axis=-1)


TASKS = registry("task")
TASKS.register(
    "markov_chain", MarkovOptions, doc="in-context Markov chains, a fresh chain per sequence (Edelman et al. 2024)"
)(lambda options: lambda key, batch: sample_markov(key, batch, options))
