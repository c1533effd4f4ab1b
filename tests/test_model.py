"""Model shapes, token constructions, and the fast paths computing the same function."""
import jax
import jax.numpy as jnp
import numpy as np

from src.config import preset
from src.data import concat_tokens, interleaved_tokens, make_tokens, sample_tasks, sinusoidal_encoding
from src.metrics import first_layer_jacobian_norms
from src.transformer import build_model, flatten_params, unflatten_params


def test_token_constructions():
    s = preset("twolayer")
    tasks = sample_tasks(jax.random.key(0), 3, s.task)
    concat = concat_tokens(tasks)
    assert concat.shape == (3, 11, 11)
    np.testing.assert_array_equal(concat[:, :10, :10], tasks.context_x)
    np.testing.assert_array_equal(concat[:, :10, 10], tasks.context_y)
    np.testing.assert_array_equal(concat[:, 10], jnp.concatenate([tasks.query_x, jnp.zeros((3, 1))], -1))
    inter = interleaved_tokens(tasks, 10)
    assert inter.shape == (3, 21, 20)
    np.testing.assert_array_equal(inter[:, 0:20:2, :10], tasks.context_x)
    np.testing.assert_array_equal(inter[:, 1:20:2, 9], tasks.context_y)
    assert float(jnp.abs(inter[:, 1:20:2, :9]).max()) == 0.0
    np.testing.assert_array_equal(inter[:, 20, :10], tasks.query_x)
    np.testing.assert_allclose(inter[1, :, 10:], sinusoidal_encoding(21, 10))
    assert abs(float(tasks.context_x.min())) <= 0.5 and float(tasks.context_x.max()) <= 0.5


def _random_params(model, scale):
    return jax.tree_util.tree_map(lambda w: w * scale, model.init(jax.random.key(3)))


def test_shared_position_path_is_the_general_path():
    s = preset("twolayer")
    fast, general = build_model(s.task, s.model), build_model(s.task, s.model, split_positions=False)
    params = _random_params(fast, 5.0)
    tasks = sample_tasks(jax.random.key(1), 64, s.task)
    tokens = make_tokens(tasks, s.model)
    a = fast.apply(params, tokens, return_attention=True, return_layer_outputs=True)
    b = general.apply(params, tokens, return_attention=True, return_layer_outputs=True)
    assert float(jnp.abs(a.prediction).max()) > 1e-2
    np.testing.assert_allclose(a.prediction, b.prediction, atol=1e-5, rtol=1e-4)
    for x, y in zip(a.attention + a.layer_outputs, b.attention + b.layer_outputs):
        np.testing.assert_allclose(x, y, atol=1e-5, rtol=1e-4)
    loss = lambda m: (lambda p: jnp.mean((m.apply(p, tokens).prediction - tasks.query_y) ** 2))
    ga, gb = jax.grad(loss(fast))(params), jax.grad(loss(general))(params)
    for x, y in zip(jax.tree_util.tree_leaves(ga), jax.tree_util.tree_leaves(gb)):
        assert np.linalg.norm(np.asarray(x) - np.asarray(y)) <= 1e-5 * np.linalg.norm(np.asarray(y))
    np.testing.assert_allclose(first_layer_jacobian_norms(fast, params, tokens[:8]),
                               first_layer_jacobian_norms(general, params, tokens[:8]), atol=1e-4, rtol=1e-4)


def test_params_round_trip_and_names():
    s = preset("twolayer")
    model = build_model(s.task, s.model)
    params = model.init(jax.random.key(0))
    flat = flatten_params(params)
    assert sorted(flat) == sorted(f"transformer/layer_{i}/{p}/w" for i in (0, 1)
                                  for p in ("query", "key", "value", "linear"))
    back = unflatten_params(flat)
    tasks = sample_tasks(jax.random.key(2), 8, s.task)
    np.testing.assert_array_equal(model.predict(params, tasks), model.predict(back, tasks))
