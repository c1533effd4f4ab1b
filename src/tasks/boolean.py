"""Boolean function classes for in-context learning (Bhattamishra et al. 2023, as used by seeds
001 and 002): a function f: {±1}^d -> {±1} drawn per sequence, then n inputs and their labels.

    sample(key, name, batch, n_points, d, options) -> BooleanBatch(xs [B, n, d], ys [B, n],
                                                                   support [B, d] bool)

`support` marks the coordinates f depends on (tests check it exactly). Classes (w selects
literals: w_i = +1 for x_i, −1 for ¬x_i, 0 for unused):

  conjunction        y = +1 iff every selected literal holds: sign(wᵀx − (‖w‖₁ − 1)); each
                     variable selected w.p. `p_literal`
  disjunction        y = +1 iff some selected literal holds: sign(wᵀx + (‖w‖₁ − 1))
  sparse_disjunction a disjunction of exactly `k` literals
  dnf3 / cnf3        OR of 3 conjunctions / AND of 3 disjunctions, each over `k` literals
  int_halfspace      w ∈ {−3, …, 3}^d, y = sign(wᵀx − ½)
  majority           a random odd-sized subset S: y = sign(Σ_{i∈S} x_i) (never a tie)
  sparse_threshold   `k` weights in {±1}, threshold b ∈ {−k+1, −k+3, …, k−1}: y = sign(wᵀx − b)
                     (b has the other parity of k, so never a tie)
  parity             a random non-empty subset S: y = Π_{i∈S} x_i
  sparse_parity      |S| = `k`: y = Π_{i∈S} x_i

Inputs are uniform on {±1}^d, except for the conjunctive/disjunctive classes, whose labels would
be almost all one value: there a fraction `balance` of the inputs is rewritten to satisfy a
randomly chosen term (conjunction, dnf3) or to falsify every literal (disjunction,
sparse_disjunction) or a randomly chosen clause (cnf3), as Bhattamishra et al. do.
The public implementation's bugs are tested against here: its parity label was constant within a
sequence, its DNF/CNF sampler raised in most draws.

Glossary: B sequences, n points, d input dimension, k literals per term.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp

CLASSES = ("conjunction", "disjunction", "sparse_disjunction", "dnf3", "cnf3", "int_halfspace",
           "majority", "sparse_threshold", "parity", "sparse_parity")


@dataclass(frozen=True)
class BooleanOptions:
    k: int = 3                 # literals per term (sparse classes, dnf3/cnf3)
    p_literal: float = 0.3     # conjunction/disjunction: probability a variable is selected
    balance: float = 0.5       # conjunctive/disjunctive classes: fraction of rewritten inputs


class BooleanBatch(NamedTuple):
    xs: jax.Array        # [B, n, d] in {±1}
    ys: jax.Array        # [B, n] in {±1}
    support: jax.Array   # [B, d] bool: the coordinates f depends on


def _signs(key, shape) -> jax.Array:
    return jnp.where(jax.random.bernoulli(key, 0.5, shape), 1.0, -1.0)


def _k_subset(key, batch: int, d: int, k: int) -> jax.Array:
    """[B, d] bool with exactly k True per row (uniform)."""
    ranks = jnp.argsort(jnp.argsort(jax.random.uniform(key, (batch, d)), -1), -1)
    return ranks < k


def _terms(key, batch: int, d: int, k: int, terms: int) -> jax.Array:
    """[B, terms, d] literal weights in {−1, 0, 1}, exactly k non-zero per term."""
    k_sel, k_sign = jax.random.split(key)
    chosen = _k_subset(k_sel, batch * terms, d, k).reshape(batch, terms, d)
    return jnp.where(chosen, _signs(k_sign, (batch, terms, d)), 0.0)


def _holds(w: jax.Array, xs: jax.Array) -> jax.Array:
    """[B, T, n] bool: term t's literals all hold at point i (w [B, T, d], xs [B, n, d])."""
    matched = jnp.einsum("btd,bnd->btn", w, xs)
    return matched >= jnp.sum(jnp.abs(w), -1)[..., None]


def _any_literal(w: jax.Array, xs: jax.Array) -> jax.Array:
    """[B, T, n] bool: some literal of clause t holds at point i."""
    return jnp.einsum("btd,bnd->btn", w, xs) > -jnp.sum(jnp.abs(w), -1)[..., None]


def _rewrite(key, xs, w_term, rate: float, satisfy: bool) -> jax.Array:
    """Rewrite a `rate` fraction of the points so that the literals of `w_term` [B, n, d] all
    hold (satisfy) or all fail (not satisfy); other coordinates keep their values."""
    pick = jax.random.bernoulli(key, rate, xs.shape[:2])[..., None]
    target = w_term if satisfy else -w_term
    return jnp.where(pick & (w_term != 0), target, xs)


