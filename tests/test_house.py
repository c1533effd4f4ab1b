"""Tests that keep the house standing (ARCHITECTURE.md):

1. imports follow the flow settings -> tasks -> models -> systems and the loop -> run directory ->
   analyses -> pipeline and command lines -> jobs -> figures -> entry points, with no circle,
   and nothing imports runners/;
2. no module outside a registry entry compares the name of a registered thing (of any kind);
3. one of each: one training loop, one run-directory writer, one Settings base, one optimizer
   factory; every settings tree is a Settings and every Choice field names its registry;
4. every registry entry builds, jits and returns the documented shapes; no module over 400 lines.
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
    (0, ("src.registry", "src.settings", "src.cli", "src.config", "src.provenance", "src.optim",
         "src.overrides", "src.params", "src.stats", "src.files", "src.bounds", "src.rundir.names",
         "plots.style", "src")),
    (1, ("src.tasks", "src.curricula", "src.metrics")),
    (2, ("src.models", "baselines")),
    (3, ("src.loop", "src.checkpoint", "src.eval_set", "src.probes", "src.systems", "src.presets")),
    (4, ("src.rundir",)),
    (5, ("analysis",)),
    (6, ("src.pipeline", "src.cli.command", "src.cli.lsa", "src.cli.linattn", "src.cli.gpt2",
         "src.cli.recipe", "src.cli.rerun")),
    (7, ("src.jobs", "eval_order", "eval_noise")),
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


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of a module graph (depth-first search), or []."""
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if state.get(nxt) is None:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = 2
        return []
    for module in sorted(graph):
        if state.get(module) is None:
            found = visit(module, [module])
            if found:
                return found
    return []


def test_imports_have_no_circle():
    graph = {m: {t for t, _ in imports_of(p) if t != m and t in MODULES and t != "src"}
             for m, p in MODULES.items()}
    cycle = find_cycle(graph)
    assert not cycle, "an import circle: " + " -> ".join(cycle)


def test_the_circle_check_can_fail():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


# ---------------------------------------------------------------------------
# 2. No branching on names outside registry entries

NAME_KINDS = tuple(KINDS)          # every registry kind is guarded
ENTRY_MODULES = ("src.tasks", "src.models", "src.probes", "src.presets", "src.registry", "baselines",
                 "src.systems", "src.jobs.local", "src.jobs.ray")


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
    from src.tasks.objectives import objective_of
    options = entry.default_options()
    inputs = objective_of(entry.name).inputs      # every task names a registered objective
    if inputs == "pairs":                         # regression / boolean: x/y pairs (gpt2, lm)
        batch = jax.jit(entry.build(options, n_points=6, n_dims=3), static_argnums=1)(
            jax.random.key(0), 2, 3, 6)
        assert batch.xs.shape == (2, 6, 3) and batch.ys.shape == batch.weights.shape == (2, 6)
        return
    if inputs == "tokens":                        # token tasks (lm): inputs, targets, scored [B, T]
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
    from src.config import ModelConfig, TaskConfig
    from src.registry import choice
    from src.systems.lsa import LSASettings
    task = TaskConfig(d=3, num_context=4)
    model = ModelConfig(layout=choice("layout", layout), mixers=mixers,
                        shared_weights=len(mixers) == 1, num_layers=len(mixers) if len(mixers) > 1 else 2)
    return LSASettings(task=task, model=model)


def _check_family(entry):
    if hasattr(entry.options, "inputs"):          # the sequence family: every preset, both inputs
        from src.models import sequence
        for preset in (sequence.gpt2, sequence.lm):
            for inputs, args, shape in (("tokens", (jnp.zeros((2, 8), jnp.int32),), (2, 8, 32)),
                                        ("pairs", (jnp.ones((2, 4, 3)), jnp.ones((2, 4))), (2, 4))):
                config = dataclasses.replace(preset(n_dims=3, n_head=2, n_layer=1), width=16, inputs=inputs,
                                             vocab_size=32, max_tokens=8)
                config.check()
                model = entry.build(config)
                params, state = model.init(jax.random.key(0), *args)
                assert jax.jit(model.apply)(params, state, *args).shape == shape
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
        from src.tasks.garg import RegressionBatch
        batch = RegressionBatch(jnp.zeros((2, 3, 2)), jnp.ones((2, 3)), jnp.ones((2, 3)),
                                jnp.zeros((2, 2)), jnp.asarray(2.0))
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


CHECKS = {"state_mixer": _check_state_mixer, "position": _check_position, "task": _check_task,
          "dynamics_model": _check_dynamics_model, "seq_mixer": _check_seq_mixer, "layout": _check_layout,
          "scoring": _check_scoring, "family": _check_family, "probe": _check_probe,
          "baseline": _check_baseline, "analysis": _check_analysis, "system": _check_system,
          "objective": _check_objective, "executor": _check_executor, "norm": _check_norm}


def all_entries():
    return [(kind, name) for kind in KINDS for name in registry(kind).names()]


@pytest.mark.parametrize("kind, name", all_entries())
def test_registry_entry_builds_jits_and_has_documented_shapes(kind, name):
    entry = registry(kind).get(name)
    assert entry.doc, f"{kind} {name!r} has no one-line doc"
    assert dataclasses.is_dataclass(entry.options)
    if kind != "system" and dataclasses.fields(entry.options):   # options are checked with their entry
        assert callable(getattr(entry.options, "check", None)), f"{kind} {name!r}: options without check()"
        entry.default_options().check()
    assert kind in CHECKS, f"no shape check for registry kind {kind!r}: add one to CHECKS"
    CHECKS[kind](entry)


def test_every_registry_kind_has_a_check_and_the_guard_covers_it():
    assert set(KINDS) <= set(CHECKS) and set(NAME_KINDS) == set(KINDS)


# ---------------------------------------------------------------------------
# 3. One of each

def _calls(name: str) -> list[str]:
    """project places that call `name` (a dotted attribute or a plain function name)."""
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                text = ast.unparse(node.func)
                if text == name or text.endswith("." + name):
                    found.append(f"{module}:{node.lineno}")
    return found


def test_one_loop_one_writer_one_optimizer_factory():
    assert {p.split(":")[0] for p in _calls("RunDir.create")} == {"src.pipeline"}
    for ctor in ("optax.adam", "optax.adamw", "optax.sgd", "optax.chain"):
        assert {p.split(":")[0] for p in _calls(ctor)} <= {"src.optim"}, ctor
    assert {p.split(":")[0] for p in _calls("first_bad_step")} == {"src.loop"}
    # the training loop: a Python `while` over steps that calls a compiled chunk exists once
    loops = [m for m, path in MODULES.items() for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.While) and "step" in ast.unparse(node.test)
             and "run_chunk" in ast.unparse(node)]
    assert loops == ["src.loop"], loops


def test_every_settings_tree_is_a_settings_and_every_choice_field_names_its_registry():
    import typing
    from src.registry import Choice
    from src.settings import Settings
    for entry in registry("system"):
        assert issubclass(entry.options, Settings)
    seen, todo = set(), [entry.options for entry in registry("system")]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if hints[f.name] is Choice:
                assert f.metadata.get("registry") in KINDS, f"{cls.__name__}.{f.name}: use choice_field"
            elif dataclasses.is_dataclass(hints[f.name]):
                todo.append(hints[f.name])


def test_no_module_is_over_400_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long
