"""MAD's six token tasks (Poli et al., ICML 2024, "Mechanistic Design and Scaling of Hybrid
Architectures"; athms/mad-lab), token tasks of the ICL benchmark's suite (registry "task"). Each is
drawn on device from the batch's key; the defaults are MAD's baseline settings (its
configs/tasks/*.yml), the difficulty axes are options. Every task reports exact-match accuracy per
token (micro) and per class (macro, MAD's torchmetrics default): objective `token_classes`.

  in_context_recall  V 16, T 128: keys [0, 8), values [8, 16); 63 pairs k v, each key drawn with
                     replacement and holding one value per sequence (drawn at its first
                     appearance), then a probe pair: a key already shown and its value. The model
                     reads T − 1 tokens and predicts the next at each. Trained on every position
                     (MAD's whole next-token loss); scored (split test) on the values whose key
                     appeared in an earlier pair, the probe's among them.
  noisy_recall       in-context recall with V 32, of which 16 noise tokens [16, 32): each of the
                     63 pair slots is two noise tokens with probability frac_noise = 0.2 (one slot
                     drawn uniformly from the 64 never is); noise is never scored.
  fuzzy_recall       keys and values are motifs of 1 to 3 distinct tokens (keys from [0, 7),
                     values from [7, 15), V 16, pad 15): pairs of random sizes until the sequence
                     is nearly T + 1 long, one of them a probe pair placed at a random point,
                     then the probe pair again; left-padded to T + 1, the model reads T. At test
                     every key has the largest size (MAD prompts keys of 3 tokens). Scored (test):
                     the value tokens of keys that appeared before.
  selective_copying  V 16, T 256: 16 content tokens of [0, 14) in order among 223 blanks (14), each
                     blank before a content token drawn uniformly (MAD's np.insert before
                     index 0..15: the last content token is always followed by the copy token),
                     the copy token (15), then 16 blanks at whose positions the model gives the
                     content in order (targets aligned with inputs, as MAD's). Scored: those 16.
  compression        V 16, T 32: 31 tokens of [0, 15) and the compression token (15); the model
                     (read-out `compress`: the last position's state, plus sin-cos positions,
                     through a 2-layer MLP decoder) reconstructs all 32. Scored: all 32.
  memorization       V 256, T 32: a fixed table of 127 facts key -> value (keys [0, 127), values
                     [127, 255), the table drawn once from `table_seed` as MAD's generate_kv_map
                     with its seed 12345); 16 slots k, insert token (255), the value due at the
                     insert token's position. Scored: the 16 insert positions.

Where we differ from MAD: every batch is fresh (MAD trains 200 epochs over 12,800 fixed sequences,
256 for memorization), and fuzzy recall's probe is scored only where its key appeared (MAD's
generator can draw the probe's slot after its loop has ended and still scores the final value).

A batch is TokenBatch (src/tasks/tokens.py). Glossary: B sequences, T tokens read, V vocabulary,
P pair slots, K key tokens, S motif slots, m motif size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from src.registry import registry
from src.settings import require, require_int, require_number, require_one_of
from src.tasks.tokens import TokenBatch, _distinct

SPLITS = ("train", "test")  # train: MAD's training draw and loss; test: its test draw, scored where MAD scores


def _check_split(split) -> None:
    require_one_of("split", split, SPLITS)


@dataclass(frozen=True)
class RecallOptions:
    objective: ClassVar[str] = "token_classes"
    vocab_size: int = 16  # V, noise tokens included
    seq_len: int = 128  # MAD's seq_len: the sequence of pairs; the model reads seq_len − 1 tokens
    noise_vocab_size: int = 0
    frac_noise: float = 0.0
    split: str = "train"

    def tokens(self) -> int:
        return self.seq_len - 1

    def evaluation(self):
        """The options of the eval set: MAD's test draw."""
        return replace(self, split="test")

    def key_count(self) -> int:
        return (self.vocab_size - self.noise_vocab_size) // 2

    def check(self) -> None:
        require_int("vocab_size", self.vocab_size, 4, 1 << 20)
        require(
            isinstance(self.seq_len, int) and self.seq_len >= 4 and self.seq_len % 2 == 0,
            "seq_len",
            self.seq_len,
            "an even integer >= 4 (pairs of tokens)",
        )
        require_int("noise_vocab_size", self.noise_vocab_size, 0, self.vocab_size - 2)
        require_number("frac_noise", self.frac_noise, 0.0, high=1.0, open_high=True)
        require(
            self.frac_noise == 0 or self.noise_vocab_size > 0,
            "frac_noise",
            self.frac_noise,
            "0 when noise_vocab_size is 0 (noise slots draw noise tokens)",
        )
        _check_split(self.split)


