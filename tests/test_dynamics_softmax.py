"""The training-dynamics paper's --softmax (src/models/dynamics_softmax.py, src/systems/dynamics.py):
the direct forward pass without softmax is the moments path's loss; with softmax the system's
losses equal a plain NumPy transcription of the original's Attention_Merge / Attention_Separate
and compute_loss (loops over heads and prefixes, softmax over the keys); the command line runs,
records softmax in config.json and reruns from it bit for bit; the MLP refuses it."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import src.models.dynamics_softmax as direct
from src import rundir as names
from src.cli.dynamics import main as dynamics_main
from src.cli.rerun import main as rerun_main
from src.loop import train as loop_train
from src.registry import choice, registry
from src.systems.dynamics import (
    DynamicsSettings,
    DynamicsTrain,
    DynamicsTrainer,
    moments,
    prefix_moments,
    quadratic_loss,
)
from src.tasks.dynamics import DynamicsTaskConfig, make_sets

TASK = DynamicsTaskConfig(in_dim=3, seq_len=6, trainset_size=40, testset_size=20, seed=3)
MODELS = ("attn_merged", "attn_separate")
LOSS = jax.jit(direct.loss, static_argnames=("softmax", "prefixes", "per_length"))


def settings(model, epochs=2, **train):
    options = {"heads": 2, **({"rank": 2} if model == "attn_separate" else {})}
    return DynamicsSettings(
        task=TASK,
        model=choice("dynamics_model", model, **options),
        train=DynamicsTrain(epochs=epochs, learning_rate=0.05, init=0.5, log_every=1, float64=True, **train),
    ).validate()


def build(s):
    return registry("dynamics_model").get(s.model.name).build(s.model.options)


@pytest.mark.parametrize("model", MODELS)
def test_the_direct_loss_without_softmax_is_the_moments_loss(model):
    m, sets = build(settings(model)), make_sets(TASK)
    with jax.enable_x64(True):
        p = m.init(jax.random.key(1), TASK.in_dim, 0.5)
        v, w, t = m.values(p), m.kq(p), m.coefficients(p)
        data = sets["train"]
        x, y = jnp.asarray(data.tokens), jnp.asarray(data.targets)
        pairs = [
            (
                LOSS(v, w, x, y, softmax=False),  # the loss, and --vary_len's test sets
                quadratic_loss(t, moments(lambda z: m.features(z, False), data, jnp.float64)),
            ),
            (
                LOSS(v, w, x, y, softmax=False, per_length=True),
                quadratic_loss(t, moments(lambda z: m.features(z, False) / z.shape[1], data, jnp.float64)),
            ),
            (
                LOSS(v, w, x, y, softmax=False, prefixes=True),  # --vary_len's training loss
                quadratic_loss(t, prefix_moments(lambda z: m.features(z, False), data, jnp.float64)),
            ),
        ]
        for got, want in pairs:
            assert abs(float(got) - float(want)) <= 1e-5 * abs(float(want)), (got, want)


def test_chunks_change_neither_the_loss_nor_its_gradient(monkeypatch):
    m, data = build(settings("attn_separate")), make_sets(TASK)["train"]
    with jax.enable_x64(True):
        p = m.init(jax.random.key(2), TASK.in_dim, 0.5)
        x, y = jnp.asarray(data.tokens), jnp.asarray(data.targets)
        f = lambda q: direct.loss(m.values(q), m.kq(q), x, y, prefixes=True)
        whole, whole_grad = jax.jit(jax.value_and_grad(f))(p)
        monkeypatch.setattr(direct, "CHUNK_ELEMENTS", 2 * 6 * 6 * 7)  # 7 sequences a chunk: 6, the last padded
        chunked, chunked_grad = jax.jit(jax.value_and_grad(f))(p)
        assert abs(float(chunked) - float(whole)) <= 1e-12 * float(whole)
        for k in p:
            assert np.allclose(chunked_grad[k], whole_grad[k], rtol=1e-10, atol=1e-14)


def numpy_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def numpy_forward(model, params, x, vary_len):
    """The original's forward, head by head: its x [B, N, D+1] -> out[:, -1, -1] (the query's y)."""
    out = np.zeros(len(x))
    for h in range(params["value"].shape[0]):
        if model == "attn_merged":  # the original's W_kq,h is our W_KQ,hᵀ: attn[n, m] = x_n · (W_kq,h x_m)
            kq = x @ params["kq"][h]  # rows: x_m W_KQ,h = (W_kq,h x_m)ᵀ
            attn = np.einsum("bnd,bmd->bnm", x, kq)
        else:  # attn[n, m] = Q_n · K_m
            q, k = x @ params["query"][h].T, x @ params["key"][h].T
            attn = np.einsum("bnr,bmr->bnm", q, k)
        attn = numpy_softmax(attn, -1)
        v = x @ params["value"][h]  # the value's y entry of each token
        out += np.einsum("bnm,bm->bn", attn, v)[:, -1]
    return out / x.shape[1] if vary_len else out


def numpy_loss(model, params, tokens, targets, vary_len):
    """The original's compute_loss: the MSE of the query, or with vary_len the mean over prefixes
    n = 2..N of the MSE of the prefix's last token, its y zeroed."""
    if not vary_len:
        return np.mean((numpy_forward(model, params, tokens, False) - targets) ** 2)
    total, length = 0.0, tokens.shape[1]
    for n in range(2, length + 1):
        seq = tokens[:, :n].copy()
        y = seq[:, -1, -1].copy() if n < length else targets
        seq[:, -1, -1] = 0.0
        total += np.mean((numpy_forward(model, params, seq, True) - y) ** 2)
    return total / (length - 1)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("vary_len", [False, True])
