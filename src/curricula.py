"""Noise, ordering and placement of context pairs (SPEC §7).

Pure, jittable functions over a batch of raw tasks. Noise is applied first,
ordering second, placement last; all act on whole context *pairs* (x_i, y_i),
so they apply unchanged to both token constructions (an interleaved pair is
the x token and its ȳ token). The query is never touched.

Shapes: B tasks, N context pairs, d input dimension.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from src.config import CurriculumConfig, TaskConfig
from src.tasks.paper_form import is_paper_task, paper_form_sampler
from src.tasks.regression import Tasks, random_pair_inputs


class CurriculumOutput(NamedTuple):
    tasks: Tasks
    ordering_idx: jax.Array  # [B, N] int32: new position p holds old pair ordering_idx[p]
    noise_mask: jax.Array    # [B, N] bool, in the new order: True = corrupted pair


def num_corrupted(p: float, num_context: int) -> int:
    """Exactly round(p*N) pairs, rounding halves up (p=0.25, N=10 -> 3)."""
    return int(math.floor(p * num_context + 0.5))


def corrupt(key: jax.Array, tasks: Tasks, curriculum: CurriculumConfig, task: TaskConfig,
            alpha: float = 1.0) -> tuple[Tasks, jax.Array]:
    """Corrupt exactly round(p*N) uniformly chosen pairs per task.

    label_noise:  y_i <- y_i + sigma * eps, eps ~ N(0, 1)
    random_pairs: (x_i, y_i) <- (x', y'), x' ~ U(-alpha*a/2, alpha*a/2)^d (a pair task: x' from
                  its own inputs), y' ~ N(0, sigma^2)
    Returns the corrupted tasks and the noise mask [B, N] (original order).
    """
    b, n, d = tasks.context_x.shape
    count = num_corrupted(curriculum.noise_p, n) if curriculum.noise_mode != "clean" else 0
    if count == 0:
        return tasks, jnp.zeros((b, n), dtype=bool)
    key_pick, key_x, key_y = jax.random.split(key, 3)
    rank = jnp.argsort(jnp.argsort(jax.random.uniform(key_pick, (b, n)), axis=-1), axis=-1)
    mask = rank < count  # [B, N]
    sigma = curriculum.noise_sigma
    if curriculum.noise_mode == "label_noise":
        noisy_y = tasks.context_y + sigma * jax.random.normal(key_y, (b, n))
        return tasks._replace(context_y=jnp.where(mask, noisy_y, tasks.context_y)), mask
    fresh_x = (random_pair_inputs(key_x, (b, n), task, alpha) if is_paper_task(task)
               else paper_form_sampler(task)(key_x, b, alpha).context_x)   # a pair task's own inputs
    fresh_y = sigma * jax.random.normal(key_y, (b, n))
    return tasks._replace(context_x=jnp.where(mask[..., None], fresh_x, tasks.context_x),
                          context_y=jnp.where(mask, fresh_y, tasks.context_y)), mask


def ordering_key(key: jax.Array, tasks: Tasks, ordering: str) -> jax.Array:
    """The ascending sort key of every pair [B, N] for the named ordering.

    random: uniform draws (a uniform shuffle); smallnorm2largenorm: ||x_i||;
    easy2hard: difficulty 1 - |cos(x_i, x_q)| (most query-aligned first);
    hard2easy: minus that difficulty.
    """
    if ordering == "random":
        return jax.random.uniform(key, tasks.context_y.shape)
    if ordering == "smallnorm2largenorm":
        return jnp.linalg.norm(tasks.context_x, axis=-1)
    dots = jnp.einsum("bnd,bd->bn", tasks.context_x, tasks.query_x)
    norms = jnp.linalg.norm(tasks.context_x, axis=-1) * jnp.linalg.norm(tasks.query_x, axis=-1)[:, None]
    difficulty = 1.0 - jnp.abs(dots) / jnp.maximum(norms, 1e-12)
    if ordering == "easy2hard":
        return difficulty
    if ordering == "hard2easy":
        return -difficulty
    raise ValueError(f"ordering={ordering!r} is unknown")


def order(key: jax.Array, tasks: Tasks, noise_mask: jax.Array,
          curriculum: CurriculumConfig) -> CurriculumOutput:
    """Reorder pairs by the ordering key, within placement groups.

    mixed: one group; clean_first: clean pairs then corrupted; noisy_first: the reverse.
    """
    sort_key = ordering_key(key, tasks, curriculum.ordering)
    if curriculum.noise_placement == "mixed":
        perm = jnp.argsort(sort_key, axis=-1)
    else:  # the group (0 first, then 1) is the primary key
        group = noise_mask if curriculum.noise_placement == "clean_first" else ~noise_mask
        perm = jnp.lexsort((sort_key, group.astype(jnp.int32)), axis=-1)
    perm = perm.astype(jnp.int32)
    return CurriculumOutput(permute_pairs(tasks, perm),
                            perm, jnp.take_along_axis(noise_mask, perm, axis=-1))


def permute_pairs(tasks: Tasks, perm: jax.Array) -> Tasks:
    """Context pairs in the order `perm` [B, N] (position p <- old pair perm[p])."""
    return tasks._replace(
        context_x=jnp.take_along_axis(tasks.context_x, perm[..., None], axis=1),
        context_y=jnp.take_along_axis(tasks.context_y, perm, axis=1))


def is_exchangeable(curriculum: CurriculumConfig) -> bool:
    """Clean pairs in uniformly random order: the transform leaves the distribution of a
    batch of i.i.d. tasks unchanged, so training may skip it (evaluation still applies it,
    to record the permutation)."""
    return curriculum.noise_mode == "clean" and curriculum.ordering == "random"


def apply_curriculum(key: jax.Array, tasks: Tasks, curriculum: CurriculumConfig,
                     task: TaskConfig, alpha: float = 1.0) -> CurriculumOutput:
    """Noise, then ordering and placement."""
    key_noise, key_order = jax.random.split(key)
    noisy, mask = corrupt(key_noise, tasks, curriculum, task, alpha)
    return order(key_order, noisy, mask, curriculum)
