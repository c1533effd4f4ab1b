"""The residual stream of a model of the sequence family (src/models/sequence.py), read without
changing what the model computes: what residual-stream probes read (analysis.probes).

Glossary: L layers, B batch, T tokens, D width.
"""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp

from src.models.sequence import Block, SequenceConfig, SequenceModel


def residual_stream(config: SequenceConfig, params, state, *inputs, at: int | None = None) -> jax.Array:
    """[L + 1, B, T, D] (or [L + 1, B, D] at token `at`): the model's residual stream after the
    read-in and position encoding (0), then after each block (before the final norm), read by
    intercepting its blocks; the model computes as in `apply` (no dropout key)."""

    def forward(*xs):
        seen = []

        def keep(next_call, args, kwargs, context):
            out = next_call(*args, **kwargs)
            if isinstance(context.module, Block) and context.method_name == "__call__":
                seen.extend([args[0], out] if not seen else [out])
            return out

        with hk.intercept_methods(keep):
            SequenceModel(config)(*xs)
        return jnp.stack([h if at is None else h[:, at] for h in seen])

    transformed = hk.without_apply_rng(hk.transform_with_state(forward))
    return transformed.apply(params, state, *inputs)[0]
