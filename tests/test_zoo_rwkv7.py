"""RWKV-7 (src/models/mixers/rwkv7.py) against a NumPy loop of its definition with every parameter
nonzero, chunked against recurrent (outputs and gradients), causal bit for bit, its options refused
in one line, Zoology's initialisation (the helpers of test_zoo_mixers)."""

from __future__ import annotations

import functools
import math

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.models.mixers.rwkv7 import chunked_rwkv7, recurrent_rwkv7
from src.registry import registry
from test_zoo_mixers import HEADS, TOKENS, WIDTH, numpy_params


def rwkv7_params(params, seed: int = 5) -> dict:
    """Every parameter redrawn at a working scale: x_x, k_k, k_a and r_k NONZERO (Zoology starts
    them at zero, which would hide the shift, the removal and the bonus), the Linears at 1/√fan_in
    (at N(0, 0.02) the bonus reaches the output near 1e-5), the GroupNorm's affine off 1 and 0."""
    rng = np.random.default_rng(seed)
    out = {}
    for module, group in params.items():
        out[module] = {}
        for name, leaf in group.items():
            z = rng.standard_normal(leaf.shape)
            if name == "x_x":
                z = rng.uniform(-1.0, 2.0, leaf.shape)
            elif name == "g_norm_weight":
                z = 1.0 + 0.3 * z
            elif name == "w":
                z = z / math.sqrt(leaf.shape[0])
            elif name in ("b", "g_norm_bias"):
                z = 0.3 * z
            out[module][name] = jnp.asarray(z, leaf.dtype)
    return out


@functools.lru_cache(maxsize=None)
def rwkv7_case():
    """(transformed, initial params, x) as `mixer("rwkv7")` builds them, once for the tests below,
    the init jitted (one compilation instead of an eager init op by op)."""
    entry = registry("seq_mixer").get("rwkv7")
    opts = entry.options()
    f = hk.without_apply_rng(hk.transform(lambda x: entry.build(opts, width=WIDTH, num_heads=HEADS, name="m")(x)))
    x = jax.random.normal(jax.random.key(1), (2, TOKENS, WIDTH))
    params = jax.jit(f.init)(jax.random.key(2), x)
    return hk.Transformed(f.init, jax.jit(f.apply)), params, x


def rwkv7_numpy(p: dict, x: np.ndarray) -> np.ndarray:
    """RWKV-7 written out one position at a time in float64 (module docstring of rwkv7)."""
    b, t, d = x.shape
    size = d // HEADS
    sigmoid = lambda u: 1 / (1 + np.exp(-u))
    shifted = np.concatenate([np.zeros((b, 1, d)), x[:, :-1]], 1)
    x_r, x_w, x_k, x_v, x_a, x_g = (x + (shifted - x) * p["m/x_x"][i] for i in range(6))
    r, k, v = x_r @ p["r_proj/w"], x_k @ p["k_proj/w"], x_v @ p["v_proj/w"]
    w = -math.exp(-0.5) * sigmoid(np.tanh(x_w @ p["w_lora_down/w"]) @ p["w_lora_up/w"] + p["w_lora_up/b"])
    a = sigmoid(x_a @ p["a_lora_down/w"] @ p["a_lora_up/w"] + p["a_lora_up/b"])
    g = sigmoid(x_g @ p["g_lora_down/w"]) @ p["g_lora_up/w"]
    heads = lambda u: u.reshape(b, t, HEADS, size)
    kappa = heads(k * p["m/k_k"])
    kappa = kappa / np.sqrt((kappa * kappa).sum(-1, keepdims=True) + 1e-6)
    k = k * (1 + (a - 1) * p["m/k_a"])
    r, w, k, v, a = (heads(u) for u in (r, w, k, v, a))
    state = np.zeros((b, HEADS, size, size))  # [B, H, key, value]
    o = np.zeros((b, t, HEADS, size))
    for i in range(t):
        removal = np.einsum("bhk,bhkv->bhv", kappa[:, i], state)  # κ̂ᵀ S_{t−1}
        state = (
            np.exp(w[:, i])[..., None] * state
            - (kappa[:, i] * a[:, i])[..., :, None] * removal[..., None, :]
            + k[:, i, :, :, None] * v[:, i, :, None, :]
        )
        o[:, i] = np.einsum("bhkv,bhk->bhv", state, r[:, i])
    mean = o.mean(-1, keepdims=True)
    o = (o - mean) / np.sqrt(((o - mean) ** 2).mean(-1, keepdims=True) + size * 1e-5)
    o = o.reshape(b, t, d) * p["m/g_norm_weight"] + p["m/g_norm_bias"]
    o = o + ((r * k * p["m/r_k"]).sum(-1, keepdims=True) * v).reshape(b, t, d)
    return (o * g) @ p["o_proj/w"]


