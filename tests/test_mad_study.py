"""The MAD study (scripts/mad.py, scripts/mad_claims.py): its grid and the refusals of bad grid
files, `make mad` (the grid alone) against `make mad_settling` (the grid and its settling run), the
claims' budget lines, and a quick study end to end."""

from __future__ import annotations

import subprocess
import sys

import pytest

from src.tasks import mad

NAMES = tuple(mad.MAD_TASKS)


def test_study_grid_and_bad_configs(tmp_path):
    from scripts.mad import MadGrid, read_grid, study_cells
    from src.flags import UsageError

    grid = read_grid("configs/mad.yaml")
    assert len(grid.mixers) == 12 and set(grid.tasks) == set(NAMES) and grid.learning_rates == (3e-3,)
    paper = read_grid("configs/paper/mad.yaml")
    assert paper.width == 128 and paper.batch_size == 128 and len(paper.tasks["noisy_recall"]["variants"]) == 10
    for text, word in (
        ("widht: 64\n", "widht"),
        ("tasks: {copying: {steps: 3}}\n", "copying"),
        ("learning_rates: []\n", "learning_rates"),
        ("tasks: {compression: {steps: 3, epochs: 2}}\n", "compression"),
        ("settling: {copying: {mixer: attention, steps: 9}}\n", "settling.copying"),
        ("settling: {compression: {mixer: attention}}\n", "settling.compression"),
        ("settling: {compression: {mixer: attention, steps: 0}}\n", "settling.compression"),
        ("settling: [compression]\n", "settling"),
    ):
        path = tmp_path / "bad.yaml"
        path.write_text(text)
        with pytest.raises(UsageError, match=word):
            read_grid(str(path))

    class Flags:
        quick, config, mixers = True, None, None

    class Settling(Flags):
        settling = True

    assert grid.settling == {"selective_copying": {"mixer": "attention", "steps": 2400}}
    assert grid.tasks["selective_copying"]["steps"] == 400 and grid.tasks["memorization"]["steps"] == 1000
    grid_only = study_cells(Flags, tmp_path)  # make mad: the grid alone
    assert len(grid_only) == 12 and not any(c.tags.get("settling") for c in grid_only)
    cells = study_cells(Settling, tmp_path)  # make mad_settling: the grid and its settling run
    assert len(cells) == 13 and {c.tags["task"] for c in cells} == set(NAMES)
    assert [c.name for c in cells[:12]] == [c.name for c in grid_only]
    (longer,) = [c for c in cells if c.tags.get("settling")]
    assert longer.tags["mixer"] == "attention" and longer.settings.train.steps == 60
    assert longer.settings.task.name == "selective_copying" and longer.name.endswith("_settling60")
    compression = next(c for c in cells if c.tags["task"] == "compression")
    assert compression.settings.model.read_out == "compress"
    assert all(c.settings.model.read_out == "next_token" for c in cells if c.tags["task"] != "compression")
    assert MadGrid().tasks["memorization"]["steps"] == 600

    class Narrowed(Settling):
        tasks, mixers = "compression, memorization", "attention"

    assert [c.tags["task"] for c in study_cells(Narrowed, tmp_path)] == ["compression", "memorization"]  # no settling
    for text, word in (("copying", "copying"), ("compression,compression", "compression"), (",", "comma list")):
        Narrowed.tasks = text
        with pytest.raises(UsageError, match=word):
            study_cells(Narrowed, tmp_path)


@pytest.mark.study
def test_quick_study_writes_the_report(tmp_path):
    """scripts.mad --quick --settling: 2 mixers x 6 tasks and a longer attention run on selective copying, the
    report's tables, claims and the budget a missed claim would take, the figures; a second run reuses
    the runs."""
    import json
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    args = [sys.executable, "-m", "scripts.mad", "--quick", "--settling", "--runs-dir", str(tmp_path / "runs")]
    args += ["--report-dir", str(tmp_path / "report")]
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "mad_results.json").read_text())
    assert set(results["tasks"]) == set(NAMES)
    for cells in results["tasks"].values():
        assert set(cells) == {"attention", "mamba2"}
        for cell in cells.values():
            assert 0.0 <= cell["accuracy"] <= 1.0 and 0.0 <= cell["macro_accuracy"] <= 1.0
    claims = {c["claim"].split(":")[0] for c in results["checks"]}
    assert any(c.startswith("attention reaches 0.94") for c in claims)
    (copying,) = [c for c in results["checks"] if "selective copying" in c["claim"]]
    assert "60-step run of attention (1,920 sequences)" in copying["budget"]
    longer = results["settling"]["selective_copying"]
    assert longer["steps"] == 60 and [p[0] for p in longer["curve"]][-1] == 60
    text = (tmp_path / "report" / "MAD.md").read_text()
    assert "QUICK" in text and "| attention |" in text and "## Beside the paper" in text
    assert "## Longer runs" in text and "| selective copying | attention | 60 | 1,920 |" in text
    assert (tmp_path / "report" / "figures" / "mad" / "accuracy.png").stat().st_size > 1000
    again = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "13 already finished" in again.stdout + again.stderr


def test_a_missed_claim_names_the_settling_command_when_its_run_was_not_trained():
    """`make mad` trains the grid alone: a threshold its attention run misses points to `make
    mad_settling` when the grid declares a settling run of that task, and says nothing otherwise."""
    from scripts.mad_claims import checks

    cell = {"accuracy": 0.6, "macro_accuracy": 0.6, "curve": [(200, 0.3, 0.3), (300, 0.5, 0.5), (400, 0.6, 0.6)]}
    tasks = {"selective_copying": {"attention": cell}}
    (missed,) = checks(tasks, {}, {"selective_copying": {"mixer": "attention", "steps": 2400}})
    assert not missed["holds"] and "make mad_settling" in missed["budget"] and "2,400 steps" in missed["budget"]
    (plain,) = checks(tasks, {}, {})
    assert "budget" not in plain
    (other,) = checks(tasks, {}, {"selective_copying": {"mixer": "mamba", "steps": 2400}})
    assert "budget" not in other
