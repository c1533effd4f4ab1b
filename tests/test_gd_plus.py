"""GD++ reduces to GD at γ = 0 and, fitted, beats plain K-step GD."""

import jax
import jax.numpy as jnp
import numpy as np

from baselines.gd_plus import GDPlusParams, fit_gd_plus, gd_plus_predictions, gd_plus_sensitivity
from baselines.gd_step import gd_predictions, tune_eta
from src.gd_paper.config import TaskConfig
from src.tasks.regression import sample_tasks

TASK = TaskConfig()


def test_gamma_zero_is_k_step_gd():
    tasks = sample_tasks(jax.random.key(0), 500, TASK)
    for k in (1, 2, 3):
        params = GDPlusParams(jnp.full((k,), 2.5), jnp.zeros((k,)))
        np.testing.assert_allclose(gd_plus_predictions(tasks, params), gd_predictions(tasks, 2.5, k), atol=1e-5)
    sens = gd_plus_sensitivity(tasks, GDPlusParams(jnp.array([2.5]), jnp.array([0.0])))
    np.testing.assert_allclose(sens, np.einsum("bn,bnd->bd", tasks.context_y, tasks.context_x) * 2.5 / 10, atol=1e-5)


def test_fitted_gd_plus_beats_tuned_gd_with_two_layers():
    eval_tasks = sample_tasks(jax.random.key(1), 4000, TASK)
    eta, gd_loss = tune_eta(eval_tasks, steps=2)
    params, losses = fit_gd_plus(TASK, 2, eta, steps=300, batch_size=512)
    plus_loss = 0.5 * float(jnp.mean((gd_plus_predictions(eval_tasks, params) - eval_tasks.query_y) ** 2))
    assert plus_loss < gd_loss - 0.005
    # the curvature correction is used before the last layer; the last layer's γ cannot
    # change ŷ (it only moves x after the final y-update), so it keeps its initial 0
    gamma = np.asarray(params.gamma)
    assert gamma[0] > 0.1 and gamma[-1] == 0
