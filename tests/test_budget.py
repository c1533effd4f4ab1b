"""The analysis budget (analysis/budget.py) and the progress bars inside analyses (src/batched.py):
a run whose analyses would exceed the budget reads the first tasks that fit and says so; --full
reads every one; a bar is drawn for a computation of several blocks, with the same numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from analysis import budget, icl_curve, inductive_bias, robustness
from src import rundir as names
from src.batched import in_blocks, shown

ROOT = Path(__file__).resolve().parents[1]


def test_every_task_where_it_is_cheap_the_first_that_fit_else_never_fewer_than_the_floor():
    allowed = 10**9
    assert budget.tasks_within(1000, 10**6, allowed) == 1000
    assert budget.tasks_within(1000, allowed // 100, allowed) == 100
    assert budget.tasks_within(1000, allowed, allowed) == budget.LEAST_TASKS
    assert budget.tasks_within(5, allowed, allowed) == 5
    with budget.full():
        assert budget.tasks_within(1000, allowed, allowed) == 1000


def test_the_budget_is_a_share_of_the_runs_training_never_below_the_floor():
    class Side:
        def __init__(self, work):
            self.work = work

        def training_work(self):
            return self.work

    assert budget.budget(Side(0)) == budget.FLOOR
    assert budget.budget(Side(10**15)) == int(budget.SHARE * 10**15)


def test_thinned_variants_keep_the_first_and_the_last():
    allowed = 160 * 10**6
    assert budget.thinned(101, 8, 1, allowed) == list(range(101))
    kept = budget.thinned(101, 8, 10**6, allowed)  # 20 prompts a task fit
    assert kept[0] == 0 and kept[-1] == 100 and 15 <= len(kept) <= 21
    assert len(set(np.diff(kept[:-1]))) == 1  # evenly spaced
    with budget.full():
        assert budget.thinned(101, 8, allowed, allowed) == list(range(101))


def test_a_bar_for_several_blocks_and_the_same_numbers(capsys):
    xs = jnp.arange(40.0).reshape(10, 4)
    square = in_blocks(lambda x: x**2, 3, "rows")
    quiet = np.asarray(square(xs))
    assert "rows" not in capsys.readouterr().err
    with shown("a test"):
        drawn = np.asarray(square(xs))
    assert "a test: rows" in capsys.readouterr().err
    np.testing.assert_array_equal(drawn, quiet)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    """A 20-step GPT-2 of configs/quick.yaml with 40 eval tasks, no analyses yet."""
    out = tmp_path_factory.mktemp("budget") / "quick"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "runners.train",
            "--config",
            "configs/quick.yaml",
            "--set",
            "training.train_steps=20",
            "--set",
            "training.eval_size=40",
            "--out",
            str(out),
            "--quiet",
            "--skip_analysis",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_over_budget_the_analyses_read_the_first_tasks_and_say_so(small_run, monkeypatch, capsys):
    assert robustness.main(["--run", str(small_run)]) == 0
    full = json.loads((small_run / names.ROBUSTNESS).read_text())
    assert "budget" not in full  # cheap: every task, as before
    monkeypatch.setattr(budget, "FLOOR", 1)  # nothing fits: the floor of 8 tasks
    monkeypatch.setattr(budget, "SHARE", 0.0)
    capsys.readouterr()
    assert robustness.main(["--run", str(small_run)]) == 0
    cut = json.loads((small_run / names.ROBUSTNESS).read_text())
    assert (cut["tasks"], cut["eval_tasks"]) == (budget.LEAST_TASKS, 40)
    assert "the first 8 of 40 eval tasks" in cut["budget"] and "--full" in cut["budget"]
    assert "robustness: the first 8 of 40 eval tasks" in capsys.readouterr().err
    assert cut["clean_last"] != full["clean_last"]
    assert icl_curve.main(["--run", str(small_run)]) == 0
    assert "icl_curve: the first 8 of 40 eval tasks" in capsys.readouterr().err
    assert inductive_bias.main(["--run", str(small_run)]) == 0
    record = json.loads((small_run / names.INDUCTIVE_BIAS_JSON).read_text())
    assert record["tasks"] == 8 and "the first 8 of 40 eval tasks" in record["budget"]
    assert robustness.main(["--run", str(small_run), "--full"]) == 0
    assert json.loads((small_run / names.ROBUSTNESS).read_text()) == full


def test_a_run_whose_training_would_not_fit_here_is_still_read_back(small_run, monkeypatch):
    """A finished run is read with its evaluation's memory checked, not training's (src.bounds
    reading_a_run): on a machine with less memory than its training needs, its analyses run."""
    from src import bounds
    from src.rundir import RunDir
    from src.settings import SettingsError
    from src.systems.gpt2_prompts import run_bytes

    settings = RunDir(small_run).load_settings()
    training = run_bytes(settings)
    with bounds.reading_a_run():
        reading = run_bytes(settings)
    assert reading < training
    monkeypatch.setattr(bounds, "available_bytes", lambda: int((reading + training) / 2 / bounds.HEADROOM))
    with pytest.raises(SettingsError, match="needs about"):
        settings.validate()  # training it here: refused
    assert RunDir(small_run).load_settings() == settings  # reading it back: accepted
    assert robustness.main(["--run", str(small_run)]) == 0
