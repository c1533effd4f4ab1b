"""`python -m scripts.mechanisms --quick` (150 steps, one seed; here two of the mechanisms to
keep the suite short — the full quick study is `make mechanisms_quick`) writes its report,
JSON and figures; every run gets the stress tests and the ICL curve. Then the robustness battery
(`python -m scripts.robustness --quick`) on the same runs: it reuses them (trains only its two
curricula runs) and writes ROBUSTNESS.md with every shift, the baselines and the curricula."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.study
def test_quick_mechanisms_study(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.mechanisms",
            "--quick",
            "--mechanisms",
            "softmax_causal,favor",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    finished = [line for line in done.stdout.splitlines() if line.startswith("  done ")]
    assert len(finished) == 2 and all("eval_loss" in line for line in finished), done.stdout  # a line per run
    results = json.loads((tmp_path / "report" / "mechanisms_results.json").read_text())["results"]
    assert set(results) == {"softmax_causal", "favor"}
    for record in results.values():
        robustness = record["robustness"][0]
        assert {"label_noise", "random_pairs", "order_easy2hard", "ood_alpha2", "length_1.5x"} <= set(robustness)
        assert {"model", "least_squares", "averaging", "knn", "gd_step"} <= set(record["curve_mean"])
    text = (tmp_path / "report" / "MECHANISMS.md").read_text()
    assert text.count("\n| ") >= 3  # header + one row per mechanism

    robust = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.robustness",
            "--quick",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert robust.returncode == 0, robust.stdout + robust.stderr
    assert "2 already finished, 1 to train" in robust.stdout  # the mechanisms runs reused
    shifts = json.loads((tmp_path / "runs" / "favor_seed0" / "analysis" / "shifts.json").read_text())
    assert len(shifts) >= 15 and shifts["sparse=2"].get("lasso") is not None  # quick: the report's columns
    assert {"model", "least_squares", "averaging", "knn"} <= set(shifts["opposite_quadrants=2"])
    report = (tmp_path / "report" / "ROBUSTNESS.md").read_text()
    assert "## Training-time curricula" in report and "| label_noise_noisy_first |" in report
    assert (tmp_path / "report" / "figures" / "robustness" / "heatmap.png").is_file()
