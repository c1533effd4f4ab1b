"""analysis.inductive_bias (Lin et al.'s baseline_all_dup.png) and analysis.length_gen.judge
(claims only on trained models), with stand-in models whose answers are known: a model that is
least squares, one that is averaging, one that predicts zero."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from analysis.inductive_bias import block_size, inductive_bias, prompt_indices, query_errors
from analysis.length_gen import TRAINED_BELOW, judge
from baselines.regression import averaging, least_squares
from src.models.sequence import Model
from src.models.sequence_presets import gpt2
from src.registry import choice
from src.systems.gpt2 import GPT2Settings
from src.systems.gpt2_prompts import eval_batch
from src.tasks.garg import Curriculum, Schedule


def settings_for(task: str = "linear_regression", d: int = 3, points: int = 12) -> GPT2Settings:
    return GPT2Settings(
        model=gpt2(n_dims=d, n_embd=8, n_head=2, n_layer=1, n_positions=points),
        task=choice("task", task),
        curriculum=Curriculum(Schedule(d, d), Schedule(points, points)),
    ).validate()


def stand_in(predict) -> Model:
    """A model that answers as the baseline `predict` does."""
    from src.tasks.pairs import pair_prompt

    return Model(None, None, lambda params, state, xs, ys: predict(pair_prompt(xs, ys)))


def test_one_padded_prompt_per_number_of_copies():
    assert prompt_indices(3, 6).tolist() == [[0, 1, 2, 3, 3, 3], [0, 1, 2, 2, 3, 3], [0, 1, 2, 2, 2, 3]]


def test_learners_under_copies_match_their_closed_forms():
    """Least squares stays exact (2d consistent examples, copies add nothing); averaging's
    ŵ = (Σ_{j<b} y_j x_j + r y_last x_last) / (b + r), computed here in NumPy."""
    settings = settings_for()
    batch = eval_batch(settings, n_points=12)
    block = block_size(settings)
    assert block == 6
    xs, ys = np.asarray(batch.xs, np.float64), np.asarray(batch.ys, np.float64)
    errors, gaps = query_errors(settings, stand_in(least_squares), None, None, batch, prompt_indices(block, 12))
    assert max(gaps["least_squares"]) < 1e-9 and min(gaps["averaging"]) > 0.01
    assert len(errors["model"]) == 12 - block
    for r in (0, 3, 5):
        assert errors["least_squares"][r] < 1e-6 and errors["model"][r] < 1e-6
        w = (np.einsum("bj,bjd->bd", ys[:, :block], xs[:, :block]) + r * ys[:, block - 1, None] * xs[:, block - 1]) / (
            block + r
        )
        want = np.mean((np.einsum("bd,bd->b", w, xs[:, block]) - ys[:, block]) ** 2) / 3
        assert errors["averaging"][r] == pytest.approx(want, rel=1e-4)


@pytest.mark.parametrize("predict, closest", [(least_squares, "least_squares"), (averaging, "averaging")])
def test_the_closest_learner_is_the_one_the_model_is(predict, closest):
    out = inductive_bias(settings_for(), stand_in(predict), None, None)
    assert out["closest"] == closest and out["mean_gap"][closest] == pytest.approx(0.0, abs=1e-6)
    assert sorted(map(int, out["errors"])) == list(range(12 - 6))  # copies fill the prompt to L − 1


def test_an_untrained_model_is_not_judged():
    settings = settings_for()
    batch = eval_batch(settings, n_points=12)
    zero = judge(settings, stand_in(lambda prompt: jnp.zeros_like(prompt.ys)), None, None, batch)
    expected = float(np.mean(np.asarray(batch.ys)[:, -1] ** 2) / 3)  # the zero predictor, n = L − 1
    assert zero["constant_error"] == pytest.approx(expected, rel=1e-5)
    assert zero["in_distribution_error"] == pytest.approx(expected, rel=1e-5)
    assert not zero["trained_enough"] and zero["verdict"].startswith("not trained enough to judge")
    exact = judge(settings, stand_in(least_squares), None, None, batch)
    assert exact["trained_enough"] and exact["in_distribution_error"] < TRAINED_BELOW * exact["constant_error"]
    out = inductive_bias(settings, stand_in(lambda prompt: jnp.zeros_like(prompt.ys)), None, None)
    assert out["closest"] is None and out["trained_enough"] is False


def test_boolean_tasks_are_judged_against_the_majority_label():
    settings = settings_for("conjunction", d=6, points=14)
    batch = eval_batch(settings, n_points=14)
    labels = np.asarray(batch.ys)[:, -1]
    majority = judge(
        settings,
        stand_in(lambda prompt: jnp.ones_like(prompt.ys) * (1 if labels.mean() > 0 else -1)),
        None,
        None,
        batch,
    )
    assert majority["constant_error"] == pytest.approx(min(np.mean(labels > 0), np.mean(labels < 0)))
    assert not majority["trained_enough"]
    assert judge(settings, stand_in(lambda prompt: prompt.ys), None, None, batch)["trained_enough"]


def test_least_squares_at_the_query_is_least_squares_at_every_prefix_read_there():
    """The inductive bias solves least squares at each prompt's query only: the same prediction as
    the every-prefix baseline's at that point (float32 rounding apart)."""
    from baselines.regression import least_squares, least_squares_at
    from src.tasks.pairs import pair_prompt

    key_x, key_y = jax.random.split(jax.random.key(3))
    prompt = pair_prompt(jax.random.normal(key_x, (6, 14, 4)), jax.random.normal(key_y, (6, 14)))
    query = np.array([0, 1, 3, 4, 9, 13])
    every = np.asarray(least_squares(prompt))[np.arange(6), query]
    np.testing.assert_allclose(np.asarray(least_squares_at(prompt, query)), every, rtol=1e-5, atol=1e-6)


def test_the_block_is_2d_where_copies_have_room_else_half_the_prompt():
    assert block_size(settings_for(d=3, points=12)) == 6  # 2d
    assert block_size(settings_for(d=5, points=21)) == 10  # the length study: 2d
    assert block_size(settings_for(d=5, points=11)) == 5  # limits_of_icl's: 6 numbers of copies, not 2
    assert block_size(settings_for(d=20, points=41)) == 20
