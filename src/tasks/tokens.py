"""Token-level in-context tasks of the ICL benchmark's suite (registry "task"): next-token prediction over
a vocabulary of V tokens, scored only where the task says.

  mqar           multi-query associative recall (Arora et al. 2023, "Zoology"): κ key-value
                 pairs k_1 v_1 … k_κ v_κ (keys distinct, from [1, V/2); values distinct, from
                 [V/2, V)), then the rest of the sequence, where every key appears once more as a
                 query in a slot drawn with a power law p(slot s) ∝ a (s + 1)^(a − 1)
                 (a = `power_a`; small a favours early slots), followed by its value. Filler
                 between queries: token 0 (`filler="zero"`) or random value-half tokens
                 (`filler="noise"`, never keys), or uniform tokens of [1, V), keys included
                 (`filler="uniform"`: the ICL benchmark's `random_non_queries`). Scored: the
                 positions holding a query key (the target is its value).
  disjoint_sets  two lists, m tokens from [1, V/2) and m' from [V/2, V) (m' = `long_size`,
                 or m when it is 0), sharing exactly one token c (drawn from the first half,
                 put into both), each list followed by the separator 0:
                 a_1 … a_m 0 b_1 … b_m' 0. Scored: the last position (the target is c).

A batch is TokenBatch(inputs [B, T] int32, targets [B, T] int32, scored [B, T] bool): the model
reads inputs[:, :t+1] and predicts targets[:, t] (= inputs[:, t+1] where there is one).
Glossary: B sequences, T tokens, V vocabulary, κ pairs, m and m' list lengths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from src.registry import registry


class TokenBatch(NamedTuple):
    inputs: jax.Array  # [B, T] int32
    targets: jax.Array  # [B, T] int32 (the next token)
    scored: jax.Array  # [B, T] bool: positions whose prediction counts


FILLERS = ("zero", "noise", "uniform")


@dataclass(frozen=True)
class MQAROptions:
    objective: ClassVar[str] = "token"  # registry "objective": cross-entropy, exact match
    vocab_size: int = 8192
    seq_len: int = 64  # T
    num_pairs: int = 8  # κ
    power_a: float = 0.01
    filler: str = "zero"  # zero | noise | uniform

    def tokens(self) -> int:
        """T, the sequence length the model reads."""
        return self.seq_len

    def scored_per_row(self) -> int:
        """How many positions of every sequence are scored: the κ queries."""
        return self.num_pairs

    def check(self) -> None:
        """ValueError naming the option when the sizes cannot hold the task."""
        half = self.vocab_size // 2
        if self.filler not in FILLERS:
            raise ValueError(f"filler={self.filler!r} is unknown; accepted: {', '.join(FILLERS)}")
        if not 1 <= self.num_pairs <= half - 1:
            raise ValueError(
                f"num_pairs={self.num_pairs} needs that many distinct keys in [1, V/2) with "
                f"vocab_size={self.vocab_size}; accepted: 1 <= num_pairs <= {half - 1}"
            )
        if self.seq_len < 4 * self.num_pairs:
            raise ValueError(
                f"seq_len={self.seq_len} cannot hold {self.num_pairs} pairs and their "
                f"queries (2κ + 2κ tokens); accepted: seq_len >= {4 * self.num_pairs}"
            )
        if not self.power_a > 0:
            raise ValueError(f"power_a={self.power_a} must be positive; accepted: a > 0")


@dataclass(frozen=True)
class DisjointOptions:
    objective: ClassVar[str] = "token"
    vocab_size: int = 512
    set_size: int = 8  # m tokens in the first list
    long_size: int = 0  # m' tokens in the second list (0: m); T = m + m' + 2

    def second(self) -> int:
        return self.long_size or self.set_size

    def tokens(self) -> int:
        return self.set_size + self.second() + 2

    def scored_per_row(self) -> int:
        """How many positions of every sequence are scored: the last."""
        return 1

    def check(self) -> None:
        half = self.vocab_size // 2
        if not 1 <= self.set_size <= half - 2:
            raise ValueError(
                f"set_size={self.set_size} needs {self.set_size} distinct tokens per vocabulary "
                f"half with vocab_size={self.vocab_size}; accepted: 1 <= set_size <= {half - 2}"
            )
        if not 0 <= self.long_size <= half - 2:
            raise ValueError(
                f"long_size={self.long_size} needs that many distinct tokens in the vocabulary's "
                f"second half with vocab_size={self.vocab_size}; accepted: 0 (set_size) to {half - 2}"
            )


def _distinct(key, batch: int, low: int, high: int, count: int) -> jax.Array:
    """[B, count] distinct integers from [low, high) per row, in random order: the positions of
    the `count` smallest of uniform scores, in increasing order of score, ties to the lower
    position (a stable argsort's first `count`; top_k of the negated scores gives the same
    indices without sorting the row: 4.5 ms instead of 198 ms at B = 256, V/2 = 4,096)."""
    scores = jax.random.uniform(key, (batch, high - low))
    return low + jax.lax.top_k(-scores, count)[1].astype(jnp.int32)


def sample_mqar(key, batch: int, options: MQAROptions) -> TokenBatch:
    o = options
    kappa, t, half = o.num_pairs, o.seq_len, o.vocab_size // 2
    k_keys, k_values, k_slots, k_fill = jax.random.split(key, 4)
    keys = _distinct(k_keys, batch, 1, half, kappa)  # [B, κ]
    values = _distinct(k_values, batch, half, o.vocab_size, kappa)  # [B, κ]
    context = jnp.stack([keys, values], -1).reshape(batch, 2 * kappa)  # k1 v1 k2 v2 ...
    slots = (t + 1 - 2 * kappa) // 2  # query-value pairs that fit
    log_p = jnp.log(o.power_a) + (o.power_a - 1) * jnp.log(jnp.arange(1, slots + 1))
    gumbel = jax.random.gumbel(k_slots, (batch, slots))
    chosen = jnp.argsort(-(log_p + gumbel), axis=-1)[:, :kappa]  # κ slots, no repeats
    rest = 2 * slots
    if o.filler == "noise":
        tail = jax.random.randint(k_fill, (batch, rest), half, o.vocab_size)
    elif o.filler == "uniform":
        tail = jax.random.randint(k_fill, (batch, rest), 1, o.vocab_size)
    else:
        tail = jnp.zeros((batch, rest), jnp.int32)
    rows = jnp.arange(batch)[:, None]
    tail = tail.at[rows, 2 * chosen].set(keys).at[rows, 2 * chosen + 1].set(values)
    sequence = jnp.concatenate([context, tail], axis=1)[:, : t + 1]  # [B, T + 1]
    if sequence.shape[1] < t + 1:
        sequence = jnp.pad(sequence, ((0, 0), (0, t + 1 - sequence.shape[1])))
    inputs, targets = sequence[:, :t], sequence[:, 1:]
    is_query = jnp.zeros((batch, rest), bool).at[rows, 2 * chosen].set(True)
    scored = jnp.concatenate([jnp.zeros((batch, 2 * kappa), bool), is_query], axis=1)[:, :t]
    return TokenBatch(inputs.astype(jnp.int32), targets.astype(jnp.int32), scored)


def sample_disjoint(key, batch: int, options: DisjointOptions) -> TokenBatch:
    m, m2, half = options.set_size, options.second(), options.vocab_size // 2
    k_first, k_second, k_place_a, k_place_b = jax.random.split(key, 4)
    first = _distinct(k_first, batch, 1, half, m + 1)  # m tokens + the shared one
    shared = first[:, -1]
    second = _distinct(k_second, batch, half, options.vocab_size, m2)
    rows = jnp.arange(batch)
    place_a = jax.random.randint(k_place_a, (batch,), 0, m)
    place_b = jax.random.randint(k_place_b, (batch,), 0, m2)
    list_a = first[:, :m].at[rows, place_a].set(shared)
    list_b = second.at[rows, place_b].set(shared)
    sep = jnp.zeros((batch, 1), jnp.int32)
    inputs = jnp.concatenate([list_a, sep, list_b, sep], axis=1)  # [B, m + m' + 2]
    targets = jnp.concatenate([inputs[:, 1:], shared[:, None]], axis=1)
    scored = jnp.zeros(inputs.shape, bool).at[:, -1].set(True)
    return TokenBatch(inputs, targets.astype(jnp.int32), scored)


TASKS = registry("task")
TASKS.register("mqar", MQAROptions, doc="Zoology's multi-query associative recall (token task)")(
    lambda options: lambda key, batch: sample_mqar(key, batch, options)
)
TASKS.register("disjoint_sets", DisjointOptions, doc="the one token two disjoint-half lists share (token task)")(
    lambda options: lambda key, batch: sample_disjoint(key, batch, options)
)
