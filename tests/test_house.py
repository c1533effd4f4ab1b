"""Tests that keep the house standing (ARCHITECTURE.md):

1. imports follow the flow settings -> tasks -> models -> training -> run directory ->
   analyses -> pipeline -> jobs -> figures -> entry points, and nothing imports runners/;
2. no module outside a registry entry compares a model, layout, task or mixer name;
3. every registry entry builds, jits and returns the documented shapes.
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.registry import KINDS, registry

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".venv", "tests", ".git", "runs", "report"}

# Module-name prefixes and their level; a module may import only modules of its level or
# lower. The longest matching prefix wins.
LEVELS = [
    (0, ("src.registry", "src.cli", "src.config", "src.presets", "src.provenance",
         "src.overrides", "src.params", "src.losses", "src.stats", "utils_log", "plots.style",
         "src")),
    (1, ("src.tasks", "src.curricula", "src.metrics")),
    (2, ("src.models", "baselines")),
    (3, ("src.train", "src.probes", "utils_attention", "src.dynamics_train", "src.seq_train",
         "src.recipe_train")),
    (4, ("src.rundir",)),
    (5, ("analysis",)),
    (6, ("src.pipeline", "src.lsa_cli", "src.linattn_cli", "src.gpt2_cli", "src.recipe_cli")),
    (7, ("src.launch", "src.ray_executor", "sweep_grid", "sweep", "eval_order", "eval_noise")),
    (8, ("plots",)),
    (9, ("scripts", "runners")),
]


def level_of(module: str) -> int | None:
    matches = [(len(p), level) for level, prefixes in LEVELS for p in prefixes
               if module == p or module.startswith(p + ".")]
    return max(matches)[1] if matches else None


def project_modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if SKIP_DIRS & set(rel.parts):
            continue
        name = ".".join(rel.with_suffix("").parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


MODULES = project_modules()


def imports_of(path: Path) -> list[tuple[str, int]]:
    """(imported project module, line) for every import statement, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and (name, node.lineno) not in found:
                found.append((name, node.lineno))
    return found


def test_every_module_has_a_level():
    missing = sorted(m for m in MODULES if level_of(m) is None)
    assert not missing, f"add these modules to LEVELS in tests/test_house.py: {missing}"


def test_imports_point_down_the_flow_and_nothing_imports_runners():
    bad = []
    for module, path in MODULES.items():
        mine = level_of(module)
        for target, line in imports_of(path):
            if target == module or target == "src":
                continue
            if target.split(".")[0] == "runners" and module.split(".")[0] != "runners":
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target} (nothing imports runners/)")
            elif level_of(target) is not None and mine is not None and level_of(target) > mine:
                bad.append(f"{path.relative_to(ROOT)}:{line} (level {mine}) imports {target} "
                           f"(level {level_of(target)})")
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------------------
# 2. No branching on names outside registry entries

NAME_KINDS = ("task", "layout", "family", "scoring", "seq_mixer", "state_mixer", "position", "norm")
ENTRY_MODULES = ("src.tasks", "src.models", "src.probes", "src.presets", "src.registry", "baselines")


def registered_names() -> set[str]:
    from src.presets import MODEL_PRESETS
    names = set(MODEL_PRESETS)
    for kind in NAME_KINDS:
        names.update(registry(kind).names())
    return names


def _string_constants(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def test_no_name_branches_outside_registry_entries():
    names = registered_names()
    bad = []
    for module, path in MODULES.items():
        if any(module == p or module.startswith(p + ".") for p in ENTRY_MODULES):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                hits = {s for o in operands for s in _string_constants(o)} & names
                if hits:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} compares with {sorted(hits)}")
            elif isinstance(node, ast.MatchValue):
                hits = set(_string_constants(node.value)) & names
                if hits:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} matches {sorted(hits)}")
    assert not bad, "ask a registry entry instead of comparing names:\n" + "\n".join(bad)


def test_the_name_check_can_fail(tmp_path):
    """The scanner sees a comparison like the ones it forbids."""
    tree = ast.parse('if model.layout.name == "interleaved":\n    pass\n')
    compare = next(n for n in ast.walk(tree) if isinstance(n, ast.Compare))
    assert set(_string_constants(compare.comparators[0])) & registered_names() == {"interleaved"}


# ---------------------------------------------------------------------------
# 3. Every registry entry builds, jits and returns the documented shapes

def _check_task(entry):
    from src.config import TaskConfig
    options = entry.default_options()
    labels = getattr(options, "labels", None)
    if labels in ("real", "sign"):                # regression / boolean: x/y pairs (gpt2, lm)
        batch = jax.jit(entry.build(options, n_points=6, n_dims=3), static_argnums=1)(
            jax.random.key(0), 2, 3, 6)
        assert batch.xs.shape == (2, 6, 3) and batch.ys.shape == batch.weights.shape == (2, 6)
        return
    if labels == "token":                         # token tasks (lm): inputs, targets, scored [B, T]
        small = dataclasses.replace(options, vocab_size=64)
        batch = jax.jit(entry.build(small), static_argnums=1)(jax.random.key(0), 3)
        t = small.tokens()
        assert batch.inputs.shape == batch.targets.shape == batch.scored.shape == (3, t)
        return
    if not isinstance(options, TaskConfig):       # a fixed-set task (the dynamics study)
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
    from src.config import TaskConfig
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
    from src.config import ModelConfig, Settings, TaskConfig
    from src.registry import choice
    task = TaskConfig(d=3, num_context=4)
    model = ModelConfig(layout=choice("layout", layout), mixers=mixers,
                        shared_weights=len(mixers) == 1, num_layers=len(mixers) if len(mixers) > 1 else 2)
    return Settings(task=task, model=model)


