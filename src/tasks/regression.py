"""In-context linear regression with uniform inputs, the task of von Oswald et al. (SPEC §1).

One task: w ~ N(0, s² I_d), N context pairs x_i ~ U(−α·a/2, α·a/2)^d, y_i = w·x_i, and a
query x_q with target y_q = w·x_q (no label noise). Pure, jittable functions of a PRNG key
and static sizes; `alpha` scales the input range for out-of-distribution tests (SPEC §6).

Glossary of shapes: B tasks, N context pairs, d input dimension.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from src.gd_paper.config import TaskConfig
from src.registry import registry
from src.tasks.pairs import PairPrompt, empty_prompt, query_prompt


def sample_tasks(key: jax.Array, batch_size: int, task: TaskConfig, alpha: float = 1.0) -> PairPrompt:
    """Draw B tasks: w ~ N(0, s^2 I), x ~ U(-alpha*a/2, alpha*a/2)^d, y = w.x (no noise), as prompts
    of N + 1 points, the query last."""
    key_w, key_x, key_q = jax.random.split(key, 3)
    n, d = task.num_context, task.d
    half = alpha * task.input_range / 2.0
    w = jax.random.normal(key_w, (batch_size, d)) * task.weight_scale
    context_x = jax.random.uniform(key_x, (batch_size, n, d), minval=-half, maxval=half)
    query_x = jax.random.uniform(key_q, (batch_size, d), minval=-half, maxval=half)
    context_y = jnp.einsum("bnd,bd->bn", context_x, w)
    query_y = jnp.einsum("bd,bd->b", query_x, w)
    return query_prompt(context_x, context_y, query_x, query_y, w)


def with_task_vectors(tasks: PairPrompt, w: jax.Array) -> PairPrompt:
    """`tasks` with task vectors w [B, d] in place of theirs, labels y = w·x recomputed."""
    return query_prompt(
        tasks.context_x,
        jnp.einsum("bnd,bd->bn", tasks.context_x, w),
        tasks.query_x,
        jnp.einsum("bd,bd->b", tasks.query_x, w),
        w,
    )


def random_pair_inputs(key: jax.Array, shape: tuple[int, ...], task: TaskConfig, alpha: float = 1.0) -> jax.Array:
    """Fresh inputs x' [*shape, d] from the task's input distribution (for random pairs)."""
    half = alpha * task.input_range / 2.0
    return jax.random.uniform(key, (*shape, task.d), minval=-half, maxval=half)


def empty_tasks(task: TaskConfig) -> PairPrompt:
    """One all-zero task of the right shapes (to initialise a model)."""
    return empty_prompt(task.num_context, task.d)


@registry("task").register(
    "uniform_regression", TaskConfig, doc="von Oswald et al.: x ~ U(-a/2, a/2)^d, w ~ N(0, s^2 I), y = w.x"
)
def build_uniform_regression(options: TaskConfig) -> Callable[..., PairPrompt]:
    """(key, batch_size, alpha=1) -> PairPrompt for this task's sizes."""
    return lambda key, batch_size, alpha=1.0: sample_tasks(key, batch_size, options, alpha)
