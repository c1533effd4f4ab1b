"""`python -m scripts.reproduce` at toy size: report table, results JSON, figures, checks.

One toy reproduction (1 seed, 20 steps, K = 2) is shared by the tests. The runs use the
persistent XLA compilation cache named by JAX_COMPILATION_CACHE_DIR (the suite's own, set in
tests/conftest.py), else the repository's (runs/.jax_cache, as `make` does).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scripts import reproduce, reproduce_plan
from src.jobs import engine as launch
from src.gd_paper.study.paper_checks import checks as compute_checks

ROOT = Path(__file__).resolve().parent.parent
TOY = [
    "--seeds",
    "0",
    "--lsa1-steps",
    "20",
    "--rec-steps",
    "20",
    "--twolayer-steps",
    "20",
    "--batch_size",
    "64",
    "--eval_size",
    "200",
    "--ks",
    "2",
    "--gdpp-steps",
    "20",
    "--alphas",
    "0.5,1,2",
    "--weight-scales",
    "1,3",
    "--distractors",
    "0,4,8",
    "--nonlinear-steps",
    "20",
    "--jobs",
    "2",
]
PARTS = ("one_step_gd", "k_steps", "copy", "ood", "distractors", "nonlinear")


def run_reproduce(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(ROOT / "runs" / ".jax_cache"))
    return subprocess.run(
        [sys.executable, "-m", "scripts.reproduce", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    base = tmp_path_factory.mktemp("reproduce")
    runs, report = base / "runs", base / "report"
    args = [*TOY, "--runs-dir", str(runs), "--report-dir", str(report)]
    done = run_reproduce(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((report / reproduce.RESULTS).read_text())
    return {
        "runs": runs,
        "report": report,
        "args": args,
        "stdout": done.stdout,
        "results": results,
        "text": (report / reproduce.REPORT).read_text(),
    }


@pytest.mark.study
def test_report_has_one_table_with_every_experiment(toy):
    text = toy["text"]
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []  # the first table only: the 'Beside the paper' table follows it
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        table.append(line)
    assert table[0] == "| Experiment | What the paper reports | What we measured | Wall time |"
    assert table[1] == "|---|---|---|---|"
    body = table[2:]
    assert len(body) == 6
    for number, row in enumerate(body, start=1):
        assert row.startswith(f"| {number}. ")
        assert row.count(" | ") == 3  # four cells, no stray pipes
        assert row.rstrip().endswith(" s |") or row.rstrip().endswith(" min |")
    for header in ("- Produced ", " from commit ", "Machine:", "Training:", "Total wall time:", "Command:"):
        assert header in text
    assert "0.206" in text and "SPEC gives no number" in text


@pytest.mark.study
def test_results_json_holds_every_experiment(toy):
    results = toy["results"]
    assert set(PARTS) <= set(results["results"])
    one = results["results"]["one_step_gd"]
    assert one["seeds"] == [0] and one["steps"] == 20
    assert one["curves"]["step"][-1] == 20 and len(one["curves"]["step"]) == 10
    k2 = results["results"]["k_steps"]["2"]
    for key in ("tf_loss", "gdk_loss", "gdpp_loss", "gd1_loss", "align"):
        assert key in k2
    assert set(k2["align"]) == {"vs_gd1", "vs_gdk", "vs_gdpp"}
    # Two GD steps with their own tuned η beat one on the same tasks (held-out tuning).
    assert k2["gdk_loss"] < k2["gd1_loss"]
    assert [row["x"] for row in results["results"]["ood"]["alpha"]] == [0.5, 1.0, 2.0]
    dis = results["results"]["distractors"]["rows"]
    assert [row["k"] for row in dis] == [0, 4, 8]
    assert [row["corrupted_per_task"] for row in dis] == [0.0, 4.0, 8.0]
    # At α = 1 the OOD eval set is the run's own eval set: same loss as its summary.
    summary = json.loads((toy["runs"] / "lsa1_seed0" / "metrics_summary.json").read_text())
    at_one = results["results"]["ood"]["alpha"][1]
    assert at_one["tf_loss"]["mean"] == pytest.approx(summary["eval_loss"], rel=1e-5)
    assert at_one["gd_loss"] == pytest.approx(summary["gd_loss"], rel=1e-5)
    assert dis[0]["tf_loss"]["mean"] == pytest.approx(summary["eval_loss"], rel=1e-5)


@pytest.mark.study
def test_figures_exist_white_png(toy):
    from matplotlib.image import imread

    figures = toy["results"]["figures"]
    assert len(figures) == 6
    for rel in figures:
        path = toy["report"] / rel
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = imread(path)
        assert image.shape[0] > 200 and image.shape[1] > 200
        assert np.allclose(image[0, 0, :3], 1.0)  # white background
        assert f"`{rel}`" in toy["text"]  # listed with a caption


@pytest.mark.study
def test_checks_follow_the_numbers(toy):
    results, text = toy["results"]["results"], toy["text"]
    stored = {c["name"]: c["status"] for c in toy["results"]["checks"]}
    assert stored == {c["name"]: c["status"] for c in compute_checks(results)}
    one, k2, cp = results["one_step_gd"], results["k_steps"]["2"], results["copy"]
    gap = (one["final"]["eval_loss"]["mean"] - one["gd_loss"]) / one["gd_loss"]
    expect = {
        "lsa1 loss within 2 % of one-step GD": abs(gap) <= 0.02,
        "lsa1 align_cos ≥ 0.99": one["final"]["align_cos"]["mean"] >= 0.99,
        "K=2: recurrent LSA loss ≤ 2-step GD loss": k2["tf_loss"]["mean"] <= k2["gdk_loss"],
        "K=2: recurrent LSA loss closer to GD++ than to 2-step GD": abs(k2["tf_loss"]["mean"] - k2["gdpp_loss"])
        < abs(k2["tf_loss"]["mean"] - k2["gdk_loss"]),
        "copy model loss within 0.05 of one-step GD": abs(
            cp["final"]["eval_loss"]["mean"] - cp["final"]["gd_loss"]["mean"]
        )
        <= 0.05,
    }
    for name, ok in expect.items():
        assert stored[name] == ("PASS" if ok else "MISMATCH"), name
        assert f"**{stored[name]}** {name}" in text
    # 20 steps cannot match the paper: the toy run must say so.
    assert stored["lsa1 align_cos ≥ 0.99"] == "MISMATCH"
    assert "MISMATCH" in toy["stdout"]


def test_checks_pass_and_fail_on_synthetic_numbers():
    def s(x):
        return {"mean": x, "std": 0.0, "n": 1, "values": [x]}

    def results(model_loss, cos):
        return {
            "one_step_gd": {
                "final": {"eval_loss": s(model_loss), "align_cos": s(cos)},
                "gd_loss": 0.2,
                "gd_loss_se": 0.001,
                "eval_size": 10_000,
                "rel_gap": s((model_loss - 0.2) / 0.2),
            }
        }

    good = {c["name"]: c["status"] for c in compute_checks(results(0.202, 0.995))}
    bad = {c["name"]: c["status"] for c in compute_checks(results(0.21, 0.98))}
    assert good["lsa1 loss within 2 % of one-step GD"] == "PASS"
    assert good["lsa1 align_cos ≥ 0.99"] == "PASS"
    assert bad["lsa1 loss within 2 % of one-step GD"] == "MISMATCH"
    assert bad["lsa1 align_cos ≥ 0.99"] == "MISMATCH"


def test_sine_checks_pass_and_fail_on_synthetic_numbers():
    def s(x):
        return {"mean": x, "std": 0.0, "n": 1, "values": [x]}

    def results(tf, features, raw, to_features, to_kernel):
        return {
            "nonlinear": {
                "final": {"mlp_lsa": s(tf), "features_gd": s(features)},
                "zero_loss": 0.026,
                "baselines": {"gd_raw": {"loss": raw}, "kernel_ridge": {"loss": 0.0006}},
                "distance_to_transformer": {"features_gd": s(to_features), "kernel_ridge": s(to_kernel)},
            }
        }

    def statuses(*args):
        return [c["status"] for c in compute_checks(results(*args))]

    assert statuses(0.002, 0.0027, 0.026, 0.01, 0.02) == ["PASS"] * 3
    assert statuses(0.03, 0.0027, 0.026, 0.01, 0.02) == ["MISMATCH"] * 2 + ["PASS"]
    assert statuses(0.0034, 0.0027, 0.026, 0.03, 0.02) == ["PASS", "MISMATCH", "MISMATCH"]


@pytest.mark.study
def test_finished_runs_are_reused_and_changed_settings_redone(toy):
    args = reproduce.build_parser().parse_args(toy["args"])
    plan = reproduce_plan.make_plan(args)
    jobs = reproduce.make_jobs(plan)
    assert [j.name for j in jobs] == [
        "lsa1_seed0",
        "lsa_rec_k2_seed0",
        "twolayer_seed0",
        "sine_mlp_lsa_seed0",
        "sine_features_gd_seed0",
    ]
    assert all(launch.job_state(j)[0] == "complete" for j in jobs)
    longer = reproduce_plan.make_plan(reproduce.build_parser().parse_args(toy["args"] + ["--lsa1-steps", "30"]))
    states = {j.name: launch.job_state(j)[0] for j in reproduce.make_jobs(longer)}
    assert states == {
        "lsa1_seed0": "stale",
        "lsa_rec_k2_seed0": "complete",
        "twolayer_seed0": "complete",
        "sine_mlp_lsa_seed0": "complete",
        "sine_features_gd_seed0": "complete",
    }


@pytest.mark.study
def test_runs_of_other_settings_are_refused_unless_overwrite(toy, tmp_path):
    """The study frame's rule: a finished run made with other settings is not retrained silently."""
    done = run_reproduce(*toy["args"], "--lsa1-steps", "30", timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "made with other settings or code" in lines[0] and "--overwrite" in lines[0], lines
    assert json.loads((toy["runs"] / "lsa1_seed0" / "config.json").read_text())["settings"]["train"]["steps"] == 20


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--seeds", "a"], "--seeds='a' is not an integer"),
        (["--ks", "1"], "--ks=1 is out of range"),
        (["--seeds", "0,0"], "repeats a value"),
        (["--steps-scale", "0"], "--steps-scale='0' is not accepted"),
        (["--distractors", "11"], "--distractors=11 is out of range"),
        (["--alphas", "1,,2"], "has an empty item"),
    ],
)
def test_bad_flags_one_line(flags, message, tmp_path):
    done = run_reproduce(*flags, "--runs-dir", str(tmp_path / "r"), "--report-dir", str(tmp_path / "rep"), timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert not (tmp_path / "r").exists()
