"""Finite pools of training data, as Garg et al.'s and limits_of_icl's configs spell them
(`training.num_tasks`, `training.num_training_examples`) and as Raventós et al. (2023) vary them:

  num_tasks M              M task parameters drawn once (the task vectors w of the regression
                           tasks of src/tasks/garg.py, and affine_regression's bias); every prompt
                           takes one of them, its inputs and noise fresh
  num_training_examples N  N whole prompts drawn once; every training prompt is one of them

A batch takes B members: the first B of a fresh permutation when the pool holds at least B (Garg's
`randperm(M)[:B]`, every member at most once a batch), else B independent uniform draws
(Raventós et al.'s pools of 2, 4, ... tasks, smaller than a batch). Member i of a pool is drawn
from key i of `pool_keys(seed, size)`: the pool is a pure function of the run's seed. Only the
training batches draw from the pool; evaluation draws fresh tasks, as in the originals. The
pools serve the GPT-2 family (`pooled`) and von Oswald et al.'s system (`pooled_tasks`).
Seeds with a pool train one at a time (the pool is drawn from each run's seed outside the
program that src/together.py batches over seeds).

Glossary: B prompts in a batch, M / N pool size.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from src.bounds import RANGES
from src.settings import require, require_int

POOL_TAG = 3  # the pool's key is fold_in(key(seed), POOL_TAG) (1: the training batches)
# the tasks whose samplers take a task key per prompt (src/tasks/garg.py's make_sampler)
TASK_POOL_TASKS = (
    "linear_regression",
    "sparse_linear_regression",
    "noisy_linear_regression",
    "linear_classification",
    "quadratic_regression",
    "uniform_linear_regression",
    "affine_regression",
    "outlier_regression",
)


def check_pool(
    prefix: str, num_tasks, num_training_examples, task_name: str, pool_tasks: tuple[str, ...] = TASK_POOL_TASKS
) -> None:
    """Sizes >= 0, one pool at most, a pool of tasks only for one of `pool_tasks` (SettingsError,
    one line, naming `prefix`num_tasks ...)."""
    top = RANGES["pool"][1]  # a pool's keys and its permutation each step: int32 indices, memory
    require_int(f"{prefix}num_tasks", num_tasks, 0, top)
    require_int(f"{prefix}num_training_examples", num_training_examples, 0, top)
    require(
        not (num_tasks and num_training_examples),
        f"{prefix}num_training_examples",
        num_training_examples,
        f"0 with {prefix}num_tasks={num_tasks} (one pool: of tasks or of prompts)",
    )
    if num_tasks:
        require(
            task_name in pool_tasks,
            f"{prefix}num_tasks",
            num_tasks,
            f"0 for the task {task_name!r} (a pool of tasks applies to {', '.join(pool_tasks)}; "
            f"{prefix}num_training_examples pools whole prompts of any task)",
        )


def pool_keys(seed: int, size: int) -> jax.Array:
    """[size] keys: member i of the pool is drawn from key i."""
    return jax.random.split(jax.random.fold_in(jax.random.key(seed), POOL_TAG), size)


def members(key, pool_size: int, batch_size: int) -> jax.Array:
    """[B] pool indices (module docstring: without replacement when the pool holds a batch)."""
    if pool_size >= batch_size:
        return jax.random.permutation(key, pool_size)[:batch_size]
    return jax.random.randint(key, (batch_size,), 0, pool_size)


def chosen(pool, key, batch_size: int):
    """The B members of `pool` [M, ...] (keys or task vectors) that the batch at `key` takes."""
    return pool[members(jax.random.fold_in(key, POOL_TAG), pool.shape[0], batch_size)]


def stacked(draw_one, keys):
    """One prompt per key, `draw_one(key)` a batch of one, stacked into a batch of len(keys)."""
    rows = jax.vmap(draw_one)(keys)
    return jax.tree_util.tree_map(lambda a: a[:, 0] if a.ndim >= 2 else a[0], rows)


def pooled(sample, seed: int, num_tasks: int = 0, num_training_examples: int = 0):
    """The sampler `sample(key, batch_size, dims, points)` with its training prompts drawn from a
    pool (module docstring); `sample` itself when both sizes are 0."""
    if num_tasks:
        keys = pool_keys(seed, num_tasks)

        def from_task_pool(key, batch_size, dims, points, alpha=1.0):
            return sample(key, batch_size, dims, points, alpha, task_keys=chosen(keys, key, batch_size))

        return from_task_pool
    if num_training_examples:
        keys = pool_keys(seed, num_training_examples)

        def from_prompt_pool(key, batch_size, dims, points, alpha=1.0):
            return stacked(lambda k: sample(k, 1, dims, points, alpha), chosen(keys, key, batch_size))

        return from_prompt_pool
    return sample


def pooled_tasks(sample, seed: int, num_tasks: int = 0, num_training_examples: int = 0):
    """The same pools for von Oswald et al.'s sampler `sample(key, batch_size, alpha=1) -> PairPrompt`
    (src/tasks/regression.py): member i of a pool of tasks is the task vector w of
    `sample(key i, 1)`, and a batch takes fresh inputs with its members' vectors (y = w·x
    recomputed); a pool of prompts holds whole prompts. `sample` itself when both sizes are 0."""
    from src.tasks.regression import with_task_vectors

    if num_tasks:
        vectors = jax.vmap(lambda k: sample(k, 1).w[0])(pool_keys(seed, num_tasks))  # [M, d]

        def from_task_pool(key, batch_size, alpha=1.0):
            return with_task_vectors(sample(key, batch_size, alpha), chosen(vectors, key, batch_size))

        return from_task_pool
    if num_training_examples:
        keys = pool_keys(seed, num_training_examples)

        def from_prompt_pool(key, batch_size, alpha=1.0):
            return stacked(lambda k: sample(k, 1, alpha), chosen(keys, key, batch_size))

        return from_prompt_pool
    return sample


def task_pool(sample, seed: int, num_tasks: int, dims: int, points: int) -> jax.Array:
    """The pool's task vectors [M, d] (for the Bayes-optimal baseline over the pool, dMMSE)."""
    batch = sample(jax.random.key(0), num_tasks, dims, points, 1.0, task_keys=pool_keys(seed, num_tasks))
    return batch.w


def distinct_rows(a) -> int:
    """How many distinct rows an array [R, ...] holds (a pool's test)."""
    flat = jnp.reshape(jnp.asarray(a), (a.shape[0], -1))
    return len({tuple(row) for row in flat.tolist()})
