"""What the multi-seed experiment analyses share (src.gd_paper.study.one_step_gd, k_steps, copy_model,
ood_scales, distractors): reading a group of finished runs, one per seed.

Numbers over seeds are src.stats.over_seeds records {mean, std, n, values} (sample std,
ddof 1). Loss is the paper's ½ mean (ŷ − y_q)² throughout.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import numpy as np

from src import rundir as names
from src.rundir import RunDir
from src.stats import mean_std_rows


def curves(runs: Sequence[RunDir], keys: Sequence[str]) -> dict:
    """Metrics over training, on the steps every run logged: {step: [...], key: {mean, std}}."""
    tables = [{row["step"]: row for row in run.read_metrics()} for run in runs]
    steps = sorted(set.intersection(*(set(t) for t in tables))) if tables else []
    out: dict = {"step": steps}
    for key in keys:
        matrix = np.asarray([[num(t[s].get(key)) for s in steps] for t in tables], dtype=np.float64)
        if matrix.size == 0 or np.all(np.isnan(matrix)):
            continue
        mean, std = mean_std_rows(matrix)
        out[key] = {"mean": mean.tolist(), "std": std.tolist()}
    return out


def num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def summary(run: RunDir) -> dict:
    return run.load_json(names.SUMMARY)


def statuses(runs: Sequence[RunDir]) -> dict:
    return {str(run.path): summary(run).get("status") for run in runs}


def half_sq_se(prediction: jax.Array, target: jax.Array) -> float:
    """Standard error of the loss ½ mean (ŷ − y)² over the tasks (sampling error of the eval set)."""
    per_task = 0.5 * (np.asarray(prediction, np.float64) - np.asarray(target, np.float64)) ** 2
    return float(np.std(per_task, ddof=1) / math.sqrt(per_task.size)) if per_task.size > 1 else 0.0


def zero_loss(tasks) -> float:
    return float(0.5 * np.mean(np.asarray(tasks.query_y, np.float64) ** 2))
