"""Garg et al.'s recurrent model: the `lstm` sequence mixer against a float64 NumPy loop of
PyTorch's nn.LSTM equations, the `lstm` preset (read-in, LSTM layers stacked with no residual or
norm, read-out) against the same loop end to end, its initialisation range, causality, and the
limits_of_icl YAML's `family: lstm` (its keys, one-line refusals, a short run)."""

import jax
import numpy as np
import pytest

from src.flags import UsageError
from src.cli.gpt2 import settings_from_config
from src.models.mixers.lstm import lstm_scan
from src.models.sequence import build_sequence
from src.models.sequence_presets import lstm

RNG = np.random.default_rng(0)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def np_lstm(x, w_x, b_x, w_h, b_h):
    """x [B, T, D] float64 -> h [B, T, D], one token at a time (gates i, f, g, o)."""
    b, t, d = x.shape
    h, c = np.zeros((b, d)), np.zeros((b, d))
    out = np.zeros((b, t, d))
    for step in range(t):
        gates = x[:, step] @ w_x + b_x + h @ w_h + b_h
        i, f, g, o = (gates[:, k * d : (k + 1) * d] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        out[:, step] = h
    return out


def test_the_lstm_recurrence_matches_pytorchs_equations():
    b, t, d = 3, 9, 6
    x = RNG.normal(size=(b, t, d))
    w_x, w_h = RNG.normal(size=(d, 4 * d)) * 0.5, RNG.normal(size=(d, 4 * d)) * 0.5
    b_x, b_h = RNG.normal(size=4 * d) * 0.3, RNG.normal(size=4 * d) * 0.3
    gates_x = np.einsum("btd,de->bte", x, w_x) + b_x
    got = lstm_scan(*(jax.numpy.asarray(a, jax.numpy.float32) for a in (gates_x, w_h, b_h)))
    np.testing.assert_allclose(np.asarray(got), np_lstm(x, w_x, b_x, w_h, b_h), atol=1e-5)


def preset_model(n_layer=2, width=8, n_dims=3, points=5):
    config = lstm(n_dims=n_dims, n_embd=width, n_layer=n_layer, n_positions=points)
    model = build_sequence(config)
    xs = jax.numpy.asarray(RNG.normal(size=(4, points, n_dims)), jax.numpy.float32)
    ys = jax.numpy.asarray(RNG.normal(size=(4, points)), jax.numpy.float32)
    params, state = model.init(jax.random.key(1), xs, ys)
    return model, params, state, xs, ys


def test_the_preset_is_read_in_plain_lstm_layers_and_read_out():
    model, params, state, xs, ys = preset_model()
    flat = {f"{m}/{n}": np.asarray(v, np.float64) for m, names in params.items() for n, v in names.items()}
    assert sorted(flat) == sorted(
        [
            "lstm/read_in/w",
            "lstm/read_in/b",
            "lstm/read_out/w",
            "lstm/read_out/b",
            *[f"lstm/block_{i}/seq_mixer/{p}" for i in range(2) for p in ("w_x", "b_x", "w_h", "b_h")],
        ]
    )
    tokens = np.stack([np.asarray(xs), np.zeros_like(xs)], axis=2).reshape(4, -1, xs.shape[-1])
    tokens[:, 1::2, 0] = np.asarray(ys)
    h = tokens @ flat["lstm/read_in/w"] + flat["lstm/read_in/b"]
    for i in range(2):
        h = np_lstm(h, *(flat[f"lstm/block_{i}/seq_mixer/{p}"] for p in ("w_x", "b_x", "w_h", "b_h")))
    expected = (h @ flat["lstm/read_out/w"] + flat["lstm/read_out/b"])[:, 0::2, 0]
    np.testing.assert_allclose(np.asarray(model.apply(params, state, xs, ys)), expected, atol=1e-5)


def test_initialisation_is_pytorchs_range_and_the_model_is_causal():
    model, params, state, xs, ys = preset_model()
    for i in range(2):
        for value in params[f"lstm/block_{i}/seq_mixer"].values():
            assert np.abs(np.asarray(value)).max() <= 1 / np.sqrt(8) and np.asarray(value).std() > 0.05
    before = np.asarray(model.apply(params, state, xs, ys))
    after = np.asarray(model.apply(params, state, xs.at[:, 3:].set(5.0), ys.at[:, 2:].set(-7.0)))
    np.testing.assert_array_equal(after[:, :3], before[:, :3])  # ŷ_i reads the pairs before i and x_i only
    assert not np.allclose(after[:, 3:], before[:, 3:])


GARG_LSTM = {
    "model": {"family": "lstm", "n_dims": 5, "n_embd": 16, "n_layer": 2, "n_positions": 11},
    "training": {
        "task": "linear_regression",
        "train_steps": 3,
        "batch_size": 8,
        "log_every": 3,
        "curriculum": {
            "dims": {"start": 5, "end": 5, "inc": 1, "interval": 100},
            "points": {"start": 11, "end": 11, "inc": 2, "interval": 100},
        },
    },
}


def test_family_lstm_reads_its_keys_and_refuses_others_in_one_line():
    model = settings_from_config(GARG_LSTM)[0].model
    assert (model.preset, model.width, model.n_layer, model.n_dims, model.max_tokens) == ("lstm", 16, 2, 5, 22)
    assert (model.seq_mixer.name, model.norm.name, model.state_mixer.name, model.residual) == (
        "lstm",
        "none",
        "none",
        False,
    )
    assert model.state_floats(22) == 2 * 2 * 16
    for key, value, message in (
        ("n_head", 4, r"model.n_head"),
        ("attention_type", "softmax_causal", "attention_type"),
        ("n_embd", 0, r"model.n_embd=0 is not accepted"),
        ("n_positions", 3, r"model.n_positions=3 is not accepted"),
    ):
        raw = {**GARG_LSTM, "model": {**GARG_LSTM["model"], key: value}}
        with pytest.raises(UsageError, match=message):
            settings_from_config(raw)


def test_an_lstm_config_trains_through_runners_train(tmp_path):
    import json
    import yaml
    from runners import train

    path = tmp_path / "lstm.yaml"
    path.write_text(yaml.safe_dump(GARG_LSTM))
    assert train.main(["--config", str(path), "--out", str(tmp_path / "run"), "--quiet", "--skip_analysis"]) == 0
    summary = json.loads((tmp_path / "run" / "metrics_summary.json").read_text())
    assert summary["model"] == "lstm" and np.isfinite(summary["eval_error_last"])
    settings = json.loads((tmp_path / "run" / "config.json").read_text())["settings"]
    assert settings["model"]["residual"] is False and settings["model"]["preset"] == "lstm"
    assert "residual" not in json.dumps(
        settings_from_config(
            {
                **GARG_LSTM,
                "model": {"family": "gpt2", "n_dims": 5, "n_embd": 16, "n_head": 2, "n_layer": 2, "n_positions": 11},
            }
        )[0].to_dict()
    )  # the transformer's records are unchanged