def _check_family(entry):
    if hasattr(entry.options, "vocab_size"):      # lm: tokens -> logits [B, T, V], pairs -> [B, n]
        for inputs, args, shape in (("tokens", (jnp.zeros((2, 8), jnp.int32),), (2, 8, 32)),
                                    ("pairs", (jnp.ones((2, 4, 3)), jnp.ones((2, 4))), (2, 4))):
            config = entry.options(width=16, n_head=2, n_layer=1, max_len=8, vocab_size=32, n_dims=3,
                                   inputs=inputs)
            model = entry.build(config)
            params = model.init(jax.random.key(0), *args)
            assert jax.jit(model.apply)(params, *args).shape == shape
        return
    if dataclasses.is_dataclass(entry.options) and hasattr(entry.options, "n_embd"):   # gpt2
        config = entry.options(n_dims=3, n_embd=16, n_head=2, n_layer=1, n_positions=6)
        model = entry.build(config)
        xs, ys = jnp.ones((2, 6, 3)), jnp.ones((2, 6))
        params, state = model.init(jax.random.key(0), xs, ys)
        assert jax.jit(model.apply)(params, state, xs, ys).shape == (2, 6)
        return
    from src.models.layouts import make_tokens
    from src.tasks.regression import sample_tasks
    for layout in registry("layout").names():
        settings = _small_attention_only(layout, ("softmax", "linear"))
        model = entry.build(None, settings.task, settings.model)
        params = model.init(jax.random.key(0))
        tokens = make_tokens(sample_tasks(jax.random.key(1), 5, settings.task), settings.model)
        out = jax.jit(model.apply)(params, tokens)
        assert out.prediction.shape == (5,)


def _check_probe(entry):
    from src.models.attention_only import build_model
    from src.tasks.regression import sample_tasks
    settings = _small_attention_only("interleaved", ("softmax", "linear"))
    model = build_model(settings.task, settings.model)
    scores = entry.build(None, model)(model.init(jax.random.key(0)),
                                      sample_tasks(jax.random.key(1), 3, settings.task))
    assert scores and all(np.isfinite(v) for v in scores.values())


def _check_baseline(entry):
    if hasattr(entry.options, "k"):                # a per-point regression baseline (icl_curve)
        xs = jax.random.normal(jax.random.key(0), (2, 6, 3))
        ys = jnp.einsum("bnd,d->bn", xs, jnp.ones(3))
        assert entry.build(entry.default_options())(xs, ys).shape == (2, 6)
        return
    from src.config import TaskConfig
    from src.tasks.regression import sample_tasks
    baseline = entry.build(None)
    tasks = sample_tasks(jax.random.key(0), 50, TaskConfig(d=3, num_context=4))
    eta, _ = baseline.tune_eta(tasks)
    reference = baseline.reference(tasks, eta)
    assert reference.prediction.shape == (50,) and reference.sensitivity.shape == (50, 3)


def _check_analysis(entry):
    assert callable(entry.build(None)) and entry.applies is not None


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


def _check_seq_mixer(entry):
    import haiku as hk
    options = entry.default_options()
    f = hk.without_apply_rng(hk.transform_with_state(
        lambda x: entry.build(options, width=16, num_heads=4, name="mixer")(x)))
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
        return mixer.build(mixer.default_options(), width=16, num_heads=4, position=encoding,
                           name="mixer")(x)
    f = hk.without_apply_rng(hk.transform(forward))
    x = jax.random.normal(jax.random.key(0), (2, 5, 16))
    params = f.init(jax.random.key(1), x)
    assert jax.jit(f.apply)(params, x).shape == (2, 5, 16)


def _check_state_mixer(entry):
    import haiku as hk
    f = hk.without_apply_rng(hk.transform(lambda x: entry.build(entry.default_options())(x)))
    x = jnp.ones((2, 5, 12))
    assert jax.jit(f.apply)(f.init(jax.random.key(0), x), x).shape == (2, 5, 12)


CHECKS = {"state_mixer": _check_state_mixer, "position": _check_position, "task": _check_task, "dynamics_model": _check_dynamics_model, "seq_mixer": _check_seq_mixer, "layout": _check_layout, "scoring": _check_scoring,
          "family": _check_family, "probe": _check_probe, "baseline": _check_baseline,
          "analysis": _check_analysis}


def all_entries():
    return [(kind, name) for kind in KINDS for name in registry(kind).names()]


@pytest.mark.parametrize("kind, name", all_entries())
def test_registry_entry_builds_jits_and_has_documented_shapes(kind, name):
    entry = registry(kind).get(name)
    assert entry.doc, f"{kind} {name!r} has no one-line doc"
    assert dataclasses.is_dataclass(entry.options)
    assert kind in CHECKS, f"no shape check for registry kind {kind!r}: add one to CHECKS"
    CHECKS[kind](entry)
