"""Any registered pair task in von Oswald et al.'s form, so the paper's attention-only models
train and are scored on it: a prompt of n = N + 1 points of d dimensions (the pair task's own
sampler, its options at their defaults), whose first N points are the context and the last the
query (src/tasks/pairs.py). The paper's own task (uniform_regression, options TaskConfig) is
drawn by its sampler as before.

    sample = paper_form_sampler(TaskConfig(name="sparse_parity", d=10, num_context=10))
    tasks = sample(key, batch_size)     # context_x [B, N, d], context_y [B, N], query_x [B, d], query_y [B]

The prompt's `w` holds the pair task's: the task vector of the linear families, the support (0/1) of
a boolean function, the first-layer weights' stand-in of others; only a pool of task vectors reads
it, and the paper's system allows that pool for its own task alone.
"""

from __future__ import annotations

from typing import Callable

import jax

from src.gd_paper.config import TaskConfig
from src.registry import registry
from src.tasks.objectives import tasks_for
from src.tasks.pairs import PairPrompt


def is_paper_task(task: TaskConfig) -> bool:
    """Whether `task` names a task drawn in the paper's form itself (options TaskConfig)."""
    return registry("task").get(task.name).options is TaskConfig


def own_tasks() -> list[str]:
    """The registered tasks drawn in the paper's form itself (options TaskConfig)."""
    return [e.name for e in registry("task") if e.options is TaskConfig]


def paper_tasks() -> list[str]:
    """Every registered task the paper's system trains on: its own and every pair task."""
    own = own_tasks()
    return own + [name for name in tasks_for("pairs") if name not in own]


def paper_form_sampler(task: TaskConfig) -> Callable[..., PairPrompt]:
    """(key, batch_size, alpha=1) -> PairPrompt of `task` (module docstring)."""
    entry = registry("task").get(task.name)
    if entry.options is TaskConfig:
        return entry.build(task)
    points = task.num_context + 1
    draw = entry.build(entry.default_options(), n_points=points, n_dims=task.d)

    def sample(key: jax.Array, batch_size: int, alpha: float = 1.0) -> PairPrompt:
        return draw(key, batch_size, task.d, points, alpha)

    return sample
