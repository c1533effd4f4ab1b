"""Zoology's mixers (src/models/mixers/): each against a step-by-step NumPy reimplementation of its
definition (≤ 1e-5; the delta rule's in tests/test_zoo_delta_rule.py), causal bit for bit, and its
options refused in one line."""

from __future__ import annotations

import math
from pathlib import Path

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.models.mixers import convolutions
from src.registry import registry

WIDTH, HEADS, TOKENS = 12, 3, 23
ZOO = {
    "short_conv": {},
    "base_conv": {},
    "base_conv@long": {"kernel_size": -1},
    "delta_net": {},
    "delta_net@no_beta": {"use_beta": False},
    "gated_delta_net": {},
    "gated_delta_net@gate": {"use_gate": True},
    "based": {"feature_dim": 5},
    "hyena": {"filter_order": 8},
    "h3": {"d_state": 8},
    "h3@wide": {"head_dim": 3},
}


def mixer(name: str, **options):
    """(transformed, params, x [2, TOKENS, WIDTH]) of mixer `name` (a label `<mixer>@<variant>` names
    the mixer before the @)."""
    entry = registry("seq_mixer").get(name.split("@")[0])
    opts = entry.options(**options)
    f = hk.without_apply_rng(hk.transform(lambda x: entry.build(opts, width=WIDTH, num_heads=HEADS, name="m")(x)))
    x = jax.random.normal(jax.random.key(1), (2, TOKENS, WIDTH))
    params = f.init(jax.random.key(2), x)
    return hk.Transformed(f.init, jax.jit(f.apply)), params, x


def numpy_params(params) -> dict:
    return {
        f"{module.split('/')[-1]}/{name}": np.asarray(value, np.float64)
        for module, group in params.items()
        for name, value in group.items()
    }


def conv_numpy(x, w, b):
    """y_t = b + Σ_j w[k−1−j] x_{t−j}, one output at a time."""
    k = w.shape[0]
    y = np.zeros_like(x) + b
    for t in range(x.shape[1]):
        for j in range(min(k, t + 1)):
            y[:, t] += w[k - 1 - j] * x[:, t - j]
    return y


def test_short_conv_is_a_depthwise_causal_convolution():
    f, params, x = mixer("short_conv", kernel_size=3)
    p = numpy_params(params)
    expected = conv_numpy(np.asarray(x, np.float64), p["m/w"], p["m/b"])
    assert np.abs(np.asarray(f.apply(params, x)) - expected).max() <= 1e-5


def test_base_conv_gates_the_convolution_by_a_projection_plus_the_input():
    f, params, x = mixer("base_conv")
    p = numpy_params(params)
    xn = np.asarray(x, np.float64)
    expected = conv_numpy(xn, p["short_conv/w"], p["short_conv/b"]) * (xn @ p["projection/w"] + p["projection/b"]) + xn
    assert np.abs(np.asarray(f.apply(params, x)) - expected).max() <= 1e-5


def long_filter_numpy(p: dict, length: int, max_length: int, width: int) -> np.ndarray:
    """Zoology's implicit filter, written out: positions (t, cos, −sin), an MLP with one shared
    sine frequency, an exponential decay over the channels."""
    i = np.arange(length)
    t = i / (max_length - 1)
    z = np.stack([t, np.cos(2 * math.pi * 1e-4 * i / max_length), -np.sin(2 * math.pi * 1e-4 * i / max_length)], -1)
    sine = p["long_conv/frequency"]
    h = np.sin(sine * (z @ p["filter_in/w"] + p["filter_in/b"]))
    for k in range(2):
        h = np.sin(sine * (h @ p[f"filter_{k}/w"] + p[f"filter_{k}/b"]))
    h = h @ p["filter_out/w"]
    deltas = np.linspace(math.log(1e-2) / 1.5, math.log(1e-2) / 0.3, width)
    return h * np.exp(-t[:, None] * np.abs(deltas)[None])


@pytest.mark.parametrize("fft", [False, True])
def test_base_conv_with_the_implicit_long_filter(fft, monkeypatch):
    if fft:
        monkeypatch.setattr(convolutions, "FFT_FROM", 1)
    f, params, x = mixer("base_conv", kernel_size=-1)
    p = numpy_params(params)
    xn = np.asarray(x, np.float64)
    filt = long_filter_numpy(p, TOKENS, TOKENS, WIDTH)
    conv = np.zeros_like(xn)
    for t in range(TOKENS):
        for s in range(t + 1):
            conv[:, t] += filt[t - s] * xn[:, s]
    expected = (conv + xn) * (xn @ p["projection/w"] + p["projection/b"]) + xn
    assert np.abs(np.asarray(f.apply(params, x)) - expected).max() <= 1e-5


