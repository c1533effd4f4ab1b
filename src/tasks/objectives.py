"""Objectives (registry "objective"): how a task's predictions are trained and scored. Every task
names its objective (the `objective` class attribute of its options); code asks the entry
instead of comparing task kinds.

  regression  x/y pairs; loss: squared error; reported: squared error / d per point (the zero
              predictor scores 1 on N(0, I) tasks), lower is better
  sign        x/y pairs with ±1 labels; loss: squared error on the labels (Garg et al.'s
              recipe); reported: the 0/1 error of sign ŷ per point (accuracy = 1 − error)
  token       token sequences; loss: cross-entropy of the next token where scored; reported:
              exact match of the argmax token there (accuracy)
  token_classes  as token, and at every log point the accuracy per class as well (macro: the mean
              over the target tokens present of each one's accuracy, MAD's torchmetrics default)
  markov      in-context Markov chains; loss: cross-entropy of the drawn next token at every
              position; reported: the cross-entropy against the true next-token distribution
              P[x_t] (nats, lower is better), and at every log point the KL divergences from the
              unigram and bigram estimators' predictions to the model's (src/tasks/markov.py)
  query_half_mse   the paper's loss (von Oswald et al.), ½ mean (ŷ − y_q)² at the query; the
              system scores it against one GD step (src/gd_paper/metrics.py)
  query_mse   the training-dynamics study's loss, mean (ŷ − y_q)² at the query over a fixed set

Shapes: B sequences, n points, T tokens, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from src.registry import NoOptions, registry

OBJECTIVES = registry("objective")


class Scored(NamedTuple):
    """One batch scored by an objective (the recipe's evaluation)."""

    loss: jax.Array  # [] the training objective
    score: jax.Array  # [B, P] per position: 1 where right (accuracy) or the error
    counted: jax.Array  # [B, P] 1 where scored


@dataclass(frozen=True)
class Objective:
    name: str
    inputs: str  # what a model reads: "pairs" or "tokens"
    metric: str  # what `score` averages to: "accuracy" | "error"
    describes: str  # the reported number, in words
    continuous_labels: bool = False  # labels are real numbers (noise can be added)
    point_errors: Callable | None = None  # (ŷ [B, n], batch) -> error per point [B, n]
    score: Callable[..., Scored] | None = None  # (model outputs, batch) -> Scored
    extras: Callable[..., dict] | None = None  # (model outputs, batch) -> {name: scalar} logged beside the score

    def mean_point_errors(self, prediction, batch) -> jax.Array:
        """The error per point, mean over tasks: [n]."""
        return jnp.mean(self.point_errors(prediction, batch), axis=0)


def _squared_over_d(prediction, batch):
    return (prediction - batch.ys) ** 2 / batch.dims


def _sign_errors(prediction, batch):
    return (jnp.sign(prediction) != batch.ys).astype(jnp.float32)


def _score_regression(prediction, batch) -> Scored:
    return Scored(jnp.mean((prediction - batch.ys) ** 2), _squared_over_d(prediction, batch), jnp.ones_like(batch.ys))


def _score_sign(prediction, batch) -> Scored:
    return Scored(
        jnp.mean((prediction - batch.ys) ** 2), 1.0 - _sign_errors(prediction, batch), jnp.ones_like(batch.ys)
    )


def _score_tokens(logits, batch) -> Scored:
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, batch.targets)
    weight = batch.scored.astype(jnp.float32)
    loss = jnp.sum(nll * weight) / jnp.maximum(jnp.sum(weight), 1.0)
    correct = (jnp.argmax(logits, -1) == batch.targets).astype(jnp.float32) * weight
    return Scored(loss, correct, weight)


def _score_markov(logits, batch) -> Scored:
    from src.tasks.markov import cross_entropy

    log_q = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    weight = batch.scored.astype(jnp.float32)
    drawn = -jnp.take_along_axis(log_q, batch.targets[..., None], axis=-1)[..., 0]
    loss = jnp.sum(drawn * weight) / jnp.maximum(jnp.sum(weight), 1.0)
    return Scored(loss, cross_entropy(batch.next_probs, log_q) * weight, weight)


