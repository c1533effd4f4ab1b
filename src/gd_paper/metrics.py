"""Metrics that compare a model with GD, shared by training and the analyses (SPEC §5).

  loss          ½ mean (ŷ − y_q)²   (the paper's loss; the one definition in the project)
  l2_pred_diff  mean |ŷ_TF − ŷ_GD|
  align_cos     mean cos(s_TF, s_GD), s = ∂ŷ/∂x_q ∈ R^d per task
  model_diff    mean ‖s_TF − s_GD‖

Shapes: B tasks, N pairs, d input dim.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from src.tasks.pairs import PairPrompt


class Reference(NamedTuple):
    """A reference predictor's answers (e.g. GD's) on a fixed set of tasks."""

    prediction: jax.Array  # [B]
    sensitivity: jax.Array  # [B, d]


def loss(prediction: jax.Array, target: jax.Array) -> jax.Array:
    """The paper's loss, ½ mean (ŷ − y)²."""
    return 0.5 * jnp.mean((prediction - target) ** 2)


def predictions_and_sensitivities(model, params, tasks: PairPrompt) -> tuple[jax.Array, jax.Array]:
    """ŷ [B] and s = ∂ŷ/∂x_q [B, d]. Tasks are independent, so the gradient of Σ_b ŷ_b
    with respect to query_x holds every task's own sensitivity."""

    def total(query_x):
        prediction = model.predict(params, tasks.with_query_x(query_x))
        return jnp.sum(prediction), prediction

    sensitivity, prediction = jax.grad(total, has_aux=True)(tasks.query_x)
    return prediction, sensitivity


def make_scorer(model):
    """jitted (params, tasks, reference) -> {eval_loss, gd_loss, align_cos, l2_pred_diff,
    model_diff} as floats: the scores logged during training and written by the analyses."""

    @jax.jit
    def scores(params, tasks: PairPrompt, reference: Reference):
        prediction, sensitivity = predictions_and_sensitivities(model, params, tasks)
        return alignment(prediction, sensitivity, reference, tasks.query_y)

    return lambda params, tasks, reference: {k: float(v) for k, v in scores(params, tasks, reference).items()}


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
