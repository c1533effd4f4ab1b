"""Repeated random tokens (Olsson et al. 2022, "In-context Learning and Induction Heads"), a token
task of the ICL benchmark's suite (registry "task": `repeated_tokens`): BOS (token 0), R tokens
uniform over [0, V), then the same R again, then uniform filler up to T = 1 + 2 `repeat` tokens;
R is drawn per sequence, uniformly from [min_repeat, repeat], so that no fixed offset finds the
answer (a 1-layer model with relative positions solves a fixed R by position alone). The model
reads every token and predicts the next; scored (and trained) at the positions R + 1 … 2R − 1,
where the next token is the one that followed the current token's first occurrence: what an
induction head copies. analysis.induction scores heads on sequences of one R (repeated_sequences).

A batch is TokenBatch (src/tasks/tokens.py). Glossary: B sequences, R repeated tokens, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp

from src.registry import registry
from src.settings import require_int
from src.tasks.tokens import TokenBatch

BOS = 0


@dataclass(frozen=True)
class RepeatOptions:
    objective: ClassVar[str] = "token"
    vocab_size: int = 64  # V
    repeat: int = 20  # the longest R
    min_repeat: int = 5  # the shortest R

    def tokens(self) -> int:
        return 1 + 2 * self.repeat

    def check(self) -> None:
        require_int("vocab_size", self.vocab_size, 2, 1 << 20)
        require_int("repeat", self.repeat, 2, 1 << 15)
        require_int("min_repeat", self.min_repeat, 2, self.repeat)


def repeated_sequences(key, batch: int, repeat: int, vocab: int) -> jax.Array:
    """[B, 1 + 2R]: BOS, R tokens uniform over [0, V), the same R again."""
    half = jax.random.randint(key, (batch, repeat), 0, vocab, dtype=jnp.int32)
    return jnp.concatenate([jnp.full((batch, 1), BOS, jnp.int32), half, half], axis=1)


def sample_repeats(key, batch: int, options: RepeatOptions) -> TokenBatch:
    o = options
    k_tokens, k_fill, k_length = jax.random.split(key, 3)
    tokens = jax.random.randint(k_tokens, (batch, o.repeat), 0, o.vocab_size, dtype=jnp.int32)
    fill = jax.random.randint(k_fill, (batch, o.tokens()), 0, o.vocab_size, dtype=jnp.int32)
    r = jax.random.randint(k_length, (batch, 1), o.min_repeat, o.repeat + 1)  # [B, 1]
    p = jnp.arange(o.tokens())[None, :]
    first, second = (p >= 1) & (p <= r), (p > r) & (p <= 2 * r)
    source = jnp.clip(jnp.where(second, p - r, p) - 1, 0, o.repeat - 1)
    inputs = jnp.where(first | second, jnp.take_along_axis(tokens, source, axis=1), fill).at[:, 0].set(BOS)
    targets = jnp.concatenate([inputs[:, 1:], jnp.full((batch, 1), BOS, jnp.int32)], axis=1)
    scored = (p >= r + 1) & (p <= 2 * r - 1)
    return TokenBatch(inputs, targets, scored)


registry("task").register("repeated_tokens", RepeatOptions, doc="repeated random tokens: the induction-head task")(
    lambda options: lambda key, batch: sample_repeats(key, batch, options)
)
