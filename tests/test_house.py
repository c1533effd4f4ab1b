"""Tests that keep the house standing (docs/architecture.md):

1. imports follow the flow flags, process guards, settings -> tasks -> models -> systems and the
   loop -> run directory -> analyses -> pipeline and the papers' dialects (src/cli/) -> jobs ->
   figures -> entry points, with no circle; nothing imports runners/, and no analysis, plot or
   baseline imports a dialect;
2. no module outside a registry entry compares the name of a registered thing (of any kind).
Rules 3 (one of each) and 4 (no module over 400 lines, tests included) are checked in
tests/test_house_one_of_each.py; every registry entry's shapes in tests/test_registry_entries.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from src.registry import KINDS, registry

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".venv", "tests", ".git", "runs", "report", ".originals"}

# Module-name prefixes and their level; a module may import only modules of its level or
# lower. The longest matching prefix wins.
LEVELS = [
    (
        0,
        (
            "src.registry",
            "src.settings",
            "src.flags",
            "src.process",
            "src.provenance",
            "src.optim",
            "src.overrides",
            "src.params",
            "src.stats",
            "src.files",
            "src.bounds",
            "src.rundir.names",
            "src.interrupts",
            "src.yaml_includes",
            "plots.style",
            "src",
            "src.gd_paper",  # the room of von Oswald et al.'s system: its modules at their levels below
            "src.gd_paper.config",
        ),
    ),
    (1, ("src.tasks", "src.gd_paper.curricula", "src.gd_paper.metrics")),
    (2, ("src.models", "src.gd_paper.models", "baselines")),
    (
        3,
        (
            "src.loop",
            "src.checkpoint",
            "src.probes",
            "src.systems",
            "src.together",
            "src.gd_paper.eval_set",
            "src.gd_paper.presets",
        ),
    ),
    (4, ("src.rundir",)),
    (5, ("analysis", "src.gd_paper.study")),  # the paper's study aggregations read runs as analyses do
    (6, ("src.pipeline", "src.jobs", "src.formats")),  # training a run; the job engine and the study
    # frame; the originals' config file formats (read by the dialects and by the studies)
    # the papers' dialects (their flags and config schemas; flag helpers and process guards are at
    # level 0) and the paper's sweep drivers: above the engine, which never imports a dialect
    (
        7,
        (
            "src.cli",
            "src.gd_paper.sweep",
            "src.gd_paper.sweep_flags",
            "src.gd_paper.sweep_grid",
            "eval_order",
            "eval_noise",
        ),
    ),
    (8, ("plots",)),
    (9, ("scripts", "runners")),
]


def level_of(module: str) -> int | None:
    matches = [
        (len(p), level) for level, prefixes in LEVELS for p in prefixes if module == p or module.startswith(p + ".")
    ]
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
                bad.append(
                    f"{path.relative_to(ROOT)}:{line} (level {mine}) imports {target} (level {level_of(target)})"
                )
    assert not bad, "\n".join(bad)


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of a module graph (depth-first search), or []."""
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
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


def dialect_imports(path: Path) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for target, line in imports_of(path)
        if target == "src.cli" or target.startswith("src.cli.")
    ]


def test_analyses_plots_and_baselines_import_no_dialect():
    """The papers' dialects (src/cli/) sit above analyses, plots and baselines: what those share
    with the command lines is in src/flags.py, src/process.py, src/mixer_spec.py and
    src/yaml_includes.py (issue 44's re-floored layer)."""
    bad = [
        hit
        for module, path in MODULES.items()
        if module.split(".")[0] in ("analysis", "plots", "baselines")
        for hit in dialect_imports(path)
    ]
    assert not bad, "\n".join(bad)


# Plots draw (ARCHITECTURE v4): plots/ imports no analysis, baseline or model. The one exception is
# a command, not a figure: `python -m plots.attention_quick`, the original's name for an analysis.
PLOTS_THAT_ARE_COMMANDS = {"plots.attention_quick": "the original's command for analysis.attention_heatmap"}
COMPUTING = ("analysis", "baselines", "src.models", "src.gd_paper.models", "src.gd_paper.study")


def test_every_sequence_mixer_is_registered_under_src_models_mixers():
    """All mixers in one place (ARCHITECTURE v4): register_mixer, or a direct registration in the
    "seq_mixer" registry, is called only by modules of src/models/mixers/."""
    bad = []
    for module, path in MODULES.items():
        if module.startswith("src.models.mixers."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            direct = (
                name == "register"
                and isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Call)
                and any(isinstance(a, ast.Constant) and a.value == "seq_mixer" for a in func.value.args)
            )
            if name == "register_mixer" or direct:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, "register sequence mixers in a module of src/models/mixers/: " + ", ".join(bad)
    from src.models.mixers import kit
    from src.registry import load_entries

    load_entries()
    assert kit.MIXERS.names() and all(kit.MIXERS.get(n).build.mixer_name == n for n in kit.MIXERS.names())


