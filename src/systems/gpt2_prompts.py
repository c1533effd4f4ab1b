"""The prompts of system `gpt2` (src/systems/gpt2.py) and their sizes: the task's sampler at the
curriculum's end, the fixed eval set (eval_seed), src/bounds' memory estimate of a run (bytes) and
the blocks of prompts evaluated at once (src/batched.py). `settings`: a GPT2Settings.
Shapes: E eval prompts, n points, d dims.
"""

from __future__ import annotations

import jax

from src.batched import block_rows, in_blocks
from src.bounds import FLOAT_BYTES, forward_bytes, training_bytes
from src.registry import registry
from src.tasks.pairs import PairPrompt


def sampler(settings, n_points: int | None = None):
    c = settings.curriculum
    return (
        registry("task")
        .get(settings.task.name)
        .build(settings.task.options, n_points=n_points or c.points.end, n_dims=c.dims.end)
    )


def eval_batch(settings, n_points: int | None = None, alpha: float = 1.0) -> PairPrompt:
    """The fixed eval tasks at the curriculum's end (more points for a length test)."""
    c = settings.curriculum
    points = n_points or c.points.end
    return jax.jit(lambda key: sampler(settings, points)(key, settings.train.eval_size, c.dims.end, points, alpha))(
        jax.random.key(settings.train.eval_seed)
    )


def run_bytes(settings) -> int:
    """src/bounds' over-estimate of a run's memory: training (attention's scores and weights, and
    the state sublayer's hidden width), one block of eval_rows prompts (src/batched.py) and the
    eval set in full."""
    m, tr, c = settings.model, settings.train, settings.curriculum
    hidden = getattr(m.state_mixer.options, "hidden_ratio", 0.0) or 0.0
    return training_bytes(
        batch_size=tr.batch_size,
        eval_size=eval_rows(settings),
        tokens=max(m.max_tokens, 2 * c.points.end),
        width=m.width,
        layers=m.n_layer,
        heads=m.n_head,
        hidden_ratio=hidden,
        score_copies=2,
    ) + prompt_bytes(tr.eval_size, c.points.end, c.dims.end)


def prompt_bytes(tasks: int, n_points: int, n_dims: int) -> int:
    """Bytes of a PairPrompt of `tasks` prompts: xs, ys, weights and the task vectors."""
    return FLOAT_BYTES * tasks * (n_points * (n_dims + 2) + n_dims)


def eval_rows(settings, n_points: int | None = None, tasks: int | None = None, keep_attention: bool = False) -> int:
    """Prompts of `n_points` (default: the curriculum's end) evaluated at once: as many as fit in
    src.bounds.EVAL_BLOCK_BYTES by the forward pass's estimate, at most `tasks` (default: eval_size)."""
    m = settings.model
    points = n_points or settings.curriculum.points.end
    per_row = forward_bytes(
        tokens=2 * points, width=m.width, layers=m.n_layer, heads=m.n_head, keep_attention=keep_attention
    )
    return block_rows(per_row, tasks or settings.train.eval_size)


def predictor(settings, model, params, state, n_points: int | None = None, tasks: int | None = None):
    """predict(prompt: PairPrompt of E prompts of n points) -> [E, n]: the model's predictions, computed
    in blocks of `eval_rows` prompts (the same numbers as one batch)."""
    apply = jax.jit(model.apply)
    return in_blocks(lambda prompt: apply(params, state, prompt.xs, prompt.ys), eval_rows(settings, n_points, tasks))
