"""limits_of_icl's `local_global` attention (src/models/mixers/attention.py) against a NumPy loop whose
visible keys follow the original's mask, built as its constructor builds it (window, then each
global position as a query over its whole past and as a key for every later query); its options
in one line; and its YAML in the original's keys."""

import numpy as np
import pytest

from src.flags import UsageError
from src.cli.gpt2 import settings_from_config
from tests.test_mechanisms import B, H, K, T, X, out_projection, run, split_qkv


def original_mask(block: int, window, global_indices) -> np.ndarray:
    mask = np.zeros((block, block), bool)
    for i in range(block):
        start = 0 if window is None else max(0, i - window + 1)
        mask[i, start : i + 1] = True
    for g in global_indices:
        if 0 <= g < block:
            mask[g, : g + 1] = True
    for i in range(block):
        for g in global_indices:
            if 0 <= g <= i < block:
                mask[i, g] = True
    return mask


def np_masked_attention(q, k, v, mask):
    out = np.zeros_like(q)
    for b in range(B):
        for h in range(H):
            for t in range(T):
                keys = np.flatnonzero(mask[t])
                s = np.array([q[b, t, h] @ k[b, j, h] for j in keys]) / np.sqrt(K)
                p = np.exp(s - s.max())
                out[b, t, h] = (p / p.sum()) @ v[b, keys, h]
    return out


@pytest.mark.parametrize("window, global_indices", [(2, (3,)), (3, (0, 5)), (None, (2,)), (2, ())])
def test_local_global_matches_the_originals_mask(window, global_indices):
    got, params, _ = run("local_global", X, local_window_size=window, global_attn_indices=global_indices)
    q, k, v = split_qkv(params, X)
    mask = original_mask(T, window, global_indices)
    np.testing.assert_allclose(got, out_projection(params, np_masked_attention(q, k, v, mask)), atol=1e-5, rtol=1e-5)


def test_the_originals_local_global_config_reads_as_typed():
    raw = {
        "model": {
            "family": "gpt2",
            "n_dims": 20,
            "n_embd": 32,
            "n_head": 2,
            "n_layer": 2,
            "n_positions": 41,
            "attention_type": "local_global",
            "attention_kwargs": {"local_window_size": 15, "global_attn_indices": [20, 40]},
        },
        "training": {
            "task": "linear_regression",
            "train_steps": 3,
            "curriculum": {
                "dims": {"start": 20, "end": 20, "inc": 1, "interval": 100},
                "points": {"start": 41, "end": 41, "inc": 2, "interval": 100},
            },
        },
    }
    mixer = settings_from_config(raw)[0].model.seq_mixer
    assert mixer.name == "local_global" and mixer.options.local_window_size == 15
    assert mixer.options.global_attn_indices == (20, 40)
    raw["model"]["attention_kwargs"] = {"local_window_size": -1}
    with pytest.raises(UsageError, match=r"local_window_size=-1 is not accepted; accepted: an integer >= 1"):
        settings_from_config(raw)
    raw["model"]["attention_kwargs"] = {"global_attn_indices": [3, "x"]}
    with pytest.raises(UsageError, match=r"global_attn_indices\[1\]='x' is not accepted"):
        settings_from_config(raw)


def test_the_mask_builds_inside_a_traced_program():
    """Training traces the model: the mask with global positions is a NumPy constant (found by
    a short run of limits_of_icl's config: the mask was once read back from a traced array)."""
    import jax
    import jax.numpy as jnp
    from src.models.mixers.kit import local_global_mask

    out = jax.jit(lambda x: jnp.where(local_global_mask(6, 2, (0, 3)), x, 0.0))(jnp.ones((6, 6)))
    np.testing.assert_array_equal(np.asarray(out, bool), original_mask(6, 2, (0, 3)))
