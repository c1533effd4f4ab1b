"""Seed 001's model (registry "family" entry `lm`): a pre-RMSNorm residual stack whose blocks ask
their config for a sequence mixer (registry "seq_mixer") and a state mixer ("state_mixer").

    tokens  Embed(V, D)(tokens) + learned positions [max_len, D] -> blocks -> RMSNorm ->
            Linear(D -> V): logits [B, T, V] (token tasks: mqar, disjoint_sets)
    pairs   Linear(d -> D) of interleaved x_i, (y_i, 0, …) tokens + learned positions -> blocks
            -> RMSNorm -> Linear(D -> 1) at every x token: ŷ_i from the pairs before i
            [B, n] (boolean and regression tasks)

    block   h += seq_mixer(RMSNorm(h));  h += state_mixer(RMSNorm(h))

Glossary: B batch, T tokens, V vocabulary, D width, n pairs, d input dimension.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import haiku as hk
import jax.numpy as jnp

from src.models.backbone import interleave
from src.registry import Choice, registry
from src.settings import choice_field

INPUTS = ("tokens", "pairs")


@dataclass(frozen=True)
class LMConfig:
    width: int = 128                  # D
    n_layer: int = 2
    n_head: int = 8
    max_len: int = 64                 # tokens the learned position table covers
    vocab_size: int = 8192            # V (tokens input)
    n_dims: int = 5                   # d (pairs input)
    inputs: str = "tokens"            # tokens | pairs: set from the task by the recipe
    seq_mixer: Choice = choice_field("seq_mixer", "softmax_causal")
    state_mixer: Choice = choice_field("state_mixer", "mlp")


class Block(hk.Module):
    def __init__(self, config: LMConfig, name: str | None = None):
        super().__init__(name=name)
        self.config = config

    def __call__(self, h):
        c = self.config
        seq = registry("seq_mixer").get(c.seq_mixer.name).build(
            c.seq_mixer.options, width=c.width, num_heads=c.n_head, name="seq_mixer")
        state = registry("state_mixer").get(c.state_mixer.name).build(c.state_mixer.options)
        h = h + seq(hk.RMSNorm(-1, name="norm_seq")(h))
        with hk.experimental.name_scope("state_mixer"):
            return h + state(hk.RMSNorm(-1, name="norm_state")(h))


class LM(hk.Module):
    def __init__(self, config: LMConfig, name: str = "lm"):
        super().__init__(name=name)
        self.config = config

    def _stack(self, h):
        c = self.config
        t = h.shape[1]
        if t > c.max_len:
            raise ValueError(f"{t} tokens exceed max_len={c.max_len} (the learned position table)")
        table = hk.get_parameter("positions", [c.max_len, c.width], init=hk.initializers.TruncatedNormal(0.02))
        h = h + table[:t]
        for layer in range(c.n_layer):
            h = Block(c, name=f"block_{layer}")(h)
        return hk.RMSNorm(-1, name="norm_final")(h)

    def tokens(self, tokens):
        """tokens [B, T] int -> logits [B, T, V]."""
        c = self.config
        h = hk.Embed(c.vocab_size, c.width, name="embed")(tokens)
        return hk.Linear(c.vocab_size, with_bias=False, name="unembed")(self._stack(h))

    def pairs(self, xs, ys):
        """xs [B, n, d], ys [B, n] -> ŷ [B, n] (ŷ_i from the pairs before i)."""
        h = hk.Linear(self.config.width, name="read_in")(interleave(xs, ys))
        return hk.Linear(1, name="read_out")(self._stack(h))[:, 0::2, 0]


class LMModel(NamedTuple):
    """init(key, *inputs) -> params; apply(params, *inputs) -> logits [B, T, V] or ŷ [B, n]."""
    config: Any
    init: Callable
    apply: Callable


@registry("family").register("lm", LMConfig, doc="seed 001: pre-RMSNorm blocks of a sequence mixer "
                                                  "and a state mixer, token or x/y-pair inputs")
def build_lm(config: LMConfig) -> LMModel:
    if config.inputs not in INPUTS:
        raise ValueError(f"inputs={config.inputs!r} is unknown; accepted: {', '.join(INPUTS)}")
    method = config.inputs
    transformed = hk.without_apply_rng(hk.transform(lambda *a: getattr(LM(config), method)(*a)))
    return LMModel(config, transformed.init, transformed.apply)


def parameter_count(params) -> int:
    return int(sum(jnp.size(p) for group in params.values() for p in group.values()))
