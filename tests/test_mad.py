"""MAD's six token tasks (src/tasks/mad.py): each generator against a NumPy reading of its
definition (the sequence parsed back into its parts, the scored positions recomputed) and
against statistics of the definition drawn in NumPy; seeded determinism; the per-class accuracy
against a loop; the compression read-out; the tasks' place in the recipe."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.registry import registry
from src.tasks import mad

NAMES = tuple(mad.MAD_TASKS)


def _draw(name: str, batch: int, seed: int = 0, **options):
    entry = registry("task").get(name)
    chosen = replace(entry.options(), **options)
    chosen.check()
    return jax.tree_util.tree_map(np.asarray, jax.jit(lambda k: entry.build(chosen)(k, batch))(jax.random.key(seed)))


@pytest.mark.parametrize("name", NAMES)
def test_seeded_and_deterministic(name):
    a, b, c = _draw(name, 8, 3), _draw(name, 8, 3), _draw(name, 8, 4)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.inputs, c.inputs)
    vocab = registry("task").get(name).options().vocab_size
    assert a.inputs.dtype == np.int32 and a.targets.dtype == np.int32
    assert 0 <= a.inputs.min() and a.inputs.max() < vocab and a.targets.max() < vocab


def _recall_reference(sequence: np.ndarray, n_keys: int) -> np.ndarray:
    """The test's scored positions of recall sequences [B, T + 1], read back from the tokens: the
    value of a pair (tokens 2j, 2j + 1, a key then a value) counts where its key was in an earlier
    pair; noise pairs (tokens >= 2K) never; position t predicts token t + 1."""
    scored = np.zeros((sequence.shape[0], sequence.shape[1] - 1), bool)
    for b, row in enumerate(sequence):
        values: dict[int, int] = {}
        for j in range(len(row) // 2):
            k, v = int(row[2 * j]), int(row[2 * j + 1])
            if k >= 2 * n_keys:
                assert v >= 2 * n_keys  # a noise slot is two noise tokens
                continue
            assert k < n_keys <= v < 2 * n_keys
            assert values.setdefault(k, v) == v  # one value per key in a sequence
            scored[b, 2 * j] = any(int(row[2 * i]) == k for i in range(j))
        assert int(row[-2]) in {int(row[2 * i]) for i in range(len(row) // 2 - 1)}  # the probe was shown
    return scored


@pytest.mark.parametrize("name", ["in_context_recall", "noisy_recall"])
def test_recall_against_its_definition(name):
    options = registry("task").get(name).options()
    train, test = _draw(name, 64), _draw(name, 64, split="test")
    np.testing.assert_array_equal(train.inputs, test.inputs)  # the same draw, scored two ways
    np.testing.assert_array_equal(train.targets[:, :-1], train.inputs[:, 1:])
    assert train.scored.all() and train.inputs.shape == (64, options.seq_len - 1)
    sequence = np.concatenate([test.inputs, test.targets[:, -1:]], axis=1)
    np.testing.assert_array_equal(test.scored, _recall_reference(sequence, options.key_count()))
    assert test.scored[:, -1].all()  # the probe's value


def test_noise_fraction_and_key_statistics():
    options = mad.NoisyRecallOptions()
    batch = _draw("noisy_recall", 512, 1)
    pairs = np.concatenate([batch.inputs, batch.targets[:, -1:]], axis=1).reshape(512, -1, 2)[:, :-1]
    noisy = pairs[..., 0] >= 2 * options.key_count()
    # each of the 63 slots is noise with probability 0.2, but for one of 64 slots drawn uniformly
    assert noisy.mean() == pytest.approx(0.2 * (1 - 1 / 64), abs=0.01)
    keys = pairs[..., 0][~noisy]
    assert np.bincount(keys, minlength=8).min() / keys.size == pytest.approx(1 / 8, abs=0.01)


def _parse_fuzzy(row: np.ndarray, n_keys: int, pad: int) -> list[tuple[tuple, tuple, int]]:
    """(key motif, value motif, position of the value's first token) of a fuzzy-recall sequence,
    the left padding dropped: maximal runs of key tokens [0, K), then of value tokens [K, pad)."""
    start = int(np.argmax(row != pad))
    assert (row[:start] == pad).all() and (row[start:] != pad).all()
    pairs, t = [], start
    while t < len(row):
        k0 = t
        while t < len(row) and row[t] < n_keys:
            t += 1
        v0 = t
        while t < len(row) and n_keys <= row[t] < pad:
            t += 1
        pairs.append((tuple(row[k0:v0]), tuple(row[v0:t]), v0))
    return pairs


@pytest.mark.parametrize("split", ["train", "test"])
def test_fuzzy_recall_against_its_definition(split):
    options = mad.FuzzyRecallOptions(split=split)
    batch = _draw("fuzzy_recall", 48, 2, split=split)
    n_keys, pad = options.key_count(), options.vocab_size - 1
    sequence = np.concatenate([batch.inputs, batch.targets[:, -1:]], axis=1)
    assert sequence.shape == (48, options.seq_len + 1)
    for b, row in enumerate(sequence):
        pairs = _parse_fuzzy(row, n_keys, pad)
        expected = np.zeros(len(row), bool)
        value_of: dict[tuple, tuple] = {}
        for j, (k, v, at) in enumerate(pairs):
            assert 1 <= len(k) <= options.k_motif_size and len(set(k)) == len(k)
            assert 1 <= len(v) <= options.v_motif_size and len(set(v)) == len(v)
            if split == "test":
                assert len(k) == options.k_motif_size  # MAD prompts every key at its largest size
            assert value_of.setdefault(k, v) == v  # one value per key
            if any(pairs[i][0] == k for i in range(j)):
                expected[at : at + len(v)] = True
        if split == "test":
            np.testing.assert_array_equal(batch.scored[b], expected[1:])
        else:
            assert batch.scored[b].all()


def _fuzzy_numpy(rng: np.random.Generator, o: mad.FuzzyRecallOptions) -> tuple[int, int, bool]:
    """MAD's fuzzy-recall definition drawn in NumPy, one sequence: (pairs before the final probe,
    left padding, whether the probe's key appeared before the end)."""
    n_keys, km, vm = o.key_count(), o.k_motif_size, o.v_motif_size

    def motif(low, high, size):
        return tuple(rng.permutation(np.arange(low, high))[:size])

    ks = km if o.split == "test" else int(rng.integers(1, km + 1))
    vs = int(rng.integers(1, vm + 1))
    probe_key = motif(0, n_keys, ks)
    probe_at = int(rng.integers(0, o.seq_len - 2 * (ks + vs)))
    length, pairs, added = 0, 0, False
    while length < o.seq_len - (ks + vs) - (km + vm):
        k_size = km if o.split == "test" else int(rng.integers(1, km + 1))
        v_size = int(rng.integers(1, vm + 1))
        if length >= probe_at and not added:
            length, pairs, added = length + ks + vs, pairs + 1, True
            continue
        key = motif(0, n_keys, k_size)
        added |= key == probe_key
        length, pairs = length + k_size + v_size, pairs + 1  # (a repeated key's value keeps its size: rare)
    return pairs, o.seq_len + 1 - (length + ks + vs), added


@pytest.mark.parametrize("split", ["train", "test"])
def test_fuzzy_recall_statistics_match_the_definition(split):
    options = mad.FuzzyRecallOptions(split=split)
    n_keys, pad = options.key_count(), options.vocab_size - 1
    batch = _draw("fuzzy_recall", 400, 5, split=split)
    sequence = np.concatenate([batch.inputs, batch.targets[:, -1:]], axis=1)
    parsed = [_parse_fuzzy(row, n_keys, pad) for row in sequence]
    ours_pairs = np.mean([len(p) - 1 for p in parsed])
    ours_pad = np.mean([int(np.argmax(row != pad)) for row in sequence])
    ours_shown = np.mean([p[-1][0] in {q[0] for q in p[:-1]} for p in parsed])
    rng = np.random.default_rng(0)
    draws = [_fuzzy_numpy(rng, options) for _ in range(400)]
    ref_pairs, ref_pad, ref_shown = (np.mean([d[i] for d in draws]) for i in range(3))
    assert ours_pairs == pytest.approx(ref_pairs, rel=0.05)
    assert ours_pad == pytest.approx(ref_pad, abs=0.6)
    assert ours_shown == pytest.approx(ref_shown, abs=0.06)


def test_selective_copying_against_its_definition():
    o = mad.SelectiveCopyOptions()
    batch = _draw("selective_copying", 256, 1)
    n, t, blank, copy = o.num_tokens_to_copy, o.seq_len, o.vocab_size - 2, o.vocab_size - 1
    assert (batch.inputs[:, t - n - 1] == copy).all() and (batch.inputs[:, t - n :] == blank).all()
    assert (batch.scored.sum(1) == n).all() and batch.scored[:, t - n :].all()
    gaps = []
    for row, target in zip(batch.inputs, batch.targets):
        head = row[: t - n - 1]
        content = head[head != blank]
        np.testing.assert_array_equal(content, target[t - n :])  # copied in order, 16 whatever blanks
        assert head[-1] != blank  # MAD inserts blanks before indices 0..n-1: the last one precedes the copy
        where = np.flatnonzero(head != blank)
        gaps.append(np.diff(np.concatenate([[-1], where])) - 1)
    # blanks before each content token: Multinomial(t - 2n - 1, uniform over the n gaps), as np.insert
    # of t - 2n - 1 blanks at uniform indices of [0, n) gives
    rng = np.random.default_rng(0)
    reference = []
    for _ in range(256):
        seq = np.insert(np.arange(n), rng.integers(0, n, t - 2 * n - 1), -1)
        reference.append(np.diff(np.concatenate([[-1], np.flatnonzero(seq >= 0)])) - 1)
    np.testing.assert_allclose(np.mean(gaps, 0), np.mean(reference, 0), rtol=0.08)
    assert np.mean(gaps) == pytest.approx((t - 2 * n - 1) / n, rel=1e-6)


def test_selective_copying_honours_the_copy_count():
    batch = _draw("selective_copying", 4, 0, num_tokens_to_copy=5, seq_len=40)
    assert (batch.scored.sum(1) == 5).all() and (batch.inputs != 14).sum(1).tolist() == [6] * 4


def test_compression_targets_are_its_inputs():
    batch = _draw("compression", 256, 0)
    assert (batch.inputs[:, -1] == 15).all() and batch.scored.all()
    np.testing.assert_array_equal(batch.targets, batch.inputs)
    counts = np.bincount(batch.inputs[:, :-1].ravel(), minlength=16)
    assert counts[15] == 0 and counts[:15].min() > 0.85 * counts[:15].mean()


def test_memorization_table_and_slots():
    keys, values = mad.fact_table(256, 12345)
    assert sorted(keys.tolist()) == list(range(127)) and len(set(values.tolist())) == 127
    assert values.min() >= 127 and values.max() <= 254
    rng = np.random.default_rng(12345)  # MAD's order: the key list shuffled, then the value list
    shuffled_keys = rng.permutation(127)
    assert keys.tolist() == shuffled_keys.tolist()
    table = dict(zip(keys.tolist(), values.tolist()))
    for seed in (0, 1):  # one table whatever the batch's key
        batch = _draw("memorization", 32, seed)
        assert (batch.inputs[:, 1::2] == 255).all() and batch.scored[:, 1::2].all() and not batch.scored[:, 0::2].any()
        got = [table[k] for k in batch.inputs[:, 0::2].ravel().tolist()]
        assert got == batch.targets[:, 1::2].ravel().tolist()
    other = _draw("memorization", 32, 0, table_seed=7)
    assert not np.array_equal(mad.fact_table(256, 7)[0], keys) and other.inputs.shape == (32, 32)


def test_macro_accuracy_against_a_loop():
    from src.tasks.objectives import _macro_accuracy
    from src.tasks.tokens import TokenBatch

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 9, 5)).astype(np.float32)
    targets = rng.integers(0, 4, (6, 9)).astype(np.int32)  # class 4 never a target
    scored = rng.random((6, 9)) < 0.6
    got = float(
        _macro_accuracy(
            jnp.asarray(logits), TokenBatch(jnp.asarray(targets), jnp.asarray(targets), jnp.asarray(scored))
        )["macro_accuracy"]
    )
    right = logits.argmax(-1) == targets
    per_class = [right[scored & (targets == c)].mean() for c in range(5) if (scored & (targets == c)).any()]
    assert got == pytest.approx(np.mean(per_class), abs=1e-6)


