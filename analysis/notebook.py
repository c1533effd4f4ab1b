"""A trained run from Python (a notebook, a script): open it by its path, ask it for predictions on
prompts of your own, and draw its ICL curve beside the baselines, through the read side every
analysis uses (src/read_side.py), so the numbers are the analyses' own.

    from analysis.notebook import open_run
    run = open_run("runs/demo/mechanisms_softmax")   # any finished run that predicts (x, y) pairs
    run.settings.model.width                         # its validated settings
    batch = run.prompts()                            # its fixed eval prompts (a PairPrompt): xs [E, n, d], ys [E, n]
    y_hat = run.predict(batch)                       # [E, n]: y_i predicted from the pairs before i
    mine = run.sample(tasks=64, seed=1)              # fresh prompts of its task, or your own arrays:
    y_hat = run.predict(pair_prompt(xs, ys))         # (from src.tasks.pairs import pair_prompt)
    curve = run.icl_curve()                          # a DataFrame: predictor, n_examples, mean, ci95
    fig = run.plot()                                 # that curve as a matplotlib Figure

Runs that predict pairs: Garg et al.'s GPT-2 family (runners.train: gpt2) and the sequence models
on their pair tasks (runners.recipe: lm). Shapes: E prompts, n points, d input dimensions; errors
are the task's (squared error / d for regression, 0/1 of sign ŷ for boolean tasks).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.common import pairs_of
from analysis.icl_curve import curves, figure, load_run, summarise
from src.rundir import RunDir
from src.tasks.objectives import objective_of
from src.tasks.pairs import PairPrompt


class NotebookRun:
    """One finished run, restored once (the constructor reads and checks its settings and
    parameters; MissingArtifact, CorruptArtifact or WrongSystem, one line, when it cannot)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.settings, self.model, self.params, self.state = load_run(RunDir(self.path))
        self.pairs = pairs_of(self.settings)
        self.trained_points, self.dims = self.pairs.trained_shape()

    def __repr__(self) -> str:
        return (
            f"NotebookRun({str(self.path)!r}: {self.settings.model.mixer_label()} on {self.settings.task.name}, "
            f"d = {self.dims}, trained to {self.trained_points} points)"
        )

    def prompts(self, n_points: int | None = None):
        """The run's fixed eval prompts (what its analyses evaluate) of n_points points (default:
        the trained number): a PairPrompt with xs [E, n, d], ys [E, n]."""
        return self.pairs.prompts(n_points)

    def sample(self, tasks: int = 64, n_points: int | None = None, seed: int = 0, alpha: float = 1.0):
        """`tasks` fresh prompts of the run's task, drawn from `seed` (inputs scaled by alpha)."""
        import jax

        points = n_points or self.trained_points
        return self.pairs.sampler(points)(jax.random.PRNGKey(seed), tasks, self.dims, points, alpha)

    def predict(self, prompt: PairPrompt) -> np.ndarray:
        """ŷ [E, n]: each y_i predicted from the pairs before it, for prompts xs [E, n, d], ys [E, n]
        (ys[:, i] is not read for ŷ_i): a PairPrompt (run.prompts(), run.sample(), or
        src.tasks.pairs.pair_prompt(xs, ys) of your own arrays)."""
        if not isinstance(prompt, PairPrompt):
            raise TypeError(
                f"predict takes a PairPrompt, not {type(prompt).__name__}; accepted: run.prompts(), "
                "run.sample() or src.tasks.pairs.pair_prompt(xs, ys)"
            )
        xs, ys = np.asarray(prompt.xs, np.float32), np.asarray(prompt.ys, np.float32)
        if xs.ndim != 3 or ys.shape != xs.shape[:2] or xs.shape[2] != self.dims:
            raise ValueError(
                f"prompts of shapes xs {xs.shape}, ys {ys.shape} are not accepted; accepted: xs "
                f"[E, n, {self.dims}] and ys [E, n]"
            )
        tasks, points, _ = xs.shape
        rows = prompt._replace(xs=xs, ys=ys)
        return np.asarray(self.pairs.predictor(self.model, self.params, self.state, points, tasks)(rows))

    def errors(self, batch: PairPrompt) -> np.ndarray:
        """[E, n]: the model's error at each point of `batch` (the task's metric)."""
        return np.asarray(objective_of(self.settings.task.name).point_errors(self.predict(batch), batch))

    def icl_curve(self, n_points: int | None = None, batch=None):
        """The ICL curve as analysis.icl_curve computes it: a pandas DataFrame with columns predictor
        (model and every applicable baseline), n_examples, mean and ci95 (over the prompts), on
        `batch` (default: the run's eval prompts at n_points)."""
        import pandas as pd

        return pd.DataFrame(summarise(curves(self.settings, self.model, self.params, self.state, n_points, batch)))

    def plot(self, curve=None):
        """A matplotlib Figure of `curve` (default: icl_curve()), as analysis.icl_curve draws it."""
        curve = self.icl_curve() if curve is None else curve
        title = f"{self.path.name}: {self.settings.model.mixer_label()} on {self.settings.task.name}"
        return figure(
            curve.to_dict("records"), title, self.trained_points, objective_of(self.settings.task.name).metric
        )


def open_run(path: str | Path) -> NotebookRun:
    """The finished run at `path` (module docstring)."""
    return NotebookRun(path)