def test_softmax_losses_equal_the_original_in_numpy(model, vary_len):
    s = settings(model, softmax=True, vary_len=vary_len, track_value=True)
    trainer = DynamicsTrainer(s)
    with trainer.context():
        params = {k: np.asarray(v, np.float64) for k, v in trainer.init_state().params.items()}
        result = loop_train(trainer)
        out = trainer.trajectory(result)
    sets = make_sets(TASK)
    want = numpy_loss(model, params, sets["train"].tokens, sets["train"].targets, vary_len)
    assert abs(out["loss"][0] - want) <= 1e-5 * want, (out["loss"][0], want)
    for name in ("test_icl", "test_iwl"):
        test = sets[name]
        want = np.mean((numpy_forward(model, params, test.tokens, vary_len) - test.targets) ** 2)
        assert abs(out[f"{name}_loss"][0] - want) <= 1e-5 * want, name
    assert "gamma_diag" not in out and out["singular_values"].shape[0] == 3
    assert np.array_equal(out["value_yy"][0], params["value"][:, -1])
    assert out["loss"][-1] < out["loss"][0]


def test_softmax_trains_with_minibatch_sgd():
    trainer = DynamicsTrainer(settings("attn_merged", epochs=4, softmax=True, optimizer="sgd", batch_size=10))
    with trainer.context():
        loss = trainer.trajectory(loop_train(trainer))["loss"]
    assert np.all(np.isfinite(loss)) and loss[-1] < loss[0]


SMALL = [
    "--in_dim",
    "3",
    "--seq_len",
    "6",
    "--trainset_size",
    "60",
    "--testset",
    "20",
    "--init",
    "0.3",
    "--lr",
    "0.1",
    "--log_every",
    "5",
    "--quiet",
]


def test_the_command_line_trains_softmax_and_config_json_reruns_it_bit_for_bit(tmp_path):
    out, again = tmp_path / "run", tmp_path / "again"
    assert (
        dynamics_main(["--model", "attnS", "--head", "2", "--softmax", "--epoch", "20", *SMALL, "--out", str(out)]) == 0
    )
    config = json.loads((out / names.CONFIG).read_text())
    assert config["settings"]["train"]["softmax"] is True
    assert rerun_main(["--config", str(out / names.CONFIG), "--out", str(again), "--quiet", "--skip_analysis"]) == 0
    with np.load(out / names.DYNAMICS) as a, np.load(again / names.DYNAMICS) as b:
        assert a["loss"].shape == (20,) and "gamma_diag" not in a.files and sorted(a.files) == sorted(b.files)
        assert all(np.array_equal(a[k], b[k]) for k in a.files)
    record = json.loads((out / names.DYNAMICS_JSON).read_text())
    assert "theory_levels" not in record and "drops" in record


@pytest.mark.parametrize("flags", [["--model", "mlp"], ["--model", "mlp", "--cubic_feat"], ["--normalize"]])
def test_softmax_refusals_exit_2_with_one_line(flags, tmp_path, capsys):
    out = tmp_path / "never"
    assert dynamics_main(["--softmax", *flags, "--out", str(out)]) == 2 and not out.exists()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--softmax" in lines[0], lines
