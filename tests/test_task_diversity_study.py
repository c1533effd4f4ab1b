"""The task-diversity study (scripts/task_diversity.py, plots/task_diversity_report.py): its pools
refused in one line, its runs sized as configs/task_diversity.yaml says with their pool, the
threshold read off numbers, and `--quick` end to end (make test_studies)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plots.task_diversity_report import threshold
from scripts import task_diversity as study
from src.flags import UsageError

ROOT = Path(__file__).resolve().parent.parent


def test_pools_are_integers_at_least_zero():
    assert study.pool_sizes(None, False) == study.POOLS and study.pool_sizes(None, True) == study.QUICK_POOLS
    assert study.pool_sizes("4, 64,0", False) == (4, 64, 0)
    for bad in ("", "4,-1", "four"):
        with pytest.raises(UsageError, match="accepted: a comma list of integers >= 0"):
            study.pool_sizes(bad, False)


def test_every_pool_and_seed_is_one_run_of_the_config_with_its_pool(tmp_path):
    jobs = study.make_jobs(tmp_path, (2, 0), (0, 1), False)
    assert sorted(j.name for j in jobs) == ["pool2_seed0", "pool2_seed1", "poolfresh_seed0", "poolfresh_seed1"]
    pool = next(j for j in jobs if j.name == "pool2_seed1").settings
    assert pool.train.num_tasks == 2 and pool.train.seed == 1 and pool.task.name == "noisy_linear_regression"
    assert pool.curriculum.dims.end == 8 and pool.curriculum.points.end == 16 and pool.task.options.noise_std == 0.5
    assert next(j for j in jobs if j.name == "poolfresh_seed0").settings.train.num_tasks == 0


def rows(**by_size):
    out = []
    for size, (model, dmmse, ridge, to_dmmse, to_ridge) in by_size.items():
        out.append(
            {
                "num_tasks": int(size[1:]),
                "seed": 0,
                "errors": {
                    "prior": {
                        "model": model,
                        "dmmse": dmmse,
                        "ridge": ridge,
                        "distance_dmmse": to_dmmse,
                        "distance_ridge": to_ridge,
                    }
                },
            }
        )
    return out


def test_the_threshold_is_where_the_models_predictions_are_nearer_ridges_from_then_on():
    found, lines = threshold(
        rows(
            m2=(1.5, 1.6, 0.4, 0.1, 1.2),
            m8=(0.5, 1.2, 0.4, 0.9, 0.2),
            m32=(1.0, 1.1, 0.4, 0.3, 0.5),
            m128=(0.45, 1.0, 0.4, 0.7, 0.1),
            m512=(0.45, 0.44, 0.4, 0.3, 0.1),
        )
    )
    assert found == 128  # 8 is nearer ridge, 32 is not: from 128 on (512 errs nearer dMMSE, predicts nearer ridge)
    assert lines[0] == (
        "- M = 2: on prior prompts, error: model 1.5000, dMMSE 1.6000, ridge 0.4000; the model's "
        "distance to dMMSE 0.1000, to ridge 1.2000: nearer dMMSE"
    )
    assert threshold(rows(m2=(1.5, 1.6, 0.4, 0.1, 1.2)))[0] is None


@pytest.mark.study
def test_quick_task_diversity_study_writes_its_report(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.task_diversity",
            "--quick",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "task_diversity_results.json").read_text())
    assert {r["num_tasks"] for r in results["results"]} == {2, 0}
    pool2 = next(r for r in results["results"] if r["num_tasks"] == 2)["errors"]
    assert set(pool2) == {"pool", "prior"}
    assert set(pool2["pool"]) == {"model", "dmmse", "ridge", "distance_dmmse", "distance_ridge"}
    assert "| 2 |" in (tmp_path / "report" / "TASK_DIVERSITY.md").read_text()
    assert (tmp_path / "report" / "figures" / "task_diversity" / "error_pool.png").stat().st_size > 1000


def test_finite_size_runs_train_ten_times_longer_and_keep_ten_checkpoints(tmp_path):
    from plots import task_diversity_finite as finite

    jobs = study.make_jobs(tmp_path, study.FINITE_POOLS, (0,), quick=False, finite_size=True)
    base = study.read_settings(study.CONFIG).train
    assert [j.settings.train.num_tasks for j in jobs] == list(study.FINITE_POOLS)
    for job in jobs:
        assert job.settings.train.steps == finite.STEPS_FACTOR * base.steps == 50_000
        assert job.settings.train.keep_every == job.settings.train.checkpoint_every == 5_000


def test_finite_size_rule_on_numbers_made_by_hand():
    from plots.task_diversity_finite import rises, threshold_at_budget

    assert rises([0.30, 0.10, 0.12]) is True  # falls, then rises 20 %: below the threshold
    assert rises([0.30, 0.10, 0.105]) is False  # within 10 % of its lowest: does not rise
    assert rises([0.30, 0.20, 0.10]) is False
    assert rises([0.30, 0.10]) is None  # too few checkpoints to judge
    assert threshold_at_budget({32: True, 128: False, 512: False}) == 128
    assert threshold_at_budget({32: False, 128: True, 512: False}) == 512  # a larger one rises: not yet
    assert threshold_at_budget({32: True, 128: True}) is None
    assert threshold_at_budget({32: None, 128: False}) == 128


@pytest.mark.study
def test_quick_finite_size_test_evaluates_each_kept_checkpoint(tmp_path):
    from scripts.task_diversity import evaluate

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.task_diversity",
            "--finite-size",
            "--quick",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "task_diversity_finite_results.json").read_text())
    assert set(results["curves"]) == {"32", "128"}
    assert all(c["step"] == [30, 60, 90] for c in results["curves"].values())
    assert set(results["rises"].values()) <= {True, False}
    # the checkpoint kept at the last step holds the finished run's parameters: the same numbers
    job = study.make_jobs(tmp_path / "runs", (32,), (0,), quick=True, finite_size=True)[0]
    assert results["curves"]["32"]["distance_ridge"][-1] == evaluate(job)["prior"]["distance_ridge"]
    assert "## Answer" in (tmp_path / "report" / "TASK_DIVERSITY_FINITE.md").read_text()
