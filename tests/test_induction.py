"""Induction and copying scores (analysis/induction.py): the prefix score against a loop and on a
constructed induction head, the eigenvalue positivity on known matrices, the OV circuit's K x K
form against the full V x V one sliced another way, and the analysis on a trained-for-a-step run."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.induction import copying_scores, head_matrices, positivity, prefix_scores, read_in_out


def _causal_uniform(batch: int, heads: int, t: int) -> np.ndarray:
    w = np.tril(np.ones((t, t)))
    return np.broadcast_to(w / w.sum(1, keepdims=True), (batch, heads, t, t)).copy()


def test_prefix_score_against_a_loop():
    rng = np.random.default_rng(0)
    repeat, t = 7, 15
    weights = rng.random((2, 3, 4, t, t))
    weights /= weights.sum(-1, keepdims=True)
    expected = np.zeros((2, 4))
    for layer in range(2):
        for head in range(4):
            values = [
                weights[layer, b, head, q, q - repeat + 1] for b in range(3) for q in range(repeat + 1, 2 * repeat)
            ]
            expected[layer, head] = np.mean(values)
    np.testing.assert_allclose(prefix_scores(weights, repeat), expected, rtol=1e-12)


def test_a_constructed_induction_head_scores_one_and_a_previous_token_head_none():
    repeat = 10
    t = 1 + 2 * repeat
    weights = np.stack([_causal_uniform(2, 2, t)])  # [1, B, H, T, T]
    for q in range(t):
        weights[0, :, 0, q] = 0
        weights[0, :, 0, q, q - repeat + 1 if q > repeat else 0] = 1  # head 0: the token after the first occurrence
        weights[0, :, 1, q] = 0
        weights[0, :, 1, q, max(q - 1, 0)] = 1  # head 1: the previous token
    scores = prefix_scores(weights, repeat)
    assert scores[0, 0] == 1.0 and scores[0, 1] == 0.0
    uniform = prefix_scores(np.stack([_causal_uniform(1, 1, t)]), repeat)[0, 0]
    assert uniform == pytest.approx(np.mean([1 / (q + 1) for q in range(repeat + 1, 2 * repeat)]))


def test_positivity_of_known_matrices():
    assert positivity(np.eye(4)) == pytest.approx(1.0)
    assert positivity(-np.eye(4)) == pytest.approx(-1.0)
    assert positivity(np.array([[0.0, -1.0], [1.0, 0.0]])) == pytest.approx(0.0, abs=1e-12)  # eigenvalues ±i
    assert positivity(np.diag([3.0, -1.0])) == pytest.approx(0.5)
    assert positivity(np.zeros((3, 3))) == 0.0


@pytest.mark.parametrize("mixer", ["softmax_causal", "mqa"])
def test_copying_score_equals_the_full_circuit(mixer):
    import jax

    from src.models.sequence_presets import lm
    from src.registry import choice
    from src.systems.lm import LMSettings, init_model, make_model

    model = lm(width=16, n_layer=2, n_head=4, max_len=12, vocab_size=10, seq_mixer=choice("seq_mixer", mixer))
    settings = LMSettings(task=choice("task", "mqar", vocab_size=10, seq_len=12, num_pairs=2), model=model).validate()
    params, _ = init_model(settings, make_model(settings))
    params = jax.tree_util.tree_map(np.asarray, params)
    got = copying_scores(params, model)
    embed, unembed = read_in_out(params, model)
    k = model.width // model.n_head
    for layer in range(2):
        root = f"lm/block_{layer}/seq_mixer"
        qkv, out = params[f"{root}/qkv"]["w"], params[f"{root}/out"]["w"]
        kv = 1 if mixer == "mqa" else 4
        values = qkv[:, (4 + kv) * k :].reshape(16, kv, k)  # another slicing of the fused weight
        outs = out.reshape(4, k, 16)
        for head in range(4):
            full = embed @ values[:, head * kv // 4] @ outs[head] @ unembed  # [V, V]
            assert got[layer, head] == pytest.approx(positivity(full), abs=1e-5)
        assert len(head_matrices(params, model, layer)) == 4


def test_the_analysis_on_a_run_and_its_refusals(tmp_path):
    """A 2-step MQAR run of attention: the files, the shapes, the losses; a Mamba-2 run is refused
    in one line (exit 2), naming what is accepted."""
    import json
    import subprocess
    import sys

    def recipe(mixer: str, name: str) -> None:
        args = [sys.executable, "-m", "runners.recipe", "wandb:None", f"model.seq_mixer:{mixer}", "--model.width", "16"]
        args += ["--task.vocab_size", "32", "--task.seq_len", "24", "--task.num_pairs", "2"]
        args += ["--train.train_steps", "2", "--train.eval_size", "8", "--train.batch_size", "4"]
        args += ["--out", str(tmp_path / name)]
        done = subprocess.run(args, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]

    recipe("attention", "att")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "analysis.induction",
            "--run",
            str(tmp_path / "att"),
            "--repeat",
            "8",
            "--sequences",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads((tmp_path / "att" / "analysis" / "induction.json").read_text())
    assert out["repeat"] == 8 and np.asarray(out["prefix"]).shape == np.asarray(out["copying"]).shape
    assert np.all(np.abs(out["copying"]) <= 1.0) and out["loss_first_repeat"] > 0
    assert (tmp_path / "att" / "analysis" / "induction_heads.png").stat().st_size > 1000
    recipe("mamba2", "ssm")
    done = subprocess.run(
        [sys.executable, "-m", "analysis.induction", "--run", str(tmp_path / "ssm")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "softmax" in done.stderr


def test_repeated_tokens_task_against_its_definition():
    import jax

    from src.registry import registry
    from src.tasks.repeats import RepeatOptions

    options = RepeatOptions(vocab_size=16, repeat=12, min_repeat=3)
    draw = lambda seed: jax.tree_util.tree_map(  # noqa: E731
        np.asarray,
        jax.jit(lambda k: registry("task").get("repeated_tokens").build(options)(k, 256))(jax.random.key(seed)),
    )
    batch, again = draw(0), draw(0)
    assert all(np.array_equal(a, b) for a, b in zip(batch, again))
    assert batch.inputs.shape == (256, 25) and (batch.inputs[:, 0] == 0).all()
    np.testing.assert_array_equal(batch.targets[:, :-1], batch.inputs[:, 1:])
    lengths = []
    for row, scored in zip(batch.inputs, batch.scored):
        (where,) = np.nonzero(scored)
        r = int(where[0]) - 1  # scored from R + 1 to 2R − 1
        assert where.tolist() == list(range(r + 1, 2 * r)) and 3 <= r <= 12
        np.testing.assert_array_equal(row[1 : r + 1], row[r + 1 : 2 * r + 1])  # the second copy repeats the first
        lengths.append(r)
    assert set(lengths) == set(range(3, 13))  # every length drawn


def test_bad_repeat_options_one_line():
    from src.registry import choice
    from src.settings import SettingsError
    from src.systems.lm import LMSettings
    from src.models.sequence_presets import induction

    settings = LMSettings(task=choice("task", "repeated_tokens", repeat=4, min_repeat=9), model=induction(64, 9))
    with pytest.raises(SettingsError, match="min_repeat"):
        settings.validate()