@dataclass(frozen=True)
class NoisyRecallOptions(RecallOptions):
    vocab_size: int = 32
    noise_vocab_size: int = 16
    frac_noise: float = 0.2


def sample_recall(key, batch: int, options: RecallOptions) -> TokenBatch:
    """In-context recall, noisy or not (module docstring)."""
    o = options
    n_keys = o.key_count()
    special = o.vocab_size - o.noise_vocab_size  # keys and values; noise above
    slots = o.seq_len // 2 - 1  # random pairs before the probe
    k_key, k_value, k_noisy, k_keep, k_noise, k_probe = jax.random.split(key, 6)
    keys = jax.random.randint(k_key, (batch, slots), 0, n_keys)
    value_of = jax.random.randint(k_value, (batch, n_keys), n_keys, 2 * n_keys)  # a key's value in its sequence
    kept = jax.random.randint(k_keep, (batch, 1), 0, slots + 1)  # one slot of the slots + 1 that is no noise
    noisy = (jax.random.uniform(k_noisy, (batch, slots)) < o.frac_noise) & (jnp.arange(slots) != kept)
    noise = jax.random.randint(k_noise, (batch, slots, 2), special, max(o.vocab_size, special + 1))
    values = jnp.take_along_axis(value_of, keys, axis=1)
    pairs = jnp.where(noisy[..., None], noise, jnp.stack([keys, values], -1))  # [B, P, 2]
    shown = jax.nn.one_hot(keys, n_keys, dtype=jnp.int32) * (~noisy)[..., None]  # [B, P, K]
    before = jnp.cumsum(shown, axis=1) - shown  # pairs of the same key earlier
    seen = (~noisy) & (jnp.take_along_axis(before, keys[..., None], axis=2)[..., 0] > 0)
    presented = jnp.sum(shown, axis=1) > 0  # [B, K]
    probe = jax.random.categorical(k_probe, jnp.where(presented, 0.0, -jnp.inf))
    probe = jnp.where(jnp.any(presented, axis=1), probe, 0)
    probe_pair = jnp.stack([probe, jnp.take_along_axis(value_of, probe[:, None], axis=1)[:, 0]], -1)
    sequence = jnp.concatenate([pairs.reshape(batch, 2 * slots), probe_pair], axis=1).astype(jnp.int32)
    # the value of slot j is token 2j + 1, predicted at position 2j; the probe's at the last position
    at_value = jnp.stack([seen, jnp.zeros_like(seen)], -1).reshape(batch, 2 * slots)
    test_scored = jnp.concatenate([at_value, jnp.ones((batch, 1), bool)], axis=1)
    scored = test_scored if o.split == "test" else jnp.ones_like(test_scored)
    return TokenBatch(sequence[:, :-1], sequence[:, 1:], scored)


@dataclass(frozen=True)
class FuzzyRecallOptions:
    objective: ClassVar[str] = "token_classes"
    vocab_size: int = 16  # V: keys [0, (V − 1) // 2), values up to V − 1, pad V − 1
    seq_len: int = 128  # the model reads seq_len tokens
    k_motif_size: int = 3  # a key's largest size (every test key's size)
    v_motif_size: int = 3
    split: str = "train"

    def tokens(self) -> int:
        return self.seq_len

    def evaluation(self):
        return replace(self, split="test")

    def key_count(self) -> int:
        return (self.vocab_size - 1) // 2

    def check(self) -> None:
        require_int("vocab_size", self.vocab_size, 5, 1 << 20)
        require_int("k_motif_size", self.k_motif_size, 1, self.key_count())
        require_int("v_motif_size", self.v_motif_size, 1, self.vocab_size - 1 - self.key_count())
        low = 2 * (self.k_motif_size + self.v_motif_size) + 1
        require_int("seq_len", self.seq_len, low, 1 << 16)
        _check_split(self.split)


