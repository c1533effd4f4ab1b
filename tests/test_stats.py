"""The one aggregate over seeds (sample std, ddof 1) and the one figure style."""

import math
import warnings

import numpy as np
import pandas as pd

from plots.results_table import mean_std
from plots.style import new_figure, png_bytes
from src.stats import format_pm, mean_std_rows, over_seeds


def test_over_seeds_is_the_sample_std_and_nan_safe():
    s = over_seeds([1.0, 2.0, 4.0, None, float("nan")])
    assert s["n"] == 3 and math.isclose(s["mean"], 7 / 3)
    assert math.isclose(s["std"], float(np.std([1.0, 2.0, 4.0], ddof=1)))
    assert over_seeds([5.0])["std"] == 0.0
    assert over_seeds([])["n"] == 0 and format_pm(over_seeds([])) == "n/a"
    assert format_pm(over_seeds([1.0, 3.0]), 2) == "2.00 ± 1.41"


def test_curves_and_sweep_figures_use_the_same_std():
    matrix = np.array([[1.0, 2.0], [3.0, np.nan], [5.0, 6.0]])
    mean, std = mean_std_rows(matrix)
    assert np.allclose(mean, [3.0, 4.0]) and np.allclose(std, [2.0, np.std([2.0, 6.0], ddof=1)])
    frame = pd.DataFrame({"model": ["a"] * 3, "eval_loss": [1.0, 3.0, 5.0]})
    row = mean_std(frame, ["model"], "eval_loss").iloc[0]
    assert row["std"] == over_seeds([1.0, 3.0, 5.0])["std"] == 2.0 and row["n"] == 3


def test_curves_follow_over_seeds_column_by_column():
    matrix = np.array(
        [[1.0, np.nan, np.inf, 2.0, np.nan], [np.nan, np.nan, 4.0, 3.0, 7.0], [3.0, np.nan, 5.0, 5.0, np.nan]]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "mean of empty slice"
        mean, std = mean_std_rows(matrix)
    for column in range(matrix.shape[1]):
        want = over_seeds(matrix[:, column])
        assert np.allclose([mean[column], std[column]], [want["mean"], want["std"]], equal_nan=True)
    assert std[4] == 0.0 and np.isnan(mean[1]) and np.isnan(std[1])
    single = mean_std_rows(np.array([[1.0, 2.0]]))
    assert np.array_equal(single[0], [1.0, 2.0]) and np.array_equal(single[1], [0.0, 0.0])


def test_png_bytes_are_deterministic():
    def draw():
        figure = new_figure(2, 2)
        figure.add_subplot(1, 1, 1).plot([0, 1], [1, 0])
        return png_bytes(figure)

    first = draw()
    assert first[:4] == b"\x89PNG" and draw() == first
