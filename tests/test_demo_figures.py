"""`make demo`'s steps end to end at a few steps each (scripts.demo --quick: the same commands,
analyses and figures) with every figure checked as it is drawn (WORKBENCH_CHECK_FIGURES=1:
plots.style.png_bytes refuses a figure without a title or axis labels, or with text outside the
canvas), so a figure a reader cannot read fails a step; a briefly trained run draws the figures'
"not trained enough" forms too. A study test (make test_studies: about 2 minutes on 2 cores; the
demo's own length took 8)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.study
def test_every_demo_figure_passes_the_check(tmp_path):
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "scripts.demo", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "WORKBENCH_CHECK_FIGURES": "1"},
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "not drawn" not in done.stderr, done.stderr[-2000:]
    figures = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.png"))
    assert "mqar_attention_vs_linear.png" in figures
    assert any(f.startswith("mechanisms_softmax/") and "icl_curve" in f for f in figures), figures
    assert any(f.startswith("lengthgen_fire/") and "ood_length" in f for f in figures), figures
