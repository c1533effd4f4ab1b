"""Noise, ordering and placement of context pairs (SPEC §7).

Pure, jittable functions over a batch of prompts (src/tasks/pairs.py: N context pairs, then the
query). Noise is applied first,
ordering second, placement last; all act on whole context *pairs* (x_i, y_i),
so they apply unchanged to both token constructions (an interleaved pair is
the x token and its ȳ token). The query is never touched.

Shapes: B tasks, N context pairs, d input dimension.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from src.gd_paper.config import CurriculumConfig, TaskConfig
from src.tasks.paper_form import is_paper_task, paper_form_sampler
from src.tasks.pairs import PairPrompt
from src.tasks.regression import random_pair_inputs


class CurriculumOutput(NamedTuple):
    tasks: PairPrompt
    ordering_idx: jax.Array  # [B, N] int32: new position p holds old pair ordering_idx[p]
    noise_mask: jax.Array  # [B, N] bool, in the new order: True = corrupted pair


def num_corrupted(p: float, num_context: int) -> int:
    """Exactly round(p*N) pairs, rounding halves up (p=0.25, N=10 -> 3)."""
    return int(math.floor(p * num_context + 0.5))


# which context pairs are corrupted: `count` uniformly chosen ones, the first `count` or the last
PICKS = ("uniform", "first", "last")


def gaussian_inputs(key: jax.Array, xs: jax.Array) -> jax.Array:
    """Fresh inputs N(0, I) on the coordinates `xs` [..., d] uses (its non-zero ones; a curriculum's
    inactive coordinates stay 0): Garg et al.'s input distribution, for random pairs."""
    return jnp.where(xs != 0, jax.random.normal(key, xs.shape), 0.0)


