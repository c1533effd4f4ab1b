"""Metrics that compare a model with GD, shared by training and the analyses (SPEC §5).

  loss          ½ mean (ŷ − y_q)²
  l2_pred_diff  mean |ŷ_TF − ŷ_GD|
  align_cos     mean cos(s_TF, s_GD), s = ∂ŷ/∂x_q ∈ R^d per task
  model_diff    mean ‖s_TF − s_GD‖

Plus the copy analysis of the interleaved model's first layer (SPEC §3).
Shapes: B tasks, N pairs, d input dim, T tokens, D width.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from src.data import Tasks
from src.transformer import Model


class Reference(NamedTuple):
    """GD's answers on a fixed set of tasks."""
    prediction: jax.Array   # [B]
    sensitivity: jax.Array  # [B, d]


def loss(prediction: jax.Array, target: jax.Array) -> jax.Array:
    return 0.5 * jnp.mean((prediction - target) ** 2)


def predictions_and_sensitivities(model: Model, params, tasks: Tasks) -> tuple[jax.Array, jax.Array]:
    """ŷ [B] and s = ∂ŷ/∂x_q [B, d]. Tasks are independent, so the gradient of Σ_b ŷ_b
    with respect to query_x holds every task's own sensitivity."""
    def total(query_x):
        prediction = model.predict(params, tasks._replace(query_x=query_x))
        return jnp.sum(prediction), prediction
    sensitivity, prediction = jax.grad(total, has_aux=True)(tasks.query_x)
    return prediction, sensitivity


def make_scorer(model: Model):
    """jitted (params, tasks, reference) -> {eval_loss, gd_loss, align_cos, l2_pred_diff,
    model_diff} as floats: the scores logged during training and written by the analyses."""
    @jax.jit
    def scores(params, tasks: Tasks, reference: Reference):
        prediction, sensitivity = predictions_and_sensitivities(model, params, tasks)
        return alignment(prediction, sensitivity, reference, tasks.query_y)

    return lambda params, tasks, reference: {k: float(v) for k, v in
                                             scores(params, tasks, reference).items()}


def alignment(prediction, sensitivity, reference: Reference, target) -> dict[str, jax.Array]:
    """Loss and alignment of a model's answers with GD's on the same tasks."""
    dot = jnp.sum(sensitivity * reference.sensitivity, axis=-1)
    norms = jnp.linalg.norm(sensitivity, axis=-1) * jnp.linalg.norm(reference.sensitivity, axis=-1)
    return {
        "eval_loss": loss(prediction, target),
        "gd_loss": loss(reference.prediction, target),
        "align_cos": jnp.mean(dot / jnp.maximum(norms, 1e-30)),
        "l2_pred_diff": jnp.mean(jnp.abs(prediction - reference.prediction)),
        "model_diff": jnp.mean(jnp.linalg.norm(sensitivity - reference.sensitivity, axis=-1)),
    }


def first_layer_jacobian_norms(model: Model, params, tokens: jax.Array) -> jax.Array:
    """M[j, k] = mean over tasks of ‖∂(layer-1 output at token j)/∂(input token k)‖_F
    for the S context tokens: [S, S]. tokens: [B, T, D]."""
    num_context = tokens.shape[1] - 1

    def layer_one(single):  # [T, D] -> [S, D]
        out = model.apply(params, single[None], return_layer_outputs=True).layer_outputs[0]
        return out[0, :num_context]

    jac = jax.vmap(jax.jacfwd(layer_one))(tokens)            # [B, S, D, T, D]
    norms = jnp.sqrt(jnp.sum(jac ** 2, axis=(2, 4)))[..., :num_context]  # [B, S, S]
    return jnp.mean(norms, axis=0)


def copy_summary(jacobian_norms: jax.Array) -> dict[str, jax.Array]:
    """Own / next / previous / other-token sensitivities from M [S, S]."""
    s = jacobian_norms.shape[0]
    eye = jnp.eye(s, dtype=bool)
    nxt = jnp.eye(s, k=1, dtype=bool)   # (j, j+1)
    prv = jnp.eye(s, k=-1, dtype=bool)  # (j, j-1)
    other = ~(eye | nxt | prv)
    mean_where = lambda m: jnp.sum(jnp.where(m, jacobian_norms, 0.0)) / jnp.sum(m)
    return {"copy_own": mean_where(eye), "copy_next": mean_where(nxt),
            "copy_prev": mean_where(prv), "copy_other": mean_where(other)}
