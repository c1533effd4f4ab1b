"""The one training loop (src/loop.py) through the paper's system: short trainings learn, are bit
for bit deterministic, do not depend on how the steps are chunked (what makes checkpoints and
--resume exact), and stop on the one divergence rule; the optimizer factory builds each
system's optimizer."""

from dataclasses import replace

import jax
import numpy as np
import optax
import pytest

from conftest import small
from src.loop import EXPLODED, first_bad_step, train
from src.optim import Optimizer, make_optimizer
from src.systems import build


def run(settings, **kw):
    return train(build(settings), **kw)


def leaves(params):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(params)]


def strip(rows):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in rows]


def test_lsa1_learns_and_aligns_with_gd():
    # batch 512 / lr 3e-3 leaves the small-init plateau within ~100 steps (batch 256 does not)
    result = run(small("lsa1", steps=300, batch_size=512, learning_rate=3e-3))
    first, last = result.history[0], result.history[-1]
    assert result.step == 300 and result.diverged is None
    assert last["eval_loss"] < 0.30  # zero predictor: 0.417
    assert last["eval_loss"] < first["eval_loss"]
    assert last["align_cos"] > first["align_cos"]
    assert last["align_cos"] > 0.9
    assert abs(last["gd_loss"] - 0.206) < 0.02


def test_same_seed_same_metrics_and_chunking_changes_nothing():
    """Chunks end at log points and checkpoints; a checkpoint every 7 steps cuts the run into
    other chunks (7, 7, 7, 4 | 3, ...) and must give the same rows and parameters, bit for bit."""
    settings = small("lsa1", steps=100, log_every=25)
    a, b = run(settings), run(settings)
    c = run(replace(settings, train=replace(settings.train, checkpoint_every=7)))
    assert strip(a.history) == strip(b.history) == strip(c.history)
    for x, y, z in zip(leaves(a.state.params), leaves(b.state.params), leaves(c.state.params)):
        assert np.array_equal(x, y) and np.array_equal(x, z)
    assert np.array_equal(a.per_step["loss"], c.per_step["loss"]) and len(a.per_step["loss"]) == 100


def test_eval_set_does_not_depend_on_seed():
    s = small("lsa1", steps=50)
    a, b = build(s), build(replace(s, train=replace(s.train, seed=3)))
    assert np.array_equal(np.asarray(a.eval_set.tasks.query_y), np.asarray(b.eval_set.tasks.query_y))
    assert train(a).history[-1]["eval_loss"] != train(b).history[-1]["eval_loss"]


def test_an_exploding_loss_stops_the_run_as_diverged():
    """lr 1e4 blows the loss up by many orders of magnitude without a NaN at first."""
    result = run(small("lsa1", steps=200, learning_rate=1e4, log_every=10))
    assert result.diverged is not None and result.step < 200
    assert "x the first loss" in result.diverged or "not finite" in result.diverged
    assert result.final  # the scores of the last good parameters


def test_the_divergence_rule():
    assert first_bad_step(np.array([1.0, 2.0, 3.0]), 1.0) is None
    assert first_bad_step(np.array([1.0, np.nan, 3.0]), 1.0) == 1
    assert first_bad_step(np.array([1.0, 2.0, EXPLODED * 2.5]), 2.0) == 2
    assert first_bad_step(np.array([1.0, 2.0, EXPLODED * 1.5]), 2.0) is None


@pytest.mark.parametrize(
    "opt, reference",
    [
        (
            Optimizer("adam", 1e-3, b2=0.98, grad_clip=10.0),
            optax.chain(optax.clip_by_global_norm(10.0), optax.adam(1e-3, b2=0.98)),
        ),
        (Optimizer("sgd", 0.02), optax.sgd(0.02)),
        (
            Optimizer("adamw", 3e-3, weight_decay=0.1, grad_clip=3.0, warmup_fraction=0.03),
            optax.chain(
                optax.clip_by_global_norm(3.0),
                optax.adamw(optax.warmup_cosine_decay_schedule(0.0, 3e-3, 3, 100), weight_decay=0.1),
            ),
        ),
    ],
)
def test_the_optimizer_factory_matches_optax(opt, reference):
    params = {"w": np.linspace(-1, 1, 6).astype(np.float32)}
    grads = {"w": np.linspace(2, -3, 6).astype(np.float32)}
    mine, theirs = make_optimizer(opt, 100), reference
    s1, s2 = mine.init(params), theirs.init(params)
    for _ in range(3):
        u1, s1 = mine.update(grads, s1, params)
        u2, s2 = theirs.update(grads, s2, params)
        assert np.array_equal(np.asarray(u1["w"]), np.asarray(u2["w"]))


def test_step_flops_counts_forward_backward_and_scales_with_the_batch():
    from dataclasses import replace
    from src.cli.gpt2 import read_config
    from src.device_rate import matmul_rate
    from src.loop import step_flops
    from src.models.sequence import parameter_count
    from src.systems import build

    base, _ = read_config("configs/quick.yaml")
    small = replace(base, train=replace(base.train, batch_size=16)).validate()
    large = replace(base, train=replace(base.train, batch_size=32)).validate()
    f_small, f_large = step_flops(build(small)), step_flops(build(large))
    assert 1.8 < f_large / f_small < 2.1  # the step's work is per sequence
    trainer = build(small)
    params = parameter_count(trainer.init_state().params)
    tokens = 2 * small.curriculum.points.end
    # the dense layers' 6 x parameters x tokens (forward 2, backward 4), attention and the update on top
    assert 0.5 < f_small / (6 * params * tokens * 16) < 3.0
    assert matmul_rate((64, 32), repeats=3) > 1e6 and matmul_rate((4, 16, 32), repeats=3) > 1e6


def test_a_slow_step_of_a_small_model_starts_with_a_one_step_chunk():
    """The length study's width-64 Llama (1.3e5 parameters, 64 prompts of 402 tokens a step: 2.5 s
    on 2 cores) starts with one step, as a large model does; our quick GPT-2 does not."""
    from src.cli.gpt2 import read_config
    from src.loop import FIRST_STEP_WORK, ChunkSizer, TrainState
    from src.systems.gpt2 import GPT2Trainer
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    slow, _ = read_config(
        str(root / "configs/lengthgen/tasks/linear_regression/alibi.yaml"),
        ["model.hidden_size=64", "model.num_hidden_layers=2"],
    )
    quick, _ = read_config(str(root / "configs/quick.yaml"))
    for settings, first in ((slow, 1), (quick, None)):
        trainer = GPT2Trainer(settings)
        state = TrainState(trainer.params0, None)
        assert (trainer.work_per_step() >= FIRST_STEP_WORK) == (first == 1)
        assert ChunkSizer(state, trainer.work_per_step()).cap == first
    assert ChunkSizer(state).cap is None  # no estimate of the work: as before
