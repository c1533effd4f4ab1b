"""Every registry entry of every kind builds, jits and returns the documented shapes, and its
options are checked with the entry (the fourth rule of tests/test_house.py, one file per concern).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.registry import KINDS, registry


def _check_task(entry):
    from src.gd_paper.config import TaskConfig
    from src.tasks.objectives import objective_of

    options = entry.default_options()
    inputs = objective_of(entry.name).inputs  # every task names a registered objective
    if inputs == "pairs":  # regression / boolean: x/y pairs (gpt2, lm)
        batch = jax.jit(entry.build(options, n_points=6, n_dims=3), static_argnums=1)(jax.random.key(0), 2, 3, 6)
        assert batch.xs.shape == (2, 6, 3) and batch.ys.shape == batch.weights.shape == (2, 6)
        return
    if inputs == "tokens":  # token tasks (lm): inputs, targets, scored [B, T]
        fields = {f.name for f in dataclasses.fields(options)}  # a chain's vocabulary is its k states
        small = dataclasses.replace(options, vocab_size=64) if "vocab_size" in fields else options
        batch = jax.jit(entry.build(small), static_argnums=1)(jax.random.key(0), 3)
        t = small.tokens()
        assert batch.inputs.shape == batch.targets.shape == batch.scored.shape == (3, t)
        return
    if hasattr(options, "function"):  # non-linear query tasks (von Oswald et al.)
        tasks = jax.jit(entry.build(options), static_argnums=1)(jax.random.key(0), 3)
        n, d = options.num_context, options.d
        assert tasks.context_x.shape == (3, n, d) and tasks.context_y.shape == (3, n)
        assert tasks.query_x.shape == (3, d) and tasks.query_y.shape == (3,)
        return
    if not isinstance(options, TaskConfig):  # a fixed-set task (the dynamics study)
        small = dataclasses.replace(options, trainset_size=20, testset_size=10)
        sets = entry.build(small)
        assert sets["train"].tokens.shape == (20, small.seq_len, small.in_dim + 1)
        assert sets["test_icl"].targets.shape == sets["test_iwl"].targets.shape == (10,)
        return
    sample = jax.jit(entry.build(options), static_argnums=1)
    tasks = sample(jax.random.key(0), 3)
    n, d = options.num_context, options.d
    assert tasks.context_x.shape == (3, n, d) and tasks.context_y.shape == (3, n)
    assert tasks.query_x.shape == (3, d) and tasks.query_y.shape == (3,)
    assert isinstance(options, TaskConfig)


def _check_layout(entry):
    from src.gd_paper.config import TaskConfig
    from src.tasks.regression import sample_tasks

    layout = entry.build(entry.default_options())
    task = TaskConfig(d=4, num_context=5)
    tokens = jax.jit(layout.make)(sample_tasks(jax.random.key(0), 2, task))
    assert tokens.shape == (2, layout.num_tokens(5), layout.width(4))
    assert len(layout.token_labels(5)) == layout.num_context_tokens(5)


def _check_scoring(entry):
    weights = jax.jit(entry.build(None), static_argnums=1)(jnp.ones((2, 1, 3, 4)), 4)
    assert weights.shape == (2, 1, 3, 4)


def _small_attention_only(layout: str, mixers: tuple[str, ...]):
    from src.gd_paper.config import ModelConfig, TaskConfig
    from src.registry import choice
    from src.systems.lsa import LSASettings

    task = TaskConfig(d=3, num_context=4)
    model = ModelConfig(
        layout=choice("layout", layout),
        mixers=mixers,
        shared_weights=len(mixers) == 1,
        num_layers=len(mixers) if len(mixers) > 1 else 2,
    )
    return LSASettings(task=task, model=model)


def _check_family(entry):
    if hasattr(entry.options, "inputs"):  # the sequence family: every preset, both inputs
        from src.models import sequence_presets

        for preset in (sequence_presets.gpt2, sequence_presets.lm):
            for inputs, args, shape in (
                ("tokens", (jnp.zeros((2, 8), jnp.int32),), (2, 8, 32)),
                ("pairs", (jnp.ones((2, 4, 3)), jnp.ones((2, 4))), (2, 4)),
            ):
                config = dataclasses.replace(
                    preset(n_dims=3, n_head=2, n_layer=1), width=16, inputs=inputs, vocab_size=32, max_tokens=8
                )
                config.check()
                model = entry.build(config)
                params, state = model.init(jax.random.key(0), *args)
                assert jax.jit(model.apply)(params, state, *args).shape == shape
        return
    from src.gd_paper.models.layouts import make_tokens
    from src.tasks.regression import sample_tasks

    for layout in registry("layout").names():
        settings = _small_attention_only(layout, ("softmax", "linear"))
        model = entry.build(None, settings.task, settings.model)
        params = model.init(jax.random.key(0))
        tokens = make_tokens(sample_tasks(jax.random.key(1), 5, settings.task), settings.model)
        out = jax.jit(model.apply)(params, tokens)
        assert out.prediction.shape == (5,)


def _check_probe(entry):
    from src.gd_paper.models.attention_only import build_model
    from src.tasks.regression import sample_tasks

    settings = _small_attention_only("interleaved", ("softmax", "linear"))
    model = build_model(settings.task, settings.model)
    scores = entry.build(None, model)(model.init(jax.random.key(0)), sample_tasks(jax.random.key(1), 3, settings.task))
    assert scores and all(np.isfinite(v) for v in scores.values())


def _check_baseline(entry):
    """Every pair baseline reads a PairPrompt: a per-point one predicts every point, a reference (one
    GD step, the kernels) tunes itself and answers at the query; a token task's estimator reads the
    tokens."""
    from src.gd_paper.config import TaskConfig
    from src.tasks.regression import sample_tasks

    from baselines.markov import NextTokenBaseline

    if entry.options is NextTokenBaseline:  # a token task's estimator: tokens [B, T] -> next-token distributions
        probs = jax.jit(entry.build(None), static_argnums=1)(jnp.asarray([[0, 1, 2, 1, 1, 0, 2]] * 2), 3)
        assert probs.shape == (2, 7, 3) and jnp.allclose(probs.sum(-1), 1.0, atol=1e-6)
        return
    tasks = sample_tasks(jax.random.key(0), 50, TaskConfig(d=3, num_context=5))  # xs [50, 6, 3], the query last
    if dataclasses.fields(entry.options):  # a per-point regression baseline (options: k, alpha, ...; ridge's)
        predict = entry.build(entry.default_options())
        try:
            assert predict(tasks.first(2)).shape == (2, 6)
        except RuntimeError as err:  # an optional extra not installed (xgboost): says how, in one line
            assert "pip install" in str(err) and "\n" not in str(err), err
        return
    baseline = entry.build(None)
    eta, _ = baseline.tune_eta(tasks)
    reference = baseline.reference(tasks, eta)
    assert reference.prediction.shape == (50,) and reference.sensitivity.shape == (50, 3)


def _check_analysis(entry):
    analysis = entry.build(None)
    assert callable(analysis.run) and callable(analysis.outputs) and entry.applies is not None


def _check_system(entry):
    """Default settings validate, round-trip through JSON, and build a trainer whose state the
    loop can checkpoint (its shapes, without training)."""
    import json

    settings = entry.options().validate()
    assert settings.system == entry.name
    again = entry.options.from_dict(json.loads(json.dumps(settings.to_dict())))
    assert again == settings and again.digest() == settings.digest()
    trainer = entry.build(settings)
    with trainer.context():
        state = jax.eval_shape(trainer.init_state)
    assert jax.tree_util.tree_leaves(state.params) and trainer.steps >= 1 and trainer.log_every >= 1


def _check_objective(entry):
    objective = entry.build(None)
    assert objective.name == entry.name and objective.inputs and objective.metric
    if objective.point_errors is not None:
        from src.tasks.pairs import PairPrompt

        batch = PairPrompt(
            jnp.zeros((2, 3, 2)), jnp.ones((2, 3)), jnp.ones((2, 3)), jnp.zeros((2, 2)), jnp.asarray(2.0)
        )
        assert objective.point_errors(jnp.zeros((2, 3)), batch).shape == (2, 3)


def _check_executor(entry):
    assert dataclasses.is_dataclass(entry.options) and callable(entry.build)


def _check_norm(entry):
    import haiku as hk

    f = hk.without_apply_rng(hk.transform(lambda x: entry.build(entry.default_options(), name="n")(x)))
    x = jnp.ones((2, 5, 12))
    assert jax.jit(f.apply)(f.init(jax.random.key(0), x), x).shape == (2, 5, 12)


def _check_dynamics_model(entry):
    model = entry.build(entry.default_options())
    params = model.init(jax.random.key(0), 3, 0.3)
    tokens = jax.random.normal(jax.random.key(1), (4, 6, 4))
    features = jax.jit(model.features, static_argnums=1)(tokens, False)
    t = jax.jit(model.coefficients)(params)
    prediction = jax.jit(model.predict, static_argnums=2)(params, tokens, False)
    assert features.shape == (4, t.shape[0]) and prediction.shape == (4,)
    np.testing.assert_allclose(features @ t, prediction, rtol=1e-4, atol=1e-5)
    assert model.gamma(params).shape[1:] == (3, 3)


def _check_nonlinear_model(entry):
    from src.tasks.nonlinear import SineOptions, sample_function_tasks

    tasks = sample_function_tasks(jax.random.key(0), 4, SineOptions(num_context=5))
    model = entry.build(entry.default_options())
    params = model.init(jax.random.key(1), tasks)
    assert jax.jit(model.apply)(params, tasks).shape == (4,)


def _check_seq_mixer(entry):
    import haiku as hk

    options = entry.default_options()
    f = hk.without_apply_rng(
        hk.transform_with_state(lambda x: entry.build(options, width=16, num_heads=4, name="mixer")(x))
    )
    x = jax.random.normal(jax.random.key(0), (2, 5, 16))
    params, state = f.init(jax.random.key(1), x)
    assert jax.jit(f.apply)(params, state, x)[0].shape == (2, 5, 16)


def _check_position(entry):
    """A softmax_causal mixer with the encoding: [B, T, D] -> [B, T, D] under jit."""
    import haiku as hk

    encoding = entry.build(entry.default_options(), trained_tokens=8)
    mixer = registry("seq_mixer").get("softmax_causal")

    def forward(x):
        absolute = encoding.absolute(x.shape[1], x.shape[-1])
        x = x if absolute is None else x + absolute
        return mixer.build(mixer.default_options(), width=16, num_heads=4, position=encoding, name="mixer")(x)

    f = hk.without_apply_rng(hk.transform(forward))
    x = jax.random.normal(jax.random.key(0), (2, 5, 16))
    params = f.init(jax.random.key(1), x)
    assert jax.jit(f.apply)(params, x).shape == (2, 5, 16)


def _check_state_mixer(entry):
    import haiku as hk

    if entry.build(entry.default_options()) is None:  # `none`: the block has no state sublayer
        assert "no state sublayer" in entry.doc
        return
    f = hk.without_apply_rng(hk.transform(lambda x: entry.build(entry.default_options())(x)))
    x = jnp.ones((2, 5, 12))
    assert jax.jit(f.apply)(f.init(jax.random.key(0), x), x).shape == (2, 5, 12)


def _check_shift(entry):
    """An input shift: [B, n, d] -> ([B, n, d], [B, d]) under jit; a task shift names a task."""
    shift = entry.build(entry.default_options())
    if shift.task is not None:
        task, options = shift.task
        registry("task").get(task).options(**options).check()
        return
    xs = jax.random.normal(jax.random.key(0), (3, 7, 4))
    context, query = jax.jit(shift.inputs, static_argnums=2)(jax.random.key(1), xs, 4)
    assert context.shape == (3, 7, 4) and query.shape == (3, 4)


CHECKS = {
    "state_mixer": _check_state_mixer,
    "shift": _check_shift,
    "position": _check_position,
    "task": _check_task,
    "dynamics_model": _check_dynamics_model,
    "nonlinear_model": _check_nonlinear_model,
    "seq_mixer": _check_seq_mixer,
    "layout": _check_layout,
    "scoring": _check_scoring,
    "family": _check_family,
    "probe": _check_probe,
    "baseline": _check_baseline,
    "analysis": _check_analysis,
    "system": _check_system,
    "objective": _check_objective,
    "executor": _check_executor,
    "norm": _check_norm,
}


def all_entries():
    return [(kind, name) for kind in KINDS for name in registry(kind).names()]


@pytest.mark.parametrize("kind, name", all_entries())
def test_registry_entry_builds_jits_and_has_documented_shapes(kind, name):
    entry = registry(kind).get(name)
    assert entry.doc, f"{kind} {name!r} has no one-line doc"
    assert dataclasses.is_dataclass(entry.options)
    if kind != "system" and dataclasses.fields(entry.options):  # options are checked with their entry
        assert callable(getattr(entry.options, "check", None)), f"{kind} {name!r}: options without check()"
        entry.default_options().check()
    assert kind in CHECKS, f"no shape check for registry kind {kind!r}: add one to CHECKS"
    CHECKS[kind](entry)


def test_every_registry_kind_has_a_check():
    assert set(KINDS) <= set(CHECKS), sorted(set(KINDS) - set(CHECKS))
