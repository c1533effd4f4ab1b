"""Mamba-2 (src/models/mixers/mamba2.py) against a NumPy loop of its definition, chunked against
recurrent, causal bit for bit, its options refused in one line (the helpers of test_zoo_mixers)."""

from __future__ import annotations

import math

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.registry import registry
from src.models.mixers import mamba2
from test_zoo_mixers import HEADS, TOKENS, WIDTH, conv_numpy, mixer, numpy_params


def mamba2_numpy(p: dict, x: np.ndarray, d_state: int = 16) -> np.ndarray:
    """Mamba-2 written out one position and one head at a time (module docstring of mamba2)."""
    b, t, d = x.shape
    inner, n = 2 * d, d_state
    size = inner // HEADS
    zxbcdt = x @ p["in_proj/w"]
    z, xbc, dt = zxbcdt[..., :inner], zxbcdt[..., inner : 2 * inner + 2 * n], zxbcdt[..., 2 * inner + 2 * n :]
    xbc = conv_numpy(xbc, p["conv/w"], p["conv/b"])
    xbc = xbc / (1 + np.exp(-xbc))
    u, bb, cc = xbc[..., :inner].reshape(b, t, HEADS, size), xbc[..., inner : inner + n], xbc[..., inner + n :]
    delta = np.log1p(np.exp(dt + p["m/dt_bias"]))
    a = -np.exp(p["m/A_log"])
    state = np.zeros((b, HEADS, size, n))
    y = np.zeros((b, t, HEADS, size))
    for i in range(t):
        for h in range(HEADS):
            dh = delta[:, i, h][:, None, None]
            state[:, h] = np.exp(dh * a[h]) * state[:, h] + dh * u[:, i, h][:, :, None] * bb[:, i][:, None, :]
            y[:, i, h] = np.einsum("bpn,bn->bp", state[:, h], cc[:, i]) + p["m/D"][h] * u[:, i, h]
    g = y.reshape(b, t, inner) * (z / (1 + np.exp(-z)))
    normed = g / np.sqrt((g * g).mean(-1, keepdims=True) + 1e-5) * p["norm/scale"]
    return normed @ p["out_proj/w"]


@pytest.mark.parametrize("chunk", [None, 8])
def test_mamba2_is_the_ssd_recurrence_written_out(chunk, monkeypatch):
    """D 12, H 3 (P 8), T 23: one padded chunk of 64, or (CHUNK 8) three chunks, the last padded."""
    if chunk:
        monkeypatch.setattr(mamba2, "CHUNK", chunk)
    f, params, x = mixer("mamba2")
    expected = mamba2_numpy(numpy_params(params), np.asarray(x, np.float64))
    assert np.abs(np.asarray(f.apply(params, x)) - expected).max() <= 1e-5


def ssd_inputs(tokens: int, heads: int = 2, size: int = 5, n: int = 4):
    """Δ log-uniform in [1e-3, 0.2] (around Zoology's initial [1e-3, 1e-1]): long memory; A = −U(1, 16)."""
    keys = jax.random.split(jax.random.key(tokens), 6)
    x = jax.random.normal(keys[0], (2, tokens, heads, size))
    delta = jnp.exp(jax.random.uniform(keys[1], (2, tokens, heads), minval=math.log(1e-3), maxval=math.log(0.2)))
    a = -jax.random.uniform(keys[2], (heads,), minval=1.0, maxval=16.0)
    b, c = (jax.random.normal(key, (2, tokens, n)) for key in keys[3:5])
    return x, delta, a, b, c, jax.random.normal(keys[5], (heads,))


@pytest.mark.parametrize("tokens, chunk", [(37, 8), (16, 8), (5, 64), (23, 64)])
def test_the_chunked_ssd_is_the_recurrent_one(tokens, chunk):
    inputs = ssd_inputs(tokens)
    chunked = np.asarray(jax.jit(mamba2.chunked_ssd, static_argnames="chunk")(*inputs, chunk=chunk))
    assert np.abs(chunked - np.asarray(jax.jit(mamba2.recurrent_ssd)(*inputs))).max() <= 1e-5


