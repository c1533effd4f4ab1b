"""Finite pools of training data (src/tasks/pools.py): a config in limits_of_icl's layout with
training.num_tasks or training.num_training_examples trains on exactly that many task vectors or
prompts (counted), evaluation stays fresh, bad values are one line, and settings without a pool
are written as before (no key)."""

import jax
import numpy as np
import pytest

from src.flags import UsageError
from src.cli.gpt2 import settings_from_config
from src.systems.gpt2 import GPT2Settings
from src.systems.gpt2_prompts import eval_batch, sampler
from src.tasks.pools import distinct_rows, members, pooled, task_pool

LIMITS_LAYOUT = {
    "model": {"family": "gpt2", "n_dims": 5, "n_embd": 16, "n_head": 2, "n_layer": 2, "n_positions": 11},
    "training": {
        "task": "linear_regression",
        "train_steps": 3,
        "batch_size": 16,
        "learning_rate": 1e-3,
        "curriculum": {
            "dims": {"start": 5, "end": 5, "inc": 1, "interval": 100},
            "points": {"start": 11, "end": 11, "inc": 2, "interval": 100},
        },
    },
}


def config(**training):
    return {**LIMITS_LAYOUT, "training": {**LIMITS_LAYOUT["training"], **training}}


def training_batches(settings, steps=12):
    tr = settings.train
    sample = pooled(sampler(settings), tr.seed, tr.num_tasks, tr.num_training_examples)
    return [sample(jax.random.fold_in(jax.random.key(5), step), tr.batch_size, 5, 11) for step in range(steps)]


def test_a_pool_of_64_tasks_is_64_task_vectors_and_each_batch_takes_distinct_ones():
    settings = settings_from_config(config(num_tasks=64))[0]
    assert settings.train.num_tasks == 64 and settings.to_dict()["train"]["num_tasks"] == 64
    batches = training_batches(settings, steps=40)
    seen = np.concatenate([np.asarray(b.w) for b in batches])
    assert distinct_rows(seen) == 64  # 640 draws, never a 65th vector
    assert all(distinct_rows(np.asarray(b.w)) == 16 for b in batches)  # Garg: randperm(M)[:B]
    pool = np.asarray(task_pool(sampler(settings), settings.train.seed, 64, 5, 11))
    assert {tuple(r) for r in seen.tolist()} == {tuple(r) for r in pool.tolist()}
    xs = np.concatenate([np.asarray(b.xs) for b in batches])
    assert distinct_rows(xs) == len(xs)  # the inputs are fresh
    assert distinct_rows(np.asarray(eval_batch(settings).w)) == settings.train.eval_size  # evaluation too


def test_a_pool_smaller_than_a_batch_draws_with_replacement_and_a_prompt_pool_repeats_whole_prompts():
    assert sorted(set(np.asarray(members(jax.random.key(0), 2, 16)).tolist())) == [0, 1]
    two = settings_from_config(config(task="noisy_linear_regression", num_tasks=2))[0]
    assert distinct_rows(np.concatenate([np.asarray(b.w) for b in training_batches(two)])) == 2
    prompts = settings_from_config(config(task="quadratic_regression", num_training_examples=20))[0]
    batches = training_batches(prompts)
    assert distinct_rows(np.concatenate([np.asarray(b.xs) for b in batches])) == 20
    assert (
        distinct_rows(
            np.concatenate([np.concatenate([np.asarray(b.xs).reshape(16, -1), np.asarray(b.ys)], 1) for b in batches])
        )
        == 20
    )


def test_no_pool_is_the_sampler_itself_and_leaves_the_record_as_it_was():
    settings = settings_from_config(config())[0]
    assert "num_tasks" not in settings.to_dict()["train"] and "num_training_examples" not in settings.to_dict()["train"]
    sample = sampler(settings)
    assert pooled(sample, 0) is sample
    assert settings_from_config(config(num_tasks=None, num_training_examples=None))[0] == settings
    assert GPT2Settings.from_dict(settings_from_config(config(num_tasks=8))[0].to_dict()).train.num_tasks == 8