def _draw_motifs(key, count: int, low: int, high: int, largest: int, sizes: jax.Array) -> jax.Array:
    """[count, largest] motifs: `sizes[i]` distinct tokens of [low, high) in random order (the
    first sizes[i] of a random ordering: a uniform ordered tuple), −1 after them."""
    tokens = _distinct(key, count, low, high, largest)
    return jnp.where(jnp.arange(largest) < sizes[:, None], tokens, -1)


def _fuzzy_one(key, o: FuzzyRecallOptions):
    """One fuzzy-recall sequence: (tokens [T + 1], scored-at-test marks [T + 1])."""
    km, vm, n_keys = o.k_motif_size, o.v_motif_size, o.key_count()
    pad, window = o.vocab_size - 1, km + vm
    slots = o.seq_len // 2 + 1  # every pair takes >= 2 tokens
    test = o.split == "test"
    (k_ks, k_vs, k_keys, k_values, k_pks, k_pvs, k_pkey, k_pvalue, k_idx) = jax.random.split(key, 9)
    key_sizes = jnp.full((slots,), km) if test else jax.random.randint(k_ks, (slots,), 1, km + 1)
    value_sizes = jax.random.randint(k_vs, (slots,), 1, vm + 1)
    keys = _draw_motifs(k_keys, slots, 0, n_keys, km, key_sizes)  # [S, km]
    values = _draw_motifs(k_values, slots, n_keys, pad, vm, value_sizes)  # [S, vm]
    probe_ks = jnp.asarray(km) if test else jax.random.randint(k_pks, (), 1, km + 1)
    probe_vs = jax.random.randint(k_pvs, (), 1, vm + 1)
    probe_key = _draw_motifs(k_pkey, 1, 0, n_keys, km, probe_ks[None])[0]
    probe_value = _draw_motifs(k_pvalue, 1, n_keys, pad, vm, probe_vs[None])[0]
    probe_at = jax.random.randint(k_idx, (), 0, o.seq_len - 2 * (probe_ks + probe_vs))
    limit = o.seq_len - (probe_ks + probe_vs) - window  # MAD's loop runs while the sequence is shorter
    size = o.seq_len + 1 + window

    def pair_tokens(k, v, ks, vs):
        j = jnp.arange(window)
        tokens = jnp.where(j < ks, jnp.pad(k, (0, vm))[j], v[jnp.clip(j - ks, 0, vm - 1)])
        return tokens, j < ks + vs, (j >= ks) & (j < ks + vs)

    def write(buf, marks, length, tokens, valid, value_part, seen):
        old_t = jax.lax.dynamic_slice(buf, (length,), (window,))
        old_m = jax.lax.dynamic_slice(marks, (length,), (window,))
        buf = jax.lax.dynamic_update_slice(buf, jnp.where(valid, tokens, old_t), (length,))
        marks = jax.lax.dynamic_update_slice(marks, jnp.where(valid, value_part & seen, old_m), (length,))
        return buf, marks

    def step(carry, _):
        buf, marks, length, probe_added, shown_keys, shown_values, shown_vs, i = carry
        active = length < limit
        insert = active & (length >= probe_at) & ~probe_added
        same = jnp.all(shown_keys == keys[i], axis=1) & (jnp.arange(slots) < i)  # earlier slots with this key
        is_probe = jnp.all(keys[i] == probe_key)
        first = jnp.argmax(same)
        seen = jnp.any(same)
        k = jnp.where(insert, probe_key, keys[i])
        ks = jnp.where(insert, probe_ks, key_sizes[i])
        v = jnp.where(insert | is_probe, probe_value, jnp.where(seen, shown_values[first], values[i]))
        vs = jnp.where(insert | is_probe, probe_vs, jnp.where(seen, shown_vs[first], value_sizes[i]))
        tokens, valid, value_part = pair_tokens(k, v, ks, vs)
        seen_now = jnp.where(insert, False, seen)
        new_buf, new_marks = write(buf, marks, length, tokens, valid & active, value_part, seen_now)
        carry = (
            new_buf,
            new_marks,
            jnp.where(active, length + ks + vs, length),
            probe_added | (active & (insert | is_probe)),
            shown_keys.at[i].set(jnp.where(active, k, -2)),
            shown_values.at[i].set(v),
            shown_vs.at[i].set(vs),
            i + 1,
        )
        return carry, None

    init = (
        jnp.full((size,), pad, jnp.int32),
        jnp.zeros((size,), bool),
        jnp.asarray(0),
        jnp.asarray(False),
        jnp.full((slots, km), -2, jnp.int32),
        jnp.zeros((slots, vm), jnp.int32),
        jnp.zeros((slots,), jnp.int32),
        jnp.asarray(0),  # the slot
    )
    (buf, marks, length, probe_added, *_), _ = jax.lax.scan(step, init, None, length=slots)
    tokens, valid, value_part = pair_tokens(probe_key, probe_value, probe_ks, probe_vs)
    buf, marks = write(buf, marks, length, tokens, valid, value_part, probe_added)
    total = length + probe_ks + probe_vs
    shift = o.seq_len + 1 - total  # left padding
    p = jnp.arange(o.seq_len + 1)
    source = jnp.clip(p - shift, 0, size - 1)
    return jnp.where(p >= shift, buf[source], pad), (p >= shift) & marks[source]


