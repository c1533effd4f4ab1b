"""The read side (src/read_side.py, src/systems/read_sides.py): a trained run's model and the
prompts it is evaluated on, asked for by capability. Each system's read side gives back the
numbers its own trainer scored; analyses that ask for a capability apply to every system that
has it."""

from dataclasses import replace

import jax
import numpy as np
import pytest

from src.gd_paper.metrics import loss
from src.pipeline import execute
from src.read_side import (
    AnswersPairPrompts,
    ExposesAttention,
    LearnsFunctions,
    PredictsPairs,
    PredictsQueries,
    ReadSideError,
    ScoredAgainstGD,
    TracksDynamics,
    has,
    read_side,
    register_read_side,
    systems_with,
)
from src.registry import registry
from src.rundir import names
from conftest import tiny_gpt2

FLAGS = dict(runner="test", argv=[], progress=False, analyses=())


def settings_of(system: str):
    return registry("system").get(system).options()


def test_the_capabilities_of_the_systems():
    assert systems_with(PredictsPairs) == ("gpt2", "lm")
    assert systems_with(PredictsQueries) == ("lsa", "nonlinear")
    for system in ("lm", "dynamics"):  # lm's default task is MQAR, a token task
        assert not has(PredictsPairs, settings_of(system)) and not has(PredictsQueries, settings_of(system))
    assert systems_with(ScoredAgainstGD) == systems_with(ExposesAttention) == ("lsa",)
    assert systems_with(LearnsFunctions) == ("nonlinear",) and systems_with(TracksDynamics) == ("dynamics",)


def test_a_capability_may_depend_on_what_the_run_saved():
    lsa = settings_of("lsa")
    assert not has(ExposesAttention, lsa) and has(ExposesAttention, replace(lsa, save_attention=True))
    with pytest.raises(ReadSideError, match="does not save its attention weights"):
        read_side(ExposesAttention, lsa)
    assert has(ScoredAgainstGD, lsa) and has(PredictsQueries, lsa)  # whatever it saved


def test_a_run_without_the_capability_is_refused_in_one_line():
    with pytest.raises(ReadSideError) as err:
        read_side(PredictsPairs, settings_of("dynamics"))
    assert (
        str(err.value) == "a run of system 'dynamics' does not predict (x, y) pairs; accepted: a run of 'gpt2' or 'lm'"
    )


def test_a_read_side_must_be_a_capability():
    with pytest.raises(TypeError, match="not a subclass of a capability"):
        register_read_side("toy")(object)


@pytest.fixture(scope="module")
def gpt2_run(tmp_path_factory):
    settings = tiny_gpt2(5, 11, 1)
    return execute(settings, tmp_path_factory.mktemp("read_side") / "gpt2", **FLAGS).run


def test_the_pair_read_side_gives_the_trainers_own_eval_numbers(gpt2_run):
    settings = gpt2_run.load_settings()
    pairs = read_side(PredictsPairs, settings)
    model, params, state = pairs.restore(gpt2_run)
    batch = pairs.prompts()
    assert batch.xs.shape == (32, 11, 5) and batch.ys.shape == (32, 11)
    prediction = pairs.predictor(model, params, state)(batch)
    mse = float(
        np.sum(np.asarray(batch.weights) * (np.asarray(prediction) - np.asarray(batch.ys)) ** 2)
        / np.sum(np.asarray(batch.weights))
    )
    recorded = gpt2_run.load_json(names.SUMMARY)["eval_loss"]
    assert mse == pytest.approx(recorded, rel=1e-5)
    fresh = pairs.sampler(16)(jax.random.key(3), 4, 5, 16)
    assert fresh.xs.shape == (4, 16, 5) and pairs.prompts(16).xs.shape == (32, 16, 5)
    assert pairs.points_limit() == 11 and pairs.rows() >= 1
    assert pairs.prompt_bytes(2, 11, 5) == 4 * 2 * (11 * 7 + 5)


def test_the_query_read_side_gives_the_paper_systems_eval_loss(tmp_path, small_settings):
    run = execute(small_settings(steps=20, batch_size=64, eval_size=256), tmp_path / "lsa", **FLAGS).run
    side = read_side(PredictsQueries, run.load_settings())
    tasks = side.prompts()
    prediction = side.predictor(*side.restore(run))(tasks)
    assert prediction.shape == (256,)
    assert float(loss(prediction, tasks.query_y)) == pytest.approx(run.load_json(names.SUMMARY)["eval_loss"], rel=1e-5)
    other = side.prompts(seed=5)
    assert not np.array_equal(np.asarray(other.query_y), np.asarray(tasks.query_y))


