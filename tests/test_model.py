"""Model shapes, token constructions, and the fast paths computing the same function."""

import jax
import jax.numpy as jnp
import numpy as np

from src.gd_paper.presets import preset
from src.gd_paper.models.layouts import concat_tokens, interleaved_tokens, make_tokens, sinusoidal_encoding
from src.tasks.regression import sample_tasks
from src.gd_paper.models.attention_only import build_model
from src.params import flatten_params, unflatten_params


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


def _projection_attention(params, prefix, query_tokens, kv_tokens, softmax, key_size):
    """Textbook single-head attention from the same parameters: q, k, v projections."""
    w = lambda name: params[f"{prefix}/{name}"]["w"]
    q, k, v = query_tokens @ w("query"), kv_tokens @ w("key"), kv_tokens @ w("value")
    scores = jnp.einsum("btk,bsk->bts", q, k)
    if softmax:
        scores = jax.nn.softmax(scores / np.sqrt(key_size), axis=-1)
    return jnp.einsum("bts,bsk->btk", scores, v) @ w("linear")


def test_factorised_attention_equals_projection_attention():
    """The model computes h_t + W_O Σ_s score(W_Q h_t, W_K h_s) W_V h_s, layer by layer."""
    s = preset("twolayer")
    model = build_model(s.task, s.model)
    params = _random_params(model, 5.0)
    tasks = sample_tasks(jax.random.key(1), 64, s.task)
    tokens = make_tokens(tasks, s.model)
    out = model.apply(params, tokens, return_layer_outputs=True)
    h1 = tokens + _projection_attention(params, "transformer/layer_0", tokens, tokens[:, :20], True, 20)
    np.testing.assert_allclose(out.layer_outputs[0], h1, atol=1e-4, rtol=1e-4)
    h2 = h1[:, -1:] + _projection_attention(params, "transformer/layer_1", h1[:, -1:], h1[:, :20], False, 20)
    np.testing.assert_allclose(out.prediction, -h2[:, 0, -1], atol=1e-4, rtol=1e-4)
    assert float(jnp.abs(out.prediction).max()) > 1e-2


def test_params_round_trip_and_names():
    s = preset("twolayer")
    model = build_model(s.task, s.model)
    params = model.init(jax.random.key(0))
    flat = flatten_params(params)
    assert sorted(flat) == sorted(
        f"transformer/layer_{i}/{p}/w" for i in (0, 1) for p in ("query", "key", "value", "linear")
    )
    back = unflatten_params(flat)
    tasks = sample_tasks(jax.random.key(2), 8, s.task)
    np.testing.assert_array_equal(model.predict(params, tasks), model.predict(back, tasks))
