"""DeltaNet and Gated DeltaNet (src/models/mixers/delta_rule.py): each against a step-by-step NumPy
loop of its definition (≤ 1e-5), and the chunked delta rule against the recurrent one, with and
without a decay (the helpers of test_zoo_mixers)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.models.mixers.delta_rule import chunked_delta_rule, recurrent_delta_rule
from test_zoo_mixers import HEADS, conv_numpy, mixer, numpy_params


def delta_net_numpy(p: dict, x: np.ndarray, use_beta: bool) -> np.ndarray:
    """DeltaNet written out one position at a time (module docstring of delta_rule)."""
    b, t, d = x.shape
    size = d // HEADS

    def branch(name):
        u = conv_numpy(x @ p[f"{name}_proj/w"], p[f"{name}_conv/w"], 0.0)
        return (u / (1 + np.exp(-u))).reshape(b, t, HEADS, size)

    q, k, v = branch("q"), branch("k"), branch("v")
    q, k = (a / np.sqrt((a * a).sum(-1, keepdims=True) + 1e-6) for a in (q, k))
    beta = 1 / (1 + np.exp(-(x @ p["beta/w"]))) if use_beta else np.ones((b, t, HEADS))
    state = np.zeros((b, HEADS, size, size))
    y = np.zeros((b, t, HEADS, size))
    for i in range(t):
        u = beta[:, i, :, None] * (v[:, i] - np.einsum("bhkv,bhk->bhv", state, k[:, i]))
        state = state + k[:, i, :, :, None] * u[:, :, None, :]
        y[:, i] = np.einsum("bhkv,bhk->bhv", state, q[:, i] / math.sqrt(size))
    y = y / np.sqrt((y * y).mean(-1, keepdims=True) + 1e-5) * p["norm/scale"]
    return y.reshape(b, t, d) @ p["out/w"]


@pytest.mark.parametrize("use_beta", [True, False])
def test_delta_net_is_the_delta_rule(use_beta):
    f, params, x = mixer("delta_net", use_beta=use_beta)
    expected = delta_net_numpy(numpy_params(params), np.asarray(x, np.float64), use_beta)
    assert np.abs(np.asarray(f.apply(params, x)) - expected).max() <= 1e-5


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("tokens, chunk", [(37, 8), (16, 16), (5, 16)])
def test_the_chunked_delta_rule_is_the_recurrent_one(tokens, chunk, gated):
    """Values of another size than the keys; with a decay (Gated DeltaNet) down to α = e^-4."""
    keys = jax.random.split(jax.random.key(tokens), 6)
    q, k = (jax.random.normal(key, (2, tokens, 2, 6)) for key in keys[:2])
    v = jax.random.normal(keys[2], (2, tokens, 2, 10))
    k = k / jnp.linalg.norm(k, axis=-1, keepdims=True)
    beta = jax.random.uniform(keys[3], (2, tokens, 2))
    log_alpha = -4 * jax.random.uniform(keys[4], (2, tokens, 2)) if gated else None
    chunked = np.asarray(jax.jit(chunked_delta_rule, static_argnames="chunk")(q, k, v, beta, log_alpha, chunk=chunk))
    recurrent = np.asarray(jax.jit(recurrent_delta_rule)(q, k, v, beta, log_alpha))
    assert np.abs(chunked - recurrent).max() <= 1e-5


def gated_delta_net_numpy(p: dict, x: np.ndarray, use_gate: bool, expand_v: int = 2) -> np.ndarray:
    """Gated DeltaNet written out one position at a time (delta_rule's docstring)."""
    b, t, d = x.shape
    size = d // HEADS
    values = expand_v * size
    silu = lambda u: u / (1 + np.exp(-u))  # noqa: E731
    softplus = lambda u: np.log1p(np.exp(u))  # noqa: E731
    q, k = (silu(conv_numpy(x @ p[f"{n}_proj/w"], p[f"{n}_conv/w"], 0.0)).reshape(b, t, HEADS, size) for n in "qk")
    v = silu(conv_numpy(x @ p["v_proj/w"], p["v_conv/w"], 0.0)).reshape(b, t, HEADS, values)
    q, k = (a / np.sqrt((a * a).sum(-1, keepdims=True) + 1e-6) for a in (q, k))
    beta = 1 / (1 + np.exp(-(x @ p["beta/w"])))
    alpha = np.exp(-np.exp(p["m/A_log"]) * softplus(x @ p["alpha/w"] + p["m/dt_bias"]))
    state = np.zeros((b, HEADS, size, values))
    y = np.zeros((b, t, HEADS, values))
    for i in range(t):
        state = alpha[:, i, :, None, None] * state
        u = beta[:, i, :, None] * (v[:, i] - np.einsum("bhkv,bhk->bhv", state, k[:, i]))
        state = state + k[:, i, :, :, None] * u[:, :, None, :]
        y[:, i] = np.einsum("bhkv,bhk->bhv", state, q[:, i] / math.sqrt(size))
    y = y / np.sqrt((y * y).mean(-1, keepdims=True) + 1e-5) * p["m/norm_scale"]
    if use_gate:
        y = y * silu(x @ p["gate/w"]).reshape(b, t, HEADS, values)
    return y.reshape(b, t, HEADS * values) @ p["out/w"]


@pytest.mark.parametrize("use_gate", [False, True])
def test_gated_delta_net_is_the_gated_delta_rule(use_gate):
    f, params, x = mixer("gated_delta_net", use_gate=use_gate)
    p = numpy_params(params)
    assert 0 < np.exp(p["m/A_log"]).min() and np.exp(p["m/A_log"]).max() <= 16  # A ~ U(0, 16)
    expected = gated_delta_net_numpy(p, np.asarray(x, np.float64), use_gate)
    assert np.abs(np.asarray(f.apply(params, x)) - expected).max() <= 1e-5
