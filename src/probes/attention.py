"""Capture of attention weights on the eval batch.

The model returns its attention weights only when asked (`return_attention=True`),
so training pays nothing for this. Weights are arrays [tasks, queries, keys]
per layer and head. Keys are the context tokens; queries are every token for
all but the last layer, and the query token alone for the last layer (the only
token whose output is read).
"""

from __future__ import annotations

import jax
import numpy as np

from src.gd_paper.models.attention_only import Model
from src.gd_paper.models.layouts import make_tokens
from src.tasks.pairs import PairPrompt


def capture_attention(model: Model, params, tasks: PairPrompt, chunk: int = 1000) -> list[np.ndarray]:
    """Per layer, the attention weights [B, H, Tq, S] on `tasks` (computed in chunks)."""
    apply = jax.jit(lambda p, tokens: model.apply(p, tokens, return_attention=True).attention)
    total = tasks.query_y.shape[0]
    pieces: list[list[np.ndarray]] = []
    for start in range(0, total, chunk):
        sub = tasks.take(slice(start, start + chunk))
        pieces.append([np.asarray(a) for a in apply(params, make_tokens(sub, model.config))])
    return [np.concatenate([p[layer] for p in pieces], axis=0) for layer in range(len(pieces[0]))]


def per_head_arrays(attention: list[np.ndarray]) -> dict[tuple[int, int], np.ndarray]:
    """{(layer, head): [tasks, queries, keys]}."""
    return {
        (layer, head): weights[:, head] for layer, weights in enumerate(attention) for head in range(weights.shape[1])
    }