def test_rwkv7_is_the_dplr_recurrence_with_shift_removal_and_bonus():
    f, params, x = rwkv7_case()
    params = rwkv7_params(params)
    p = numpy_params(params)
    assert all(np.abs(p[f"m/{name}"]).min() > 0 for name in ("x_x", "k_k", "k_a", "r_k"))
    expected = rwkv7_numpy(p, np.asarray(x, np.float64))
    got = np.asarray(f.apply(params, x))
    assert np.abs(expected).max() > 0.1  # a working scale
    assert np.abs(got - expected).max() <= 1e-5


def test_rwkv7_starts_as_zoology_does():
    """x_x, k_k, k_a, r_k zero (Zoology's init never reaches them), every Linear N(0, 0.02) with
    zero biases, the GroupNorm's affine 1 and 0."""
    _, params, _ = rwkv7_case()
    p = numpy_params(params)
    for name in ("x_x", "k_k", "k_a", "r_k", "g_norm_bias"):
        assert not p[f"m/{name}"].any(), name
    assert (p["m/g_norm_weight"] == 1).all()
    assert p["m/x_x"].shape == (6, WIDTH) and p["m/r_k"].shape == (HEADS, WIDTH // HEADS)
    assert not any(value.any() for key, value in p.items() if key.endswith("/b"))
    weights = np.concatenate([value.ravel() for key, value in p.items() if key.endswith("/w")])
    assert weights.size > 2000 and abs(weights.std() - 0.02) < 1e-3 and abs(weights.mean()) < 1e-3
    assert "g_lora_up/b" not in p and {"w_lora_up/b", "a_lora_up/b"} <= set(p)


@pytest.mark.parametrize("tokens, chunk", [(37, 8), (16, 16), (5, 16)])
def test_the_chunked_rwkv7_is_the_recurrent_one(tokens, chunk):
    keys = jax.random.split(jax.random.key(tokens), 6)
    r, k, v = (jax.random.normal(key, (2, tokens, 2, 6)) for key in keys[:3])
    w = -math.exp(-0.5) * jax.random.uniform(keys[3], (2, tokens, 2, 6))
    kappa = jax.random.normal(keys[4], (2, tokens, 2, 6))
    kappa = kappa / jnp.linalg.norm(kappa, axis=-1, keepdims=True)
    a = jax.random.uniform(keys[5], (2, tokens, 2, 6))
    chunked = np.asarray(jax.jit(chunked_rwkv7, static_argnames="chunk")(r, w, k, v, -kappa, kappa * a, chunk=chunk))
    assert np.abs(chunked - np.asarray(jax.jit(recurrent_rwkv7)(r, w, k, v, -kappa, kappa * a))).max() <= 1e-5


@pytest.mark.parametrize("tokens, chunk", [(37, 8), (64, 16)])
def test_the_factorised_chunks_are_the_elementwise_ones_at_rwkv7s_decays(tokens, chunk):
    """The mixer's form (e^{G_t − G_s} as e^{G_t} e^{−G_s}, matrix products) against the elementwise
    one and the recurrence, values and gradients, at RWKV-7's decays (w >= −e^{−½})."""
    keys = jax.random.split(jax.random.key(tokens + 1), 7)
    r, k, v = (jax.random.normal(key, (2, tokens, 2, 6)) for key in keys[:3])
    w = -math.exp(-0.5) * jax.random.uniform(keys[3], (2, tokens, 2, 6))
    kappa = jax.random.normal(keys[4], (2, tokens, 2, 6))
    kappa = kappa / jnp.linalg.norm(kappa, axis=-1, keepdims=True)
    a = jax.random.uniform(keys[5], (2, tokens, 2, 6))
    probe = jax.random.normal(keys[6], (2, tokens, 2, 6))
    inputs = (r, w, k, v, -kappa, kappa * a)
    forms = [
        lambda *x: chunked_rwkv7(*x, chunk=chunk, factorised=True),
        lambda *x: chunked_rwkv7(*x, chunk=chunk),
        recurrent_rwkv7,
    ]
    values = [np.asarray(jax.jit(f)(*inputs)) for f in forms]
    grads = [jax.jit(jax.grad(lambda x, f=f: jnp.sum(f(*x) * probe)))(inputs) for f in forms]
    assert np.abs(values[0] - values[2]).max() <= 1e-5 and np.abs(values[0] - values[1]).max() <= 1e-5
    for factorised, elementwise in zip(grads[0], grads[1]):
        assert np.abs(np.asarray(factorised) - np.asarray(elementwise)).max() <= 1e-4


def test_rwkv7_changing_inputs_from_t_on_leaves_every_earlier_output_bit_identical():
    f, params, x = rwkv7_case()
    params = rwkv7_params(params)
    changed = x.at[:, 11:].set(jax.random.normal(jax.random.key(9), (2, TOKENS - 11, WIDTH)))
    before, after = np.asarray(f.apply(params, x)), np.asarray(f.apply(params, changed))
    assert np.array_equal(before[:, :11], after[:, :11])
    assert not np.allclose(before[:, 11:], after[:, 11:], atol=1e-3)


def test_the_chunked_rwkv7_has_the_recurrent_ones_gradients():
    """The chunked form exponentiates only gaps <= 0 (the masked ones are replaced before exp), so
    its gradients stay finite under strong decays (log decay down to −30: a positive gap of the
    masked half would overflow exp), and they are the recurrent form's."""
    keys = jax.random.split(jax.random.key(3), 7)
    r, k, v = (jax.random.normal(key, (1, 21, 2, 4)) for key in keys[:3])
    w = -30.0 * jax.random.uniform(keys[3], (1, 21, 2, 4))
    kappa = jax.random.normal(keys[4], (1, 21, 2, 4))
    kappa = kappa / jnp.linalg.norm(kappa, axis=-1, keepdims=True)
    a = jax.random.uniform(keys[5], (1, 21, 2, 4))
    probe = jax.random.normal(keys[6], (1, 21, 2, 4))
    inputs = (r, w, k, v, -kappa, kappa * a)
    grads = [
        jax.jit(jax.grad(lambda args, form=form: jnp.sum(form(*args, **kw) * probe)))(inputs)
        for form, kw in ((chunked_rwkv7, {"chunk": 8}), (recurrent_rwkv7, {}))
    ]
    for chunked, recurrent in zip(*grads):
        assert np.isfinite(np.asarray(chunked)).all()
        assert np.abs(np.asarray(chunked) - np.asarray(recurrent)).max() <= 1e-4


@pytest.mark.parametrize(
    "options, words",
    [
        ({"decay_low_rank_dim": 0}, "decay_low_rank_dim=0; accepted: an integer >= 1"),
        ({"a_low_rank_dim": True}, "a_low_rank_dim=True; accepted: an integer >= 1"),
        ({"gate_low_rank_dim": 2.5}, "gate_low_rank_dim=2.5; accepted: an integer >= 1"),
        ({"norm_eps": 0}, "norm_eps=0; accepted: a finite number > 0"),
        ({"norm_eps": -1e-5}, "norm_eps=-1e-05; accepted: a finite number > 0"),
        ({"norm_eps": float("nan")}, "norm_eps=nan; accepted: a finite number > 0"),
    ],
)
def test_rwkv7_bad_options_are_one_line(options, words):
    entry = registry("seq_mixer").get("rwkv7")
    with pytest.raises(ValueError) as err:
        entry.build(entry.options(**options), width=WIDTH, num_heads=HEADS)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_rwkv7_declares_its_recurrent_state():
    """Floats per sequence and layer at D = 12, H = 3 (K = 4), T = 23, written out by hand: the
    three 4 × 4 state matrices and the previous token."""
    from src.models.mixers.kit import state_floats

    entry = registry("seq_mixer").get("rwkv7")
    assert entry.build.state_doc == "H·K² + D"
    assert state_floats("rwkv7", entry.default_options(), width=12, num_heads=3, tokens=23) == 3 * 16 + 12
