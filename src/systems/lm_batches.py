"""The batches of system `lm` (src/systems/lm.py): the task's sampler (token batches, or the pair
tasks' x/y prompts), what the model reads of a batch, the training loss (over every position, or
over the logits of the scored positions alone: train.logits), a training step's dropout key and
a few eval sequences decoded (examples.json).
`settings`: an LMSettings. Shapes: B batch, T tokens, V vocabulary, κ scored positions per row.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from src.registry import registry
from src.tasks.objectives import objective_of

LOGITS = {"scored": True, "all": False}  # train.logits -> the read-out at the scored positions only
DROPOUT_STREAM = 0x64726F70  # a training step's dropout key: fold_in(fold_in(train key, step), this)


def sampler(settings):
    """(key, batch) -> a batch of the task: TokenBatch, or the pair tasks' PairPrompt (these
    take alpha too: inputs scaled, 1 by default)."""
    if objective_of(settings.task.name).inputs == "tokens":
        return registry("task").get(settings.task.name).build(settings.task.options)
    shape = settings.pairs
    draw = pair_sampler(settings)
    return lambda key, batch, alpha=1.0: draw(key, batch, shape.n_dims, shape.n_points, alpha)


def evaluation_sampler(settings):
    """The eval set's (key, batch) -> batch: the task's own evaluation draw where its options
    give one (`evaluation()`: MAD's recall tasks score only recalled values at test), else the
    training sampler."""
    test = getattr(settings.task.options, "evaluation", None)
    if test is None:
        return sampler(settings)
    return registry("task").get(settings.task.name).build(test())


def pair_sampler(settings, n_points: int | None = None):
    """A pair task's draw(key, batch, d, n, alpha=1.0) -> PairPrompt, built for n_points
    (default: pairs.n_points) of pairs.n_dims."""
    return (
        registry("task")
        .get(settings.task.name)
        .build(settings.task.options, n_points=n_points or settings.pairs.n_points, n_dims=settings.pairs.n_dims)
    )


def model_inputs(batch) -> tuple:
    """What the LM reads of a batch: (tokens,) or (xs, ys)."""
    return (batch.inputs,) if hasattr(batch, "inputs") else (batch.xs, batch.ys)


def scored_positions(batch, count: int) -> jax.Array:
    """[B, count] the scored positions of every row of a token batch, in order (each row scores
    exactly `count`)."""
    return jnp.argsort(~batch.scored, axis=1, stable=True)[:, :count].astype(jnp.int32)


def training_loss(settings, apply, objective):
    """loss(params, batch, rng=None) of the training step: the objective over every position's
    output, or (train.logits = scored, a task that scores a fixed count per row) over the logits
    of the scored positions alone: the same function, the read-out computed on κ of T rows. `rng`:
    the step's dropout key (dropout_key), read by a model with dropout only."""
    count = getattr(settings.task.options, "scored_per_row", None)
    if not LOGITS[settings.train.logits] or count is None:
        return lambda p, batch, rng=None: objective.score(apply(p, *model_inputs(batch), rng=rng), batch).loss

    def loss(p, batch, rng=None):
        positions = scored_positions(batch, count())
        take = lambda a: jnp.take_along_axis(a, positions, axis=1)
        logits = apply(p, batch.inputs, positions=positions, rng=rng)  # [B, κ, V]
        return objective.score(logits, batch._replace(targets=take(batch.targets), scored=take(batch.scored))).loss

    return loss


def dropout_key(train_key: jax.Array, step) -> jax.Array:
    """The dropout masks' key of training step `step`: the step's batch key fold_in(train_key,
    step) folded with DROPOUT_STREAM (a stream of its own, never the batch's draw)."""
    return jax.random.fold_in(jax.random.fold_in(train_key, step), DROPOUT_STREAM)


def decoded_examples(apply, params, batch, count: int = 3) -> list[dict]:
    """A few eval sequences as lists: inputs, targets, which positions are scored, predictions."""
    inputs = model_inputs(batch)
    output = np.asarray(jax.jit(apply)(params, *(a[:count] for a in inputs)))
    examples = []
    for i in range(count):
        if hasattr(batch, "inputs"):
            scored = np.asarray(batch.scored[i])
            examples.append(
                {
                    "inputs": np.asarray(batch.inputs[i]).tolist(),
                    "targets": np.asarray(batch.targets[i]).tolist(),
                    "scored_positions": np.flatnonzero(scored).tolist(),
                    "predicted_at_scored": output[i].argmax(-1)[scored].tolist(),
                }
            )
        else:
            examples.append(
                {
                    "xs": np.asarray(batch.xs[i]).round(4).tolist(),
                    "ys": np.asarray(batch.ys[i]).round(4).tolist(),
                    "scored_positions": list(range(int(batch.ys.shape[1]))),
                    "predictions": output[i].round(4).tolist(),
                }
            )
    return examples
