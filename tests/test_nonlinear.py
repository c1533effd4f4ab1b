"""Non-linear regression in von Oswald et al.'s system: the sine and random-MLP tasks against
their closed forms, the two models against NumPy re-implementations and the paper's construction
(an MLP block with LSA on top is one GD step on the block's features), the kernel baselines, and
the `nonlinear` system's settings, training and determinism."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from baselines.gd_step import gd_predictions
from baselines.kernel import build_kernel_gd_step, build_kernel_ridge, kernel_gd_predictions, kernel_ridge_predictions
from src.models.features import FeatureOptions, FeaturesGDOptions
from src.registry import choice, registry
from src.settings import SettingsError
from src.systems import build, settings_from_record
from src.systems.nonlinear import NonlinearSettings, NonlinearTrain
from src.tasks.nonlinear import RandomMLPOptions, SineOptions, sample_function_tasks


def _sine_fit(tasks):
    """Per task, least squares of all N + 1 points on [sin x, cos x]: amplitude, phase, residual."""
    x = np.concatenate([tasks.context_x[..., 0], tasks.query_x], 1).astype(np.float64)
    y = np.concatenate([tasks.context_y, tasks.query_y[:, None]], 1).astype(np.float64)
    out = []
    for xs, ys in zip(x, y):
        basis = np.stack([np.sin(xs), np.cos(xs)], 1)
        (c, s), *_ = np.linalg.lstsq(basis, ys, rcond=None)  # A cos φ, A sin φ
        out.append((np.hypot(c, s), np.arctan2(s, c), np.max(np.abs(basis @ [c, s] - ys))))
    return np.array(out)


def test_sine_tasks_are_one_sine_each_with_the_stated_ranges():
    options = SineOptions()
    tasks = sample_function_tasks(jax.random.key(0), 2000, options)
    assert tasks.context_x.shape == (2000, 10, 1) and tasks.query_y.shape == (2000,)
    assert np.all(np.abs(tasks.context_x) <= 5.0)
    fit = _sine_fit(tasks)
    assert fit[:, 2].max() < 1e-5  # every point of a task on one sine
    assert fit[:, 0].min() >= 0.1 - 1e-5 and fit[:, 0].max() <= 0.5 + 1e-5
    assert fit[:, 1].min() >= -1e-4 and fit[:, 1].max() <= np.pi + 1e-4
    # E[y²] = E[A²] · ½ for independent A ~ U(0.1, 0.5), φ ~ U(0, π): (0.5³ − 0.1³) / 1.2 / 2
    y = np.asarray(tasks.context_y, np.float64)
    assert abs(np.mean(y**2) - 0.124 / 1.2 / 2) < 0.002
    assert abs(np.corrcoef(fit[:, 0], fit[:, 1])[0, 1]) < 0.1  # independent draws


def test_sine_shared_draw_is_the_reference_codes_one_parameter_family():
    tasks = sample_function_tasks(jax.random.key(1), 300, SineOptions(shared_draw=True))
    amplitude, phase, _ = _sine_fit(tasks).T
    np.testing.assert_allclose(phase, np.pi * (amplitude - 0.1) / 0.4, atol=1e-4)


def test_alpha_scales_the_input_range():
    tasks = sample_function_tasks(jax.random.key(2), 500, SineOptions(), alpha=2.0)
    x = np.asarray(tasks.context_x)
    assert x.max() > 9.0 and x.min() < -9.0 and np.abs(x).max() <= 10.0


def test_random_mlp_tasks_are_piecewise_linear_with_at_most_h_kinks():
    options = RandomMLPOptions(hidden=5)
    f = options.function(jax.random.key(3), 20)
    grid = np.linspace(-1, 1, 4001)
    y = np.asarray(f(jnp.asarray(np.tile(grid[None, :, None], (20, 1, 1)), jnp.float32)), np.float64)
    slope_change = np.abs(np.diff(y, 2, axis=1)) / (grid[1] - grid[0])  # Δ slope at each point
    for row in slope_change:
        kinks = np.flatnonzero(row > 1e-2)
        groups = 0 if kinks.size == 0 else 1 + np.count_nonzero(np.diff(kinks) > 2)
        assert groups <= 5
    assert np.sum(np.max(slope_change, 1) > 0.1) >= 10  # not linear: most tasks have a kink
    tasks = sample_function_tasks(jax.random.key(4), 4000, RandomMLPOptions(d=3))
    assert tasks.context_x.shape == (4000, 10, 3)
    assert abs(float(np.mean(tasks.query_y))) < 0.05  # v ~ N(0, 1): zero mean over tasks


def _numpy_embed_mlp(p, prefix, inputs):
    e = inputs @ p[f"{prefix}/emb"]["w"]
    pre = e @ p[f"{prefix}/mlp_in"]["w"] + p[f"{prefix}/mlp_in"]["b"]
    gelu = 0.5 * pre * (1 + np.tanh(np.sqrt(2 / np.pi) * (pre + 0.044715 * pre**3)))
    return e + gelu @ p[f"{prefix}/mlp_out"]["w"] + p[f"{prefix}/mlp_out"]["b"]


def _params(name, options, tasks, seed=0):
    model = registry("nonlinear_model").get(name).build(options)
    params = model.init(jax.random.key(seed), tasks)
    # large random weights, so the test sees every term (the trained init is tiny)
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.key(seed + 1), len(leaves))
    params = jax.tree_util.tree_unflatten(
        tree, [0.3 * jax.random.normal(k, leaf.shape) for k, leaf in zip(keys, leaves)]
    )
    return model, params, jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params)


def test_mlp_lsa_matches_a_numpy_reimplementation():
    tasks = sample_function_tasks(jax.random.key(5), 7, SineOptions(num_context=6))
    model, params, p = _params("mlp_lsa", FeatureOptions(width=8, widening=2), tasks)
    prefix = next(k for k in p if k.endswith("/emb")).rsplit("/", 1)[0]
    cx, cy = np.asarray(tasks.context_x, np.float64), np.asarray(tasks.context_y, np.float64)
    qx = np.asarray(tasks.query_x, np.float64)
    tokens = np.concatenate(
        [np.concatenate([cx, cy[..., None]], -1), np.concatenate([qx, np.zeros((7, 1))], -1)[:, None]], 1
    )
    h = _numpy_embed_mlp(p, prefix, tokens)
    q = h[:, -1] @ p[f"{prefix}/query"]["w"]
    k, v = h[:, :-1] @ p[f"{prefix}/key"]["w"], h[:, :-1] @ p[f"{prefix}/value"]["w"]
    update = np.einsum("bn,bnk->bk", np.einsum("bk,bnk->bn", q, k), v) @ p[f"{prefix}/output"]["w"]
    want = -(h[:, -1] + update)[:, -1]
    np.testing.assert_allclose(np.asarray(model.apply(params, tasks)), want, rtol=2e-4, atol=1e-5)


def test_features_gd_is_one_gd_step_on_its_features():
    tasks = sample_function_tasks(jax.random.key(6), 5, RandomMLPOptions(d=2, num_context=4))
    model, params, p = _params("features_gd", FeaturesGDOptions(width=6, widening=3), tasks)
    prefix = next(k for k in p if k.endswith("/emb")).rsplit("/", 1)[0]
    phi = _numpy_embed_mlp(
        p,
        prefix,
        np.concatenate([np.asarray(tasks.context_x, np.float64), np.asarray(tasks.query_x, np.float64)[:, None]], 1),
    )
    eta = float(p[prefix]["eta"])
    # one GD step from W0 = 0 on L(W) = 1/(2N) Σ (W φ_i − y_i)², then ŷ = W1 φ_q
    w1 = eta / 4 * np.einsum("bn,bnk->bk", np.asarray(tasks.context_y, np.float64), phi[:, :4])
    np.testing.assert_allclose(
        np.asarray(model.apply(params, tasks)), np.einsum("bk,bk->b", w1, phi[:, 4]), rtol=2e-4, atol=1e-5
    )


def test_lsa_after_an_identity_mlp_block_is_one_gd_step_on_raw_inputs():
    """The paper's construction through the MLP block: embedding [x, y] as they are, an MLP that
    adds nothing, W_Q = W_K keep x, W_V e = −y, W_O = η/N on the label channel."""
    tasks = sample_function_tasks(jax.random.key(7), 50, RandomMLPOptions(d=3, num_context=8))
    model = registry("nonlinear_model").get("mlp_lsa").build(FeatureOptions(width=4, widening=1))
    params = model.init(jax.random.key(0), tasks)
    eta, n = 0.7, 8
    keep_x, value, out = np.diag([1.0, 1, 1, 0]), np.zeros((4, 4)), np.zeros((4, 4))
    value[3, 3], out[3, 3] = -1.0, eta / n
    new = {}
    for module, leaves in params.items():
        part = module.rsplit("/", 1)[-1]
        new[module] = {k: jnp.zeros_like(a) for k, a in leaves.items()}
        matrix = {"emb": np.eye(4), "query": keep_x, "key": keep_x, "value": value, "output": out}.get(part)
        if matrix is not None:
            new[module]["w"] = jnp.asarray(matrix, jnp.float32)
    np.testing.assert_allclose(
        np.asarray(model.apply(new, tasks)), np.asarray(gd_predictions(tasks, eta)), rtol=1e-4, atol=1e-5
    )


def test_kernel_baselines_closed_forms_and_tuning():
    tasks = sample_function_tasks(jax.random.key(8), 40, SineOptions())
    cx, cy, qx = (np.asarray(a, np.float64) for a in (tasks.context_x, tasks.context_y, tasks.query_x))
    k_q = np.exp(-np.sum((cx - qx[:, None]) ** 2, -1) / (2 * 1.5**2))
    np.testing.assert_allclose(
        np.asarray(kernel_gd_predictions(tasks, 1.5, 2.0)), 2.0 / 10 * np.sum(cy * k_q, -1), rtol=1e-4, atol=1e-6
    )
    # with a tiny ridge, kernel ridge interpolates its context: queried at x_1 it returns y_1
    at_first = tasks.with_query_x(tasks.context_x[:, 0])
    np.testing.assert_allclose(np.asarray(kernel_ridge_predictions(at_first, 1.0, 1e-7)), cy[:, 0], atol=2e-3)
    for build_baseline in (build_kernel_gd_step, build_kernel_ridge):
        baseline = build_baseline(None)
        hyper, best = baseline.tune_eta(tasks)
        reference = baseline.reference(tasks, hyper)
        assert reference.prediction.shape == (40,) and reference.sensitivity.shape == (40, 1)
        assert abs(0.5 * np.mean((np.asarray(reference.prediction) - np.asarray(tasks.query_y)) ** 2) - best) < 1e-5
        assert best < 0.5 * np.mean(np.asarray(tasks.query_y) ** 2)  # beats predicting 0


def _small(model="mlp_lsa", task="sine_regression", **train):
    defaults = dict(steps=40, batch_size=64, log_every=20, eval_size=200)
    return NonlinearSettings(
        task=choice("task", task), model=choice("nonlinear_model", model), train=NonlinearTrain(**{**defaults, **train})
    ).validate()


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("train.steps", 0, "train.steps=0"),
        ("train.warmup_fraction", 1.5, "train.warmup_fraction=1.5"),
        ("task.name", "linear_regression", "task.name='linear_regression'"),
    ],
)
def test_bad_settings_are_refused_in_one_line(key, value, needle):
    raw = _small().to_dict()
    part, name = key.split(".")
    raw[part][name] = value
    if key == "task.name":
        raw["task"]["options"] = {}
    with pytest.raises(SettingsError) as err:
        settings_from_record(raw)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_settings_round_trip_and_training_is_deterministic_and_learns():
    settings = _small(task="random_mlp_regression", steps=60, learning_rate=3e-3, warmup_fraction=0.1)
    again = settings_from_record(json.loads(json.dumps(settings.to_dict())))
    assert again == settings
    results = []
    for _ in range(2):
        trainer = build(settings)
        state = trainer.init_state()
        first = trainer.evaluate(state)["eval_loss"]
        state = trainer.run_chunk(state, 0, 60).state
        results.append((first, trainer.evaluate(state)["eval_loss"]))
    assert results[0] == results[1]  # bit for bit
    assert results[0][1] < 0.85 * results[0][0]  # measured: 0.293 -> 0.226


def test_features_gd_trains_through_the_system():
    settings = dataclasses.replace(_small("features_gd", steps=60, learning_rate=3e-3))
    trainer = build(settings)
    state = trainer.init_state()
    before = trainer.evaluate(state)["eval_loss"]
    after = trainer.evaluate(trainer.run_chunk(state, 0, 60).state)["eval_loss"]
    assert after < before


def test_shipped_configs_are_the_reproductions_settings():
    from pathlib import Path
    from scripts.reproduce import build_parser, nonlinear_settings
    from scripts.reproduce_plan import make_plan

    plan = make_plan(build_parser().parse_args([]))
    root = Path(__file__).resolve().parent.parent
    for model in ("mlp_lsa", "features_gd"):
        shipped = json.loads((root / "configs" / f"sine_{model}.json").read_text())
        assert shipped == json.loads(json.dumps(nonlinear_settings(plan, model, 0).to_dict()))
        assert settings_from_record(shipped).model.name == model


def test_an_optional_setting_is_set_from_the_command_line():
    """`train.warmup_fraction` is `float | None`: --set takes a number or none/null."""
    from src.overrides import apply_overrides

    settings = _small()
    assert settings.train.warmup_fraction is None
    warm = apply_overrides(settings, ["train.warmup_fraction=0.05"])
    assert warm.train.warmup_fraction == 0.05
    assert apply_overrides(warm, ["train.warmup_fraction=none"]).train.warmup_fraction is None
    with pytest.raises(ValueError) as err:
        apply_overrides(settings, ["train.warmup_fraction=x"])
    assert "accepted: a finite number" in str(err.value) and "\n" not in str(err.value)