def corrupt_pairs(
    key: jax.Array,
    xs: jax.Array,
    ys: jax.Array,
    count: int,
    mode: str,
    sigma: float,
    fresh_inputs: Callable[[jax.Array, jax.Array], jax.Array] = gaussian_inputs,
    *,
    pick: str = "uniform",
    context: int | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Corrupt `count` of the first `context` pairs (default: all) of every prompt xs [B, n, d],
    ys [B, n]; the pairs after them (a query) are never touched. Returns (xs, ys, mask [B, n]).

    mode label_noise:  y_i <- y_i + sigma * eps, eps ~ N(0, 1)
    mode random_pairs: (x_i, y_i) <- (x', y'), x' = fresh_inputs(key, xs) (the task's own inputs),
                       y' ~ N(0, sigma^2)
    pick: which pairs, `count` uniformly chosen ones per prompt, the first `count` or the last.
    The key is split in three (pick, inputs, labels) and every draw has the shape of xs or ys."""
    b, n = ys.shape
    context = n if context is None else context
    k_pick, k_x, k_y = jax.random.split(key, 3)
    position = jnp.broadcast_to(jnp.arange(context), (b, context))
    if pick == "uniform":
        rank = jnp.argsort(jnp.argsort(jax.random.uniform(k_pick, (b, context)), -1), -1)
    elif pick == "first":
        rank = position
    elif pick == "last":
        rank = context - 1 - position
    else:
        raise ValueError(f"pick={pick!r} is unknown; accepted: {', '.join(PICKS)}")
    mask = jnp.concatenate([rank < count, jnp.zeros((b, n - context), bool)], axis=1)
    if mode == "label_noise":
        return xs, jnp.where(mask, ys + sigma * jax.random.normal(k_y, ys.shape), ys), mask
    if mode != "random_pairs":
        raise ValueError(f"mode={mode!r} is unknown; accepted: label_noise, random_pairs")
    return (
        jnp.where(mask[..., None], fresh_inputs(k_x, xs), xs),
        jnp.where(mask, sigma * jax.random.normal(k_y, ys.shape), ys),
        mask,
    )


def corrupt(
    key: jax.Array, tasks: PairPrompt, curriculum: CurriculumConfig, task: TaskConfig, alpha: float = 1.0
) -> tuple[PairPrompt, jax.Array]:
    """The curriculum's noise on the context pairs of von Oswald et al.'s form: exactly
    round(p*N) uniformly chosen pairs per task (corrupt_pairs), random pairs with inputs from the
    task's own distribution (U(-alpha*a/2, alpha*a/2)^d; a pair task: its sampler's inputs).
    Returns the corrupted tasks and the noise mask [B, N] (original order)."""
    b, n, d = tasks.context_x.shape
    count = num_corrupted(curriculum.noise_p, n) if curriculum.noise_mode != "clean" else 0
    if count == 0:
        return tasks, jnp.zeros((b, n), dtype=bool)

    def fresh_inputs(k, xs):
        if is_paper_task(task):
            return random_pair_inputs(k, xs.shape[:2], task, alpha)
        return paper_form_sampler(task)(k, b, alpha).context_x  # a pair task's own inputs

    context_x, context_y, mask = corrupt_pairs(
        key, tasks.context_x, tasks.context_y, count, curriculum.noise_mode, curriculum.noise_sigma, fresh_inputs
    )
    return tasks.with_context(context_x, context_y), mask


def ordering_key(key: jax.Array, tasks: PairPrompt, ordering: str) -> jax.Array:
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


def order(key: jax.Array, tasks: PairPrompt, noise_mask: jax.Array, curriculum: CurriculumConfig) -> CurriculumOutput:
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
    return CurriculumOutput(permute_pairs(tasks, perm), perm, jnp.take_along_axis(noise_mask, perm, axis=-1))


def permute_pairs(tasks: PairPrompt, perm: jax.Array) -> PairPrompt:
    """Context pairs in the order `perm` [B, N] (position p <- old pair perm[p])."""
    return tasks.with_context(
        jnp.take_along_axis(tasks.context_x, perm[..., None], axis=1),
        jnp.take_along_axis(tasks.context_y, perm, axis=1),
    )


def is_exchangeable(curriculum: CurriculumConfig) -> bool:
    """Clean pairs in uniformly random order: the transform leaves the distribution of a
    batch of i.i.d. tasks unchanged, so training may skip it (evaluation still applies it,
    to record the permutation)."""
    return curriculum.noise_mode == "clean" and curriculum.ordering == "random"


def apply_curriculum(
    key: jax.Array, tasks: PairPrompt, curriculum: CurriculumConfig, task: TaskConfig, alpha: float = 1.0
) -> CurriculumOutput:
    """Noise, then ordering and placement."""
    key_noise, key_order = jax.random.split(key)
    noisy, mask = corrupt(key_noise, tasks, curriculum, task, alpha)
    return order(key_order, noisy, mask, curriculum)


def with_pair_curriculum(key: jax.Array, batch: PairPrompt, curriculum: CurriculumConfig) -> PairPrompt:
    """The curriculum on prompts of pairs (the GPT-2 family's training batches, xs [B, n, d]): the
    context pairs (every point before the last) corrupted (corrupt_pairs; random pairs get N(0, I)
    inputs on the active coordinates), then ordered and placed relative to the last point (order);
    corrupted points leave the loss (their weight is 0). The key's split in four gives the
    corruption's three keys and the ordering's."""
    b, n, _ = batch.xs.shape
    count = num_corrupted(curriculum.noise_p, n - 1) if curriculum.noise_mode != "clean" else 0
    corrupted, mask = batch, jnp.zeros((b, n - 1), bool)
    if count:
        context_x, context_y, mask = corrupt_pairs(
            key, batch.context_x, batch.context_y, count, curriculum.noise_mode, curriculum.noise_sigma
        )
        corrupted = batch.with_context(context_x, context_y)
    ordered = order(jax.random.split(key, 4)[3], corrupted, mask, curriculum)
    kept = jnp.concatenate([~ordered.noise_mask, jnp.ones((b, 1), bool)], axis=1)
    return ordered.tasks._replace(weights=batch.weights * kept)
