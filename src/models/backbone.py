"""The GPT-2-style in-context learner of Garg et al. (2022), with a pluggable sequence mixer:
registry "family" entry `gpt2`.

    read-in   Linear(d -> D) of every token (x_i, and (y_i, 0, ..., 0))
    + a position encoding (registry "position"; default: learned absolute [n_positions·2, D],
      others act inside softmax attention: rope, alibi, fire, yarn, ...)
    n_layer pre-LayerNorm blocks:  h += mixer(LN(h));  h += MLP(LN(h))   (GELU, hidden 4D)
    final LN, read-out Linear(D -> 1) at every x token: ŷ_i predicts y_i from pairs < i

The block asks its config for its sequence mixer (registry "seq_mixer", by name with
options); it never branches on the name.

Glossary: B batch, n pairs, d input dim, T = 2n tokens, D width (n_embd), H heads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp

from src.registry import Choice, registry
from src.settings import choice_field


@dataclass(frozen=True)
class GPT2Config:
    n_dims: int = 5                 # d
    n_embd: int = 64                # D
    n_head: int = 4                 # H
    n_layer: int = 3
    n_positions: int = 11           # pairs the position table covers (tokens: 2 n_positions)
    mixer: Choice = choice_field("seq_mixer", "softmax_causal")
    position: Choice = choice_field("position", "learned")

    def encoding(self):
        """The position encoding (src/models/positions.py); trained length 2 n_positions tokens."""
        entry = registry("position").get(self.position.name)
        return entry.build(self.position.options, trained_tokens=2 * self.n_positions)


def interleave(xs: jax.Array, ys: jax.Array) -> jax.Array:
    """x_1, (y_1, 0, ...), x_2, ...: xs [B, n, d], ys [B, n] -> tokens [B, 2n, d]."""
    b, n, d = xs.shape
    y_tokens = jnp.zeros_like(xs).at[..., 0].set(ys)
    return jnp.stack([xs, y_tokens], axis=2).reshape(b, 2 * n, d)


class Block(hk.Module):
    def __init__(self, config: GPT2Config, name: str | None = None):
        super().__init__(name=name)
        self.config = config

    def __call__(self, h, position=None):
        c = self.config
        entry = registry("seq_mixer").get(c.mixer.name)
        mixer = entry.build(c.mixer.options, width=c.n_embd, num_heads=c.n_head, position=position,
                            name="mixer")
        h = h + mixer(hk.LayerNorm(-1, True, True, name="ln_mixer")(h))
        hidden = jax.nn.gelu(hk.Linear(4 * c.n_embd, name="mlp_in")(
            hk.LayerNorm(-1, True, True, name="ln_mlp")(h)))
        return h + hk.Linear(c.n_embd, name="mlp_out")(hidden)


class GPT2(hk.Module):
    def __init__(self, config: GPT2Config, name: str = "gpt2"):
        super().__init__(name=name)
        self.config = config

    def __call__(self, xs, ys):
        """xs [B, n, d], ys [B, n] -> predictions [B, n] (ŷ_i from the pairs before i)."""
        c = self.config
        tokens = interleave(xs, ys)                                   # [B, 2n, d]
        t = tokens.shape[1]
        position = c.encoding()
        limit = position.max_tokens()
        if limit is not None and t > limit:
            raise ValueError(f"{t // 2} points need n_positions >= {t // 2}; the model has "
                             f"{c.n_positions} (its learned position table cannot index past them)")
        h = hk.Linear(c.n_embd, name="read_in")(tokens)
        absolute = position.absolute(t, c.n_embd)                      # [T, D] or None
        if absolute is not None:
            h = h + absolute
        for layer in range(c.n_layer):
            h = Block(c, name=f"block_{layer}")(h, position)
        h = hk.LayerNorm(-1, True, True, name="ln_final")(h)
        return hk.Linear(1, name="read_out")(h)[:, 0::2, 0]        # at the x tokens


class SequenceModel(NamedTuple):
    """Pure functions: init(key, xs, ys) -> (params, state); apply(params, state, xs, ys) -> ŷ."""
    config: Any
    init: Callable
    apply: Callable


@registry("family").register("gpt2", GPT2Config,
                             doc="Garg et al.: interleaved x/y tokens, learned positions, pre-LN "
                                 "blocks (mixer + GELU MLP), read-out at every x token")
def build_gpt2(config: GPT2Config) -> SequenceModel:
    transformed = hk.without_apply_rng(hk.transform_with_state(
        lambda xs, ys: GPT2(config)(xs, ys)))

    def apply(params, state, xs, ys):
        return transformed.apply(params, state, xs, ys)[0]
    return SequenceModel(config, transformed.init, apply)
