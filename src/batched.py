"""Evaluation within a memory budget: a predictor applied to a set of prompts a block of rows at
a time, so that evaluating 1,000 tasks at 1,600 points needs the memory of a few tasks, not of
all of them.

    rows = block_rows(per_row_bytes, total_rows)       # from src.bounds' estimate, deterministic
    predictions = in_blocks(jax.jit(predict), rows)(prompt)     # a PairPrompt, or arrays [R, ...]

The block size depends on the settings only (never on the memory free now), so a run's numbers
do not depend on what else the machine is doing, and a set that fits in one block (every golden
run) is computed as one batch, as before. Every row is computed on its own, but XLA picks its
matrix kernels by the number of rows, so a model's predictions in blocks may differ from one big
batch's in float32's last digits: up to 5.4e-7 (about 1e-6 relative) measured on a width-16 GPT-2
here, 0 on the length study's width-64 model in blocks of 64; the baselines gave the same bits
(tests/test_batched.py states the tolerance, 1e-5 relative).

Inside `shown(label)` (the end-of-run analyses, an analysis's own command) a computation of more
than one block draws a progress bar on stderr, each block waited for as it ends (the same numbers).

Shapes: R rows (prompts), then whatever each array holds per row.
"""

from __future__ import annotations

import contextvars
import sys
from typing import Callable

import numpy as np

from src.scoped import holding
from src import bounds

_SHOWN = contextvars.ContextVar("blocks_shown", default=None)  # the progress bars' label, or None


def shown(label: str):
    """Inside: every in_blocks computation of more than one block shows a progress bar named `label`."""
    return holding(_SHOWN, label)


def block_rows(per_row_bytes: int, total_rows: int, budget: int | None = None) -> int:
    """Rows per block: as many as fit in `budget` bytes (default src.bounds.EVAL_BLOCK_BYTES) by
    the estimate, at least 1, at most `total_rows` (one block when everything fits: the path of one
    big batch, unchanged)."""
    budget = bounds.EVAL_BLOCK_BYTES if budget is None else budget
    return max(1, min(total_rows, budget // max(1, per_row_bytes)))


def in_blocks(predict: Callable, rows: int, what: str = "prompts") -> Callable:
    """`predict(*arrays)` (each argument an array [R, ...] or a pytree of them such as a PairPrompt,
    whose scalars (its dims) every block takes whole; output [R, ...] or a tuple of such) computed
    `rows` rows at a time and concatenated. The last block is filled up to `rows` with repeats of
    its own rows (one compiled shape) and the repeats are dropped. `what`: the rows, in words, for
    the progress bar (inside `shown`)."""
    import jax
    import jax.numpy as jnp

    def rows_of(tree, index):
        return jax.tree_util.tree_map(lambda a: a[index] if np.ndim(a) else a, tree)

    def blocked(*arrays):
        total = next(a for a in jax.tree_util.tree_leaves(arrays) if np.ndim(a)).shape[0]
        if total <= rows:
            return predict(*arrays)
        label, parts = _SHOWN.get(), []
        bar = None
        if label is not None:
            from tqdm import tqdm

            bar = tqdm(total=total, desc=f"{label}: {what}", leave=False, file=sys.stderr, dynamic_ncols=True)
        for start in range(0, total, rows):
            count = min(rows, total - start)
            index = start + np.arange(rows) % count
            block = predict(*(rows_of(a, index if count < rows else slice(start, start + rows)) for a in arrays))
            parts.append(jax.tree_util.tree_map(lambda x: x[:count], block))
            if bar is not None:
                jax.block_until_ready(parts[-1])
                bar.update(count)
        if bar is not None:
            bar.close()
        return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=0), *parts)

    return blocked