def _markov_distances(logits, batch) -> dict:
    """KL(estimator ‖ model), mean over every position, for the unigram and bigram estimators."""
    from src.tasks.markov import ESTIMATORS

    log_q = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    k = logits.shape[-1]
    out = {}
    for name in ("unigram", "bigram"):
        p = ESTIMATORS[name](batch.inputs, k)
        out[f"kl_{name}"] = jnp.mean(jnp.sum(p * (jnp.log(p) - log_q), axis=-1))
    return out


def _macro_accuracy(logits, batch) -> dict:
    """{macro_accuracy}: over the scored positions, each target token's share predicted right,
    averaged over the tokens that are targets somewhere in the batch."""
    weight = batch.scored.astype(jnp.float32).reshape(-1)
    target = batch.targets.reshape(-1)
    right = (jnp.argmax(logits, -1).reshape(-1) == target).astype(jnp.float32) * weight
    classes = logits.shape[-1]
    count = jax.ops.segment_sum(weight, target, classes)
    correct = jax.ops.segment_sum(right, target, classes)
    present = count > 0
    per_class = jnp.where(present, correct / jnp.maximum(count, 1.0), 0.0)
    return {"macro_accuracy": jnp.sum(per_class) / jnp.maximum(jnp.sum(present), 1)}


class RegressionObjective(Objective):
    def mean_point_errors(self, prediction, batch) -> jax.Array:
        # this operation order keeps the GPT-2 runs' numbers as they were recorded
        return jnp.mean((prediction - batch.ys) ** 2, axis=0) / batch.dims


OBJECTIVES.register("regression", NoOptions, doc="squared error; reported: squared error / d")(
    lambda options: RegressionObjective(
        "regression", "pairs", "error", "squared error / d", True, _squared_over_d, _score_regression
    )
)
OBJECTIVES.register("sign", NoOptions, doc="squared error on ±1 labels; reported: accuracy of sign ŷ")(
    lambda options: Objective(
        "sign", "pairs", "accuracy", "error rate (1 − accuracy of sign ŷ)", False, _sign_errors, _score_sign
    )
)
OBJECTIVES.register("token", NoOptions, doc="next-token cross-entropy; reported: exact-match accuracy")(
    lambda options: Objective(
        "token", "tokens", "accuracy", "exact-match accuracy of the argmax token", False, None, _score_tokens
    )
)
OBJECTIVES.register(
    "token_classes", NoOptions, doc="next-token cross-entropy; reported: accuracy per token and per class (MAD)"
)(
    lambda options: Objective(
        "token_classes",
        "tokens",
        "accuracy",
        "exact-match accuracy of the argmax token (per token; per class as macro_accuracy)",
        False,
        None,
        _score_tokens,
        _macro_accuracy,
    )
)
OBJECTIVES.register("markov", NoOptions, doc="cross-entropy against the true next-token distribution (nats)")(
    lambda options: Objective(
        "markov",
        "tokens",
        "cross_entropy",
        "cross-entropy against the true next-token distribution (nats)",
        False,
        None,
        _score_markov,
        _markov_distances,
    )
)
OBJECTIVES.register("query_half_mse", NoOptions, doc="½ mean (ŷ − y_q)² at the query (von Oswald et al.)")(
    lambda options: Objective("query_half_mse", "query", "loss", "½ mean (ŷ − y_q)² at the query", True)
)
OBJECTIVES.register("query_mse", NoOptions, doc="mean (ŷ − y_q)² at the query over a fixed set (Zhang et al.)")(
    lambda options: Objective("query_mse", "fixed_set", "loss", "mean (ŷ − y_q)² at the query", True)
)


def objective_of(task_name: str) -> Objective:
    """The objective a registered task names (UnknownChoice for an unknown task)."""
    return OBJECTIVES.get(objective_name(task_name)).build(None)


def objective_name(task_name: str) -> str:
    return getattr(registry("task").get(task_name).options, "objective", "")


def tasks_for(*inputs: str) -> list[str]:
    """The registered tasks whose objective reads `inputs` (pairs, tokens)."""
    return [
        e.name
        for e in registry("task")
        if getattr(e.options, "objective", None) in OBJECTIVES
        and OBJECTIVES.get(e.options.objective).build(None).inputs in inputs
    ]