def sample_fuzzy(key, batch: int, options: FuzzyRecallOptions) -> TokenBatch:
    """Fuzzy in-context recall (module docstring)."""
    sequence, marks = jax.vmap(lambda k: _fuzzy_one(k, options))(jax.random.split(key, batch))
    scored = marks[:, 1:] if options.split == "test" else jnp.ones(marks[:, 1:].shape, bool)
    return TokenBatch(sequence[:, :-1].astype(jnp.int32), sequence[:, 1:].astype(jnp.int32), scored)


@dataclass(frozen=True)
class SelectiveCopyOptions:
    objective: ClassVar[str] = "token_classes"
    vocab_size: int = 16  # content [0, V − 2), blank V − 2, copy V − 1
    seq_len: int = 256  # T
    num_tokens_to_copy: int = 16

    def tokens(self) -> int:
        return self.seq_len

    def scored_per_row(self) -> int:
        return self.num_tokens_to_copy

    def check(self) -> None:
        require_int("vocab_size", self.vocab_size, 3, 1 << 20)
        require_int("num_tokens_to_copy", self.num_tokens_to_copy, 1, 1 << 16)
        require_int("seq_len", self.seq_len, 2 * self.num_tokens_to_copy + 2, 1 << 20)


def sample_selective_copy(key, batch: int, options: SelectiveCopyOptions) -> TokenBatch:
    """Selective copying (module docstring)."""
    o = options
    n, t = o.num_tokens_to_copy, o.seq_len
    blank, copy = o.vocab_size - 2, o.vocab_size - 1
    blanks = t - 2 * n - 1
    k_content, k_gaps = jax.random.split(key)
    content = jax.random.randint(k_content, (batch, n), 0, o.vocab_size - 2)
    gaps = jax.random.randint(k_gaps, (batch, blanks), 0, n)  # the content token each blank precedes
    rows = jnp.arange(batch)[:, None]
    before = jnp.zeros((batch, n), jnp.int32).at[rows, gaps].add(1)
    where = jnp.arange(n) + jnp.cumsum(before, axis=1)  # [B, n] positions of the content tokens
    inputs = jnp.full((batch, t), blank, jnp.int32).at[rows, where].set(content).at[:, t - n - 1].set(copy)
    targets = jnp.full((batch, t), blank, jnp.int32).at[:, t - n :].set(content)
    scored = jnp.zeros((batch, t), bool).at[:, t - n :].set(True)
    return TokenBatch(inputs, targets, scored)


@dataclass(frozen=True)
class CompressionOptions:
    objective: ClassVar[str] = "token_classes"
    read_out: ClassVar[str] = "compress"  # the model pools its last position and decodes every position
    vocab_size: int = 16  # tokens [0, V − 1), the compression token V − 1
    seq_len: int = 32  # T

    def tokens(self) -> int:
        return self.seq_len

    def scored_per_row(self) -> int:
        return self.seq_len

    def check(self) -> None:
        require_int("vocab_size", self.vocab_size, 2, 1 << 20)
        require_int("seq_len", self.seq_len, 2, 1 << 16)