def test_the_chunked_ssd_masks_before_exp_so_strong_decays_keep_finite_gradients():
    """Δ ≥ 20, so Δ·A ≤ −20 a position: exp of an unmasked exponent (s > c, five positions
    apart) would overflow, and its gradient be NaN."""
    x, delta, *rest = ssd_inputs(12)
    grads = [
        np.asarray(jax.jit(jax.grad(lambda dl: jnp.sum(form(x, dl, *rest) ** 2)))(delta + 20.0))
        for form in (lambda *u: mamba2.chunked_ssd(*u, chunk=8), mamba2.recurrent_ssd)
    ]
    assert np.all(np.isfinite(grads[0])) and np.abs(grads[0] - grads[1]).max() <= 1e-4 * np.abs(grads[1]).max()


@pytest.mark.parametrize("chunk", [None, 8])
def test_mamba2_changing_inputs_from_t_on_leaves_every_earlier_output_bit_identical(chunk, monkeypatch):
    if chunk:
        monkeypatch.setattr(mamba2, "CHUNK", chunk)
    f, params, x = mixer("mamba2")
    changed = x.at[:, 11:].set(jax.random.normal(jax.random.key(9), (2, TOKENS - 11, WIDTH)))
    before, after = np.asarray(f.apply(params, x)), np.asarray(f.apply(params, changed))
    assert np.array_equal(before[:, :11], after[:, :11])
    assert not np.allclose(before[:, 11:], after[:, 11:], atol=1e-3)


def test_mamba2_parameters_are_zoologys_shapes_and_initial_values():
    _, params, _ = mixer("mamba2")
    p = numpy_params(params)
    inner, n = 2 * WIDTH, 16
    assert {k: v.shape for k, v in p.items()} == {
        "in_proj/w": (WIDTH, 2 * inner + 2 * n + HEADS),
        "conv/w": (4, inner + 2 * n),
        "conv/b": (inner + 2 * n,),
        "m/dt_bias": (HEADS,),
        "m/A_log": (HEADS,),
        "m/D": (HEADS,),
        "norm/scale": (inner,),
        "out_proj/w": (inner, WIDTH),
    }
    dt = np.log1p(np.exp(p["m/dt_bias"]))
    assert np.all((dt >= 1e-3 * (1 - 1e-5)) & (dt <= 1e-1 * (1 + 1e-5))) and len(set(dt)) == HEADS
    assert np.all((p["m/A_log"] >= 0) & (p["m/A_log"] <= math.log(16) + 1e-6)) and len(set(p["m/A_log"])) == HEADS
    assert np.all(p["m/D"] == 1) and np.all(p["norm/scale"] == 1)
    assert np.abs(p["conv/w"]).max() <= 0.5 and np.abs(p["conv/b"]).max() <= 0.5  # ±1/√d_conv


@pytest.mark.parametrize(
    "options, words",
    [
        ({"d_state": 0}, "d_state=0; accepted: an integer >= 1"),
        ({"d_state": 2.5}, "d_state=2.5; accepted: an integer >= 1"),
        ({"d_conv": 0}, "d_conv=0; accepted: an integer >= 1"),
        ({"expand": 0}, "expand=0; accepted: an integer >= 1"),
        ({"expand": True}, "expand=True; accepted: an integer >= 1"),
    ],
)
def test_mamba2_bad_options_are_one_line(options, words):
    entry = registry("seq_mixer").get("mamba2")
    with pytest.raises(ValueError) as err:
        entry.build(entry.options(**options), width=WIDTH, num_heads=HEADS)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_mamba2_refuses_heads_that_do_not_divide_the_inner_width_in_one_line():
    """The registry refuses a width its heads do not divide first; the module itself checks E % H."""
    f = hk.transform(lambda x: mamba2.Mamba2(5, mamba2.Mamba2Options(expand=2))(x))
    with pytest.raises(ValueError) as err:
        f.init(jax.random.key(0), jnp.zeros((1, 4, WIDTH)))
    assert "expand=2; accepted:" in str(err.value) and "(24) divisible by the 5 heads" in str(err.value)
    assert "\n" not in str(err.value)


def test_mamba2_declares_its_recurrent_state():
    """Floats per sequence and layer at D 12, H 3, T 23, written out by hand: E 24, P 8."""
    from src.models.mixers.kit import state_floats

    entry = registry("seq_mixer").get("mamba2")
    assert entry.build.state_doc == "H·P·N + (d_conv − 1)·(E + 2N)"
    assert state_floats("mamba2", entry.default_options(), width=12, num_heads=3, tokens=23) == 3 * 8 * 16 + 3 * (
        24 + 32
    )
    small = entry.options(d_state=8, d_conv=2, expand=1)  # E 12, P 4
    assert state_floats("mamba2", small, width=12, num_heads=3, tokens=23) == 3 * 4 * 8 + 1 * (12 + 16)