def test_the_nonlinear_read_side_gives_its_eval_loss(tmp_path):
    settings = settings_of("nonlinear")
    settings = replace(
        settings, train=replace(settings.train, steps=10, batch_size=32, eval_size=64, log_every=5)
    ).validate()
    run = execute(settings, tmp_path / "nonlinear", **FLAGS).run
    side = read_side(PredictsQueries, run.load_settings())
    tasks = side.prompts()
    prediction = side.predictor(*side.restore(run))(tasks)
    assert float(loss(prediction, tasks.query_y)) == pytest.approx(run.load_json(names.SUMMARY)["eval_loss"], rel=1e-5)


def test_analyses_that_ask_for_pairs_apply_to_every_system_that_predicts_pairs():
    """An analysis registered by capability applies to every system with it, and to no other."""
    from src.registry import choice
    from src.systems.lm import lm_settings

    lm_pairs = lm_settings(
        choice("task", "parity"),
        choice("seq_mixer", "softmax_causal"),
        choice("state_mixer", "mlp"),
        width=16,
        n_layer=1,
        n_head=2,
    )  # lm on a pair task (its default is MQAR)
    runs = [settings_of(system) for system in registry("system").names()] + [lm_pairs]
    assert has(PredictsPairs, lm_pairs)
    for entry in registry("analysis"):
        if entry.name not in ("icl_curve", "inductive_bias"):
            continue
        for settings in runs:
            assert entry.is_applicable(settings) == has(PredictsPairs, settings), (entry.name, settings.describe())


@pytest.fixture(scope="module")
def lsa_run(tmp_path_factory):
    from src.gd_paper.presets import preset

    s = preset("lsa1")
    s = replace(
        s,
        task=replace(s.task, d=5, num_context=10),
        train=replace(s.train, steps=20, batch_size=64, eval_size=64, log_every=10),
    ).validate()
    return execute(s, tmp_path_factory.mktemp("read_side") / "lsa", **FLAGS).run


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """The ICL benchmark's model on a pair task (linear regression, 11 points of d = 5)."""
    from src.registry import choice
    from src.systems.lm import LMTrain, PairShape, lm_settings

    settings = lm_settings(
        choice("task", "linear_regression"),
        choice("seq_mixer", "softmax_causal"),
        choice("state_mixer", "mlp"),
        width=16,
        n_layer=1,
        n_head=2,
        train=LMTrain(steps=20, log_every=10, eval_size=32, checkpoint_every=0),
        pairs=PairShape(n_points=11, n_dims=5),
    )
    return execute(settings, tmp_path_factory.mktemp("read_side") / "lm", **FLAGS).run


def test_an_lm_pair_run_answers_pair_prompts_with_its_trained_model(lm_run):
    from src.loop import TrainState
    from src.systems.lm import LMTrainer

    settings = lm_run.load_settings()
    side = read_side(AnswersPairPrompts, settings)
    model, params, state = side.restore(lm_run)
    trainer = LMTrainer(settings)
    assert trainer.evaluate(TrainState(params, None))["eval_loss"] == lm_run.load_json(names.SUMMARY)["eval_loss"]
    prompts = side.pair_prompts()
    np.testing.assert_array_equal(prompts.xs, trainer.evaluation.xs)  # the run's own eval batch
    np.testing.assert_allclose(
        side.query_predictor((model, params, state), 11)(prompts),
        trainer.apply(params, prompts.xs, prompts.ys)[:, -1],
        rtol=1e-5,
        atol=1e-6,
    )  # jitted: rounded alike to 1e-7
    mqar = settings_of("lm")
    assert mqar.task.name == "mqar" and not has(AnswersPairPrompts, mqar)  # a token task: not offered