def test_the_chunk_of_steps_is_compiled_in_one_place():
    """The chunk once (ARCHITECTURE v4): in src/, only src/loop.py scans over a range of step numbers
    (scan_chunk; gradient_chunk around the one gradient step; baselines that fit a learner per
    prompt keep their own small loops); every system's trainer is a GradientTrainer or builds its
    chunk with scan_chunk (the dynamics paper's epochs)."""
    bad = []
    for module, path in MODULES.items():
        if module == "src.loop" or not module.startswith("src."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "scan"
                and any(isinstance(n, ast.Attribute) and n.attr == "arange" for a in node.args for n in ast.walk(a))
            ):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, "a chunk of steps scanned outside src.loop.scan_chunk: " + ", ".join(bad)
    for module, path in MODULES.items():
        if module.startswith("src.systems.") and "Trainer(" in (text := path.read_text()):
            trainers = re.findall(r"^class \w+Trainer\((\w+)\)", text, re.M)
            assert all(base == "GradientTrainer" for base in trainers) or "scan_chunk(" in text, (module, trainers)


def test_plots_import_no_analysis_baseline_or_model():
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for module, path in MODULES.items()
        if module.split(".")[0] == "plots" and module not in PLOTS_THAT_ARE_COMMANDS
        for target, line in imports_of(path)
        if any(target == c or target.startswith(c + ".") for c in COMPUTING)
    ]
    assert not bad, "plots draw; compute in an analysis or the study's step:\n" + "\n".join(bad)
    assert all(module in MODULES for module in PLOTS_THAT_ARE_COMMANDS)


# Studies that still read their configs through a command line's dialect (issue 44): none. The
# studies that take limits_of_icl's YAML (mechanisms, lengthgen, linear_attention, ...) read it with
# the file format's reader, src/formats/limits_of_icl.py, which the dialect src/cli/gpt2.py uses too.
# This list may only shrink: an entry that no longer imports a dialect fails.
STILL_ON_A_DIALECT: set[str] = set()


def test_the_job_engine_and_the_studies_import_no_dialect():
    """src/jobs/ (the engine, the study frame) and scripts/ (the studies) build settings in the
    workbench's own terms (src.jobs.study.read_settings, src.gd_paper.presets.preset_settings,
    src.systems.lm.lm_settings), never through a command line's dialect."""
    bad = [
        hit
        for module, path in MODULES.items()
        if (module.startswith("src.jobs") or module.startswith("scripts.")) and module not in STILL_ON_A_DIALECT
        for hit in dialect_imports(path)
    ]
    assert not bad, "\n".join(bad)
    stale = sorted(m for m in STILL_ON_A_DIALECT if not dialect_imports(MODULES[m]))
    assert not stale, f"remove from STILL_ON_A_DIALECT (they import no dialect now): {stale}"


def test_imports_have_no_circle():
    graph = {m: {t for t, _ in imports_of(p) if t != m and t in MODULES and t != "src"} for m, p in MODULES.items()}
    cycle = find_cycle(graph)
    assert not cycle, "an import circle: " + " -> ".join(cycle)


def test_the_circle_check_can_fail():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


# von Oswald et al.'s system beyond its registry entries: its room (src/gd_paper/)
PAPER_SYSTEM = ("src.gd_paper", "src.systems.lsa", "src.systems.nonlinear")


def test_the_root_of_src_holds_only_what_every_system_shares():
    """A room per paper's system (ARCHITECTURE v4): no module at the root of src/ imports the paper's
    room or its systems; one that needs the paper's config, metrics or models belongs in the room."""
    root = {m: p for m, p in MODULES.items() if m.startswith("src.") and m.count(".") == 1}
    assert len(root) > 20 and "src.gd_paper" in root  # the root's modules and packages are read
    bad = [
        f"{m}:{line} imports {i}"
        for m, path in root.items()
        if m != "src.gd_paper"
        for i, line in imports_of(path)
        if any(i == p or i.startswith(p + ".") for p in PAPER_SYSTEM)
    ]
    assert not bad, bad


def test_analyses_and_plots_import_no_system():
    """An analysis reads a run through its system's read side, asked for by capability
    (src/read_side.py; the read sides are src/systems/read_sides.py): nothing under analysis/ or
    plots/ imports src.systems or a module in it."""
    found = [
        f"{m}:{line} imports {i}"
        for m, path in MODULES.items()
        if m.split(".")[0] in ("analysis", "plots")
        for i, line in imports_of(path)
        if i == "src.systems" or i.startswith("src.systems.")
    ]
    assert not found, found
    # nor names one: a run is read by capability (analysis.common.settings_with), not load_settings("lsa")
    named = [
        f"{m}:{node.lineno}"
        for m, path in MODULES.items()
        if m.split(".")[0] in ("analysis", "plots")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith("load_settings")
        and any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)
    ]
    assert not named, named


# ---------------------------------------------------------------------------
# 2. No branching on names outside registry entries

NAME_KINDS = tuple(KINDS)  # every registry kind is guarded
ENTRY_MODULES = (
    "src.tasks",
    "src.models",
    "src.probes",
    "src.gd_paper.models",
    "src.gd_paper.presets",
    "src.registry",
    "baselines",
    "src.systems",
    "src.jobs.local",
    "src.jobs.ray",
)


def registered_names() -> set[str]:
    from src.gd_paper.presets import MODEL_PRESETS

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


def test_the_name_guard_covers_every_registry_kind():
    assert set(NAME_KINDS) == set(KINDS)


def test_the_name_check_can_fail(tmp_path):
    """The scanner sees a comparison like the ones it forbids."""
    tree = ast.parse('if model.layout.name == "interleaved":\n    pass\n')
    compare = next(n for n in ast.walk(tree) if isinstance(n, ast.Compare))
    assert set(_string_constants(compare.comparators[0])) & registered_names() == {"interleaved"}