def test_a_fixed_max_length_keeps_the_filter_and_refuses_longer_inputs():
    entry = registry("seq_mixer").get("base_conv")
    opts = entry.options(kernel_size=-1, max_length=40)
    f = hk.without_apply_rng(hk.transform(lambda x: entry.build(opts, width=WIDTH, num_heads=HEADS)(x)))
    x = jax.random.normal(jax.random.key(3), (1, 30, WIDTH))
    params = f.init(jax.random.key(4), x)
    assert np.array_equal(np.asarray(f.apply(params, x[:, :20])), np.asarray(f.apply(params, x))[:, :20])
    with pytest.raises(ValueError, match="41 tokens exceed max_length=40"):
        f.apply(params, jnp.zeros((1, 41, WIDTH)))


@pytest.mark.parametrize("name", sorted(ZOO))
def test_changing_inputs_from_t_on_leaves_every_earlier_output_bit_identical(name):
    f, params, x = mixer(name, **ZOO[name])
    changed = x.at[:, 11:].set(jax.random.normal(jax.random.key(9), (2, TOKENS - 11, WIDTH)))
    before, after = np.asarray(f.apply(params, x)), np.asarray(f.apply(params, changed))
    assert np.array_equal(before[:, :11], after[:, :11])
    assert not np.allclose(before[:, 11:], after[:, 11:], atol=1e-3)


def based_numpy(p: dict, x: np.ndarray, feature_dim: int) -> np.ndarray:
    """Based as Zoology's linear view: the Taylor features written out (the full f² outer
    product), running sums of φ(k) vᵀ and φ(k), one position at a time."""
    b, t, d = x.shape
    size, f = d // HEADS, feature_dim
    q, k = ((x @ p[f"{n}/w"]).reshape(b, t, HEADS, f) for n in "qk")
    v = (x @ p["v/w"]).reshape(b, t, HEADS, size)

    def phi(u):
        outer = (u[..., :, None] * u[..., None, :]).reshape(*u.shape[:-1], f * f)
        return np.concatenate([np.ones(u.shape[:-1] + (1,)), u / f**0.25, outer / (math.sqrt(2) * math.sqrt(f))], -1)

    sums = np.zeros((b, HEADS, 1 + f + f * f, size))
    norms = np.zeros((b, HEADS, 1 + f + f * f))
    y = np.zeros((b, t, HEADS, size))
    for i in range(t):
        sums += phi(k[:, i])[..., None] * v[:, i, :, None, :]
        norms += phi(k[:, i])
        y[:, i] = np.einsum("bhe,bhek->bhk", phi(q[:, i]), sums) / (
            np.einsum("bhe,bhe->bh", phi(q[:, i]), norms)[..., None] + 1e-12
        )
    return y.reshape(b, t, d) @ p["out/w"]


@pytest.mark.parametrize("feature_dim", [5, 16])
def test_based_is_normalised_linear_attention_with_taylor_features(feature_dim):
    f, params, x = mixer("based", feature_dim=feature_dim)
    expected = based_numpy(numpy_params(params), np.asarray(x, np.float64), feature_dim)
    assert np.abs(np.asarray(f.apply(params, x)) - expected).max() <= 1e-5


def causal_filter_numpy(u: np.ndarray, filt: np.ndarray) -> np.ndarray:
    """y_t = Σ_{s≤t} filt_{t−s} ⊙ u_s, one output at a time; u [B, T, C], filt [T, C]."""
    y = np.zeros_like(u)
    for t in range(u.shape[1]):
        for s in range(t + 1):
            y[:, t] += filt[t - s] * u[:, s]
    return y


def test_hyena_gates_an_implicit_long_convolution():
    f, params, x = mixer("hyena", filter_order=8)
    p = numpy_params(params)
    xn = np.asarray(x, np.float64)
    projected = conv_numpy(xn @ p["in_proj/w"] + p["in_proj/b"], p["short_filter/w"], p["short_filter/b"])
    x1, x2, v = projected[..., :WIDTH], projected[..., WIDTH : 2 * WIDTH], projected[..., 2 * WIDTH :]
    v = v * x1
    p["long_conv/frequency"] = p["filter/frequency"]
    filt = long_filter_numpy(p, TOKENS, TOKENS, WIDTH)
    y = (causal_filter_numpy(v, filt) + p["m/skip"] * v) * x2
    expected = y @ p["out_proj/w"] + p["out_proj/b"]
    assert np.abs(np.asarray(f.apply(params, x)) - expected).max() <= 1e-5


