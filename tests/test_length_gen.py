"""analysis.length_gen (Lin et al., AAAI 2025): the within-2x rule on a closed-form curve. End to end (a
learned table stops the curve at its length and says so; ALiBi evaluates to 8 x L and its
reference equals the long pass's point L - 1) is tests/test_lengthgen.py's quick study."""

from __future__ import annotations

from analysis.length_gen import usable_lengths


def test_usable_lengths_compares_each_multiple_with_the_last_trained_point():
    curve = [1.0 / (n + 1) for n in range(10)] + [0.2] * 9 + [0.5] * 21  # 40 points, L = 5
    out = usable_lengths(curve, trained_points=5)
    assert out["2"] == {"n_examples": 9, "error": 0.1, "within_2x": True}  # 0.1 <= 2 x 0.2
    assert out["4"] == {"n_examples": 19, "error": 0.5, "within_2x": False}  # 0.5 > 0.4
    assert out["8"] == {"n_examples": 39, "error": 0.5, "within_2x": False}
    assert usable_lengths(curve[:12], trained_points=5)["4"] is None
