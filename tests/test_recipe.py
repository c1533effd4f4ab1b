"""The ICL benchmark's suite: the token tasks' generators (statistically), the linear mixers' chunked form
against a step-by-step recurrence and a NumPy loop, causality of every recipe mixer, the state
mixers' sizes, and the recipe command line end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.models.mixers.gated_linear_attention import chunked_decay_attention, recurrent_decay_attention
from src.registry import registry
from src.tasks.tokens import DisjointOptions, MQAROptions, sample_disjoint, sample_mqar

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mqar():
    options = MQAROptions(vocab_size=128, seq_len=64, num_pairs=8, power_a=0.01)
    return options, jax.tree.map(np.asarray, sample_mqar(jax.random.key(0), 2000, options))


def test_mqar_pairs_queries_and_scored_positions(mqar):
    options, batch = mqar
    half, kappa = options.vocab_size // 2, options.num_pairs
    for b in range(200):
        inputs, targets, scored = batch.inputs[b], batch.targets[b], batch.scored[b]
        keys, values = inputs[0 : 2 * kappa : 2], inputs[1 : 2 * kappa : 2]
        assert len(set(keys)) == kappa and np.all((keys >= 1) & (keys < half))
        assert len(set(values)) == kappa and np.all((values >= half) & (values < options.vocab_size))
        where = np.flatnonzero(scored)
        assert len(where) == kappa and np.all(where >= 2 * kappa)
        assert sorted(inputs[where]) == sorted(keys)  # every key queried once
        pair = dict(zip(keys, values))
        assert all(targets[p] == pair[inputs[p]] for p in where)  # the target is its value
        unscored = inputs[2 * kappa :][~scored[2 * kappa :]]  # filler 0 and the values
        assert np.all((unscored == 0) | (unscored >= half))
        assert np.array_equal(targets[:-1], inputs[1:])  # next-token targets


def test_mqar_query_slots_follow_the_power_law(mqar):
    options, batch = mqar
    kappa = options.num_pairs
    slots = (options.seq_len + 1 - 2 * kappa) // 2
    where = np.concatenate([(np.flatnonzero(s) - 2 * kappa) // 2 for s in batch.scored])
    counts = np.bincount(where, minlength=slots) / len(batch.scored)  # P(slot used) per sequence
    # a = 0.01: the weight of slot s is ∝ (s + 1)^(−0.99), so the first slots are taken far more
    # often than the last (a uniform draw would use every slot with probability κ / slots = 0.33)
    assert counts[0] > 0.9 and counts[-1] < 0.15 and np.all(np.diff(counts[:8]) < 0.02)


def test_mqar_noise_filler_never_adds_a_key():
    options = MQAROptions(vocab_size=64, seq_len=40, num_pairs=4, filler="noise")
    batch = jax.tree.map(np.asarray, sample_mqar(jax.random.key(1), 300, options))
    tail = batch.inputs[:, 2 * options.num_pairs :]
    unscored = tail[~batch.scored[:, 2 * options.num_pairs :]]
    assert np.all(unscored >= options.vocab_size // 2)  # keys appear only as queries
    assert len(np.unique(unscored)) > 20  # and the filler is not constant


def test_disjoint_sets_share_exactly_one_token():
    options = DisjointOptions(vocab_size=64, set_size=6)
    batch = jax.tree.map(np.asarray, sample_disjoint(jax.random.key(2), 2000, options))
    m, half = options.set_size, options.vocab_size // 2
    for b in range(2000):
        first, second = batch.inputs[b, :m], batch.inputs[b, m + 1 : 2 * m + 1]
        shared = set(first) & set(second)
        assert len(shared) == 1 and batch.targets[b, -1] == shared.pop()
        assert len(set(first)) == m and len(set(second)) == m
        assert np.all(first < half) and np.sum(second < half) == 1
    assert np.array_equal(np.flatnonzero(batch.scored[0]), [2 * m + 1])
    # the shared token's place in each list is uniform
    where = [np.flatnonzero(batch.inputs[b, :m] == batch.targets[b, -1])[0] for b in range(2000)]
    assert np.all(np.abs(np.bincount(where, minlength=m) / 2000 - 1 / m) < 0.04)


@pytest.mark.parametrize("decay", ["data", "steep", "zero", "none"])
def test_chunked_recurrence_equals_the_step_by_step_form_and_a_numpy_loop(decay):
    """GLA's decays ("data"; "steep": log α down to −40 a step, so a chunk's cumulative decay
    reaches e^−300, far past float32's range, and nothing may overflow), α = 1 through the decay
    path ("zero") and linear attention's no-decay path (log_alpha=None) against the
    one-step-at-a-time scan and a NumPy loop."""
    keys = jax.random.split(jax.random.key(3), 4)
    b, t, h, f, k = 2, 37, 3, 8, 5
    q, kk = jax.random.normal(keys[0], (b, t, h, f)), jax.random.normal(keys[1], (b, t, h, f))
    v = jax.random.normal(keys[2], (b, t, h, k))
    log_alpha = {
        "data": jax.nn.log_sigmoid(2 * jax.random.normal(keys[3], (b, t, h, f))),
        "steep": -40.0 * jax.random.uniform(keys[3], (b, t, h, f)),
    }.get(decay, jnp.zeros((b, t, h, f)))
    chunked = np.asarray(chunked_decay_attention(q, kk, v, None if decay == "none" else log_alpha, chunk=8))
    recurrent = np.asarray(recurrent_decay_attention(q, kk, v, log_alpha))
    assert np.max(np.abs(chunked - recurrent)) <= 1e-5 * max(1.0, np.abs(recurrent).max() / 10)
    state, loop = np.zeros((b, h, f, k)), []
    qn, kn, vn, an = (np.asarray(a, np.float64) for a in (q, kk, v, log_alpha))
    for i in range(t):
        state = np.exp(an[:, i])[..., None] * state + kn[:, i][..., None] * vn[:, i][..., None, :]
        loop.append(np.einsum("bhf,bhfk->bhk", qn[:, i], state))
    assert np.allclose(chunked, np.stack(loop, 1), atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("name", registry("seq_mixer").names())
def test_every_sequence_mixer_is_causal(name):
    entry = registry("seq_mixer").get(name)
    f = hk.without_apply_rng(
        hk.transform_with_state(lambda x: entry.build(entry.default_options(), width=16, num_heads=2, name="m")(x))
    )
    x = jax.random.normal(jax.random.key(4), (1, 21, 16))
    params, state = f.init(jax.random.key(5), x)
    changed = x.at[:, 13:].set(jax.random.normal(jax.random.key(6), (1, 8, 16)))
    before, after = (np.asarray(f.apply(params, state, inputs)[0]) for inputs in (x, changed))
    assert np.allclose(before[:, :13], after[:, :13], atol=1e-5)
    assert not np.allclose(before[:, 13:], after[:, 13:], atol=1e-3)


@pytest.mark.parametrize("feature_map", ["identity", "elu1", "relu", "hadamard", "hedgehog"])
def test_linear_attention_feature_maps_run_and_stay_causal(feature_map):
    entry = registry("seq_mixer").get("linear_attention")
    options = entry.options(feature_map=feature_map)
    f = hk.without_apply_rng(hk.transform(lambda x: entry.build(options, width=8, num_heads=2)(x)))
    x = jax.random.normal(jax.random.key(7), (2, 10, 8))
    params = f.init(jax.random.key(8), x)
    out = f.apply(params, x)
    assert out.shape == (2, 10, 8) and np.all(np.isfinite(np.asarray(out)))
    assert np.allclose(np.asarray(f.apply(params, x.at[:, 6:].set(0.0)))[:, :6], np.asarray(out)[:, :6], atol=1e-5)


def test_state_mixer_sizes():
    sizes = {}
    for name in ("mlp", "glu", "swiglu"):
        entry = registry("state_mixer").get(name)
        f = hk.without_apply_rng(hk.transform(lambda x: entry.build(entry.default_options())(x)))
        params = f.init(jax.random.key(0), jnp.ones((1, 2, 24)))
        sizes[name] = {k: tuple(v["w"].shape) for k, v in params.items()}
    assert sorted(sizes["mlp"].values()) == [(24, 96), (96, 24)]
    assert sorted(sizes["glu"].values()) == [(24, 96), (24, 96), (96, 24)]
    assert sorted(sizes["swiglu"].values()) == [(24, 64), (24, 64), (64, 24)]  # 8 · 24 / 3


def run_recipe(*argv: str):
    return subprocess.run(
        [sys.executable, "-m", "runners.recipe", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )


def test_recipe_choices_and_help_list_the_components_and_their_options():
    done = run_recipe("--choices")
    assert done.returncode == 0
    for name in (
        "task:mqar",
        "task:disjoint_sets",
        "task:parity",
        "model.seq_mixer:gated_linear_attn",
        "model.state_mixer:swiglu",
    ):
        assert name in done.stdout
    done = run_recipe("task:mqar", "model.seq_mixer:linear_attention", "model.state_mixer:mlp", "--help")
    assert done.returncode == 0
    for flag in ("--task.num_pairs", "--model.seq_mixer.feature_map", "--train.learning_rate", "--model.width"):
        assert flag in done.stdout


def test_recipe_trains_and_writes_accuracy_and_examples(tmp_path):
    done = run_recipe(
        "wandb:None",
        "task:mqar",
        "model.seq_mixer:gated_linear_attn",
        "model.state_mixer:glu",
        "--task.vocab_size",
        "64",
        "--task.seq_len",
        "32",
        "--task.num_pairs",
        "4",
        "--model.width",
        "16",
        "--model.n_head",
        "2",
        "--train.train_steps",
        "20",
        "--train.log_every",
        "10",
        "--train.eval_size",
        "32",
        "--out",
        str(tmp_path / "run"),
    )
    assert done.returncode == 0, done.stderr
    assert "wandb" not in done.stderr and not (tmp_path / "run" / "wandb").exists()  # wandb:None: none
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [10, 20] and all(0 <= r["eval_accuracy"] <= 1 for r in rows)
    examples = json.loads((tmp_path / "run" / "examples.json").read_text())
    assert len(examples) == 3 and len(examples[0]["scored_positions"]) == 4
    summary = json.loads((tmp_path / "run" / "metrics_summary.json").read_text())
    assert summary["status"] == "complete" and summary["seq_mixer"] == "gated_linear_attn"


@pytest.mark.parametrize("task, kind", [("conjunction", "sign"), ("linear_regression", "real")])
def test_pair_task_scores_match_numpy(task, kind):
    """evaluate() on a pair task: accuracy of sign ŷ per point (boolean) or squared error / d
    (regression), each against NumPy on the model's own predictions."""
    from src.cli.recipe import parse
    from src.systems.lm import LMTrainer

    settings = parse(
        [
            f"task:{task}",
            "model.seq_mixer:attention",
            "model.state_mixer:mlp",
            "--model.width",
            "16",
            "--pairs.n_dims",
            "5",
            "--pairs.n_points",
            "8",
            "--train.eval_size",
            "64",
        ]
    )[0]
    trainer = LMTrainer(settings)
    params = trainer.init_state().params
    batch = registry("task").get(task).build(settings.task.options, n_points=8, n_dims=5)(jax.random.key(1), 64, 5, 8)
    trainer._evaluation = batch
    scores = trainer.scores(params)
    result = {"accuracy_by_position": scores["by_position"], "accuracy": scores["value"]}
    prediction = np.asarray(trainer.apply(params, batch.xs, batch.ys), np.float64)
    ys = np.asarray(batch.ys, np.float64)
    if kind == "sign":
        want = (np.sign(prediction) == ys).mean(0)
    else:
        want = ((prediction - ys) ** 2 / 5).mean(0)
    np.testing.assert_allclose(result["accuracy_by_position"], want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(result["accuracy"], want.mean(), rtol=1e-5)


def test_default_run_directories_are_named_by_what_differs():
    """A loop over any flag makes one run per value: runs/recipe/<components>_<changed flags>_seed<s>."""
    from src.cli.recipe import parse

    name = lambda *argv: str(parse(list(argv))[1])
    assert name("task:mqar") == "runs/recipe/mqar_attention_mlp_seed0"
    loop = {
        name("task:mqar", "model.seq_mixer:gated_linear_attn", "--task.num_pairs", k, "--train.seed", "2")
        for k in ("4", "8", "16")
    }
    assert loop == {
        f"runs/recipe/mqar_gated_linear_attn_mlp{'_num_pairs' + k if k != '8' else ''}_seed2" for k in ("4", "8", "16")
    }
    assert (
        name("task:parity", "--pairs.n_points", "12", "--model.width", "32")
        == "runs/recipe/parity_attention_mlp_width32_n_points12_seed0"
    )
    assert name("task:mqar", "--out", "elsewhere") == "elsewhere"


def test_a_hybrid_runs_default_name_reads_cleanly():
    """The stack takes the sequence mixer's place, joined by +, options after dots: no `:`, `,` or
    `=` in the directory's name, and not the unused default mixer."""
    from src.cli.recipe import parse

    name = lambda *argv: str(parse(["wandb:None", "task:mqar", *argv])[1])
    assert name("--model.seq_mixers", "short_conv,attention") == "runs/recipe/mqar_short_conv+attention_mlp_seed0"
    assert (
        name("--model.seq_mixers", "base_conv,base_conv:kernel_size=-1", "--task.num_pairs", "4")
        == "runs/recipe/mqar_base_conv+base_conv.kernel_size-1_mlp_num_pairs4_seed0"
    )
    assert (
        name("model.seq_mixer:based", "--model.seq_mixers", "based,attention")
        == "runs/recipe/mqar_based+attention_mlp_seed0"
    )
