"""The notebook API (analysis/notebook.py): the example in docs/workbench.md runs as written on a
short run of the demo's command, and its ICL curve is the one the run's own analysis wrote."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO_RUN = "runs/demo/mechanisms_softmax"


def docs_example() -> str:
    text = (ROOT / "docs/workbench.md").read_text()
    section = text.split("## A run from Python (a notebook)", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    """The demo's limits_of_icl step (scripts/demo.py) at 20 steps, then its ICL-curve analysis."""
    out = tmp_path_factory.mktemp("notebook") / "mechanisms_softmax"
    for command in (
        [
            "runners.train",
            "--config",
            "configs/mechanisms.yaml",
            "--set",
            "training.train_steps=20",
            "--set",
            "training.eval_size=64",
            "--set",
            "training.log_every=10",
            "--out",
            str(out),
            "--quiet",
            "--skip_analysis",
        ],
        ["analysis.icl_curve", "--run", str(out)],
    ):
        done = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_docs_example_runs_and_draws_the_curve_the_analysis_wrote(demo_run):
    from matplotlib.figure import Figure

    code = docs_example()
    assert DEMO_RUN in code
    scope: dict = {}
    exec(compile(code.replace(DEMO_RUN, str(demo_run)), "docs/workbench.md", "exec"), scope)
    run, batch, curve, fig = scope["run"], scope["batch"], scope["curve"], scope["fig"]
    tasks, points, dims = batch.xs.shape
    assert (tasks, points, dims) == (64, run.trained_points, 5) and scope["y_hat"].shape == (tasks, points)
    assert scope["errors"].shape == (64, points) and np.isfinite(scope["errors"]).all()
    assert isinstance(fig, Figure) and len(fig.axes[0].lines) >= 5  # the model, 4 baselines, the trained length
    written = pd.read_csv(demo_run / "analysis" / "icl_curve.csv")
    assert set(curve.predictor) == set(written.predictor)
    ours = curve.set_index(["predictor", "n_examples"]).sort_index()
    theirs = written.set_index(["predictor", "n_examples"]).sort_index()
    np.testing.assert_allclose(ours["mean"].to_numpy(), theirs["mean"].to_numpy(), rtol=1e-6)
    model = ours.loc["model", "mean"].to_numpy()
    np.testing.assert_allclose(run.errors(batch).mean(axis=0), model, rtol=1e-6)  # errors: the curve's unit


def test_prompts_of_the_wrong_shape_are_refused_in_one_line(demo_run):
    from analysis.notebook import open_run

    run = open_run(demo_run)
    from src.tasks.pairs import pair_prompt

    with pytest.raises(ValueError, match=r"accepted: xs \[E, n, 5\] and ys \[E, n\]"):
        run.predict(pair_prompt(np.zeros((2, 11, 4)), np.zeros((2, 11))))
    with pytest.raises(TypeError, match=r"predict takes a PairPrompt, not ndarray; accepted: run.prompts\(\)"):
        run.predict(np.zeros((2, 11, 5)))


def test_a_path_that_is_no_run_is_refused_in_one_line(tmp_path):
    from analysis.notebook import open_run
    from src.rundir import RunDirError

    with pytest.raises(RunDirError) as err:
        open_run(tmp_path / "nothing")
    assert "\n" not in str(err.value)
