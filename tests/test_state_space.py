"""The Mamba mixer (src/models/mixers/mamba.py) against an independent float64 NumPy
implementation, step by step: the selective scan in both forms (associative, sequential), the
whole mixer from its parameters, causality, and its use in every preset that takes a mixer."""

from __future__ import annotations

from dataclasses import replace

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.models.sequence import build_sequence
from src.models.sequence_presets import gpt2, llama, lm, mamba
from src.models.mixers.mamba import MambaOptions, selective_scan
from src.registry import choice, registry


def numpy_scan(u, delta, a, b, c, d):
    """h_t = exp(Δ_t a) h_{t−1} + Δ_t u_t b_t, y_t = h_t c_t + d u_t, one position at a time."""
    u, delta, a, b, c, d = (np.asarray(x, np.float64) for x in (u, delta, a, b, c, d))
    batch, t, e = u.shape
    h = np.zeros((batch, e, a.shape[-1]))
    out = np.zeros_like(u)
    for step in range(t):
        h = np.exp(delta[:, step, :, None] * a) * h + (delta[:, step] * u[:, step])[..., None] * b[:, step, None, :]
        out[:, step] = np.einsum("ben,bn->be", h, c[:, step]) + d * u[:, step]
    return out


def scan_inputs(t=150, batch=2, e=6, n=4, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(batch, t, e)),
        np.log1p(np.exp(rng.normal(size=(batch, t, e)))),
        -np.exp(rng.normal(size=(e, n))),
        rng.normal(size=(batch, t, n)) / 2,
        rng.normal(size=(batch, t, n)) / 2,
        rng.normal(size=e),
    )


@pytest.mark.parametrize(
    "form, chunk", [("associative", 64), ("associative", 16), ("associative", 1000), ("sequential", 64)]
)
def test_selective_scan_matches_the_numpy_recurrence(form, chunk):
    """T = 150 is no multiple of the chunk: the padded tail changes nothing before it."""
    inputs = scan_inputs()
    want = numpy_scan(*inputs)
    got = selective_scan(*(jnp.asarray(x, jnp.float32) for x in inputs), form=form, chunk=chunk)
    assert np.max(np.abs(np.asarray(got) - want)) <= 1e-5


def numpy_mamba(params: dict, x: np.ndarray, options: MambaOptions) -> np.ndarray:
    """The whole mixer from its Haiku parameters, in float64 NumPy."""
    p = {k.split("/")[-1]: {n: np.asarray(v, np.float64) for n, v in leaf.items()} for k, leaf in params.items()}
    mix = p["mixer"]
    x = np.asarray(x, np.float64)
    inner = mix["A_log"].shape[0]
    projected = x @ p["in_proj"]["w"]
    u, z = projected[..., :inner], projected[..., inner:]
    k = options.conv_kernel
    padded = np.concatenate([np.zeros((x.shape[0], k - 1, inner)), u], axis=1)
    conv = np.stack([sum(mix["conv_kernel"][j] * padded[:, t + j] for j in range(k)) for t in range(x.shape[1])], 1)
    u = conv + mix["conv_bias"]
    u = u / (1 + np.exp(-u))
    rank = mix["dt_proj_w"].shape[0]
    dbc = u @ p["x_proj"]["w"]
    n = mix["A_log"].shape[1]
    dt, b, c = dbc[..., :rank], dbc[..., rank : rank + n], dbc[..., rank + n :]
    delta = np.log1p(np.exp(dt @ mix["dt_proj_w"] + mix["dt_proj_b"]))
    y = numpy_scan(u, delta, -np.exp(mix["A_log"]), b, c, mix["D"])
    return (y * z / (1 + np.exp(-z))) @ p["out_proj"]["w"]


@pytest.mark.parametrize("scan", ["associative", "sequential"])
def test_mamba_mixer_matches_numpy_and_is_causal(scan):
    options = MambaOptions(state_size=4, scan=scan)
    entry = registry("seq_mixer").get("mamba")
    f = hk.without_apply_rng(hk.transform(lambda x: entry.build(options, width=8, num_heads=1, name="mixer")(x)))
    x = jax.random.normal(jax.random.key(0), (2, 70, 8))
    params = f.init(jax.random.key(1), x)
    out = np.asarray(f.apply(params, x))
    assert np.max(np.abs(out - numpy_mamba(params, np.asarray(x), options))) <= 1e-5
    changed = np.asarray(f.apply(params, x.at[:, 40:].set(3.0)))
    assert np.array_equal(changed[:, :40], out[:, :40])  # nothing before t = 40 moves
    assert np.max(np.abs(changed[:, 40:] - out[:, 40:])) > 1e-3


def test_mamba_initialisation_follows_the_reference():
    entry = registry("seq_mixer").get("mamba")
    f = hk.without_apply_rng(
        hk.transform(lambda x: entry.build(MambaOptions(), width=32, num_heads=1, name="mixer")(x))
    )
    params = f.init(jax.random.key(0), jnp.ones((1, 3, 32)))
    mix = params["mixer"]
    assert mix["A_log"].shape == (64, 16) and np.allclose(np.exp(mix["A_log"][0]), np.arange(1, 17))
    assert np.all(mix["D"] == 1.0) and mix["dt_proj_w"].shape == (2, 64)  # rank ⌈32 / 16⌉
    dt = np.log1p(np.exp(np.asarray(mix["dt_proj_b"])))  # softplus(bias) = Δ
    assert dt.min() >= 1e-3 * 0.999 and dt.max() <= 0.1 * 1.001


@pytest.mark.parametrize(
    "config",
    [
        gpt2(
            n_dims=3,
            n_embd=16,
            n_head=2,
            n_layer=1,
            n_positions=6,
            mixer=choice("seq_mixer", "mamba"),
            position=choice("position", "nope"),
        ),
        replace(
            llama("tiny", n_dims=3, max_tokens=12, width=16, n_head=2, position=choice("position", "nope")),
            seq_mixer=choice("seq_mixer", "mamba"),
        ),
        mamba(n_dims=3, max_tokens=12, width=16, n_layer=2),
    ],
    ids=["gpt2", "llama", "mamba"],
)
def test_mamba_runs_in_every_pairs_preset(config):
    model = build_sequence(config)
    xs, ys = jnp.ones((2, 6, 3)), jnp.ones((2, 6))
    params, state = model.init(jax.random.key(0), xs, ys)
    assert model.apply(params, state, xs, ys).shape == (2, 6)
    assert any("seq_mixer" in name and "A_log" in leaf for name, leaf in params.items())


def test_mamba_in_the_recipe_model():
    model = build_sequence(
        lm(width=16, n_layer=1, n_head=1, max_len=10, vocab_size=12, seq_mixer=choice("seq_mixer", "mamba"))
    )
    tokens = jnp.zeros((2, 10), jnp.int32)
    params, state = model.init(jax.random.key(0), tokens)
    assert model.apply(params, state, tokens).shape == (2, 10, 12)


def test_mamba_options_are_checked_by_name():
    with pytest.raises(Exception, match="scan"):
        MambaOptions(scan="parallel").check()
    with pytest.raises(Exception, match="state_size"):
        MambaOptions(state_size=0).check()
