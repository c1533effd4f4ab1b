"""`python -m scripts.mechanisms --quick` (150 steps, one seed; here two of the mechanisms to
keep the suite short — the full quick study is `make mechanisms_quick`) writes its report,
JSON and figures; every run gets the stress tests and the ICL curve."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quick_mechanisms_study(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "scripts.mechanisms", "--quick",
                           "--mechanisms", "softmax_causal,favor", "--runs-dir",
                           str(tmp_path / "runs"), "--report-dir", str(tmp_path / "report")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "mechanisms_results.json").read_text())["results"]
    assert set(results) == {"softmax_causal", "favor"}
    for record in results.values():
        robustness = record["robustness"][0]
        assert {"label_noise", "random_pairs", "order_easy2hard", "ood_alpha2", "length_1.5x"} <= set(robustness)
        assert {"model", "least_squares", "averaging", "knn", "gd_step"} <= set(record["curve_mean"])
    text = (tmp_path / "report" / "MECHANISMS.md").read_text()
    assert text.count("\n| ") >= 3          # header + one row per mechanism
