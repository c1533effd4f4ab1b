"""The zoo study (scripts/zoo.py, plots/zoo_report.py): its mixers and grid refused in one line,
its runs named and sized as configs/zoo.yaml says (hybrids included), the report's verdict read
off numbers, and `--quick` end to end (make test_studies)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plots.zoo_report import verdict
from scripts import zoo
from scripts.mixers import make_jobs, read_grid
from src.cli import UsageError

ROOT = Path(__file__).resolve().parent.parent


def test_mixers_are_registered_names_or_hybrids_and_anything_else_is_refused():
    assert zoo.mixer_names(None) == list(zoo.ZOO)
    assert zoo.mixer_names("attention, base_conv+based") == ["attention", "base_conv+based"]
    with pytest.raises(UsageError, match=r"--mixers='attention,base_conv\+flash' is not accepted \('flash' is unknown\)"):
        zoo.mixer_names("attention,base_conv+flash")


def test_the_grid_makes_every_mixer_at_every_cell_and_rate_with_its_state(tmp_path):
    grid = read_grid(zoo.CONFIG)
    assert [(c.seq_len, c.kappa) for c in grid.cells] == [(64, 4), (128, 8)] and grid.widths == (64,)
    jobs = make_jobs(tmp_path, list(zoo.ZOO), [0], False, grid)
    assert len(jobs) == len(zoo.ZOO) * 2 * 2
    based = next(j for j in jobs if j.name == "mqar_k8_T128_base_conv+based_w64_lr0.003_seed0")
    model = based.settings.model
    assert [m.name for m in model.layer_mixers()] == ["base_conv", "based"] and model.n_head == 1
    # a BaseConv layer keeps (3 − 1) D; Based (f = 16, one head of 64) E (K + 1), E = 1 + 16 + 136
    assert model.state_floats(128) == 2 * 64 + 153 * 65
    attention = next(j for j in jobs if j.name == "mqar_k8_T128_attention_w64_lr0.003_seed0")
    assert attention.settings.model.state_floats(128) == 2 * (2 * 128 * 64)     # both layers' keys and values


def rows(**accuracies):
    out = []
    for cell, by_mixer in accuracies.items():
        t, kappa = map(int, cell.split("_"))
        out += [{"mixer": m, "seq_len": t, "kappa": kappa, "width": 64, "seed": 0, "accuracy": a}
                for m, a in by_mixer.items()]
    return out


def test_the_verdict_names_the_cells_where_gated_convolutions_fall():
    found = verdict(rows(**{"64_4": {"attention": 1.0, "base_conv": 0.8, "hyena": 0.75, "delta_net": 0.9},
                            "128_8": {"attention": 0.99, "base_conv": 0.4, "hyena": 0.8, "delta_net": 0.7}}),
                    ["attention", "base_conv", "hyena", "delta_net"])
    assert found[0].startswith("- T = 64, κ = 4, width 64: attention 1.000; no gated convolution falls 0.3 below it")
    assert "base_conv fall ≥ 0.3 below it (base_conv 0.400, hyena 0.800)" in found[1]
    assert "small-state mixers: delta_net 0.700" in found[1]


@pytest.mark.study
def test_quick_zoo_study_writes_its_report(tmp_path):
    done = subprocess.run([sys.executable, "-m", "scripts.zoo", "--quick", "--mixers", "attention,base_conv+based",
                           "--runs-dir", str(tmp_path / "runs"), "--report-dir", str(tmp_path / "report")],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "zoo_results.json").read_text())
    assert {r["mixer"] for r in results["results"]} == {"attention", "base_conv+based"}
    assert all(r["status"] == "complete" and r["state_floats"] > 0 for r in results["results"])
    report = (tmp_path / "report" / "ZOO.md").read_text()
    assert "## T = 64, κ = 4, width 16" in report and "| base_conv+based |" in report
    assert (tmp_path / "report" / "figures" / "zoo" / "accuracy_state.png").stat().st_size > 1000
