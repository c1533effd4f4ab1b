"""The paper's system (von Oswald et al.'s attention-only models) on every registered pair task:
src/tasks/paper_form.py draws a pair task's prompt of N + 1 points and takes the last as the
query. Checked against the pair sampler itself, a closed form for one GD step on Garg et al.'s
Gaussian regression, and a short training of each kind of task."""

import dataclasses

import jax
import numpy as np
import pytest

from src.gd_paper.config import CurriculumConfig, TaskConfig
from src.gd_paper.curricula import apply_curriculum
from src.registry import registry
from src.settings import SettingsError
from src.systems.lsa import LSASettings, LSATrainer
from src.tasks.objectives import tasks_for
from src.tasks.paper_form import paper_form_sampler, paper_tasks


def lsa_on(name: str, d: int = 5, n: int = 5, **train) -> LSASettings:
    s = LSASettings()
    train = {"steps": 4, "batch_size": 16, "eval_size": 64, "log_every": 2, **train}
    return dataclasses.replace(
        s, task=dataclasses.replace(s.task, name=name, d=d, num_context=n), train=dataclasses.replace(s.train, **train)
    )


def test_the_paper_system_takes_its_own_task_and_every_pair_task():
    assert paper_tasks() == ["uniform_regression", *tasks_for("pairs")]
    assert len(paper_tasks()) == 22  # 21 until noise_mixture_regression (Bai et al.) joined the pair tasks
    for name in paper_tasks():
        lsa_on(name, d=10, n=10).validate()


def test_the_query_is_the_pair_samplers_last_point():
    key = jax.random.key(3)
    for name in ("linear_regression", "sparse_parity", "decision_tree"):
        entry = registry("task").get(name)
        raw = entry.build(entry.default_options(), n_points=7, n_dims=5)(key, 4, 5, 7)
        tasks = paper_form_sampler(TaskConfig(name=name, d=5, num_context=6))(key, 4)
        assert tasks.context_x.shape == (4, 6, 5) and tasks.query_x.shape == (4, 5)
        np.testing.assert_array_equal(tasks.context_x, raw.xs[:, :6])
        np.testing.assert_array_equal(tasks.context_y, raw.ys[:, :6])
        np.testing.assert_array_equal(tasks.query_x, raw.xs[:, 6])
        np.testing.assert_array_equal(tasks.query_y, raw.ys[:, 6])


def test_the_papers_own_task_is_drawn_as_before():
    task = TaskConfig()
    own = registry("task").get("uniform_regression").build(task)(jax.random.key(0), 8)
    again = paper_form_sampler(task)(jax.random.key(0), 8)
    for a, b in zip(own, again):
        np.testing.assert_array_equal(a, b)


def test_one_gd_step_on_gaussian_regression_meets_its_closed_form():
    """y = w·x with x, w ~ N(0, I_d): one GD step ŷ = c Σ y_i x_i·x_q has the least expected
    ½ squared error ½ d (d + 1) / (N + d + 1) (at c = 1 / (N + d + 1)), 2.619 at N = d = 10."""
    from src.gd_paper.eval_set import make_eval_set

    settings = lsa_on("linear_regression", d=10, n=10, eval_size=8000).validate()
    eval_set = make_eval_set(settings)
    gd = 0.5 * float(np.mean((np.asarray(eval_set.reference.prediction) - np.asarray(eval_set.tasks.query_y)) ** 2))
    assert gd == pytest.approx(0.5 * 10 * 11 / 21, rel=0.04)
    assert eval_set.gd_eta == pytest.approx(10 / 21, rel=0.15)  # η = N c on the paper's 1/N scale


@pytest.mark.parametrize("name", ["sparse_linear_regression", "sparse_parity", "relu_2nn_regression"])
def test_the_paper_model_trains_on_a_pair_task(name):
    trainer = LSATrainer(lsa_on(name).validate())
    state = trainer.init_state()
    chunk = trainer.run_chunk(state, 0, 2)
    scores = trainer.evaluate(chunk.state)
    assert np.all(np.isfinite(np.asarray(chunk.losses))) and np.isfinite(scores["eval_loss"])
    assert 0 < scores["gd_loss"]


def test_random_pairs_draw_a_pair_tasks_own_inputs():
    """Random pairs of a boolean task have ±1 inputs, as the task's (not the uniform task's)."""
    task = TaskConfig(name="parity", d=5, num_context=8)
    clean = paper_form_sampler(task)(jax.random.key(1), 32)
    curriculum = CurriculumConfig(noise_mode="random_pairs", noise_p=0.5)
    out = apply_curriculum(jax.random.key(2), clean, curriculum, task)
    corrupted = np.asarray(out.tasks.context_x)[np.asarray(out.noise_mask)]
    assert corrupted.size and set(np.unique(corrupted)) == {-1.0, 1.0}


def test_the_uniform_tasks_own_parameters_and_pools_are_refused_for_a_pair_task():
    s = lsa_on("linear_regression")
    with pytest.raises(SettingsError, match=r"task.input_range=2.0 is not accepted; accepted: 1.0 for the pair task"):
        dataclasses.replace(s, task=dataclasses.replace(s.task, input_range=2.0)).validate()
    with pytest.raises(
        SettingsError,
        match=r"train.num_tasks=8 is not accepted; accepted: 0 for the task "
        r"'linear_regression' \(a pool of tasks applies to uniform_regression",
    ):
        dataclasses.replace(s, train=dataclasses.replace(s.train, num_tasks=8)).validate()
    dataclasses.replace(s, train=dataclasses.replace(s.train, num_training_examples=8)).validate()


def test_a_pair_tasks_own_shape_rules_are_checked_before_any_work():
    with pytest.raises(SettingsError):
        lsa_on("sparse_parity", d=2).validate()  # k = 3 coordinates of d = 2
