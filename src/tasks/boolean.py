"""Boolean function classes for in-context learning (Bhattamishra et al. 2023, as used by seeds
001 and 002): a function f: {±1}^d -> {±1} drawn per sequence, then n inputs and their labels.

    sample(key, name, batch, n_points, d, options) -> PairPrompt(xs [B, n, d], ys [B, n],
                                                     weights [B, n] (1), w [B, d] (0/1), dims d)

the pair tasks' one prompt type (src/tasks/garg.py); its `w` is f's support, 1 on the coordinates
f depends on (tests check it exactly). Classes (w selects
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

Every class is also a registered task (registry "task") of the `gpt2` family: x_i as a token,
(y_i, 0, …) as the next, trained with squared error on the ±1 labels (Garg et al.'s recipe) and
scored by the accuracy of sign(ŷ_i). The dimension is fixed (no dimension curriculum).

Glossary: B sequences, n points, d input dimension, k literals per term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from src.settings import require_int, require_number
from src.tasks.pairs import PairPrompt

CLASSES = (
    "conjunction",
    "disjunction",
    "sparse_disjunction",
    "dnf3",
    "cnf3",
    "int_halfspace",
    "majority",
    "sparse_threshold",
    "parity",
    "sparse_parity",
)


@dataclass(frozen=True)
class BooleanOptions:
    objective: ClassVar[str] = "sign"  # registry "objective": accuracy of sign(ŷ)
    fixed_dimension: ClassVar[bool] = True  # f is drawn on all d coordinates: no dimension curriculum
    k: int = 3  # literals per term (sparse classes, dnf3/cnf3)
    p_literal: float = 0.3  # conjunction/disjunction: probability a variable is selected
    balance: float = 0.5  # conjunctive/disjunctive classes: fraction of rewritten inputs

    def check(self) -> None:
        require_int("k", self.k, 1, 4096)
        require_number("p_literal", self.p_literal, 0.0, high=1.0)
        require_number("balance", self.balance, 0.0, high=1.0)


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


# -- the classes: how a function is drawn, how it labels a point ---------------------------------
# Samplers: (key, batch, d, options) -> BooleanFunction. Evaluators: (f, xs [B, n, d]) -> ys [B, n].


def _random_literals(key, batch, d, options):
    k_sel, k_sign = jax.random.split(key)
    w = jnp.where(jax.random.bernoulli(k_sel, options.p_literal, (batch, d)), _signs(k_sign, (batch, d)), 0.0)
    return BooleanFunction(w[:, None], jnp.zeros((batch,)))


def _k_literal_terms(terms: int):
    return lambda key, batch, d, options: BooleanFunction(_terms(key, batch, d, options.k, terms), jnp.zeros((batch,)))


def _integer_halfspace(key, batch, d, options):
    w = jax.random.randint(key, (batch, d), -3, 4).astype(jnp.float32)
    return BooleanFunction(w[:, None], jnp.zeros((batch,)) + 0.5)


def _odd_subset(key, batch, d, options):
    k_size, k_sel = jax.random.split(key)
    size = 2 * jax.random.randint(k_size, (batch, 1), 0, (d + 1) // 2) + 1  # odd, <= d
    ranks = jnp.argsort(jnp.argsort(jax.random.uniform(k_sel, (batch, d)), -1), -1)
    return BooleanFunction((ranks < size).astype(jnp.float32)[:, None], jnp.zeros((batch,)))


def _sparse_threshold(key, batch, d, options):
    k = options.k
    k_sel, k_sign, k_b = jax.random.split(key, 3)
    w = jnp.where(_k_subset(k_sel, batch, d, k), _signs(k_sign, (batch, d)), 0.0)
    b = 2.0 * jax.random.randint(k_b, (batch,), 0, k) - (k - 1)  # −k+1, −k+3, …, k−1
    return BooleanFunction(w[:, None], b)


def _k_subset_function(key, batch, d, options):
    return BooleanFunction(_k_subset(key, batch, d, options.k).astype(jnp.float32)[:, None], jnp.zeros((batch,)))


def _nonempty_subset(key, batch, d, options):
    """A uniformly random non-empty subset (an empty draw becomes one coordinate)."""
    k_sel, k_one = jax.random.split(key)
    subset = jax.random.bernoulli(k_sel, 0.5, (batch, d))
    single = jax.nn.one_hot(jax.random.randint(k_one, (batch,), 0, d), d, dtype=bool)
    subset = jnp.where(jnp.any(subset, -1, keepdims=True), subset, single)
    return BooleanFunction(subset.astype(jnp.float32)[:, None], jnp.zeros((batch,)))


def _some_term_holds(f, xs):
    return jnp.where(jnp.any(_holds(f.w, xs), 1), 1.0, -1.0)


def _every_clause_holds(f, xs):
    return jnp.where(jnp.all(_any_literal(f.w, xs), 1), 1.0, -1.0)


def _threshold(f, xs):
    return jnp.sign(jnp.einsum("bd,bnd->bn", f.w[:, 0], xs) - f.b[:, None])


def _product(f, xs):
    return jnp.prod(jnp.where(f.w[:, 0, None, :] > 0, xs, 1.0), -1)


class FunctionClass(NamedTuple):
    sample: Callable  # (key, batch, d, options) -> BooleanFunction
    evaluate: Callable  # (f, xs) -> ys
    rewrite: bool | None = None  # rewritten inputs satisfy (True) or falsify (False) a term
    uses_k: bool = False  # the class has exactly `k` literals per term


FUNCTION_CLASSES = {
    "conjunction": FunctionClass(_random_literals, _some_term_holds, rewrite=True),
    "disjunction": FunctionClass(_random_literals, _every_clause_holds, rewrite=False),
    "sparse_disjunction": FunctionClass(_k_literal_terms(1), _every_clause_holds, False, True),
    "dnf3": FunctionClass(_k_literal_terms(3), _some_term_holds, True, True),
    "cnf3": FunctionClass(_k_literal_terms(3), _every_clause_holds, False, True),
    "int_halfspace": FunctionClass(_integer_halfspace, _threshold),
    "majority": FunctionClass(_odd_subset, _threshold),
    "sparse_threshold": FunctionClass(_sparse_threshold, _threshold, uses_k=True),
    "parity": FunctionClass(_nonempty_subset, _product),
    "sparse_parity": FunctionClass(_k_subset_function, _product, uses_k=True),
}
assert tuple(FUNCTION_CLASSES) == CLASSES


def sample_function(
    key: jax.Array, name: str, batch: int, d: int, options: BooleanOptions = BooleanOptions()
) -> BooleanFunction:
    return FUNCTION_CLASSES[name].sample(key, batch, d, options)


def evaluate(name: str, f: BooleanFunction, xs: jax.Array) -> jax.Array:
    """ys [B, n] in {±1} of the functions `f` at xs [B, n, d]."""
    return FUNCTION_CLASSES[name].evaluate(f, xs)


def sample(
    key: jax.Array, name: str, batch: int, n_points: int, d: int, options: BooleanOptions = BooleanOptions()
) -> PairPrompt:
    """A batch of sequences of the class `name` (see the module docstring)."""
    if name not in FUNCTION_CLASSES:
        raise ValueError(f"task={name!r} is unknown; accepted: {', '.join(CLASSES)}")
    cls, k = FUNCTION_CLASSES[name], options.k
    if cls.uses_k and not 1 <= k <= d:
        raise ValueError(f"k={k} is out of range for d={d}; accepted: an integer in [1, {d}]")
    k_f, k_x, k_bal, k_pick = jax.random.split(key, 4)
    f = cls.sample(k_f, batch, d, options)
    xs = _signs(k_x, (batch, n_points, d))
    if cls.rewrite is not None:
        xs = _rewrite(k_bal, xs, _pick_term(k_pick, f.w, n_points), options.balance, cls.rewrite)
    ys = cls.evaluate(f, xs)
    return PairPrompt(xs, ys, jnp.ones_like(ys), jnp.any(f.w != 0, 1).astype(jnp.float32), jnp.asarray(d, jnp.float32))


def make_sampler(name: str, options: BooleanOptions, n_points: int, n_dims: int):
    """The `gpt2` family's task protocol: (key, batch_size, dims, points, alpha=1) ->
    PairPrompt at [B, n_points, n_dims]; `dims` must be n_dims (no dimension curriculum),
    points at or beyond `points` are masked out of the loss, `w` holds the support (0/1)."""

    def draw(key, batch_size: int, dims, points, alpha: float = 1.0):
        batch = sample(key, name, batch_size, n_points, n_dims, options)
        weights = (jnp.arange(n_points) < points).astype(jnp.float32)[None].repeat(batch_size, 0)
        return batch._replace(xs=alpha * batch.xs, weights=weights)

    return draw


def _register(name: str) -> None:
    from src.registry import registry

    doc = {
        "conjunction": "AND of random literals",
        "disjunction": "OR of random literals",
        "sparse_disjunction": "OR of exactly k literals",
        "dnf3": "OR of 3 k-literal terms",
        "cnf3": "AND of 3 k-literal clauses",
        "int_halfspace": "sign(w·x − ½), w in {−3..3}^d",
        "majority": "majority of a random odd subset",
        "sparse_threshold": "sign(w·x − b), k ±1 weights",
        "parity": "product of a random non-empty subset",
        "sparse_parity": "product of k coordinates",
    }[name]
    registry("task").register(name, BooleanOptions, doc=f"boolean (Bhattamishra et al.): {doc}")(
        lambda options, n_points=11, n_dims=5: make_sampler(name, options, n_points, n_dims)
    )


for _name in CLASSES:
    _register(_name)
