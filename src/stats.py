"""The one aggregate over seeds: mean and the SAMPLE standard deviation (ddof = 1; 0 for a
single value), NaN-safe. Report tables, results JSON and every figure's error bars use it,
so "± std" means the same thing everywhere.
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

import numpy as np

DDOF = 1
STD_LABEL = "std over seeds (sample, ddof 1)"
# a run is trained enough to judge its length generalisation (analysis.length_gen) when its
# in-distribution error is at most TRAINED_BELOW x the best constant prediction's; reports print
# NOT_TRAINED for one that is not
TRAINED_BELOW = 0.75
NOT_TRAINED = "not trained enough to judge"


def over_seeds(values: Sequence[float]) -> dict:
    """{mean, std, n, values}: sample std (ddof=1) over seeds, 0 for one value; NaN-safe."""
    vals = [float(v) for v in values if v is not None]
    finite = [v for v in vals if math.isfinite(v)]
    if not finite:
        return {"mean": math.nan, "std": math.nan, "n": 0, "values": vals}
    arr = np.asarray(finite, dtype=np.float64)
    std = float(np.std(arr, ddof=1)) if arr.size > 1 else 0.0
    return {"mean": float(np.mean(arr)), "std": std, "n": int(arr.size), "values": vals}


def std_over_seeds(values) -> float:
    """The sample std (ddof 1) of the finite values; 0 for one value, NaN for none."""
    return over_seeds(values)["std"]


def mean_std_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """over_seeds column by column of [seeds, points]: the mean and sample std (ddof 1) of each
    column's finite values, std 0 where a column has one, NaN (no warning) where it has none."""
    matrix = np.where(np.isfinite(matrix), matrix, np.nan).astype(np.float64)
    count = np.sum(~np.isnan(matrix), axis=0)
    with warnings.catch_warnings():  # empty columns: NaN is the answer, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(matrix, axis=0)
        std = np.nanstd(matrix, axis=0, ddof=DDOF)
    return mean, np.where(count == 1, 0.0, std)


def format_pm(s: dict, digits: int = 4) -> str:
    """'mean ± std' of an over_seeds record, 'n/a' when it has no values."""
    if not s or s.get("n", 0) == 0:
        return "n/a"
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"
