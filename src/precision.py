"""How a training step's forward pass computes (`train.precision`): a wrapper of a model's
apply(params, state, *inputs) -> out that returns float32 outputs in every case.

  float32   full float32 matrix passes (src/__init__.py sets "highest"): every recorded run
  tf32      matrix passes in TF32 on GPUs (10-bit mantissa products, float32 sums); the same as
            float32 on a CPU, whose dots ignore the precision
  bfloat16  parameters and inputs cast to bfloat16 for the pass (softmax in float32), the output
            back to float32; the parameters, their gradients and the optimizer's moments stay
            float32 (the cast's transpose returns float32 gradients)

Evaluation always runs the model in float32 (the analyses read the float32 parameters).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp


def _tf32(apply: Callable) -> Callable:
    def forward(params, state, *inputs):
        with jax.default_matmul_precision("tensorfloat32"):
            return apply(params, state, *inputs)

    return forward


def _bfloat16(apply: Callable) -> Callable:
    def forward(params, state, *inputs):
        low = jax.tree_util.tree_map(lambda p: p.astype(jnp.bfloat16), params)
        cast = [x.astype(jnp.bfloat16) if jnp.issubdtype(x.dtype, jnp.floating) else x for x in inputs]
        return apply(low, state, *cast).astype(jnp.float32)

    return forward


# train.precision -> (apply -> the training forward pass)
PRECISIONS: dict[str, Callable[[Callable], Callable]] = {
    "float32": lambda apply: apply,
    "tf32": _tf32,
    "bfloat16": _bfloat16,
}
