"""Boolean function classes (src/tasks/boolean.py): every generator is tested statistically and
against an independent NumPy evaluation, including the public code's known bugs (a parity whose
label is constant within a sequence, DNF/CNF samplers that raise, a sparse class that keeps the
wrong coordinates)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from src.tasks.boolean import CLASSES, BooleanOptions, evaluate, sample, sample_function

D, K = 10, 3
SPARSE = ("sparse_disjunction", "sparse_threshold", "sparse_parity")


@pytest.fixture(scope="module")
def draws():
    """10,000 functions of every class, 8 points each (no exception is the first test)."""
    return {name: sample(jax.random.key(i), name, 10_000, 8, D) for i, name in enumerate(CLASSES)}


@pytest.mark.parametrize("name", CLASSES)
def test_labels_are_plus_minus_one_and_never_constant_across_sequences(draws, name):
    ys = np.asarray(draws[name].ys)
    assert set(np.unique(ys)) == {-1.0, 1.0}
    assert 0.25 < (ys > 0).mean() < 0.75  # rewriting keeps every class learnable


@pytest.mark.parametrize("name", ["parity", "sparse_parity", "majority", "sparse_threshold"])
def test_classes_whose_symmetry_implies_balance_are_balanced(draws, name):
    assert abs((np.asarray(draws[name].ys) > 0).mean() - 0.5) < 0.01  # 80,000 labels: sd 0.002


def test_parity_labels_vary_within_a_sequence(draws):
    ys = np.asarray(draws["parity"].ys)
    constant = np.all(ys == ys[:, :1], axis=1).mean()
    assert constant < 0.02  # 2 / 2^8 expected; the public generator's was 1.0


@pytest.mark.parametrize("name", SPARSE)
def test_sparse_classes_have_exactly_k_relevant_coordinates(draws, name):
    assert (np.asarray(draws[name].w).sum(1) == K).all()


def test_dnf_and_cnf_terms_have_exactly_k_literals():
    for name in ("dnf3", "cnf3"):
        f = sample_function(jax.random.key(5), name, 2_000, D, BooleanOptions())
        assert (np.count_nonzero(np.asarray(f.w), axis=-1) == K).all()


def _numpy_label(name: str, w: np.ndarray, b: float, x: np.ndarray) -> float:
    """An independent, loop-by-loop evaluation of one function at one point."""

    def literal(weight, value):
        return value == weight  # x_i for weight +1, ¬x_i for weight −1

    terms = [[(i, t[i]) for i in range(len(x)) if t[i] != 0] for t in w]
    if name in ("conjunction", "dnf3"):
        return 1.0 if any(all(literal(wt, x[i]) for i, wt in term) for term in terms) else -1.0
    if name in ("disjunction", "sparse_disjunction", "cnf3"):
        return 1.0 if all(any(literal(wt, x[i]) for i, wt in term) for term in terms) else -1.0
    if name in ("int_halfspace", "majority", "sparse_threshold"):
        total = sum(w[0][i] * x[i] for i in range(len(x))) - b
        assert total != 0
        return 1.0 if total > 0 else -1.0
    product = 1.0
    for i in range(len(x)):
        if w[0][i] > 0:
            product *= x[i]
    return product


@pytest.mark.parametrize("name", CLASSES)
def test_labels_match_an_independent_numpy_evaluation(name):
    key_f, key_x = jax.random.split(jax.random.key(11))
    f = sample_function(key_f, name, 40, D, BooleanOptions())
    xs = np.asarray(sample(key_x, "parity", 40, 12, D).xs)  # uniform ±1 points
    ys = np.asarray(evaluate(name, f, xs))
    w, b = np.asarray(f.w), np.asarray(f.b)
    for s in range(40):
        for i in range(12):
            assert ys[s, i] == _numpy_label(name, w[s], float(b[s]), xs[s, i]), (name, s, i)


@pytest.mark.parametrize("name", CLASSES)
def test_labels_depend_only_on_the_support(name):
    key_f, key_x = jax.random.split(jax.random.key(12))
    f = sample_function(key_f, name, 500, D, BooleanOptions())
    xs = np.asarray(sample(key_x, "parity", 500, 6, D).xs)
    support = np.asarray(np.any(np.asarray(f.w) != 0, axis=1))
    flipped = np.where(support[:, None, :], xs, -xs)  # flip every irrelevant coordinate
    np.testing.assert_array_equal(np.asarray(evaluate(name, f, flipped)), np.asarray(evaluate(name, f, xs)))
    if name in ("parity", "sparse_parity"):  # a relevant flip flips the label
        first = support.argmax(1)
        one = xs.copy()
        one[np.arange(500), :, first] *= -1
        np.testing.assert_array_equal(np.asarray(evaluate(name, f, one)), -np.asarray(evaluate(name, f, xs)))


def test_bad_names_and_sizes_are_one_line_errors():
    with pytest.raises(ValueError, match="accepted: conjunction"):
        sample(jax.random.key(0), "xor", 2, 3, D)
    with pytest.raises(ValueError, match=r"k=11 is out of range for d=10"):
        sample(jax.random.key(0), "sparse_parity", 2, 3, D, BooleanOptions(k=11))
