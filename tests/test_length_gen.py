"""analysis.length_gen (seed 002): the within-2x rule on a closed-form curve, and end to end: a
learned table stops the curve at its length and says so; RoPE evaluates to factor x L."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.length_gen import usable_lengths

ROOT = Path(__file__).resolve().parent.parent


def test_usable_lengths_compares_each_multiple_with_the_last_trained_point():
    curve = [1.0 / (n + 1) for n in range(10)] + [0.2] * 9 + [0.5] * 21   # 40 points, L = 5
    out = usable_lengths(curve, trained_points=5)
    assert out["2"] == {"n_examples": 9, "error": 0.1, "within_2x": True}      # 0.1 <= 2 x 0.2
    assert out["4"] == {"n_examples": 19, "error": 0.5, "within_2x": False}    # 0.5 > 0.4
    assert out["8"] == {"n_examples": 39, "error": 0.5, "within_2x": False}
    assert usable_lengths(curve[:12], trained_points=5)["4"] is None


def _train(tmp_path: Path, position: str) -> Path:
    out = tmp_path / position
    done = subprocess.run([sys.executable, "-m", "runners.train", "--config", "configs/dummy.yaml",
                           "--set", f"model.position={position}", "--set", "training.train_steps=20",
                           "--out", str(out), "--quiet"], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("position, stops", [("learned", True), ("rope", False)])
def test_length_gen_end_to_end(tmp_path, position, stops):
    run = _train(tmp_path, position)
    done = subprocess.run([sys.executable, "-m", "analysis.length_gen", "--run", str(run), "--factor", "2"],
                          cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    summary = json.loads((run / "analysis" / "length_gen.json").read_text())
    assert (run / "analysis" / "ood_length.png").stat().st_size > 1000
    rows = (run / "analysis" / "length_gen.csv").read_text().splitlines()
    model_points = [r for r in rows if r.startswith("model,")]
    if stops:   # 11 trained points, table of 11: the curve stops at 11 and says why
        assert summary["stopped_at"] == 11 and "cannot index past" in summary["reason"]
        assert len(model_points) == 11 and summary["multiples"]["2"] is None
    else:
        assert summary["stopped_at"] is None and len(model_points) == 22
        assert summary["multiples"]["2"]["n_examples"] == 21
        # the reference (the same tasks cut to L points) is the long pass's point L - 1: causal
        assert summary["in_distribution_error"] == pytest.approx(
            summary["long_pass_error_at_trained_length"], rel=1e-5)