def test_every_evaluation_shift_applies_to_every_system_that_answers_pair_prompts(gpt2_run, lsa_run, lm_run):
    """The shift battery asks for AnswersPairPrompts (gpt2; lm on its pair tasks; the paper's lsa
    on the pair form of its prompts): for each such system, every registered shift is in the grid
    and gives a finite error for the model and for least squares."""
    from analysis.robustness import battery, battery_grid

    assert systems_with(AnswersPairPrompts) == ("gpt2", "lm", "lsa")
    for system in systems_with(AnswersPairPrompts):
        run = {"gpt2": gpt2_run, "lm": lm_run, "lsa": lsa_run}[system]  # a finished run of each
        side = read_side(AnswersPairPrompts, run.load_settings())
        grid = battery_grid(11, 5)
        assert {shift for _, shift, _ in grid} == set(registry("shift").names())
        first = list({shift: label for label, shift, _ in reversed(grid)}.values())
        results = battery(side, side.restore(run), size=8, labels=first)
        assert set(results) == set(first)
        for label, row in results.items():
            assert np.isfinite(row["model"]) and np.isfinite(row["least_squares"]), (system, label, row)


def test_the_paper_models_query_on_a_pair_prompt_is_its_own_prediction(lsa_run):
    """The lsa read side's pair prompts are its eval tasks with the query last, and its query
    predictor gives the model's own eval loss on them."""
    side = read_side(AnswersPairPrompts, lsa_run.load_settings())
    prompts = side.pair_prompts()
    assert prompts.xs.shape == (64, 11, 5) and float(prompts.dims) == 5.0
    predict = side.query_predictor(side.restore(lsa_run), 11)
    prediction = np.asarray(predict(prompts))
    half_mse = 0.5 * float(np.mean((prediction - np.asarray(prompts.ys[:, -1])) ** 2))
    assert half_mse == pytest.approx(lsa_run.load_json(names.SUMMARY)["eval_loss"], rel=1e-5)


def test_the_lm_pair_read_side_gives_the_trainers_own_eval_numbers(lm_run):
    """An lm run on a pair task predicts every point: its read side's prompts are the trainer's
    own eval batch, bit for bit, and its predictions score the run's recorded error per position."""
    from src.pipeline import build
    from src.tasks.objectives import objective_of

    settings = lm_run.load_settings()
    pairs = read_side(PredictsPairs, settings)
    batch = pairs.prompts()
    own = build(settings).evaluation
    for field in ("xs", "ys", "weights"):
        np.testing.assert_array_equal(np.asarray(getattr(batch, field)), np.asarray(getattr(own, field)))
    prediction = pairs.predictor(*pairs.restore(lm_run))(batch)
    by_position = np.asarray(objective_of("linear_regression").point_errors(prediction, batch)).mean(0)
    np.testing.assert_allclose(by_position, lm_run.load_json(names.SUMMARY)["error_by_position"], rtol=1e-5)
    assert pairs.trained_shape() == (11, 5) and pairs.pool_size() == 0 and pairs.points_limit() == 11
    assert pairs.prompts(8).xs.shape == (32, 8, 5) and pairs.sampler(16)(jax.random.key(3), 4, 5, 16).xs.shape == (
        4,
        16,
        5,
    )


def test_an_lm_pair_run_writes_the_pair_analyses_at_its_end(tmp_path):
    """The ICL curve (with its baselines) and the stresses now apply to the ICL benchmark's pair
    runs; the curve's model row is the run's recorded error per position, and least squares is
    exact from d points on (noise-free labels)."""
    import csv
    from src.registry import choice
    from src.systems.lm import LMTrain, PairShape, lm_settings

    settings = lm_settings(
        choice("task", "linear_regression"),
        choice("seq_mixer", "softmax_causal"),
        choice("state_mixer", "mlp"),
        width=16,
        n_layer=1,
        n_head=2,
        train=LMTrain(steps=20, log_every=10, eval_size=32, checkpoint_every=0),
        pairs=PairShape(n_points=9, n_dims=3),
    )
    run = execute(settings, tmp_path / "lm", **{**FLAGS, "analyses": None}).run
    summary = run.load_json(names.SUMMARY)
    assert {names.ICL_CURVE_CSV, names.ROBUSTNESS, names.INDUCTIVE_BIAS_JSON} <= set(summary["outputs"])
    rows = list(csv.DictReader(run.file(names.ICL_CURVE_CSV).open()))
    curve = {(r["predictor"], int(r["n_examples"])): float(r["mean"]) for r in rows}
    np.testing.assert_allclose([curve["model", i] for i in range(9)], summary["error_by_position"], rtol=1e-5)
    assert all(curve["least_squares", i] < 1e-6 for i in range(4, 9))
    assert run.load_json(names.ROBUSTNESS)["clean_last"] == pytest.approx(summary["error_by_position"][-1], rel=1e-5)
