"""Position encodings (src/models/positions.py, the length study): the relative ones give attention
scores that depend only on i − j (a shift test), YaRN at s = 1 is RoPE, dynamic YaRN is RoPE
within the trained length, NoPE sees positions only through the causal mask (a permutation
test), and each formula matches an independent NumPy computation."""

from __future__ import annotations

import math

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.models import positions as P
from src.models.mixers.kit import causal_mask
from src.registry import registry

T, H, K = 12, 4, 8


def encoding(name: str, trained_tokens: int = T, **options):
    entry = registry("position").get(name)
    return entry.build(entry.options(**options), trained_tokens=trained_tokens)


def scores_with(enc, q, k):
    """[B, H, T, T] scores of q, k [B, T, H, K] under `enc` (rotate, then logits)."""

    def f(q, k):
        q2, k2 = enc.rotate(q, k)
        return enc.logits(jnp.einsum("bthk,bshk->bhts", q2, k2) / math.sqrt(K))

    fn = hk.without_apply_rng(hk.transform(f))
    params = fn.init(jax.random.PRNGKey(1), q, k)
    return np.asarray(fn.apply(params, q, k))


def shifted_pair(seed: int = 0):
    """q, k [1, T, H, K] where every position carries the same content vector: scores can then
    depend on positions only."""
    rng = np.random.default_rng(seed)
    q_vec, k_vec = rng.normal(size=(H, K)), rng.normal(size=(H, K))
    q = jnp.asarray(np.broadcast_to(q_vec, (1, T, H, K)), jnp.float32)
    k = jnp.asarray(np.broadcast_to(k_vec, (1, T, H, K)), jnp.float32)
    return q, k


@pytest.mark.parametrize("name", ["rope", "alibi", "fire", "yarn"])
def test_relative_encodings_depend_only_on_i_minus_j(name):
    """Same content at every position: the score of (i, j) must equal that of (i + s, j + s)."""
    options = {"threshold": 1e6} if name == "fire" else {}  # FIRE is relative below its threshold L
    scores = scores_with(encoding(name, **options), *shifted_pair())[0]  # [H, T, T]
    for shift in (1, 3):
        for i in range(T - shift):
            for j in range(i + 1):
                np.testing.assert_allclose(scores[:, i, j], scores[:, i + shift, j + shift], rtol=1e-4, atol=1e-5)


def test_absolute_and_nope_are_not_relative_but_rope_is_not_trivial():
    rope = scores_with(encoding("rope"), *shifted_pair())[0]
    assert np.ptp(rope[0][np.tril_indices(T)]) > 1e-3  # positions do change the scores
    nope = scores_with(encoding("nope"), *shifted_pair())[0]
    assert np.ptp(nope[0]) < 1e-6  # NoPE: no position in the scores


