"""`python -m scripts.mixers --quick` (width 16, κ 4, conjunction, 40 steps; here two of the three
mixers to keep the suite short — the full quick study is `make mixers_quick`) writes its report,
JSON and figures, and a second call reuses every finished run."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_study(tmp_path):
    return subprocess.run([sys.executable, "-m", "scripts.mixers", "--quick", "--mixers",
                           "attention,gated_linear_attn", "--runs-dir", str(tmp_path / "runs"),
                           "--report-dir", str(tmp_path / "report")],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
                          timeout=300)


def test_quick_mixers_study_writes_its_report_and_reuses_runs(tmp_path):
    done = run_study(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "mixers_results.json").read_text())["results"]
    cells = {(r["mixer"], r["task"], r["width"], r["kappa"], r["heads"], r["steps"]) for r in results}
    assert cells == {("attention", "mqar", 16, 4, 1, 40), ("attention", "conjunction", 64, None, 4, 40),
                     ("gated_linear_attn", "mqar", 16, 4, 1, 40),
                     ("gated_linear_attn", "conjunction", 64, None, 4, 40)}
    for row in results:
        assert row["status"] == "complete" and 0.0 <= row["accuracy"] <= 1.0
    conjunction = [r for r in results if r["task"] == "conjunction"]
    assert all(len(r["accuracy_by_position"]) == 40 for r in conjunction)
    report = (tmp_path / "report" / "MIXERS.md").read_text()
    assert "## MQAR, κ = 4" in report and "| gated_linear_attn |" in report and "1 head(s), 40 steps" in report
    for name in ("mqar_width.png", "boolean_examples.png"):
        assert (tmp_path / "report" / "figures" / "mixers" / name).stat().st_size > 1000
    examples = json.loads((tmp_path / "runs" / "mqar_k4_attention_w16_seed0" / "examples.json").read_text())
    assert len(examples[0]["scored_positions"]) == 4

    again = run_study(tmp_path)
    assert again.returncode == 0, again.stderr
    assert "4 already finished, 0 to train" in again.stdout + again.stderr
