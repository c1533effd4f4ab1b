"""Seed 001's state mixers (registry "state_mixer"): the per-token network of a block,
x [B, T, D] -> [B, T, D].

  mlp     W₂ GELU(W₁ x), hidden 4D
  glu     W₃ (σ(W₁ x) ⊙ W₂ x), hidden 4D (sigmoid-gated linear unit)
  swiglu  W₃ (swish(W₁ x) ⊙ W₂ x), hidden ⌊8D/3⌋ (about the parameters of the 4D MLP)

Glossary: B batch, T tokens, D width.
"""
from __future__ import annotations

import haiku as hk
import jax

from src.registry import NoOptions, registry

STATE_MIXERS = registry("state_mixer")


def _mlp(x):
    width = x.shape[-1]
    return hk.Linear(width, name="down")(jax.nn.gelu(hk.Linear(4 * width, name="up")(x)))


def _gated(activation, hidden_of):
    def mix(x):
        width = x.shape[-1]
        hidden = hidden_of(width)
        gate = activation(hk.Linear(hidden, name="gate")(x))
        return hk.Linear(width, name="down")(gate * hk.Linear(hidden, name="up")(x))
    return mix


STATE_MIXERS.register("mlp", NoOptions, doc="GELU MLP, hidden 4D")(lambda options: _mlp)
STATE_MIXERS.register("glu", NoOptions, doc="sigmoid-gated linear unit, hidden 4D")(
    lambda options: _gated(jax.nn.sigmoid, lambda d: 4 * d))
STATE_MIXERS.register("swiglu", NoOptions, doc="swish-gated linear unit, hidden 8D/3")(
    lambda options: _gated(jax.nn.swish, lambda d: 8 * d // 3))
