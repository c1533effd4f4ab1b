"""docs/extending.md's worked examples, executed as printed: each block is written into a scratch
copy of the repository at the path on its first line; the generic test then builds the new mixer,
task and analysis, a run trains with the new mixer on the new task, and the new analysis runs on it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"
COPIED = (
    "src",
    "baselines",
    "analysis",
    "plots",
    "runners",
    "scripts",
    "tests",
    "configs",
    "pyproject.toml",
    "eval_order.py",
    "eval_noise.py",
)
NEW = ("causal_mean", "absolute_regression", "last_point")
# the study of the page: a declaration, its report function and its quick test (and its Makefile target)
STUDY_FILES = ("scripts/width_sweep.py", "plots/width_sweep_report.py", "tests/test_width_sweep.py")


def examples() -> dict[str, str]:
    """{path: code} of the page's Python blocks that open with `# <path>`."""
    found = {}
    for block in re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S):
        first = block.splitlines()[0]
        if first.startswith("# ") and first.endswith(".py"):
            found[first[2:].strip()] = block
    return found


def test_the_page_has_its_examples_in_the_packages_that_find_them():
    assert sorted(examples()) == sorted(
        ["analysis/last_point.py", "src/models/mixers/causal_mean.py", "src/tasks/absolute_regression.py", *STUDY_FILES]
    )
    for path in examples():
        assert not (ROOT / path).exists(), f"{path} is an example of the page, not a module of the repository"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("extending") / "repo"
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, folder / name)
    for path, code in examples().items():
        (folder / path).write_text(code)
    return folder


def run(scratch: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(scratch)}  # the scratch copy before the installed checkout
    return subprocess.run(
        [sys.executable, *args], cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_the_generic_test_builds_the_new_mixer_task_and_analysis(scratch):
    done = run(
        scratch,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_registry_entries.py",
        "-k",
        " or ".join(NEW),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout, done.stdout[-1000:]
    listed = run(scratch, "-m", "runners.recipe", "--choices").stdout
    assert "model.seq_mixer:causal_mean" in listed and "task:absolute_regression" in listed


def test_a_run_trains_with_the_new_mixer_on_the_new_task_and_the_new_analysis_reads_it(scratch):
    out = scratch / "runs" / "example"
    done = run(
        scratch,
        "-m",
        "runners.recipe",
        "task:absolute_regression",
        "model.seq_mixer:causal_mean",
        "--model.seq_mixer.gate_bias",
        "1.0",
        "--train.train_steps",
        "20",
        "--train.log_every",
        "10",
        "--train.eval_size",
        "64",
        "--out",
        str(out),
        "--quiet",
        "--skip_analysis",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    settings = json.loads((out / "config.json").read_text())["settings"]
    assert settings["model"]["seq_mixer"]["name"] == "causal_mean" and settings["task"]["name"] == "absolute_regression"
    done = run(scratch, "-m", "analysis.last_point", "--run", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads((out / "analysis" / "last_point.json").read_text())
    assert set(result) == {"model", "least_squares"} and all(v >= 0 for v in result.values())


def test_the_pages_commands_run_as_written_in_the_scratch_copy(scratch):
    """Every `python -m` command on the page passes its checks (a dry run, as tests/test_docs_commands.py
    checks every other page) where the examples exist."""
    from tests.test_docs_commands import commands, runnable

    found = [c for c in commands(PAGE.read_text()) if runnable(c) and c.startswith("python -m ")]
    assert len(found) >= 5, found
    for command in found:
        done = subprocess.run(
            [sys.executable, *command.split()[1:]],
            cwd=scratch,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(scratch), "WORKBENCH_DRY_RUN": "1"},
            timeout=300,
        )
        assert done.returncode == 0, (command, done.stdout[-1000:] + done.stderr[-1000:])
        assert "dry run" in done.stdout, (command, done.stdout[-500:])


def test_a_new_study_is_a_declaration_a_report_function_a_make_target_and_a_quick_test():
    """The page's study: its three files are short (the declaration under 40 lines, the report
    function and the test about 20 each) and its Makefile target is two lines."""
    found = examples()
    sizes = {path: len(found[path].splitlines()) for path in STUDY_FILES}
    assert sizes["scripts/width_sweep.py"] <= 40 and max(sizes.values()) <= 40, sizes
    assert "Study(" in found["scripts/width_sweep.py"] and "def write_report(run)" in found[STUDY_FILES[1]]
    make = re.search(r"```make\n(.*?)```", PAGE.read_text(), re.S).group(1).strip().splitlines()
    assert len(make) == 2 and make[0].startswith("width_sweep: $(STAMP)  ## ") and "scripts.width_sweep" in make[1]


def test_the_pages_study_runs_its_quick_test_in_the_scratch_copy(scratch):
    """The page's quick test (study tier) trains the study's two runs and finds its report."""
    done = run(scratch, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "study", "tests/test_width_sweep.py")
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