def test_compress_read_out_decodes_the_last_state_only():
    import haiku as hk

    from src.models.sequence import SequenceConfig, decode_last
    from src.registry import choice

    c = SequenceConfig(
        preset="lm", inputs="tokens", width=8, vocab_size=5, norm=choice("norm", "layer_norm"), read_out="compress"
    )
    f = hk.without_apply_rng(hk.transform(lambda h: decode_last(c, h)))
    h = jax.random.normal(jax.random.key(0), (2, 6, 8))
    params = f.init(jax.random.key(1), h)
    other = h.at[:, :-1].set(jax.random.normal(jax.random.key(2), (2, 5, 8)))
    np.testing.assert_array_equal(f.apply(params, h), f.apply(params, other))
    out = f.apply(params, h)
    assert out.shape == (2, 6, 8) and not np.allclose(out[:, 0], out[:, 1])  # positions tell the rows apart


BAD_OPTIONS = (
    ("selective_copying", {"num_tokens_to_copy": 200}, "seq_len"),
    ("noisy_recall", {"frac_noise": 1.5}, "frac_noise"),
    ("fuzzy_recall", {"k_motif_size": 9}, "k_motif_size"),
    ("in_context_recall", {"split": "dev"}, "split"),
    ("memorization", {"seq_len": 33}, "seq_len"),
    ("in_context_recall", {"frac_noise": 0.3}, "frac_noise"),  # noise slots need noise tokens
)


@pytest.mark.parametrize("name,options,word", BAD_OPTIONS)
def test_bad_options_one_line(name, options, word):
    from src.registry import choice
    from src.settings import SettingsError
    from src.systems.lm import LMSettings, lm_settings_unchecked

    settings = lm_settings_unchecked(
        choice("task", name, **options),
        choice("seq_mixer", "softmax_causal"),
        choice("state_mixer", "swiglu"),
        width=16,
        n_layer=1,
        n_head=2,
    )
    with pytest.raises(SettingsError) as err:
        LMSettings.validate(settings)
    assert word in str(err.value) and "\n" not in str(err.value)


def test_listed_in_choices_and_bad_options_exit_2():
    done = subprocess.run(
        [sys.executable, "-m", "runners.recipe", "--choices"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0
    for name in NAMES:
        assert f"task:{name}" in done.stdout
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "runners.recipe",
            "wandb:None",
            "task:selective_copying",
            "--task.num_tokens_to_copy",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "seq_len" in done.stderr