def sample_compression(key, batch: int, options: CompressionOptions) -> TokenBatch:
    """Compression (module docstring): targets are the inputs."""
    o = options
    tokens = jax.random.randint(key, (batch, o.seq_len - 1), 0, o.vocab_size - 1)
    inputs = jnp.concatenate([tokens, jnp.full((batch, 1), o.vocab_size - 1)], axis=1).astype(jnp.int32)
    return TokenBatch(inputs, inputs, jnp.ones(inputs.shape, bool))


@dataclass(frozen=True)
class MemorizationOptions:
    objective: ClassVar[str] = "token_classes"
    vocab_size: int = 256  # keys and values below V − 1, the insert token V − 1
    seq_len: int = 32  # T: seq_len / 2 slots of key, insert token
    table_seed: int = 12345  # the fact table's seed (MAD's seed; the same table in training and evaluation)

    def tokens(self) -> int:
        return self.seq_len

    def scored_per_row(self) -> int:
        return self.seq_len // 2

    def check(self) -> None:
        require_int("vocab_size", self.vocab_size, 5, 1 << 16)
        require(
            isinstance(self.seq_len, int) and self.seq_len >= 2 and self.seq_len % 2 == 0,
            "seq_len",
            self.seq_len,
            "an even integer >= 2 (slots of key, insert token)",
        )
        require_int("table_seed", self.table_seed, 0, 2**63 - 1)


@lru_cache(maxsize=16)
def fact_table(vocab_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys [F], values [F]) of the fixed table: MAD's generate_kv_map over the V − 1 tokens that
    are not the insert token, one-token motifs: the key tokens [0, (V − 1) // 2) and the value
    tokens [(V − 1) // 2, V − 1), each list shuffled by default_rng(seed) in that order, then paired
    in order (F = the shorter list's length: 127 facts at V = 256)."""
    rng = np.random.default_rng(seed)
    half = (vocab_size - 1) // 2
    keys = [(k,) for k in range(half)]
    values = [(v,) for v in range(half, vocab_size - 1)]
    rng.shuffle(keys)
    rng.shuffle(values)
    facts = list(zip(keys, values))
    return np.array([k[0] for k, _ in facts], np.int32), np.array([v[0] for _, v in facts], np.int32)


def sample_memorization(key, batch: int, options: MemorizationOptions) -> TokenBatch:
    """Memorization (module docstring)."""
    o = options
    table_keys, table_values = (jnp.asarray(a) for a in fact_table(o.vocab_size, o.table_seed))
    slots = o.seq_len // 2
    fact = jax.random.randint(key, (batch, slots), 0, len(table_keys))
    insert = jnp.full((batch, slots), o.vocab_size - 1, jnp.int32)
    inputs = jnp.stack([table_keys[fact], insert], -1).reshape(batch, o.seq_len)
    targets = jnp.stack([table_keys[fact], table_values[fact]], -1).reshape(batch, o.seq_len)
    scored = jnp.zeros((batch, slots, 2), bool).at[..., 1].set(True).reshape(batch, o.seq_len)
    return TokenBatch(inputs, targets, scored)


MAD_TASKS = {  # name -> (options, sampler, doc)
    "in_context_recall": (RecallOptions, sample_recall, "MAD: in-context recall (keys seen, values recalled)"),
    "noisy_recall": (NoisyRecallOptions, sample_recall, "MAD: in-context recall with noise pairs"),
    "fuzzy_recall": (FuzzyRecallOptions, sample_fuzzy, "MAD: recall of multi-token key and value motifs"),
    "selective_copying": (SelectiveCopyOptions, sample_selective_copy, "MAD: copy the content tokens among blanks"),
    "compression": (CompressionOptions, sample_compression, "MAD: reconstruct the sequence from its last state"),
    "memorization": (MemorizationOptions, sample_memorization, "MAD: a fixed fact table recalled from weights"),
}

TASKS = registry("task")
for _name, (_options, _sample, _doc) in MAD_TASKS.items():
    TASKS.register(_name, _options, doc=_doc)(
        lambda options, _sample=_sample: lambda key, batch: _sample(key, batch, options)
    )
