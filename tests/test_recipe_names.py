"""The ICL benchmark's own spellings on the recipe (src/cli/recipe_names.py): each of its task
choices, fields and flags gives the same settings and run directory as ours typed, the tasks it
adds (the outlier regression, the random filler, lists of two lengths, renormalised noise) have
the statistics they promise, and a loop over its command makes one run per iteration."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from src.cli.recipe import main as recipe_main, parse
from src.registry import choice, registry
from src.tasks.tokens import DisjointOptions, MQAROptions, sample_disjoint, sample_mqar

SAME = [
    (
        "task:boolean --task.boolean_type dnf3 --task.input_seq_len 20 --task.input_dim 5",
        "task:dnf3 --pairs.n_points 20 --pairs.n_dims 5",
    ),
    ("task:boolean --task.boolean_type=sparse_parity --task.k 2", "task:sparse_parity --task.k 2"),
    ("task:regression", "task:linear_regression"),
    ("task:regression --task.regression_type quadratic --task.scale 2", "task:quadratic_regression --task.scale 2"),
    (
        "task:regression --task.regression_type sparse_linear --task.sparsity 2",
        "task:sparse_linear_regression --task.sparsity 2",
    ),
    (
        "task:regression --task.regression_type noisy --task.noise_std 1 --task.renormalize_noisy True",
        "task:noisy_linear_regression --task.noise_std 1 --task.renormalize",
    ),
    (
        "task:regression --task.regression_type outlier --task.outlier_prob 0.3",
        "task:outlier_regression --task.outlier_prob 0.3",
    ),
    (
        "task:disjoint --task.vocab_size 64 --task.short_length 4 --task.long_length 12",
        "task:disjoint_sets --task.vocab_size 64 --task.set_size 4 --task.long_size 12",
    ),
    (
        "task:mqar --task.num_kv_pairs 4 --task.input_seq_len 32 --task.power_a 0.1 --task.random_non_queries True",
        "task:mqar --task.num_pairs 4 --task.seq_len 32 --task.power_a 0.1 --task.filler uniform",
    ),
    (
        "--seed 3 --train.max_steps 10 --train.validate_every 5 --task.eval_size 100 --optimizer.lr 1e-3 "
        "--optimizer.weight_decay 0 --lr_scheduler.warmup_ratio 0.1 --train.max_grad_norm 1 "
        "--train.device_batch_size 32 --model.model_dim 32 --model.num_layers 1 --model.seq_mixer.num_heads 2",
        "--train.seed 3 --train.train_steps 10 --train.log_every 5 --train.eval_size 100 "
        "--train.learning_rate 1e-3 --train.weight_decay 0 --train.warmup_fraction 0.1 --train.grad_clip 1 "
        "--train.batch_size 32 --model.width 32 --model.n_layer 1 --model.n_head 2",
    ),
]


@pytest.mark.parametrize("theirs,ours", SAME)
def test_the_benchmarks_spelling_is_ours(theirs, ours):
    mine, out, *_ = parse(theirs.split())
    expected, expected_out, *_ = parse(ours.split())
    assert mine == expected and out == expected_out


def test_choices_list_the_benchmarks_four_task_names(capsys):
    assert recipe_main(["--choices"]) == 0
    text = capsys.readouterr().out
    for name in ("task:boolean", "task:disjoint", "task:mqar", "task:regression", "outlier"):
        assert name in text


def test_uniform_filler_is_any_token_but_zero_keys_included():
    options = MQAROptions(vocab_size=64, seq_len=64, num_pairs=4, filler="uniform")
    batch = jax.tree.map(np.asarray, sample_mqar(jax.random.key(7), 400, options))
    tail, queried = batch.inputs[:, 2 * options.num_pairs :], batch.scored[:, 2 * options.num_pairs :]
    answer = np.zeros_like(queried)
    answer[:, 1:] = queried[:, :-1]  # the value after each query
    filler = tail[~queried & ~answer]
    assert filler.min() >= 1 and filler.max() < options.vocab_size
    # uniform over [1, V): about (V/2 − 1)/(V − 1) of the filler lies in the keys' half
    assert abs(np.mean(filler < options.vocab_size // 2) - 31 / 63) < 0.03


def test_disjoint_lists_of_two_lengths_share_exactly_one_token():
    options = DisjointOptions(vocab_size=64, set_size=3, long_size=9)
    batch = jax.tree.map(np.asarray, sample_disjoint(jax.random.key(8), 500, options))
    assert batch.inputs.shape == (500, 3 + 9 + 2) and options.tokens() == 14
    for b in range(500):
        first, second = batch.inputs[b, :3], batch.inputs[b, 4:13]
        shared = set(first) & set(second)
        assert len(shared) == 1 and batch.targets[b, -1] == shared.pop()
        assert len(set(second)) == 9 and batch.inputs[b, 3] == 0 and batch.inputs[b, -1] == 0
    assert np.array_equal(np.flatnonzero(batch.scored[0]), [13])


def _draw(name, b, n, d, **options):
    c = choice("task", name, **options)
    return jax.tree.map(
        np.asarray, registry("task").get(name).build(c.options, n_points=n, n_dims=d)(jax.random.key(9), b, d, n)
    )


def test_outlier_regression_replaces_that_fraction_of_pairs_by_ones():
    batch = _draw("outlier_regression", 2000, 20, 5, outlier_prob=0.3)
    replaced = np.all(batch.xs == 1.0, axis=-1) & (batch.ys == 1.0)
    assert abs(replaced.mean() - 0.3) < 0.01  # 40,000 pairs: 4.4 standard errors
    clean = ~replaced
    np.testing.assert_allclose(batch.ys[clean], np.einsum("bnd,bd->bn", batch.xs, batch.w)[clean], rtol=1e-5, atol=1e-5)
    assert np.all(batch.weights == 1.0)  # scored, as in the benchmark


def test_renormalised_noise_gives_each_task_std_sqrt_d():
    batch = _draw("noisy_linear_regression", 50, 20, 5, noise_std=1.0, renormalize=True)
    np.testing.assert_allclose(np.std(batch.ys, axis=1, ddof=1), np.sqrt(5), rtol=1e-5)
    plain = _draw("noisy_linear_regression", 50, 20, 5, noise_std=1.0)
    assert np.allclose(
        batch.ys / np.std(batch.ys, axis=1, ddof=1, keepdims=True),
        plain.ys / np.std(plain.ys, axis=1, ddof=1, keepdims=True),
        atol=1e-5,
    )


def test_a_loop_over_the_benchmarks_command_makes_one_run_each(tmp_path, monkeypatch, capsys):
    from src.flags import DRY_RUN

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(DRY_RUN, "1")  # where each iteration's run would go (training: test_recipe)
    for kind in ("conjunction", "parity"):
        argv = [
            "wandb:None",
            "task:boolean",
            "--task.boolean_type",
            kind,
            "--task.input_seq_len",
            "8",
            "--task.input_dim",
            "4",
            "--train.max_steps",
            "2",
            "--model.model_dim",
            "16",
            "--quiet",
        ]
        assert recipe_main(argv) == 0
    out = capsys.readouterr().out
    assert "runs/recipe/conjunction_attention_mlp_width16_train_steps2_n_points8_n_dims4_seed0" in out
    assert "runs/recipe/parity_attention_mlp_width16_train_steps2_n_points8_n_dims4_seed0" in out
    assert not (tmp_path / "runs").exists()
