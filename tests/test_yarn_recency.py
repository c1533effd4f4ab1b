"""scripts/yarn_recency.py: the tail mass per head (analysis.recency) against a hand count, and, study-marked, the quick
study
end to end (dynamic YaRN read with its own encoding and as RoPE on the same weights)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis.recency import tail_mass_by_head

ROOT = Path(__file__).resolve().parent.parent


def test_tail_mass_counts_the_last_fifth_of_the_keys_of_the_last_query():
    layers, tasks, heads, tokens = 2, 3, 4, 10
    weights = np.full((layers, tasks, heads, tokens, tokens), 1.0 / tokens)  # uniform everywhere
    assert np.allclose(tail_mass_by_head(weights), 0.2)  # keys 8 and 9 of 10
    weights[1, :, 2, -1, :] = 0.0
    weights[1, :, 2, -1, -1] = 1.0  # layer 1, head 2: all on the last key
    weights[0, :, 0, -2, :] = 0.0  # another query: not read
    mass = tail_mass_by_head(weights)
    assert mass.shape == (layers, heads) and mass[1, 2] == 1.0 and np.allclose(np.delete(mass.ravel(), 6), 0.2)


@pytest.mark.study
def test_quick_yarn_recency(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.yarn_recency",
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
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "yarn_recency_results.json").read_text())
    cells = next(iter(results["runs"].values()))["cells"]
    assert set(cells) == {"dynamic_yarn@21", "dynamic_yarn@84", "rope@21", "rope@84"}
    # within the trained length dynamic YaRN is RoPE: the same errors and attention on the same weights
    assert cells["dynamic_yarn@21"]["error_last"] == pytest.approx(cells["rope@21"]["error_last"], rel=1e-5)
    assert np.allclose(cells["dynamic_yarn@21"]["tail_mass"], cells["rope@21"]["tail_mass"], atol=1e-5)
    assert not np.allclose(cells["dynamic_yarn@84"]["tail_mass"], cells["rope@84"]["tail_mass"], atol=1e-4)
    assert "| dynamic_yarn | 84 |" in (tmp_path / "report" / "YARN_RECENCY.md").read_text()
