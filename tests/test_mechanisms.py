"""limits_of_icl's attention mechanisms against independent NumPy implementations, causality for
every mixer, FAVOR+ against exact softmax attention, and the prefix-sum form."""

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.models.mixers.linear_attention import kernel_attention, kernel_prefix_attention
from src.registry import choice, registry

B, T, D, H = 2, 7, 16, 4
K = D // H


def mixer_fn(name, **options):
    c = choice("seq_mixer", name, **options)
    build = registry("seq_mixer").get(name).build
    return hk.without_apply_rng(
        hk.transform_with_state(lambda x: build(c.options, width=D, num_heads=H, name="mixer")(x))
    )


def run(name, x, **options):
    f = mixer_fn(name, **options)
    params, state = f.init(jax.random.key(0), x)
    params = jax.tree_util.tree_map(lambda a: a + 0.1 * jax.random.normal(jax.random.key(1), a.shape), params)
    return np.asarray(f.apply(params, state, x)[0]), jax.tree_util.tree_map(np.asarray, params), state


def split_qkv(params, x, kv_heads=H):
    w = params["mixer/qkv"]["w"]
    fused = x @ w
    q, k, v = np.split(fused, [H * K, H * K + kv_heads * K], axis=-1)
    return (q.reshape(B, T, H, K), k.reshape(B, T, kv_heads, K), v.reshape(B, T, kv_heads, K))


def np_softmax_attention(q, k, v, window=None):
    out = np.zeros_like(q)
    for b in range(B):
        for h in range(H):
            kh, vh = k[b, :, h % k.shape[2]], v[b, :, h % v.shape[2]]
            for t in range(T):
                lo = 0 if window is None else max(0, t - window + 1)
                s = np.array([q[b, t, h] @ kh[j] for j in range(lo, t + 1)]) / np.sqrt(K)
                p = np.exp(s - s.max())
                p /= p.sum()
                out[b, t, h] = p @ vh[lo : t + 1]
    return out


def np_kernel_attention(fq, fk, v, normalise):
    out = np.zeros(v.shape)
    for b in range(B):
        for h in range(H):
            for t in range(T):
                a = np.array([fq[b, t, h] @ fk[b, j, h] for j in range(t + 1)])
                out[b, t, h] = a @ v[b, : t + 1, h] / ((a.sum() + 1e-6) if normalise else 1.0)
    return out


def out_projection(params, y):
    return y.reshape(B, T, D) @ params["mixer/out"]["w"]


X = np.random.default_rng(0).normal(size=(B, T, D)).astype(np.float32)


@pytest.mark.parametrize(
    "name, options, window, kv", [("softmax_causal", {}, None, H), ("local", {"window": 3}, 3, H), ("mqa", {}, None, 1)]
)
def test_softmax_family_matches_numpy(name, options, window, kv):
    got, params, _ = run(name, X, **options)
    q, k, v = split_qkv(params, X, kv)
    want = out_projection(params, np_softmax_attention(q, k, v, window))
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_rela_matches_numpy():
    got, params, _ = run("rela", X)
    q, k, v = split_qkv(params, X)
    y = np.zeros_like(q)
    for t in range(T):
        s = np.maximum(np.einsum("bhk,bshk->bhs", q[:, t], k[:, : t + 1]) / np.sqrt(K), 0)
        y[:, t] = np.einsum("bhs,bshk->bhk", s, v[:, : t + 1])
    y = y.reshape(B, T, D)
    y = y / np.sqrt(np.mean(y**2, -1, keepdims=True) + 1e-6) * params["mixer/norm"]["scale"]
    gate = 1 / (1 + np.exp(-(X @ params["mixer/gate"]["w"])))
    np.testing.assert_allclose(got, (y * gate) @ params["mixer/out"]["w"], atol=1e-5, rtol=1e-5)


def test_linear_and_rebased_match_numpy():
    got, params, _ = run("linear", X)
    q, k, v = split_qkv(params, X)
    np.testing.assert_allclose(got, out_projection(params, np_kernel_attention(q, k, v, False)), atol=1e-5, rtol=1e-5)
    got, params, _ = run("rebased", X)
    q, k, v = split_qkv(params, X)
    g, b = params["mixer"]["gamma"], params["mixer"]["beta"]

    def phi(u):
        c = u - u.mean(-1, keepdims=True)
        return (g * c / np.sqrt((c**2).mean(-1, keepdims=True) + 1e-5) + b) ** 2

    np.testing.assert_allclose(
        got, out_projection(params, np_kernel_attention(phi(q), phi(k), v, True)), atol=1e-5, rtol=1e-5
    )


def test_linear_mean_divides_each_token_by_the_tokens_it_sees():
    got, params, _ = run("linear", X, scale="mean")
    q, k, v = split_qkv(params, X)
    seen = np.arange(1, T + 1)[None, :, None, None]  # token t sees t + 1 tokens (0-based)
    np.testing.assert_allclose(
        got, out_projection(params, np_kernel_attention(q, k, v, False) / seen), atol=1e-5, rtol=1e-5
    )
    with pytest.raises(ValueError, match="scale='max'.*sum, mean"):
        run("linear", X, scale="max")


