"""The Ray executor: an eval_order sweep on a local Ray instance gives the local executor's CSV
(except timings and paths), even when a Ray worker is killed in the middle of a run."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled")
SWEEP = [
    "--models",
    "lsa1",
    "--ordering",
    "random,easy2hard",
    "--seeds",
    "0",
    "--steps",
    "300",
    "--eval_size",
    "100",
    "--batch_size",
    "64",
    "--log_every",
    "100",
    "--jobs",
    "2",
    "--quiet",
    "--no_save_attention",
]
VARYING = {"run_dir", "train_seconds"}  # paths and timings differ by design


def sweep(tmp_path: Path, name: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eval_order",
            *SWEEP,
            *extra,
            "--out",
            str(tmp_path / f"{name}.csv"),
            "--runs-dir",
            str(tmp_path / name),
        ],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def rows(path: Path) -> list[dict]:
    with open(path) as handle:
        return [{k: v for k, v in row.items() if k not in VARYING} for row in csv.DictReader(handle)]


def kill_one_worker(stop: threading.Event, killed: list) -> None:
    """SIGKILL the Ray worker whose runner (a child with an icl-ray- run directory) runs first."""
    while not stop.is_set() and not killed:
        found = subprocess.run(["pgrep", "-f", "icl-ray-.*--quiet"], capture_output=True, text=True)
        for pid in found.stdout.split():
            try:
                parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                time.sleep(1.5)  # mid-run: compiled and training
                os.kill(parent, signal.SIGKILL)
                killed.append(parent)
                return
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find a Ray worker")
def test_ray_sweep_matches_local_even_when_a_worker_dies(tmp_path):
    local = sweep(tmp_path, "local")
    out, err = local.communicate(timeout=300)
    assert local.returncode == 0, err
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=kill_one_worker, args=(stop, killed), daemon=True)
    killer.start()
    ray_run = sweep(tmp_path, "ray", "--executor", "ray")
    try:
        out, err = ray_run.communicate(timeout=400)
    finally:
        stop.set()
    assert ray_run.returncode == 0, err
    assert killed, "no Ray worker was found to kill"
    assert rows(tmp_path / "ray.csv") == rows(tmp_path / "local.csv")
    assert len(rows(tmp_path / "ray.csv")) == 2


def test_the_ray_task_runs_the_jobs_own_command_into_its_temporary_directory(tmp_path):
    """run_on_worker (the task body; called here without Ray) runs Job.command with the worker's own
    --out and returns that run directory as an archive: the job's --analyses travel with it."""
    import io
    import json
    import tarfile
    from src.jobs.engine import Job
    from src.jobs.ray import run_on_worker
    from src.gd_paper.presets import preset

    settings = preset("lsa1", steps=20, log_every=10, eval_size=32, batch_size=16)
    job = Job("tiny", settings, tmp_path / "tiny", analyses=("ood",))
    code, output, seconds, archive = run_on_worker(job, {})
    assert code == 0, output
    command = output.splitlines()[0]
    assert "--analyses ood" in command and "/icl-ray-" in command and str(tmp_path) not in command
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        summary = json.load(tar.extractfile("./metrics_summary.json"))
    assert summary["status"] == "complete"
    from src.registry import registry

    left_out = registry("analysis").get("alignment").build(None).outputs(settings)
    assert "analysis/ood.csv" in summary["outputs"] and left_out and not set(left_out) & set(summary["outputs"])
