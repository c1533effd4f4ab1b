"""The Bayes-optimal baselines (baselines/bayes.py) against closed forms: ridge is NumPy's
regularised normal equations and tends to least squares as the prior widens; dMMSE over a pool of
two tasks is the two-hypothesis posterior written out by hand."""
import math

import jax
import numpy as np

from baselines.bayes import dmmse, ridge
from baselines.regression import least_squares
from src.registry import registry


def prompts(b=3, n=9, d=4, seed=0):
    kx, kw, ke = jax.random.split(jax.random.key(seed), 3)
    xs = jax.random.normal(kx, (b, n, d))
    w = jax.random.normal(kw, (b, d))
    return xs, np.einsum("bnd,bd->bn", xs, w) + 0.3 * np.asarray(jax.random.normal(ke, (b, n)))


def test_ridge_is_the_regularised_normal_equations_at_every_prefix():
    xs, ys = prompts()
    got = np.asarray(ridge(xs, ys, noise_std=0.5, prior_std=2.0))
    x, y = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    for b in range(3):
        for i in range(9):
            w = np.linalg.solve(x[b, :i].T @ x[b, :i] + (0.5 / 2.0) ** 2 * np.eye(4), x[b, :i].T @ y[b, :i])
            assert abs(got[b, i] - x[b, i] @ w) <= 1e-4
    assert np.all(got[:, 0] == 0)


def test_ridge_tends_to_least_squares_as_the_prior_widens():
    xs, ys = prompts(n=12)
    exact = np.asarray(least_squares(xs, ys))[:, 6:]        # at least d + 2 pairs: a unique solution
    gaps = [np.abs(np.asarray(ridge(xs, ys, 0.5, prior))[:, 6:] - exact).max() for prior in (1.0, 10.0, 1000.0)]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] <= 1e-3


def test_dmmse_over_two_tasks_is_the_two_hypothesis_posterior():
    pool = np.array([[1.0, 0.0], [0.0, 1.0]])
    xs = np.array([[[1.0, 2.0], [0.5, -1.0], [2.0, 1.0]]])
    ys = np.array([[1.2, 0.4, 0.0]])
    sigma = 0.7
    got = np.asarray(dmmse(xs, ys, pool, sigma))[0]
    assert abs(got[0] - xs[0, 0] @ pool.mean(0)) <= 1e-6          # no pairs: the pool's mean
    for i in (1, 2):
        like = [math.exp(-sum((ys[0, j] - xs[0, j] @ w) ** 2 for j in range(i)) / (2 * sigma ** 2)) for w in pool]
        p = np.array(like) / sum(like)
        assert abs(got[i] - xs[0, i] @ (p @ pool)) <= 1e-5
    # a pool of one task is that task
    assert np.allclose(np.asarray(dmmse(xs, ys, pool[:1], sigma)), xs[..., 0], atol=1e-6)


def test_ridge_is_a_registered_baseline_for_regression():
    from src.registry import load_entries
    load_entries()
    entry = registry("baseline").get("ridge")
    assert entry.is_applicable("noisy_linear_regression") and not entry.is_applicable("conjunction")
    xs, ys = prompts()
    assert np.allclose(entry.build(entry.default_options())(xs, ys), ridge(xs, ys, 0.5, 1.0))
