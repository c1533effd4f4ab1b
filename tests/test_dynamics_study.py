"""`python -m scripts.dynamics --quick` (the training-dynamics study at small sizes) writes its
report, JSON and four figures, and a rerun reuses every run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.study
def test_quick_study_writes_the_report_and_reuses_runs(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [
        sys.executable,
        "-m",
        "scripts.dynamics",
        "--quick",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--report-dir",
        str(tmp_path / "report"),
    ]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "dynamics_results.json").read_text())
    assert set(results["results"]) == {"merged_vs_mlp", "staircase", "staircase_uniform", "rank_sweep", "icl_sweep"}
    assert len(results["results"]["icl_sweep"]) == 6 and len(results["results"]["rank_sweep"]) == 4
    for figure in results["figures"]:
        assert (tmp_path / "report" / figure).read_bytes()[:4] == b"\x89PNG"
    text = (tmp_path / "report" / "DYNAMICS.md").read_text()
    assert "## Staircase" in text and "| c | final training loss" in text
    assert "attnM_restricted (restricted" in text and "(initialisation: original, uniform)" in text
    again = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "15 already finished, 0 to train" in again.stdout
