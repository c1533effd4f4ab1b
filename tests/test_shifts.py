"""Evaluation shifts (src/tasks/shifts.py): each shifted batch has the statistics it promises, and
least squares stays at ≈ 0 for n ≥ d on every shift that leaves the task linear and noiseless."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from baselines.regression import least_squares
from src.registry import choice, registry
from src.tasks.pairs import pair_prompt
from src.tasks.shifts import transformation

B, N, D = 400, 11, 5


def apply(name, **options):
    c = choice("shift", name, **options)
    shift = registry("shift").get(name).build(c.options)
    xs = jax.random.normal(jax.random.key(3), (B, N, D))
    context, query = shift.inputs(jax.random.key(4), xs, D)
    return np.asarray(xs), np.asarray(context), np.asarray(query)


def test_scaled_query_scales_only_the_query():
    xs, context, query = apply("scaled_query", scale=2.1)
    np.testing.assert_allclose(query, 2.1 * xs[:, -1], rtol=1e-6)
    np.testing.assert_array_equal(context[:, :-1], xs[:, :-1])


@pytest.mark.parametrize("flipped", [1, 2, 4])
def test_opposite_quadrants_flip_exactly_that_many_signs(flipped):
    xs, context, query = apply("opposite_quadrants", num_flipped=flipped)
    signs = np.sign(context[:, :-1])
    assert np.all(signs == signs[:, :1])  # one orthant per task
    differ = (np.sign(query) != signs[:, 0]).sum(axis=-1)
    assert np.all(differ == flipped)  # flipped dims have the opposite sign
    np.testing.assert_allclose(np.abs(query), np.abs(xs[:, -1]), rtol=1e-6)


def test_the_originals_query_orthant_is_random():
    _, context, query = apply("opposite_quadrants", num_flipped=1, query_orthant="random")
    differ = (np.sign(query) != np.sign(context[:, 0])).sum(axis=-1)
    assert abs(differ.mean() - D / 2) < 0.2  # on average d/2 signs differ


def test_random_quadrants_constrain_that_many_context_points():
    xs, context, _ = apply("random_quadrants", num_constrained=3)
    moved = np.any(context[:, :-1] != xs[:, :-1], axis=-1).sum(axis=-1)
    assert np.all(moved <= 3) and moved.mean() > 2.5  # a point may already lie there
    np.testing.assert_allclose(np.abs(context), np.abs(xs), rtol=1e-6)


def test_orthogonal_query_is_orthogonal_to_the_prompts_span():
    # n - 1 = 10 context points span R^5: with num_orthogonal 0 the query is orthogonal to d - 1 = 4
    xs, context, query = apply("orthogonal_query", num_orthogonal=3)
    np.testing.assert_allclose(np.linalg.norm(query, axis=-1), np.linalg.norm(xs[:, -1], axis=-1), rtol=1e-4)
    small = jax.random.normal(jax.random.key(5), (B, 4, D))  # 3 context points + the query
    c = choice("shift", "orthogonal_query")
    _, q = registry("shift").get("orthogonal_query").build(c.options).inputs(jax.random.key(6), small, D)
    assert np.abs(np.einsum("bnd,bd->bn", np.asarray(small[:, :-1]), np.asarray(q))).max() < 1e-4


def test_orthogonal_subspaces_put_the_query_outside_the_context():
    _, context, query = apply("orthogonal_subspaces")
    assert np.abs(np.einsum("bnd,bd->bn", context[:, :-1], query)).max() < 1e-4
    assert np.linalg.matrix_rank(context[0, :-1], tol=1e-4) == D // 2


def test_overlapping_query_is_a_context_point():
    _, context, query = apply("overlapping_query")
    assert all(np.any(np.all(np.isclose(context[b, :-1], query[b]), axis=-1)) for b in range(B))


def test_subspace_rank_and_skew_eigenvalues():
    xs, context, query = apply("subspace", num_dim=2)
    assert all(np.linalg.matrix_rank(context[b], tol=1e-4) == D - 2 for b in range(5))
    t = np.asarray(transformation(jax.random.key(0), jnp.arange(1, D + 1, dtype=jnp.float32) ** -0.5))
    covariance = np.linalg.eigvalsh(t.T @ t)[::-1]  # of x T for x ~ N(0, I): TᵀT
    np.testing.assert_allclose(covariance / covariance[0], 1.0 / np.arange(1, D + 1), rtol=1e-4)
    assert abs(np.trace(t.T @ t) - D) < 1e-4  # E ‖x T‖² = d


@pytest.mark.parametrize(
    "name,options",
    [
        ("scaled_query", {"scale": 3.0}),
        ("opposite_quadrants", {"num_flipped": 2}),
        ("random_quadrants", {"num_constrained": 5}),
        ("orthogonal_query", {}),
        ("overlapping_query", {}),
        ("subspace", {"num_dim": 2}),
        ("skewed", {"exponent": 1.0}),
        ("scale_x", {"scale": 0.5}),
    ],
)
def test_least_squares_stays_exact_on_linear_noiseless_shifts(name, options):
    xs, context, query = apply(name, **options)
    w = np.asarray(jax.random.normal(jax.random.key(9), (B, D)))
    shifted = np.concatenate([context[:, :-1], query[:, None]], axis=1)
    ys = np.einsum("bnd,bd->bn", shifted, w)
    prediction = np.asarray(least_squares(pair_prompt(shifted, ys)))[:, -1]
    rank_ok = np.linalg.matrix_rank(shifted[:, :-1], tol=1e-4) == np.linalg.matrix_rank(shifted, tol=1e-4)
    err = (prediction - ys[:, -1]) ** 2 / D
    assert np.median(err[rank_ok]) < 1e-6 and rank_ok.mean() > 0.9  # the query in the context's span


def test_task_shifts_name_registered_tasks():
    for name, task in (
        ("noisy_labels", "noisy_linear_regression"),
        ("affine", "affine_regression"),
        ("sparse", "sparse_linear_regression"),
        ("uniform_w", "uniform_linear_regression"),
        ("scale_y", "linear_regression"),
    ):
        entry = registry("shift").get(name)
        assert entry.build(entry.default_options()).task[0] == task