def test_prefix_sums_equal_the_masked_product():
    rng = np.random.default_rng(2)
    fq, fk = np.abs(rng.normal(size=(2, B, T, H, 5))).astype(np.float32)
    v = rng.normal(size=(B, T, H, K)).astype(np.float32)
    for normalise in (True, False):
        np.testing.assert_allclose(
            kernel_prefix_attention(fq, fk, v, normalise), kernel_attention(fq, fk, v, normalise), rtol=1e-5, atol=1e-5
        )


def test_favor_approaches_exact_softmax_as_features_grow():
    """Relative error of FAVOR+ to exact causal softmax attention, same q, k, v (unit scale)."""
    rng = np.random.default_rng(3)
    errors = []
    for m in (16, 64, 256):
        from src.models.mixers.linear_attention import orthogonal_gaussian, positive_random_features

        q, k = (rng.normal(size=(B, T, H, K)) / np.sqrt(K) ** 0.5 for _ in range(2))
        v = rng.normal(size=(B, T, H, K))
        exact = np_softmax_attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32))
        trial = []
        for seed in range(5):
            omega = orthogonal_gaussian(jax.random.key(seed), K, m)
            s = K**-0.25
            approx = kernel_attention(
                positive_random_features(jnp.asarray(q * s), omega),
                positive_random_features(jnp.asarray(k * s), omega),
                jnp.asarray(v),
            )
            trial.append(np.linalg.norm(np.asarray(approx) - exact) / np.linalg.norm(exact))
        errors.append(float(np.mean(trial)))
    assert errors[0] > errors[1] > errors[2] and errors[2] <= 0.1, errors


@pytest.mark.parametrize("name", ["softmax_causal", "local", "mqa", "rela", "favor", "rebased", "linear"])
def test_changing_a_later_token_changes_no_earlier_output(name):
    base, _, _ = run(name, X)
    for t in range(T - 1):
        changed = X.copy()
        changed[:, t + 1 :] += np.random.default_rng(t).normal(size=changed[:, t + 1 :].shape)
        out, _, _ = run(name, changed)
        np.testing.assert_allclose(out[:, : t + 1], base[:, : t + 1], atol=1e-6)
        assert not np.allclose(out[:, t + 1 :], base[:, t + 1 :])


def test_linear_attention_without_its_norm_is_causal_linear_self_attention():
    """linear_attention:feature_map=identity:output_norm=none is von Oswald et al.'s linear
    self-attention in causal form, y_t = Σ_{s<=t} (q_t · k_s) v_s, against a NumPy loop; the same map
    as `linear` (scale: sum) with the same parameters. Its default (output_norm: rms) keeps the
    RMSNorm per head, and stays out of the settings (recorded runs keep their digests)."""
    got, params, _ = run("linear_attention", X, feature_map="identity", output_norm="none")
    assert sorted(params) == ["mixer/out", "mixer/qkv"]  # no norm's scale
    q, k, v = split_qkv(params, X)
    lsa = np.zeros((B, T, H, K))
    for t in range(T):  # the causal sum written out, token by token
        for s in range(t + 1):
            lsa[:, t] += np.einsum("bh,bhk->bhk", np.einsum("bhk,bhk->bh", q[:, t], k[:, s]), v[:, s])
    np.testing.assert_allclose(got, out_projection(params, lsa), atol=1e-5, rtol=1e-5)
    linear, linear_params, _ = run("linear", X)
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(np.array_equal, linear_params, params))
    np.testing.assert_allclose(got, linear, atol=1e-5, rtol=1e-5)

    normed, params, _ = run("linear_attention", X, feature_map="identity")
    q, k, v = split_qkv(params, X)
    rms = lsa / np.sqrt(np.mean(lsa**2, -1, keepdims=True) + 1e-6) * params["mixer/norm"]["scale"]
    np.testing.assert_allclose(normed, out_projection(params, rms), atol=1e-4, rtol=1e-4)

    entry = registry("seq_mixer").get("linear_attention")
    with pytest.raises(ValueError, match=r"^output_norm='layer' is unknown; accepted: rms, none$"):
        entry.options(output_norm="layer").check()
    from dataclasses import replace
    from src.systems.gpt2 import GPT2Settings

    settings = GPT2Settings()
    model = settings.model
    plain = replace(settings, model=replace(model, seq_mixer=choice("seq_mixer", "linear_attention")))
    assert "output_norm" not in plain.to_dict()["model"]["seq_mixer"]["options"]
    lsa_settings = replace(
        settings, model=replace(model, seq_mixer=choice("seq_mixer", "linear_attention", output_norm="none"))
    )
    assert lsa_settings.to_dict()["model"]["seq_mixer"]["options"]["output_norm"] == "none"
