"""The constructed LSA weights are GD, to float precision (SPEC §2-3)."""

import jax
import numpy as np

from baselines.gd_step import gd_params, gd_predictions, gd_weights, tune_eta, eta_scan
from src.gd_paper.presets import preset
from src.tasks.regression import sample_tasks
from src.gd_paper.models.attention_only import build_model


def _closed_form_gd(tasks, eta, steps):
    """Plain numpy GD on L(W) = 1/(2N) Σ (W x_i − y_i)², written independently."""
    x = np.asarray(tasks.context_x, np.float64)
    y = np.asarray(tasks.context_y, np.float64)
    xq = np.asarray(tasks.query_x, np.float64)
    n = x.shape[1]
    w = np.zeros_like(xq)
    for _ in range(steps):
        grad = np.einsum("bn,bnd->bd", np.einsum("bnd,bd->bn", x, w) - y, x) / n
        w = w - eta * grad
    return np.einsum("bd,bd->b", w, xq)


def test_one_lsa_layer_is_one_gd_step():
    s = preset("lsa1")
    model = build_model(s.task, s.model)
    tasks = sample_tasks(jax.random.key(7), 1000, s.task)
    eta = 6.06
    tf = np.asarray(model.predict(gd_params(s.task, s.model, eta), tasks))
    expected = _closed_form_gd(tasks, eta, 1)
    assert np.max(np.abs(tf - expected)) <= 1e-5
    # the prediction is not trivially zero: GD actually moved
    assert np.mean(np.abs(expected)) > 0.1


def test_three_recurrent_layers_are_three_gd_steps():
    s = preset("lsa_rec", num_layers=3)
    model = build_model(s.task, s.model)
    tasks = sample_tasks(jax.random.key(8), 1000, s.task)
    eta = 2.0
    tf = np.asarray(model.predict(gd_params(s.task, s.model, eta), tasks))
    three = _closed_form_gd(tasks, eta, 3)
    assert np.max(np.abs(tf - three)) <= 1e-4
    # and it is really three steps, not one
    assert np.max(np.abs(three - _closed_form_gd(tasks, eta, 1))) > 1e-2


def test_per_layer_readouts_are_gd_steps():
    s = preset("lsa_rec", num_layers=3)
    model = build_model(s.task, s.model)
    tasks = sample_tasks(jax.random.key(9), 200, s.task)
    from src.gd_paper.models.layouts import make_tokens

    out = model.apply(gd_params(s.task, s.model, 1.5), make_tokens(tasks, s.model), return_layer_predictions=True)
    for k in range(3):
        np.testing.assert_allclose(out.layer_predictions[k], _closed_form_gd(tasks, 1.5, k + 1), atol=1e-4)


def test_jax_gd_matches_numpy_gd():
    s = preset("lsa1")
    tasks = sample_tasks(jax.random.key(10), 500, s.task)
    np.testing.assert_allclose(gd_predictions(tasks, 3.0, 2), _closed_form_gd(tasks, 3.0, 2), atol=1e-5)
    assert gd_weights(tasks, 1.0).shape == (500, 10)


def test_eta_scan_finds_reference_step_size():
    s = preset("lsa1")
    tasks = sample_tasks(jax.random.key(11), 10_000, s.task)
    eta, loss = tune_eta(tasks)
    assert 5.5 <= eta <= 6.6
    assert 0.195 <= loss <= 0.215
    # the grid optimum agrees with the exact optimum of this quadratic in η
    s_pred = np.asarray(gd_predictions(tasks, 1.0))
    y = np.asarray(tasks.query_y)
    assert abs(eta - float(s_pred @ y / (s_pred @ s_pred))) <= 0.1
    grid, losses = eta_scan(tasks)
    assert losses[0] > 0.4  # η ≈ 0 predicts ≈ 0: the zero-predictor loss 0.417


def test_the_per_point_gd_step_is_the_query_forms_step_at_every_point():
    """baselines.gd_step's two forms are one GD step: at every point i of a prompt of pairs,
    gd_at_every_point is gd_predictions of the prompt cut at i (its first i pairs the context,
    point i the query), and both are the closed form (float64 NumPy) to float32 rounding."""
    from baselines.gd_step import gd_at_every_point
    from src.tasks.pairs import pair_prompt

    s = preset("lsa1")
    tasks = sample_tasks(jax.random.key(3), 200, s.task)
    xs, ys = np.asarray(tasks.xs), np.asarray(tasks.ys)
    eta = 2.5
    every = np.asarray(gd_at_every_point(tasks, eta))
    assert np.all(every[:, 0] == 0)  # no pairs yet
    for i in range(1, xs.shape[1]):
        cut = pair_prompt(xs[:, : i + 1], ys[:, : i + 1])  # the first i pairs the context, point i the query
        np.testing.assert_allclose(every[:, i], np.asarray(gd_predictions(cut, eta)), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(every[:, i], _closed_form_gd(cut, eta, 1), rtol=1e-5, atol=1e-6)
