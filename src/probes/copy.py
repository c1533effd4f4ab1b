"""The copy probe of the interleaved two-layer model (SPEC §3): how much each first-layer
output token depends on its own input token, the next one, the previous one, and the rest.

  M[j, k] = mean over tasks of ‖∂(layer-1 output at token j)/∂(input token k)‖_F
  copy_own / copy_next / copy_prev / copy_other = mean of M on the diagonal / (j, j+1) /
  (j, j-1) / everywhere else, over the S context tokens.

After training, the next-token term dominates: each x token has copied its ȳ partner.
Registry "probe" entry `copy`: it applies to layouts with two tokens per pair and >= 2 layers.
Shapes: B tasks, T tokens, S = T-1 context tokens, D width.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from src.gd_paper.models.layouts import layout_of, make_tokens
from src.registry import registry
from src.tasks.pairs import PairPrompt

COPY_ANALYSIS_TASKS = 64  # eval tasks for the first-layer Jacobian (~0.25 s per log point)


def first_layer_jacobian_norms(model, params, tokens: jax.Array) -> jax.Array:
    """M [S, S] (see the module docstring) for tokens [B, T, D]."""
    num_context = tokens.shape[1] - 1

    def layer_one(single):  # [T, D] -> [S, D]
        out = model.apply(params, single[None], return_layer_outputs=True).layer_outputs[0]
        return out[0, :num_context]

    jac = jax.vmap(jax.jacfwd(layer_one))(tokens)  # [B, S, D, T, D]
    norms = jnp.sqrt(jnp.sum(jac**2, axis=(2, 4)))[..., :num_context]  # [B, S, S]
    return jnp.mean(norms, axis=0)


def copy_summary(jacobian_norms: jax.Array) -> dict[str, jax.Array]:
    """Own / next / previous / other-token sensitivities from M [S, S]."""
    s = jacobian_norms.shape[0]
    eye = jnp.eye(s, dtype=bool)
    nxt = jnp.eye(s, k=1, dtype=bool)  # (j, j+1)
    prv = jnp.eye(s, k=-1, dtype=bool)  # (j, j-1)
    other = ~(eye | nxt | prv)
    mean_where = lambda m: jnp.sum(jnp.where(m, jacobian_norms, 0.0)) / jnp.sum(m)
    return {
        "copy_own": mean_where(eye),
        "copy_next": mean_where(nxt),
        "copy_prev": mean_where(prv),
        "copy_other": mean_where(other),
    }


def _applies(settings) -> bool:
    return layout_of(settings.model).tokens_per_pair == 2 and settings.model.num_layers > 1


@registry("probe").register(
    "copy", applies=_applies, doc="first-layer own/next/prev/other-token sensitivities (SPEC §3)"
)
def build_copy_probe(options, model) -> Callable[[object, PairPrompt], dict[str, float]]:
    """(params, eval tasks) -> {copy_own, copy_next, copy_prev, copy_other} on the first
    COPY_ANALYSIS_TASKS eval tasks."""

    @jax.jit
    def scores(params, tasks):
        return copy_summary(first_layer_jacobian_norms(model, params, make_tokens(tasks, model.config)))

    def probe(params, tasks: PairPrompt) -> dict[str, float]:
        subset = tasks.first(COPY_ANALYSIS_TASKS)
        return {k: float(v) for k, v in scores(params, subset).items()}

    return probe
