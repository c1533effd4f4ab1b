"""A GPU queue job run here (scripts/device/gpu_job.py, scripts/device/gpu_study.py): in the study tier every job
rehearses end to end on the CPU and a job killed at its limit has returned every finished piece; a
study job stopped at its deadline returns its finished and its stopped runs, and a study job's
command passes the study's own checks and makes the runs it plans."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plots import paper_scale
from scripts.device import gpu_job, gpu_queue
from scripts.device.gpu_queue_jobs import BY_NAME, JOBS

ROOT = Path(__file__).resolve().parents[1]


# --- the study tier: rehearsals on the CPU ---------------------------------------------------------


def rehearse(job: str, tmp_path: Path, *extra: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.device.gpu_queue",
            "run",
            job,
            "--rehearse",
            "--out",
            str(tmp_path / "out"),
            "--runs-dir",
            str(tmp_path / "runs"),
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.study
@pytest.mark.parametrize("job", [job.name for job in JOBS])
def test_every_job_rehearses_end_to_end(job, tmp_path):
    done = rehearse(job, tmp_path, "--steps", "30", "--budget-s", "400")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "out"
    manifest = json.loads((out / "job.json").read_text())
    assert manifest["state"] == "done" and manifest["rehearsal"] is True
    assert len(list(out.iterdir())) <= 8  # what a device command can bring back
    spec = BY_NAME[job]
    if spec.kind == "mechanisms":
        assert sorted(p["name"] for p in manifest["pieces"]) == sorted(r.name for r in spec.runs)
        for p in manifest["pieces"]:
            assert p["exit"] == 0 and p["steps"] == 30
            assert set(p["errors"]) == {"standard", *paper_scale.SHIFTS}
    elif spec.kind == "study":
        assert manifest["pieces"] and all(p["finished"] and p["summary"] for p in manifest["pieces"])
        assert manifest["exit"] == 0 and manifest["report_files"]
        assert all((out / name).is_file() for name in manifest["report_files"])
    else:
        assert "paper_cell_bench.json" in manifest["pieces"]
    target = gpu_queue.record(spec, out, tmp_path / "records")
    text = gpu_queue.write_report(tmp_path / "records", tmp_path / "P.md").read_text()
    assert target.name.split("_")[-1] in text


@pytest.mark.study
def test_a_job_killed_at_its_limit_has_returned_every_finished_piece(tmp_path):
    """Runs that cannot end in time are stopped at the training deadline and evaluated from their
    last checkpoint; the command is then killed (as the device tool kills one at its limit) while
    the other evaluations run: job.json holds every piece finished before."""
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scripts.device.gpu_queue",
            "run",
            "mechanisms_a",
            "--rehearse",
            "--out",
            str(out),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--steps",
            "20000",
            "--budget-s",
            "150",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    began, pieces = time.time(), []
    try:
        while time.time() - began < 400 and proc.poll() is None:
            time.sleep(0.5)
            try:
                pieces = json.loads((out / "job.json").read_text())["pieces"]
                said = re.search(r"piece \S+: exit", (out / "job.log").read_text())
            except (OSError, ValueError, KeyError):
                continue
            if pieces and said:  # a piece is saved, then logged: on a loaded CPU the line can lag
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert pieces, "no piece within 400 s"
    manifest = json.loads((out / "job.json").read_text())  # whole, as the last save left it
    # The four evaluations start together; on a machine with four cores or more they end within one
    # poll of the job, so the kill can come after the job's end: then every piece is in.
    assert manifest["state"] == "running" or (manifest["state"] == "done" and len(manifest["pieces"]) == 4)
    logged = re.findall(r"piece (\S+): exit", (out / "job.log").read_text())
    assert logged and set(logged) <= {p["name"] for p in manifest["pieces"]}  # saved before logged
    for piece in manifest["pieces"]:
        assert piece["stopped_at_deadline"], piece  # training stopped at the training deadline
        if "evaluate_error" in piece:  # an evaluation the job's own deadline cut (a loaded CPU): said so
            assert "stopped at the deadline" in piece["evaluate_error"], piece
            continue
        if "errors" not in piece:  # stopped before its first checkpoint (a loaded CPU): nothing to evaluate
            assert piece["exit"] != 0 and "log_tail" in piece, piece
            continue
        assert piece["planned_steps"] == 20000 and 0 < piece["steps"] < 20000
        assert set(piece["errors"]) == {"standard", *paper_scale.SHIFTS}
        # the training's own evaluations too, once it reached its first log point (every 2,000 steps)
        assert piece.get("metrics") or piece["steps"] < 20000 // 10, piece


FAKE_STUDY = """
import argparse, json, signal, sys, time
from pathlib import Path
parser = argparse.ArgumentParser()
parser.add_argument("--runs-dir")
parser.add_argument("--report-dir")
args = parser.parse_args()
for name, finished in (("a", True), ("b", False)):
    run = Path(args.runs_dir) / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"settings": {"train": {"learning_rate": 0.01, "other": 1}}}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 10, "eval_loss": 1.5}) + "\\n")
    if finished:
        (run / "metrics_summary.json").write_text(json.dumps({"eval_loss": 1.5, "curve": [1, 2]}))
signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
time.sleep(120)
"""


def test_a_study_job_stopped_at_its_deadline_returns_its_finished_and_its_stopped_runs(tmp_path, monkeypatch):
    """A study still training at the job's deadline is stopped with Ctrl-C; the run it finished is a
    piece with its summary's numbers, the run it was training one stopped at the deadline with its
    last evaluation; no report came, and job.json says so."""
    from scripts.device import gpu_study

    (tmp_path / "fake_study.py").write_text(FAKE_STUDY)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    job = gpu_job.Job(
        "fake",
        "a fake study",
        "study",
        study=gpu_job.Study(("fake_study",), ("fake_study",), 2, 10, gpu_job.Shape(8, 1, 4, 2), 30.0),
    )
    out, saved, began = tmp_path / "out", {}, time.time()
    out.mkdir()
    gpu_study.run_study(job, out, began, began + 4, False, tmp_path / "runs", lambda text: None, saved.update)
    assert time.time() - began < 4 + gpu_study.STOP_GRACE_S
    pieces = {p["name"]: p for p in saved["pieces"]}
    assert pieces["a"]["finished"] and pieces["a"]["summary"] == {"eval_loss": 1.5}
    assert pieces["a"]["settings"] == {"learning_rate": 0.01}
    assert pieces["b"]["stopped_at_deadline"] and pieces["b"]["steps"] == 10 and "summary" not in pieces["b"]
    assert saved["stopped_at_deadline"] and saved["exit"] == 130 and saved["report_files"] == []
    assert (out / "study.log").exists()


@pytest.mark.parametrize("job", [job.name for job in JOBS if job.kind == "study"])
def test_a_study_jobs_command_checks_out_and_makes_the_runs_it_plans(job, tmp_path):
    """The device command's flags and config files pass the study's own checks (a dry run), and it
    makes as many runs as the job's plan counts."""
    spec = BY_NAME[job]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            *spec.study.args,
            "--runs-dir",
            str(tmp_path / "runs"),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "WORKBENCH_DRY_RUN": "1"},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"would make {spec.study.runs} runs" in done.stdout, done.stdout
