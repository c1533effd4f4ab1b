"""The Bayes-optimal baselines (baselines/bayes.py) against closed forms: ridge is NumPy's
regularised normal equations and tends to least squares as the prior widens; dMMSE over a pool of
two tasks is the two-hypothesis posterior written out by hand."""

import math

import jax
import numpy as np

from baselines.bayes import dmmse, ridge
from baselines.regression import least_squares
from src.registry import registry
from src.tasks.pairs import pair_prompt


def prompts(b=3, n=9, d=4, seed=0):
    kx, kw, ke = jax.random.split(jax.random.key(seed), 3)
    xs = jax.random.normal(kx, (b, n, d))
    w = jax.random.normal(kw, (b, d))
    return pair_prompt(xs, np.einsum("bnd,bd->bn", xs, w) + 0.3 * np.asarray(jax.random.normal(ke, (b, n))))


def test_ridge_is_the_regularised_normal_equations_at_every_prefix():
    prompt = prompts()
    xs, ys = prompt.xs, prompt.ys
    got = np.asarray(ridge(prompt, noise_std=0.5, prior_std=2.0))
    x, y = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    for b in range(3):
        for i in range(9):
            w = np.linalg.solve(x[b, :i].T @ x[b, :i] + (0.5 / 2.0) ** 2 * np.eye(4), x[b, :i].T @ y[b, :i])
            assert abs(got[b, i] - x[b, i] @ w) <= 1e-4
    assert np.all(got[:, 0] == 0)


def test_ridge_tends_to_least_squares_as_the_prior_widens():
    prompt = prompts(n=12)
    exact = np.asarray(least_squares(prompt))[:, 6:]  # at least d + 2 pairs: a unique solution
    gaps = [np.abs(np.asarray(ridge(prompt, 0.5, prior))[:, 6:] - exact).max() for prior in (1.0, 10.0, 1000.0)]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] <= 1e-3


def test_dmmse_over_two_tasks_is_the_two_hypothesis_posterior():
    pool = np.array([[1.0, 0.0], [0.0, 1.0]])
    xs = np.array([[[1.0, 2.0], [0.5, -1.0], [2.0, 1.0]]])
    ys = np.array([[1.2, 0.4, 0.0]])
    sigma = 0.7
    got = np.asarray(dmmse(pair_prompt(xs, ys), pool, sigma))[0]
    assert abs(got[0] - xs[0, 0] @ pool.mean(0)) <= 1e-6  # no pairs: the pool's mean
    for i in (1, 2):
        like = [math.exp(-sum((ys[0, j] - xs[0, j] @ w) ** 2 for j in range(i)) / (2 * sigma**2)) for w in pool]
        p = np.array(like) / sum(like)
        assert abs(got[i] - xs[0, i] @ (p @ pool)) <= 1e-5
    # a pool of one task is that task
    assert np.allclose(np.asarray(dmmse(pair_prompt(xs, ys), pool[:1], sigma)), xs[..., 0], atol=1e-6)


def test_ridge_is_a_registered_baseline_for_regression():
    from src.registry import load_entries

    load_entries()
    entry = registry("baseline").get("ridge")
    assert entry.is_applicable("noisy_linear_regression") and not entry.is_applicable("conjunction")
    prompt = prompts()
    assert np.allclose(entry.build(entry.default_options())(prompt), ridge(prompt, 0.5, 1.0))


def test_the_icl_curve_of_a_pooled_noisy_run_draws_dmmse_over_its_pool_and_ridge(monkeypatch):
    """Only a run trained on a pool of tasks with label noise gains the two curves (every other
    run's curve stays as recorded); a block at a time equals one batch."""
    from analysis.icl_curve import curves
    from src import bounds
    from src.cli.gpt2 import settings_from_config
    from src.systems.gpt2 import init_model, make_model
    from src.systems.gpt2_prompts import eval_batch, sampler
    from src.tasks.objectives import objective_of
    from src.tasks.pools import task_pool
    from tests.test_pools import config

    pooled = settings_from_config(
        config(task="noisy_linear_regression", task_kwargs={"noise_std": 0.5}, num_tasks=6, eval_size=24)
    )[0]
    fresh = settings_from_config(config(task="noisy_linear_regression", eval_size=24))[0]
    model = make_model(pooled)
    params, state = init_model(pooled, model)
    table = curves(pooled, model, params, state)
    assert {"dmmse", "ridge"} <= set(table) and not {"dmmse", "ridge"} & set(curves(fresh, model, params, state))
    batch = eval_batch(pooled)
    pool = task_pool(sampler(pooled), pooled.train.seed, 6, 5, 11)
    objective = objective_of(pooled.task.name)
    np.testing.assert_allclose(table["dmmse"], objective.point_errors(dmmse(batch, pool, 0.5), batch), rtol=1e-5)
    np.testing.assert_allclose(table["ridge"], objective.point_errors(ridge(batch, 0.5, 1.0), batch), rtol=1e-5)
    monkeypatch.setattr(bounds, "EVAL_BLOCK_BYTES", 3 * 4 * 11 * (6 + 55) * 5)  # 5 prompts a block
    np.testing.assert_allclose(curves(pooled, model, params, state)["dmmse"], table["dmmse"], rtol=1e-6)