def test_yarn_with_scale_1_is_rope_and_dynamic_yarn_is_rope_within_the_trained_length():
    q, k = (jnp.asarray(np.random.default_rng(s).normal(size=(2, T, H, K)), jnp.float32) for s in (1, 2))
    rope = scores_with(encoding("rope"), q, k)
    np.testing.assert_allclose(scores_with(encoding("yarn", scale=1.0), q, k), rope, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        scores_with(encoding("dynamic_yarn", trained_tokens=T), q, k), rope, rtol=1e-6, atol=1e-6
    )
    longer = scores_with(encoding("dynamic_yarn", trained_tokens=T // 2), q, k)  # s = 2 now
    assert np.max(np.abs(longer - rope)) > 1e-3
    np.testing.assert_allclose(
        longer, scores_with(encoding("yarn", scale=2.0, original_tokens=T // 2), q, k), rtol=1e-6, atol=1e-6
    )


def test_rotary_matches_numpy_complex_rotation():
    x = np.random.default_rng(3).normal(size=(1, T, H, K)).astype(np.float32)
    freqs = P.rope_frequencies(K)
    got = np.asarray(P.apply_rotary(jnp.asarray(x), freqs))
    z = x[..., 0::2] + 1j * x[..., 1::2]
    rotated = z * np.exp(1j * np.arange(T)[None, :, None, None] * freqs)
    want = np.stack([rotated.real, rotated.imag], axis=-1).reshape(x.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_yarn_frequencies_interpolate_only_long_wavelengths():
    freqs = P.rope_frequencies(64)
    yarn = P.yarn_frequencies(64, 1e4, 4.0, original_tokens=64)
    rotations = 64 * freqs / (2 * math.pi)
    assert np.allclose(yarn[rotations > 32], freqs[rotations > 32])  # fast: kept
    assert np.allclose(yarn[rotations < 1], freqs[rotations < 1] / 4.0)  # slow: interpolated
    assert P.yarn_logit_scale(1.0) == 1.0
    assert P.yarn_logit_scale(4.0) == pytest.approx((0.1 * math.log(4.0) + 1) ** 2)


def test_alibi_slopes_and_bias_match_the_formula():
    np.testing.assert_allclose(P.alibi_slopes(8), [2**-(h) for h in range(1, 9)])
    scores = scores_with(encoding("nope"), *shifted_pair())
    biased = scores_with(encoding("alibi"), *shifted_pair())
    i, j = 7, 2
    np.testing.assert_allclose(biased[0, :, i, j] - scores[0, :, i, j], -P.alibi_slopes(H) * (i - j), rtol=1e-5)


def test_sinusoidal_table_matches_numpy():
    table = P.sinusoidal_table(T, 6)
    for pos in (0, 5, 11):
        for i in range(3):
            rate = 1e4 ** (-2 * i / 6)
            assert table[pos, 2 * i] == pytest.approx(math.sin(pos * rate), abs=1e-6)
            assert table[pos, 2 * i + 1] == pytest.approx(math.cos(pos * rate), abs=1e-6)


def test_nope_with_a_causal_mask_sees_positions_only_through_the_mask():
    """One softmax attention layer without positions: the output at t is invariant to any
    permutation of the tokens before t (the prefix), but not to moving a token past t."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(1, T, H, K)).astype(np.float32) for _ in range(3))

    def attend(q, k, v):
        s = scores_with(encoding("nope"), jnp.asarray(q), jnp.asarray(k))
        s = np.where(np.asarray(causal_mask(T)), s, -np.inf)
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        return np.einsum("bhts,bshk->bthk", w, v)

    t = T - 1
    perm = np.concatenate([rng.permutation(t), [t]])
    base, permuted = attend(q, k, v), attend(q, k[:, perm], v[:, perm])
    np.testing.assert_allclose(permuted[:, t], base[:, t], rtol=1e-5, atol=1e-6)
    swap = np.arange(T)
    swap[[0, t]] = swap[[t, 0]]  # move the last token to the front: the mask sees it
    assert np.max(np.abs(attend(q[:, swap], k[:, swap], v[:, swap])[:, t] - base[:, t])) > 1e-3


def test_learned_table_refuses_to_index_past_its_length_in_one_line():
    enc = encoding("learned", trained_tokens=8)
    fn = hk.transform(lambda: enc.absolute(10, 4))
    with pytest.raises(ValueError, match="cannot index past"):
        fn.init(jax.random.PRNGKey(0))
    assert enc.max_tokens() == 8


def test_score_encodings_refuse_kernelised_mixers_and_bad_yarn_scales():
    for name in ("alibi", "fire", "rope", "yarn", "dynamic_yarn"):
        with pytest.raises(ValueError, match="does not form"):
            encoding(name).require_plain("favor")
    for name in ("nope", "learned", "sinusoidal"):
        encoding(name).require_plain("favor")  # embeddings only: any mixer
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="scale"):
            encoding("yarn", scale=bad)


def test_every_seed_002_encoding_is_registered():
    assert set(registry("position").names()) >= {
        "nope",
        "learned",
        "sinusoidal",
        "rope",
        "alibi",
        "fire",
        "yarn",
        "dynamic_yarn",
    }


def _gpt2(position: str, mixer: str = "softmax_causal"):
    from src.models.sequence import build_sequence
    from src.models.sequence_presets import gpt2
    from src.registry import choice

    config = gpt2(
        n_dims=3,
        n_embd=16,
        n_head=4,
        n_layer=2,
        n_positions=4,
        mixer=choice("seq_mixer", mixer),
        position=choice("position", position),
    )
    model = build_sequence(config)
    xs, ys = jnp.ones((2, 4, 3)), jnp.ones((2, 4))
    params, state = model.init(jax.random.PRNGKey(0), xs, ys)
    return model, params, state


@pytest.mark.parametrize("name", ["nope", "sinusoidal", "rope", "alibi", "fire", "yarn", "dynamic_yarn"])
def test_gpt2_with_a_non_table_encoding_predicts_past_its_trained_length(name):
    model, params, state = _gpt2(name)
    xs = jax.random.normal(jax.random.PRNGKey(1), (2, 16, 3))  # 4x the trained points
    out = model.apply(params, state, xs, xs[..., 0])
    assert out.shape == (2, 16) and bool(jnp.all(jnp.isfinite(out)))


def test_gpt2_with_learned_positions_says_it_cannot_index_past_its_table():
    model, params, state = _gpt2("learned")
    with pytest.raises(ValueError, match="cannot index past"):
        model.apply(params, state, jnp.ones((1, 5, 3)), jnp.ones((1, 5)))


def test_the_config_refuses_an_encoding_its_mixer_cannot_take_and_a_bad_yarn_scale():
    from src.flags import UsageError
    from src.cli.gpt2 import settings_from_config

    base = {"model": {"n_dims": 5, "n_positions": 11}, "training": {}}
    for model, words in (
        ({"attention_type": "favor", "position": "alibi"}, "does not form"),
        ({"position": "yarn", "position_kwargs": {"scale": 0}}, "scale"),
        ({"position": "rotary"}, "model.position='rotary' is unknown"),
    ):
        raw = {**base, "model": {**base["model"], **model}}
        with pytest.raises(UsageError, match=words):
            settings_from_config(raw)
    settings, _ = settings_from_config({**base, "model": {**base["model"], "position": "rope"}})
    assert settings.model.position.name == "rope"
