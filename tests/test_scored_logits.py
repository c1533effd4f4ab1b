"""The recipe's training loss over the scored positions' logits alone (train.logits = scored, the
default) equals the loss over every position's logits, masked (`all`, the records before it), to
float32 rounding, gradients included; the scored positions are found exactly; records without the
key read as `all`; MQAR's distinct keys and values drawn with top_k are those of a stable argsort."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.registry import Choice, choice, registry
from src.settings import SettingsError
from src.systems.lm import LMSettings, LMTrain, build_lm
from src.systems.lm_batches import model_inputs, scored_positions, training_loss
from src.tasks.tokens import MQAROptions, _distinct
from dataclasses import replace


def _settings(task: Choice, logits: str) -> LMSettings:
    from src.systems.lm import lm_settings

    return lm_settings(
        task,
        choice("seq_mixer", "softmax_causal"),
        choice("state_mixer", "mlp"),
        width=32,
        n_layer=2,
        n_head=2,
        train=LMTrain(batch_size=16, logits=logits),
    )


@pytest.mark.parametrize(
    "task",
    [
        choice("task", "mqar", vocab_size=64, seq_len=32, num_pairs=4),
        choice("task", "disjoint_sets", vocab_size=64, set_size=5),
    ],
)
def test_scored_logits_give_the_loss_and_gradients_of_all_logits(task):
    losses, grads = {}, {}
    for logits in ("scored", "all"):
        trainer = build_lm(_settings(task, logits))
        batch = trainer.sample(jax.random.key(3), 16)
        loss = training_loss(trainer.settings, trainer.apply, trainer.objective)
        losses[logits], grads[logits] = jax.jit(jax.value_and_grad(loss))(trainer.params0, batch)
    np.testing.assert_allclose(losses["scored"], losses["all"], rtol=1e-6)
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7), grads["scored"], grads["all"]
    )
    plain = jax.jit(lambda p, b: trainer.objective.score(trainer.apply(p, *model_inputs(b)), b).loss)
    # `all` is the loss as it was: the same function, compiled with its gradient or without, which
    # XLA may fuse differently (1 ulp apart on an AVX2-only AMD EPYC, equal on the AVX-512 ones)
    np.testing.assert_allclose(losses["all"], plain(trainer.params0, batch), rtol=2e-7)


def test_scored_positions_are_every_scored_position_in_order():
    draw = registry("task").get("mqar").build(MQAROptions(vocab_size=64, seq_len=32, num_pairs=4))
    batch = draw(jax.random.key(0), 50)
    positions = np.asarray(scored_positions(batch, 4))
    for row, scored in zip(positions, np.asarray(batch.scored)):
        np.testing.assert_array_equal(row, np.flatnonzero(scored))


def test_training_with_scored_logits_tracks_all_logits():
    task = choice("task", "mqar", vocab_size=64, seq_len=32, num_pairs=4)
    losses = {}
    for logits in ("scored", "all"):
        trainer = build_lm(_settings(task, logits))
        with trainer.context():
            losses[logits] = np.asarray(trainer.run_chunk(trainer.init_state(), 0, 20).losses)
    np.testing.assert_allclose(losses["scored"], losses["all"], rtol=0, atol=1e-5)


def test_pair_inputs_take_no_positions_and_records_read_all():
    record = LMSettings().to_dict()
    assert LMSettings.from_dict(record).train.logits == "scored"
    del record["train"]["logits"]
    assert LMSettings.from_dict(record).train.logits == "all"
    with pytest.raises(SettingsError, match="train.logits='some' is not accepted; accepted: scored, all"):
        replace(LMSettings(), train=LMTrain(logits="some")).validate()
    from src.models.sequence_presets import gpt2

    model = registry("family").get("sequence").build(gpt2(n_embd=16, n_layer=1, n_head=2, n_positions=4))
    xs, ys = jnp.ones((2, 4, 5)), jnp.ones((2, 4))
    params, state = model.init(jax.random.key(0), xs, ys)
    with pytest.raises(ValueError, match="token inputs only"):
        model.apply(params, state, xs, ys, positions=jnp.zeros((2, 1), jnp.int32))


@pytest.mark.parametrize("batch,low,high,count", [(256, 1, 4096, 8), (64, 1, 33, 32), (7, 100, 103, 3)])
def test_distinct_is_a_stable_argsort_of_its_scores(batch, low, high, count):
    for seed in range(20):
        key = jax.random.key(seed)
        scores = np.asarray(jax.random.uniform(key, (batch, high - low)))
        expected = low + np.argsort(scores, axis=-1, kind="stable")[:, :count]
        np.testing.assert_array_equal(_distinct(key, batch, low, high, count), expected)


def test_top_k_breaks_ties_to_the_lower_position():
    scores = jnp.array([[0.5, 0.1, 0.1, 0.3, 0.1, 0.0, 0.0, 0.25]])
    np.testing.assert_array_equal(jax.lax.top_k(-scores, 6)[1], np.argsort(scores, kind="stable")[:, :6])