def h3_numpy(p: dict, x: np.ndarray, n: int, size: int) -> np.ndarray:
    """H3 written out: the shift SSM as its N-tap filter, the diagonal SSM as a complex recurrence
    s_t = dA s_{t−1} + u_t read as 2 Re Σ C' s_t, one position at a time."""
    b, t, d = x.shape
    heads = d // size
    q, k, v = (x @ p[f"{name}/w"] + p[f"{name}/b"] for name in "qkv")
    taps = np.zeros((n, d))
    for j in range(n):
        for m in range(n - j):
            taps[j] += p["m/shift_b"][:, m] * p["m/shift_c"][:, m + j]
    shifted = np.zeros_like(k)
    for i in range(t):
        for j in range(min(n, i + 1)):
            shifted[:, i] += taps[j] * k[:, i - j]
    k = shifted + p["m/shift_skip"] * k
    a = -np.exp(p["m/a_real"]) + 1j * p["m/a_imag"]  # [H', N/2]
    dt = np.exp(p["m/log_dt"])[:, None]
    d_a = (1 + dt * a / 2) / (1 - dt * a / 2)
    c_prime = (p["m/b_re"] + 1j * p["m/b_im"]) * (p["m/c_re"] + 1j * p["m/c_im"]) * dt / (1 - dt * a / 2)
    kv = k.reshape(b, t, heads, size, 1) * v.reshape(b, t, heads, 1, size)
    modes = np.zeros((b, heads, size, size, n // 2), complex)
    out = np.zeros((b, t, heads, size))
    for i in range(t):
        modes = d_a[None, :, None, None, :] * modes + kv[:, i, ..., None]
        y = (
            2 * np.real(np.sum(c_prime[None, :, None, None, :] * modes, -1))
            + p["m/skip"][None, :, None, None] * kv[:, i]
        )
        out[:, i] = np.einsum("bhi,bhij->bhj", q[:, i].reshape(b, heads, size), y)
    return out.reshape(b, t, d) @ p["out/w"] + p["out/b"]


@pytest.mark.parametrize("n, size", [(8, 2), (30, 3), (64, 2)])
def test_h3_is_a_shift_ssm_and_a_diagonal_ssm_over_k_v_products(n, size):
    """d_state below, near and above the 23 tokens; head_dim 2 and 3."""
    f, params, x = mixer("h3", d_state=n, head_dim=size)
    expected = h3_numpy(numpy_params(params), np.asarray(x, np.float64), n, size)
    assert np.abs(np.asarray(f.apply(params, x)) - expected).max() <= 1e-5


@pytest.mark.parametrize(
    "name, options, words",
    [
        ("short_conv", {"kernel_size": 0}, "kernel_size=0; accepted: an integer >= 1"),
        ("base_conv", {"kernel_size": -2}, "kernel_size=-2; accepted: -1 (long) or an integer >= 1"),
        ("base_conv", {"max_length": -1}, "accepted: filter_order >= 1 and max_length >= 0"),
        ("base_conv", {"filter_order": 2.5}, "filter_order=2.5; accepted: an integer"),
        ("delta_net", {"conv_size": 0}, "conv_size=0; accepted: an integer >= 1"),
        ("delta_net", {"use_beta": "yes"}, "use_beta='yes'; accepted: true or false"),
        ("gated_delta_net", {"expand_v": 0}, "expand_v=0; accepted: an integer >= 1"),
        ("gated_delta_net", {"use_gate": 1}, "use_gate=1; accepted: true or false"),
        ("based", {"feature_dim": 0}, "feature_dim=0; accepted: an integer >= 1"),
        ("hyena", {"filter_order": 0}, "filter_order=0; accepted: an integer >= 1"),
        ("hyena", {"max_length": -3}, "max_length=-3; accepted: an integer >= 0"),
        ("h3", {"d_state": 7}, "d_state=7; accepted: an even integer >= 2"),
        ("h3", {"head_dim": 5}, "head_dim=5; accepted: a divisor of the width 12"),
    ],
)
def test_bad_options_are_one_line(name, options, words):
    """Refused when the model is built (h3's head_dim against the width: when it first sees x)."""
    entry = registry("seq_mixer").get(name)
    with pytest.raises(ValueError) as err:
        hk.transform(lambda x: entry.build(entry.options(**options), width=WIDTH, num_heads=HEADS)(x)).init(
            jax.random.key(0), jnp.zeros((1, 4, WIDTH))
        )
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_long_convolution_through_an_fft_is_causal_to_float32_rounding(monkeypatch):
    """The FFT mixes every position, so earlier outputs move in their last bits (said in the docs)."""
    monkeypatch.setattr(convolutions, "FFT_FROM", 1)
    x = jax.random.normal(jax.random.key(0), (2, 40, 6))
    filt = jax.random.normal(jax.random.key(1), (40, 6))
    before = np.asarray(convolutions.causal_long_conv(x, filt))
    after = np.asarray(convolutions.causal_long_conv(x.at[:, 20:].set(3.0), filt))
    assert np.abs(before[:, :20] - after[:, :20]).max() <= 1e-5
    assert np.abs(before[:, 20:] - after[:, 20:]).max() > 1e-2


ZOO_MIXERS = ["short_conv", "base_conv", "delta_net", "gated_delta_net", "based", "hyena", "h3", "mamba2", "rwkv7"]


@pytest.mark.parametrize("name", ZOO_MIXERS)
def test_each_trains_three_steps_through_the_recipe_and_a_gpt2_or_length_study_layout(name, tmp_path):
    """runners.recipe (`model.seq_mixer:<name>`, MQAR), then runners.train with a GPT-2 YAML
    (`attention_type`) for every other mixer of ZOO_MIXERS and with the length study's layout
    (configs/lengthgen.yaml, its Llama with `attention_type` in place of attention and no position
    encoding inside it) for the rest, 3 steps each, complete run directories (the slow tier:
    tests/slow_tests.py). Each mixer trains in two systems, each system with four or five mixers:
    both layouts name the mixer by the same model.seq_mixer setting, and every mixer's own shapes are
    test_registry_entries'."""
    import subprocess
    import sys

    from src.cli.gpt2 import main as train_main
    from src.rundir import RunDir

    root = Path(__file__).resolve().parent.parent
    recipe = subprocess.run(
        [
            sys.executable,
            "-m",
            "runners.recipe",
            "wandb:None",
            "task:mqar",
            f"model.seq_mixer:{name}",
            "model.state_mixer:mlp",
            "--task.vocab_size",
            "32",
            "--task.seq_len",
            "16",
            "--task.num_pairs",
            "2",
            "--model.width",
            "12",
            "--model.n_head",
            "3",
            "--train.train_steps",
            "3",
            "--train.log_every",
            "3",
            "--train.eval_size",
            "8",
            "--out",
            str(tmp_path / "recipe"),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert recipe.returncode == 0, recipe.stderr[-2000:]
    assert RunDir(tmp_path / "recipe").load_json("metrics_summary.json")["seq_mixer"] == name
    small = ["--set", "training.train_steps=3", "--set", "training.eval_size=8", "--quiet", "--skip_analysis"]
    layouts = {"train": (configs := root / "configs") / "quick.yaml", "lengthgen": configs / "lengthgen.yaml"}
    layout = ("train", "lengthgen")[ZOO_MIXERS.index(name) % 2]
    runs = {layout: layouts[layout]}
    sets = {
        "train": [
            "--set",
            f"model.attention_type={name}",
            "--set",
            "model.n_embd=12",
            "--set",
            "model.n_head=3",
            "--set",
            "model.n_layer=1",
        ],
        "lengthgen": [
            "--set",
            f"model.attention_type={name}",
            "--set",
            "model.position=nope",
            "--set",
            "model.hidden_size=12",
            "--set",
            "model.num_attention_heads=3",
            "--set",
            "model.num_hidden_layers=1",
            "--set",
            "training.batch_size=8",
            "--set",
            "training.log_every=3",
            "--set",
            "training.save_every_steps=3",
        ],
    }
    for run, config in runs.items():
        assert train_main([str(config), *sets[run], *small, "--out", str(tmp_path / run)]) == 0, run
        done = RunDir(tmp_path / run)
        assert done.is_complete() and done.load_json("metrics_summary.json")["steps"] == 3, run
        assert done.load_json("config.json")["settings"]["model"]["seq_mixer"]["name"] == name, run