@pytest.mark.parametrize(
    "training, words",
    [
        ({"num_tasks": -1}, "training.num_tasks=-1"),
        ({"num_tasks": 2.5}, "training.num_tasks=2.5"),
        (
            {"num_tasks": 4, "num_training_examples": 4},
            "training.num_training_examples=4 is not accepted; accepted: 0 with training.num_tasks=4",
        ),
        (
            {"task": "relu_2nn_regression", "num_tasks": 4},
            "training.num_tasks=4 is not accepted; accepted: 0 for the task 'relu_2nn_regression'",
        ),
    ],
)
def test_a_bad_pool_is_one_line(training, words):
    with pytest.raises(UsageError) as err:
        settings_from_config(config(**training))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_limits_of_icl_config_with_num_tasks_64_trains(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parent.parent
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(config(num_tasks=64, num_training_examples=None)))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "runners.train",
            "--config",
            str(path),
            "--out",
            str(tmp_path / "run"),
            "--skip_analysis",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "run" / "config.json").read_text())["settings"]
    assert record["train"]["num_tasks"] == 64 and "num_training_examples" not in record["train"]
    path.write_text(yaml.safe_dump(config(num_tasks=0.5)))
    refused = subprocess.run(
        [sys.executable, "-m", "runners.train", "--config", str(path), "--out", str(tmp_path / "bad")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert refused.returncode == 2 and "training.num_tasks=0.5" in refused.stderr and not (tmp_path / "bad").exists()


def test_the_papers_own_system_trains_on_a_pool_of_tasks_or_of_prompts():
    """von Oswald et al.'s sampler (system lsa): a pool of 32 task vectors (labels recomputed from
    them), a pool of 5 prompts; evaluation and the record without a pool as before; seeds with a
    pool are not batched together (each seed draws its own pool)."""
    from src.cli.lsa import settings_for
    from src.gd_paper.eval_set import task_sampler
    from src.tasks.pools import pooled_tasks
    from src.together import together_refusal

    base = settings_for("lsa1", batch_size=16, eval_size=32)
    assert "num_tasks" not in base.to_dict()["train"] and pooled_tasks(task_sampler(base.task), 0) is not None
    settings = settings_for("lsa1", batch_size=16, eval_size=32, num_tasks=32)
    sample = pooled_tasks(task_sampler(settings.task), settings.train.seed, 32)
    batches = [sample(jax.random.fold_in(jax.random.key(1), step), 16) for step in range(20)]
    w = np.concatenate([np.asarray(b.w) for b in batches])
    assert distinct_rows(w) == 32 and all(distinct_rows(np.asarray(b.w)) == 16 for b in batches)
    for b in batches[:3]:
        np.testing.assert_allclose(np.asarray(b.context_y), np.einsum("bnd,bd->bn", b.context_x, b.w), atol=1e-6)
        np.testing.assert_allclose(np.asarray(b.query_y), np.einsum("bd,bd->b", b.query_x, b.w), atol=1e-6)
    assert distinct_rows(np.concatenate([np.asarray(b.context_x).reshape(16, -1) for b in batches])) == 320
    prompts = pooled_tasks(task_sampler(settings.task), 0, 0, 5)
    xs = np.concatenate([np.asarray(prompts(jax.random.key(s), 16).context_x).reshape(16, -1) for s in range(6)])
    assert distinct_rows(xs) == 5
    assert settings.to_dict()["train"]["num_tasks"] == 32
    assert "pool" in together_refusal(
        [settings, settings_for("lsa1", seed=1, batch_size=16, eval_size=32, num_tasks=32)]
    )
    with pytest.raises(UsageError, match=r"train.num_tasks=-2 is not accepted"):
        settings_for("lsa1", num_tasks=-2)
