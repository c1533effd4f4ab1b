"""In-context linear regression with uniform inputs, the task of von Oswald et al. (SPEC §1).

One task: w ~ N(0, s² I_d), N context pairs x_i ~ U(−α·a/2, α·a/2)^d, y_i = w·x_i, and a
query x_q with target y_q = w·x_q (no label noise). Pure, jittable functions of a PRNG key
and static sizes; `alpha` scales the input range for out-of-distribution tests (SPEC §6).

Glossary of shapes: B tasks, N context pairs, d input dimension.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from src.config import TaskConfig
from src.registry import registry


class Tasks(NamedTuple):
    """A batch of in-context tasks in von Oswald et al.'s form: N context pairs and a query (the
    same prompts as a pair batch, src.tasks.garg.RegressionBatch: query_tasks / pair_batch)."""

    context_x: jax.Array  # [B, N, d]
    context_y: jax.Array  # [B, N]
    query_x: jax.Array  # [B, d]
    query_y: jax.Array  # [B]
    w: jax.Array | None = None  # [B, d] the task vectors; None where a task has none (src/tasks/nonlinear.py)


def sample_tasks(key: jax.Array, batch_size: int, task: TaskConfig, alpha: float = 1.0) -> Tasks:
    """Draw B tasks: w ~ N(0, s^2 I), x ~ U(-alpha*a/2, alpha*a/2)^d, y = w.x (no noise)."""
    key_w, key_x, key_q = jax.random.split(key, 3)
    n, d = task.num_context, task.d
    half = alpha * task.input_range / 2.0
    w = jax.random.normal(key_w, (batch_size, d)) * task.weight_scale
    context_x = jax.random.uniform(key_x, (batch_size, n, d), minval=-half, maxval=half)
    query_x = jax.random.uniform(key_q, (batch_size, d), minval=-half, maxval=half)
    context_y = jnp.einsum("bnd,bd->bn", context_x, w)
    query_y = jnp.einsum("bd,bd->b", query_x, w)
    return Tasks(context_x, context_y, query_x, query_y, w)


def with_task_vectors(tasks: Tasks, w: jax.Array) -> Tasks:
    """`tasks` with task vectors w [B, d] in place of theirs, labels y = w·x recomputed."""
    return Tasks(
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


def take_tasks(tasks: Tasks, index: slice | np.ndarray) -> Tasks:
    """The sub-batch `index` of every field."""
    return Tasks(*(None if field is None else field[index] for field in tasks))


def empty_tasks(task: TaskConfig) -> Tasks:
    """One all-zero task of the right shapes (to initialise a model)."""
    n, d = task.num_context, task.d
    z = jnp.zeros
    return Tasks(z((1, n, d)), z((1, n)), z((1, d)), z((1,)), z((1, d)))


@registry("task").register(
    "uniform_regression", TaskConfig, doc="von Oswald et al.: x ~ U(-a/2, a/2)^d, w ~ N(0, s^2 I), y = w.x"
)
def build_uniform_regression(options: TaskConfig) -> Callable[..., Tasks]:
    """(key, batch_size, alpha=1) -> Tasks for this task's sizes."""
    return lambda key, batch_size, alpha=1.0: sample_tasks(key, batch_size, options, alpha)
