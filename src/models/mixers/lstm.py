"""The LSTM (Hochreiter & Schmidhuber 1997), registry "seq_mixer" `lstm`: one recurrent layer
x [B, T, D] -> h [B, T, D], the recurrent model Garg et al. (2022) set beside the transformer.

    gates_t = x_t W_x + b_x + h_{t−1} W_h + b_h,  split into i, f, g, o  (each [B, D])
    c_t = σ(f) ⊙ c_{t−1} + σ(i) ⊙ tanh(g)        h_t = σ(o) ⊙ tanh(c_t)      (h_0 = c_0 = 0)

PyTorch's nn.LSTM in every convention a trained model would notice: the gate order i, f, g, o,
two biases, every weight and bias drawn from U(−1/√D, 1/√D), no forget-gate offset (Haiku's
hk.LSTM orders i, g, f, o and adds 1 to the forget gate's bias). The input's share of the gates
is one product over all tokens; the recurrence is a lax.scan over T.

The `lstm` preset (src/models/sequence_presets.py) stacks n_layer of these with no residual, no norm and
no position encoding between the read-in and the read-out, as torch's nn.LSTM(num_layers) does.
State per sequence and layer: h and c, 2·D floats.

Glossary: B batch, T tokens, D width.
"""

from __future__ import annotations

import math

import haiku as hk
import jax
import jax.numpy as jnp

from src.models.mixers.kit import register_mixer
from src.registry import NoOptions


def lstm_scan(x_gates, w_h, b_h):
    """x_gates [B, T, 4D] (the input's share of the gates, its bias included), w_h [D, 4D],
    b_h [4D] -> h [B, T, D]."""
    b, _, four_d = x_gates.shape
    d = four_d // 4

    def step(carry, gates_x):
        h, c = carry
        i, f, g, o = jnp.split(gates_x + h @ w_h + b_h, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    zeros = jnp.zeros((b, d), x_gates.dtype)
    _, hs = jax.lax.scan(step, (zeros, zeros), jnp.moveaxis(x_gates, 1, 0))
    return jnp.moveaxis(hs, 0, 1)


class LSTM(hk.Module):
    """One LSTM layer of width D: x [B, T, D] -> h [B, T, D]."""

    def __call__(self, x):
        d = x.shape[-1]
        init = hk.initializers.RandomUniform(-1.0 / math.sqrt(d), 1.0 / math.sqrt(d))
        w_x = hk.get_parameter("w_x", [d, 4 * d], x.dtype, init)
        b_x = hk.get_parameter("b_x", [4 * d], x.dtype, init)
        w_h = hk.get_parameter("w_h", [d, 4 * d], x.dtype, init)
        b_h = hk.get_parameter("b_h", [4 * d], x.dtype, init)
        x_gates = (x.reshape(-1, d) @ w_x + b_x).reshape(*x.shape[:-1], 4 * d)
        return lstm_scan(x_gates, w_h, b_h)


register_mixer(
    "lstm",
    NoOptions,
    "an LSTM layer (PyTorch's gates and init; Garg et al.'s recurrent model)",
    lambda o, h, n, p: LSTM(name=n),
    state=lambda o, d, h, t: 2 * d,
    state_doc="2·D (h and c)",
)