def _pick_term(key, w: jax.Array, n: int) -> jax.Array:
    """[B, n, d]: for each point a uniformly chosen term of w [B, T, d]."""
    b, t, _ = w.shape
    index = jax.random.randint(key, (b, n), 0, t)
    return jnp.take_along_axis(w, index[..., None], axis=1)


class BooleanFunction(NamedTuple):
    """One function per sequence: term weights w [B, T, d] in {−1, 0, 1} (integers in
    [−3, 3] for int_halfspace, 0/1 for majority and the parities) and a threshold b [B]."""
    w: jax.Array
    b: jax.Array


def sample_function(key: jax.Array, name: str, batch: int, d: int,
                    options: BooleanOptions = BooleanOptions()) -> BooleanFunction:
    k = options.k
    zero = jnp.zeros((batch,))
    if name in ("conjunction", "disjunction"):
        k_sel, k_sign = jax.random.split(key)
        w = jnp.where(jax.random.bernoulli(k_sel, options.p_literal, (batch, d)), _signs(k_sign, (batch, d)), 0.0)
        return BooleanFunction(w[:, None], zero)
    if name == "sparse_disjunction":
        return BooleanFunction(_terms(key, batch, d, k, 1), zero)
    if name in ("dnf3", "cnf3"):
        return BooleanFunction(_terms(key, batch, d, k, 3), zero)
    if name == "int_halfspace":
        w = jax.random.randint(key, (batch, d), -3, 4).astype(jnp.float32)
        return BooleanFunction(w[:, None], zero + 0.5)
    if name == "majority":
        k_size, k_sel = jax.random.split(key)
        size = 2 * jax.random.randint(k_size, (batch, 1), 0, (d + 1) // 2) + 1      # odd, <= d
        ranks = jnp.argsort(jnp.argsort(jax.random.uniform(k_sel, (batch, d)), -1), -1)
        return BooleanFunction((ranks < size).astype(jnp.float32)[:, None], zero)
    if name == "sparse_threshold":
        k_sel, k_sign, k_b = jax.random.split(key, 3)
        w = jnp.where(_k_subset(k_sel, batch, d, k), _signs(k_sign, (batch, d)), 0.0)
        b = 2.0 * jax.random.randint(k_b, (batch,), 0, k) - (k - 1)          # −k+1, −k+3, …, k−1
        return BooleanFunction(w[:, None], b)
    if name == "sparse_parity":
        return BooleanFunction(_k_subset(key, batch, d, k).astype(jnp.float32)[:, None], zero)
    # parity: a uniformly random non-empty subset (an empty draw becomes one coordinate)
    k_sel, k_one = jax.random.split(key)
    subset = jax.random.bernoulli(k_sel, 0.5, (batch, d))
    single = jax.nn.one_hot(jax.random.randint(k_one, (batch,), 0, d), d, dtype=bool)
    subset = jnp.where(jnp.any(subset, -1, keepdims=True), subset, single)
    return BooleanFunction(subset.astype(jnp.float32)[:, None], zero)


def evaluate(name: str, f: BooleanFunction, xs: jax.Array) -> jax.Array:
    """ys [B, n] in {±1} of the functions `f` at xs [B, n, d]."""
    if name in ("conjunction", "dnf3"):
        label = jnp.any(_holds(f.w, xs), 1)
    elif name in ("disjunction", "sparse_disjunction", "cnf3"):
        label = jnp.all(_any_literal(f.w, xs), 1)
    elif name in ("int_halfspace", "majority", "sparse_threshold"):
        return jnp.sign(jnp.einsum("bd,bnd->bn", f.w[:, 0], xs) - f.b[:, None])
    else:   # parities
        return jnp.prod(jnp.where(f.w[:, 0, None, :] > 0, xs, 1.0), -1)
    return jnp.where(label, 1.0, -1.0)


REWRITE = {"conjunction": True, "dnf3": True, "disjunction": False, "sparse_disjunction": False,
           "cnf3": False}   # class -> rewritten inputs satisfy (True) or falsify (False) a term


def sample(key: jax.Array, name: str, batch: int, n_points: int, d: int,
           options: BooleanOptions = BooleanOptions()) -> BooleanBatch:
    """A batch of sequences of the class `name` (see the module docstring)."""
    if name not in CLASSES:
        raise ValueError(f"task={name!r} is unknown; accepted: {', '.join(CLASSES)}")
    k = options.k
    if name in ("sparse_disjunction", "dnf3", "cnf3", "sparse_threshold", "sparse_parity") and not 1 <= k <= d:
        raise ValueError(f"k={k} is out of range for d={d}; accepted: an integer in [1, {d}]")
    k_f, k_x, k_bal, k_pick = jax.random.split(key, 4)
    f = sample_function(k_f, name, batch, d, options)
    xs = _signs(k_x, (batch, n_points, d))
    if name in REWRITE:
        xs = _rewrite(k_bal, xs, _pick_term(k_pick, f.w, n_points), options.balance, REWRITE[name])
    return BooleanBatch(xs, evaluate(name, f, xs), jnp.any(f.w != 0, 1))
