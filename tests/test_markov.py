"""In-context Markov chains (src/tasks/markov.py): the generator against NumPy references of its
definition and its statistics, the estimators against loops over the counts, the objective, the
relative position encoding against an explicit score, and the task's place in the recipe."""

from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.registry import choice, registry
from src.tasks.markov import (
    MarkovOptions,
    bigram_next,
    permutation_matrices,
    sample_markov,
    stationary,
    transition_matrices,
    unigram_next,
)
from src.tasks.objectives import objective_of


def _unigram_loop(tokens: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((*tokens.shape, k))
    for b, row in enumerate(tokens):
        counts = np.zeros(k)
        for t, x in enumerate(row):
            counts[x] += 1
            out[b, t] = (counts + 1) / (t + 1 + k)
    return out


def _bigram_loop(tokens: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((*tokens.shape, k))
    for b, row in enumerate(tokens):
        counts = np.zeros((k, k))
        for t, x in enumerate(row):
            if t:
                counts[row[t - 1], x] += 1
            out[b, t] = (counts[x] + 1) / (counts[x].sum() + k)
    return out


@pytest.mark.parametrize("k", [2, 3, 5])
def test_estimators_match_counting_loops(k):
    tokens = np.asarray(jax.random.randint(jax.random.key(k), (4, 37), 0, k))
    np.testing.assert_allclose(np.asarray(unigram_next(jnp.asarray(tokens), k)), _unigram_loop(tokens, k), atol=1e-6)
    np.testing.assert_allclose(np.asarray(bigram_next(jnp.asarray(tokens), k)), _bigram_loop(tokens, k), atol=1e-6)


def _reference_walk(transitions, first, gumbels):
    """The definition in NumPy: x_0 = first, x_{t+1} = argmax_j (log P[x_t, j] + g_t,j) (the
    Gumbel-max draw of Categorical(P[x_t]))."""
    batch = len(first)
    seq = [np.asarray(first)]
    log_p = np.log(np.maximum(transitions, 1e-30))
    for g in gumbels:
        seq.append(np.argmax(log_p[np.arange(batch), seq[-1]] + g, axis=-1))
    return np.stack(seq, 1)


def test_sequences_follow_their_chain_draw_for_draw():
    """The sampler's tokens are the NumPy walk of the same chains and the same Gumbel draws."""
    o = MarkovOptions(num_states=3, seq_len=20)
    key = jax.random.key(7)
    batch = sample_markov(key, 5, o)
    k_chain, k_first, k_steps = jax.random.split(key, 3)
    transitions = np.asarray(transition_matrices(k_chain, 5, o))
    gumbels = np.asarray(jax.random.gumbel(k_steps, (o.seq_len, 5, 3)))
    first = np.asarray(batch.inputs[:, 0])
    walk = _reference_walk(transitions, first, gumbels)
    np.testing.assert_array_equal(np.asarray(batch.inputs), walk[:, :-1])
    np.testing.assert_array_equal(np.asarray(batch.targets), walk[:, 1:])
    np.testing.assert_allclose(np.asarray(batch.next_probs), transitions[np.arange(5)[:, None], walk[:, :-1]])
    assert bool(jnp.all(batch.scored))


def test_statistics_of_the_draws():
    """Dirichlet(1) rows: P[0, 0] uniform on [0, 1] for k = 2; the first token from π; each next
    token from P[x_t] (mean of 1[x_{t+1} = j] − P[x_t, j] is 0 within 5 standard errors)."""
    o = MarkovOptions(num_states=2, seq_len=30)
    transitions = np.asarray(transition_matrices(jax.random.key(0), 20_000, o))
    np.testing.assert_allclose(transitions.sum(-1), 1.0, atol=1e-6)
    assert abs(transitions[:, 0, 0].mean() - 0.5) < 0.01 and abs(transitions[:, 0, 0].var() - 1 / 12) < 0.004
    batch = sample_markov(jax.random.key(1), 20_000, MarkovOptions(num_states=3, seq_len=30))
    k_chain = jax.random.split(jax.random.key(1), 3)[0]
    pi = np.asarray(stationary(transition_matrices(k_chain, 20_000, MarkovOptions(num_states=3))))
    first = np.eye(3)[np.asarray(batch.inputs[:, 0])] - pi
    assert np.all(np.abs(first.mean(0)) < 5 * first.std(0) / np.sqrt(len(first)))
    surprise = np.eye(3)[np.asarray(batch.targets)] - np.asarray(batch.next_probs)  # [B, T, k]
    flat = surprise.reshape(-1, 3)
    assert np.all(np.abs(flat.mean(0)) < 5 * flat.std(0) / np.sqrt(len(flat)))


def test_stationary_distribution_is_stationary():
    transitions = transition_matrices(jax.random.key(3), 64, MarkovOptions(num_states=4))
    pi = stationary(transitions)
    np.testing.assert_allclose(np.asarray(jnp.einsum("bi,bij->bj", pi, transitions)), np.asarray(pi), atol=1e-4)


def test_doubly_stochastic_chains():
    """Rows and columns sum to 1 (π uniform); for k = 2 the paper's [[a, 1 − a], [1 − a, a]], a ~ U(0, 1)."""
    assert permutation_matrices(3).shape == (6, 3, 3)
    for k in (2, 3):
        p = np.asarray(
            transition_matrices(jax.random.key(k), 10_000, MarkovOptions(num_states=k, doubly_stochastic=True))
        )
        np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
        np.testing.assert_allclose(p.sum(-2), 1.0, atol=1e-5)
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
    p2 = np.asarray(transition_matrices(jax.random.key(9), 10_000, MarkovOptions(num_states=2, doubly_stochastic=True)))
    np.testing.assert_allclose(p2[:, 0, 0], p2[:, 1, 1], atol=1e-6)
    assert abs(p2[:, 0, 0].mean() - 0.5) < 0.01 and abs(p2[:, 0, 0].var() - 1 / 12) < 0.004


def test_seeded_and_deterministic():
    o = MarkovOptions(num_states=3, seq_len=50)
    a, b = sample_markov(jax.random.key(5), 8, o), sample_markov(jax.random.key(5), 8, o)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    c = sample_markov(jax.random.key(6), 8, o)
    assert not np.array_equal(np.asarray(a.inputs), np.asarray(c.inputs))


def test_objective_scores_against_the_true_distribution():
    """A model predicting P[x_t] scores the chain's conditional entropy, the bigram estimator more,
    uniform log k; the loss is the drawn tokens' cross-entropy."""
    o = MarkovOptions(num_states=3, seq_len=60)
    batch = sample_markov(jax.random.key(2), 256, o)
    objective = objective_of("markov_chain")
    truth = objective.score(jnp.log(batch.next_probs), batch)
    entropy = -np.sum(np.asarray(batch.next_probs) * np.log(np.asarray(batch.next_probs)), -1)
    np.testing.assert_allclose(np.asarray(truth.score), entropy, rtol=1e-5)
    drawn = -np.log(np.take_along_axis(np.asarray(batch.next_probs), np.asarray(batch.targets)[..., None], -1))
    np.testing.assert_allclose(float(truth.loss), drawn.mean(), rtol=1e-5)
    bigram = objective.score(jnp.log(bigram_next(batch.inputs, 3)), batch)
    uniform = objective.score(jnp.zeros((*batch.inputs.shape, 3)), batch)
    assert float(truth.score.mean()) < float(bigram.score.mean()) < float(uniform.score.mean())
    np.testing.assert_allclose(float(uniform.score.mean()), np.log(3), rtol=1e-6)
    distances = objective.extras(jnp.log(bigram_next(batch.inputs, 3)), batch)
    assert float(distances["kl_bigram"]) < 1e-6 < float(distances["kl_unigram"])


def test_markov_baselines_are_registered_for_the_task_only():
    names = [e.name for e in registry("baseline") if e.is_applicable("markov_chain") and e.name.startswith("markov_")]
    assert names == ["markov_bigram", "markov_uniform", "markov_unigram"]
    for name in names:
        assert not registry("baseline").get(name).is_applicable("linear_regression")
        assert not registry("baseline").get(name).is_applicable("mqar")


def test_relative_scores_match_an_explicit_sum():
    """Softmax attention under `relative`: score(i, j) = (q_i·k_j + q_i·r_{i−j}) / √K."""
    import haiku as hk

    from src.models.mixers.attention import _softmax_attention
    from src.models.mixers.kit import causal_mask
    from src.models.positions import Relative

    b, t, h, size = 2, 6, 2, 4
    q, k, v = (jax.random.normal(jax.random.key(i), (b, t, h, size)) for i in range(3))
    f = hk.transform(lambda q, k, v: _softmax_attention(q, k, v, causal_mask(t), Relative(8)))
    params = f.init(jax.random.key(9), q, k, v)
    out = np.asarray(f.apply(params, None, q, k, v))
    table = np.asarray(params["~"]["relative_keys"]).reshape(8, h, size)
    qn, kn, vn = map(np.asarray, (q, k, v))
    expected = np.zeros_like(out)
    for i in range(t):
        scores = np.stack([np.einsum("bhk,bhk->bh", qn[:, i], kn[:, j] + table[i - j]) for j in range(i + 1)], -1)
        weights = np.exp(scores / np.sqrt(size) - (scores / np.sqrt(size)).max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        expected[:, i] = np.einsum("bhj,bjhk->bhk", weights, vn[:, : i + 1])
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_bad_options_one_line_exit_2():
    for argv, word in (
        (["task:markov_chain", "--task.num_states", "1"], "num_states"),
        (["task:markov_chain", "--task.alpha", "0"], "alpha"),
        (["task:markov_chain", "--task.num_states", "9", "--task.doubly_stochastic"], "num_states"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "runners.recipe", "wandb:None", *argv], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and word in lines[0], done.stderr


def test_listed_in_choices():
    done = subprocess.run(
        [sys.executable, "-m", "runners.recipe", "--choices"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "markov_chain" in done.stdout
    assert "relative" in registry("position").names()


def test_induction_preset_trains_a_few_steps():
    from src.loop import train
    from src.models.sequence_presets import induction
    from src.systems import build
    from src.systems.lm import LMSettings, LMTrain

    settings = LMSettings(
        task=choice("task", "markov_chain", num_states=2, seq_len=20),
        model=induction(2, 20),
        train=LMTrain(steps=4, batch_size=8, eval_size=16, log_every=2, warmup_fraction=None),
    ).validate()
    trainer = build(settings)
    result = train(trainer)
    row = result.history[-1]
    assert {"eval_cross_entropy", "eval_kl_unigram", "eval_kl_bigram"} <= set(row)
    scores = trainer.baseline_scores()
    assert scores["markov_uniform"] == pytest.approx(np.log(2), abs=2e-6)  # recorded to 6 decimals
    assert scores["markov_bigram"] < scores["markov_uniform"]


@pytest.mark.study
def test_quick_study_writes_the_report(tmp_path):
    """scripts.markov --quick: two cells of one seed, the report's tables, the results' curves and
    the paper's claims; a second run reuses the runs."""
    import json
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    args = [sys.executable, "-m", "scripts.markov", "--quick", "--runs-dir", str(tmp_path / "runs")]
    args += ["--report-dir", str(tmp_path / "report")]
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "markov_results.json").read_text())
    assert set(results["cells"]) == {"k2_dirichlet", "k2_doubly"}
    for cell in results["cells"].values():
        (run,) = cell["runs"]
        assert run["curve"][-1][0] == 300 and len(run["curve"]) == 6  # a row every 50 steps
        b = cell["baselines"]
        assert b["bigram"] < b["uniform"] and b["uniform"] == pytest.approx(np.log(2), abs=2e-6)
    text = (tmp_path / "report" / "MARKOV.md").read_text()
    assert "QUICK" in text and "| k = 2, Dirichlet(1) rows | 1 |" in text and "doubly stochastic" in text
    assert (tmp_path / "report" / "figures" / "markov" / "cross_entropy.png").stat().st_size > 1000
    again = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "2 already finished" in again.stdout + again.stderr
