"""scripts/protocol_sweep.py: the protocols' files (every one valid for its study, one equal to the
study's shipped config), what the report says a protocol changes, the budget curve read from a
run's metrics, and, study-marked, a quick sweep end to end with its report."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scripts import protocol_sweep
from src.jobs.declared import cell_runs
from src.flags import UsageError
from src.rundir import RunDir

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("study", list(protocol_sweep.SWEEPS))
def test_every_protocol_is_a_valid_study_config_and_one_is_the_study(study, tmp_path):
    sweep = protocol_sweep.SWEEPS[study]
    protocols = protocol_sweep.protocol_files(sweep, None)
    assert len(protocols) >= 3
    jobs = cell_runs(protocol_sweep.protocol_cells(sweep, protocols, quick=False), (0, 1, 2), tmp_path)
    assert len(jobs) == 3 * len(protocols) and all(j.state == "absent" for j in jobs)
    assert len({j.name for j in jobs}) == len(jobs) and len({j.path for j in jobs}) == len(jobs)
    unchanged = [p.stem for p in protocols if not protocol_sweep.changes(sweep.study_config, p)]
    assert len(unchanged) == 1, f"exactly one protocol must be the study's own settings, got {unchanged}"


def test_changes_name_each_key_with_both_values(tmp_path):
    study, protocol = tmp_path / "study.yaml", tmp_path / "p.yaml"
    study.write_text(yaml.safe_dump({"out_dir": "a", "training": {"learning_rate": 0.001, "steps": 5}}))
    protocol.write_text(
        yaml.safe_dump({"out_dir": "b", "training": {"learning_rate": 0.002, "steps": 5, "warmup_fraction": 0.03}})
    )
    assert protocol_sweep.changes(str(study), protocol) == {
        "training.learning_rate": "0.001 → 0.002",
        "training.warmup_fraction": "(absent) → 0.03",
    }


def test_unknown_protocol_is_refused_with_the_accepted_names():
    with pytest.raises(UsageError, match="decay_lr2e-3_7k"):
        protocol_sweep.protocol_files(protocol_sweep.SWEEPS["mechanisms"], "decay_lr9_7k")


def test_budget_curve_reads_every_logged_evaluation(tmp_path):
    rows = [
        {"step": 500, "eval_error_last": 0.5, "train_loss": 1.0},
        {"step": 1000, "eval_error_last": 0.25},
        {"step": 1001, "train_loss": 0.9},
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert protocol_sweep.budget_curve(RunDir(tmp_path)) == {500: 0.5, 1000: 0.25}


@pytest.mark.study
def test_quick_sweep_writes_its_report(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.protocol_sweep",
            "mechanisms",
            "--quick",
            "--protocols",
            "constant_lr1e-3_6k,decay_lr2e-3_7k",
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
    results = json.loads((tmp_path / "report" / "sweep_mechanisms_results.json").read_text())["results"]
    assert list(results) == ["constant_lr1e-3_6k", "decay_lr2e-3_7k"]
    assert results["decay_lr2e-3_7k"]["is_study"] and not results["constant_lr1e-3_6k"]["is_study"]  # the shipped one
    for record in results.values():  # the last logged evaluation is the run's final error
        assert record["budget"][str(record["steps"])] == pytest.approx(record["final"]["mean"], rel=1e-6)
        assert 0 <= record["max_gap_below_d"] < 2
    text = (tmp_path / "report" / "SWEEP_MECHANISMS.md").read_text()
    assert (
        "training.learning_rate: 0.002 → 0.001" in text
        and (tmp_path / "report" / "figures" / "sweeps" / "mechanisms.png").stat().st_size > 0
    )
