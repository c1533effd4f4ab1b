"""`python -m scripts.mixers --quick` (width 16, κ 4, conjunction, 40 steps; here Mamba alone of the
four mixers to keep the suite short — the full quick study is `make mixers_quick`) writes its report,
JSON and figures, and a second call reuses every finished run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_study(tmp_path):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.mixers",
            "--quick",
            "--mixers",
            "mamba",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.study
def test_quick_mixers_study_writes_its_report_and_reuses_runs(tmp_path):
    done = run_study(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "mixers_results.json").read_text())["results"]
    cells = {(r["mixer"], r["task"], r["width"], r["kappa"], r["heads"], r["steps"]) for r in results}
    assert cells == {("mamba", "mqar", 16, 4, 1, 40), ("mamba", "conjunction", 64, None, 4, 40)}
    for row in results:
        assert row["status"] == "complete" and 0.0 <= row["accuracy"] <= 1.0
    conjunction = [r for r in results if r["task"] == "conjunction"]
    assert all(len(r["accuracy_by_position"]) == 40 for r in conjunction)
    checks = json.loads((tmp_path / "report" / "mixers_results.json").read_text())["checks"]
    assert len(checks) == 4 and {c["status"] for c in checks} <= {"pass", "FAIL", "n/a"}  # the 3 targets, 1 gap
    assert next(c for c in checks if "attention solves MQAR" in c["claim"])["status"] == "n/a"  # no attention run
    report = (tmp_path / "report" / "MIXERS.md").read_text()
    assert "## MQAR, κ = 4" in report and "| mamba |" in report and "1 head(s), 40 steps" in report
    assert "## Checks (a --quick smoke test" in report
    assert "## MQAR accuracy against training steps (width 16" in report
    for name in ("mqar_steps.png", "boolean_examples.png"):  # one width: no width figure
        assert (tmp_path / "report" / "figures" / "mixers" / name).stat().st_size > 1000
    assert not (tmp_path / "report" / "figures" / "mixers" / "mqar_width.png").exists()
    assert all(r["curve"] and r["curve"][-1][0] == 40 for r in results if r["task"] == "mqar")
    examples = json.loads((tmp_path / "runs" / "mqar_k4_mamba_w16_seed0" / "examples.json").read_text())
    assert len(examples[0]["scored_positions"]) == 4
    conjunction_run = tmp_path / "runs" / "conjunction_mamba_seed0"  # the study asks for no analyses
    assert (conjunction_run / "params.npz").exists() and not (conjunction_run / "analysis").exists()

    again = run_study(tmp_path)
    assert again.returncode == 0, again.stderr
    assert "2 already finished, 0 to train" in again.stdout + again.stderr


def _row(run, mixer, task, accuracy, width=16, kappa=8, seed=0, **extra):
    return {
        "run": run,
        "mixer": mixer,
        "task": task,
        "width": width,
        "kappa": kappa,
        "seed": seed,
        "accuracy": accuracy,
        **extra,
    }


def test_checks_pass_fail_and_say_when_nothing_matched():
    from plots.mixers_checks import Check, evaluate

    rows = [
        _row("a16", "attention", "mqar", 0.85),
        _row("a32", "attention", "mqar", 0.99, width=32),
        _row("a64", "attention", "mqar", 0.96, width=64),
        _row("l16", "linear_attention", "mqar", 0.70),
        _row("g16", "gated_linear_attn", "mqar", 0.10),
        _row("g16s1", "gated_linear_attn", "mqar", 0.2, seed=1),
    ]
    wide = evaluate(
        Check("wide", {"task": "mqar", "mixer": "attention"}, "accuracy", low=0.97, minimum={"width": 32}), rows
    )
    assert wide["status"] == "FAIL" and wide["worst"] == 0.96 and [v["run"] for v in wide["values"]] == ["a32", "a64"]
    assert evaluate(Check("", {"mixer": "attention"}, "accuracy", low=0.8), rows)["status"] == "pass"
    gap = lambda mixer: evaluate(
        Check(
            "", {"task": "mqar", "mixer": mixer, "width": 16}, "accuracy", high=-0.2, reference={"mixer": "attention"}
        ),
        rows,
    )
    assert gap("gated_linear_attn")["status"] == "pass"  # 0.10 - 0.85; seed 1 has no reference: skipped
    assert [v["run"] for v in gap("gated_linear_attn")["values"]] == ["g16"]
    assert abs(gap("gated_linear_attn")["worst"] + 0.75) < 1e-12
    assert gap("linear_attention")["status"] == "FAIL"  # only 0.15 below
    assert evaluate(Check("", {"task": "parity"}, "accuracy", low=0.45, high=0.55), rows)["status"] == "n/a"


def test_study_checks_are_the_issues_targets():
    from scripts.mixers import make_checks

    checks = make_checks(["attention", "linear_attention", "gated_linear_attn"], (64,), (4, 8, 16))
    gap = [c for c in checks if c.reference]
    assert [(c.where["mixer"], c.where["kappa"]) for c in gap] == [
        (m, k) for k in (4, 8, 16) for m in ("linear_attention", "gated_linear_attn")
    ]
    assert all(c.where["width"] == 64 and c.high == -0.2 for c in gap)
    solves = [c for c in checks if not c.reference]
    assert [(c.where, c.metric, c.low) for c in solves] == [
        ({"task": "mqar", "mixer": "attention", "width": 64, "kappa": k}, "accuracy", 0.97) for k in (4, 8, 16)
    ]
    with_boolean = make_checks(["attention"], (16, 32, 64), (4,), boolean=True)
    assert {(c.metric, c.low) for c in with_boolean} == {
        ("accuracy", 0.97),
        ("last_point_accuracy", 0.95),
        ("mean_point_accuracy", 0.45),
    }
    assert make_checks(["attention", "mamba"], (16, 32), (8,))[-1].where["width"] == 16  # no 64: the smallest


def test_steps_table_reads_the_mean_curve_at_quarters():
    from plots.mixers_figures import steps_table

    curve = lambda top: [[s, top * s / 1000] for s in range(100, 1001, 100)]
    rows = [
        _row(f"a{seed}", "attention", "mqar", 1.0, width=64, kappa=4, seed=seed, curve=curve(1.0 - 0.2 * seed))
        for seed in (0, 1)
    ] + [_row("l0", "linear_attention", "mqar", 0.5, width=64, kappa=4, curve=curve(0.5))]
    lines = steps_table(rows)
    assert "| mixer | step 300 | step 500 | step 800 | step 1,000 |" in lines
    assert "| attention | 0.270 | 0.450 | 0.720 | 0.900 |" in lines  # mean of 1.0 and 0.8 times s / 1000
    assert "| linear_attention | 0.150 | 0.250 | 0.400 | 0.500 |" in lines
