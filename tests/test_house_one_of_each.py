"""The house's rules 3 and 4 (tests/test_house.py checks rules 1 and 2; docs/architecture.md):

3. one of each: one training loop, one run-directory writer, one Settings base, one optimizer
   factory, one gradient step, one train-settings check, one pair container (every baseline reads
   it); every settings tree is a Settings and every Choice field names its registry;
4. no module over 400 lines, tests included.
And papers are called by their names wherever a user reads, never by an original's README label.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from pathlib import Path

from src.registry import KINDS, registry
from test_house import MODULES, ROOT


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
    loops = [
        m
        for m, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.While) and "step" in ast.unparse(node.test) and "run_chunk" in ast.unparse(node)
    ]
    assert loops == ["src.loop"], loops


def test_one_gradient_step():
    """The optimizer's update is applied in src.optim.gradient_step alone; every system's chunk
    and every fitted baseline injects its loss there."""
    assert {p.split(":")[0] for p in _calls("apply_updates")} == {"src.optim"}
    assert {p.split(":")[0] for p in _calls("optimizer.update")} == {"src.optim"}


# the fields that make a class a container of in-context pairs (inputs and labels, or a context)
PAIR_FIELDS = ({"xs", "ys"}, {"context_x"}, {"query_x"})


def pair_containers(source: str) -> list[str]:
    """The classes of `source` whose annotated fields hold in-context pairs (PAIR_FIELDS)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            fields = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            if any(need <= fields for need in PAIR_FIELDS):
                found.append(node.name)
    return found


def test_one_pair_container():
    """Every pair task, curriculum, shift, baseline and read side speaks src.tasks.pairs.PairPrompt;
    no other class holds (x, y) pairs or a context and a query (token tasks hold tokens)."""
    found = {f"{m}.{c}" for m, path in MODULES.items() for c in pair_containers(path.read_text())}
    assert found == {"src.tasks.pairs.PairPrompt"}, found
    assert pair_containers("class Tasks:\n    context_x: int\n    query_x: int\n") == ["Tasks"]  # it can fail


def test_every_baseline_reads_a_pair_prompt():
    """One signature: no public function of baselines/ takes the prompts' arrays (xs and ys, or a
    context and a query) apart; each takes the PairPrompt (private helpers on one prompt may)."""
    apart = []
    for module, path in MODULES.items():
        if not module.startswith("baselines"):
            continue
        for node in ast.parse(path.read_text()).body:  # the module's functions (closures may take a query)
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                names = {a.arg for a in node.args.args}
                if {"xs", "ys"} <= names or "context_x" in names or "query_x" in names:
                    apart.append(f"{module}.{node.name}")
    assert not apart, apart


def check_source(settings_class) -> str:
    """The source of a settings class's check and of every function of src/systems/ it calls, at any
    depth (a check split into steps, or one that hands over to a module of checks, is read whole)."""
    import inspect
    import textwrap

    sources, seen, todo = [], set(), [settings_class.check]
    while todo:
        function = todo.pop()
        if function in seen:
            continue
        seen.add(function)
        source = textwrap.dedent(inspect.getsource(function))
        sources.append(source)
        for node in ast.walk(ast.parse(source)):
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Name):
                todo.append(function.__globals__.get(func.id))
            elif isinstance(func, ast.Attribute) and ast.unparse(func.value) in ("self", "settings"):
                todo.append(getattr(settings_class, func.attr, None))
        todo = [f for f in todo if inspect.isfunction(f) and f.__module__.startswith("src.systems.")]
    return "\n".join(sources)


def test_one_train_settings_check():
    """Every system's train settings are the one subtree (src.settings.TrainLoop, or StepTrain for
    the systems that draw a batch per step), and no system checks a shared field itself."""
    import typing
    from src.train_settings import OPTIMIZER_KNOBS, StepTrain, TrainLoop

    for entry in registry("system"):
        train = typing.get_type_hints(entry.options)["train"]
        assert issubclass(train, TrainLoop), entry.name
        assert "check" not in vars(train), f"{train.__name__} checks its fields itself"
        shared = [f.name for f in dataclasses.fields(StepTrain if issubclass(train, StepTrain) else TrainLoop)]
        shared += [k for k in OPTIMIZER_KNOBS if k in {f.name for f in dataclasses.fields(train)}]
        source = check_source(entry.options)
        # a check names the fields it refuses: one that only hands over would pass the scan below unread
        assert re.search(r'"(task|model|train|pairs|curriculum)\.', source), f"{entry.name}: no field checked"
        assert not [n for n in shared if f'"train.{n}"' in source], entry.name


def test_the_train_settings_check_reads_the_steps_of_a_split_check():
    """The scan follows a check into the steps it calls, so a shared field checked there is seen."""
    from src.systems.gpt2 import GPT2Settings

    source = check_source(GPT2Settings)  # GPT2Settings.check hands over to src/systems/gpt2_checks.py
    assert "def _check_train(" in source and '"train.precision"' in source
    assert "def _check_shapes(" in source and '"model.max_tokens"' in source


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
    tests = {f"tests.{p.stem}": p for p in (ROOT / "tests").rglob("*.py")}
    long = {m: n for m, p in {**MODULES, **tests}.items() if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


SEED_LABEL = re.compile(r"\bseed[ _]?00[0-4]\b|\bthe seed's\b", re.IGNORECASE)


def seed_labels(paths) -> list[str]:
    """Lines that call a paper by the internal label of its original's README ("seed 002")."""
    return [
        f"{p.relative_to(ROOT)}:{i}"
        for p in paths
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if SEED_LABEL.search(line)
    ]


def test_papers_are_called_by_their_names_where_a_user_reads():
    """Code, help, docs, configs and the Makefile name papers, not "seed 00X" (report/ is written by
    the studies: its writers are code and are covered here)."""
    suffixes = {".py", ".md", ".yaml", ".yml", ".txt", ".toml"}
    skip = {".venv", ".git", "runs", "report", "shared", "node_modules"}
    paths = []
    for folder, dirs, files in os.walk(ROOT):  # pruned: never walks .venv or a user's runs/
        dirs[:] = [d for d in dirs if d not in skip]
        paths += [
            Path(folder) / f
            for f in files
            if (Path(f).suffix in suffixes or f == "Makefile") and f != "test_house_one_of_each.py"
        ]
    assert len(paths) > 100
    found = seed_labels(paths)
    assert not found, found[:10]
    assert seed_labels([ROOT / "tests" / "test_house_one_of_each.py"])  # the check can fail: this file names the label
