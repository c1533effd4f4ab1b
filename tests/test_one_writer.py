"""One writer per run directory (src/rundir/lock.py; issue 42's probe of races): two commands
started at once on one run directory, one trains and the other is refused in one line naming the
holder; a holder that has not yet written its line, or never does, is named all the same."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


# -- one writer per run directory ------------------------------------------------------------------


def start(*argv: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "runners.run_concat_inputs_targets", *argv],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# long enough (about 6 s of training here) that the one that takes the lock still holds it when the
# other, started at the same moment, arrives
LONG = [
    "--steps",
    "12000",
    "--batch_size",
    "32",
    "--eval_size",
    "50",
    "--log_every",
    "2000",
    "--quiet",
    "--set",
    "train.checkpoint_every=500",
]


@pytest.mark.parametrize("mode", ["--overwrite", "--resume"])
def test_two_runs_at_once_on_one_run_directory_one_trains_the_other_is_refused(mode, tmp_path):
    """Both started at once: exactly one trains (exit 0), the other is refused in one line naming
    the holder (exit 2), and the run directory is the one that trained, whole."""
    out = tmp_path / "run"
    if mode == "--resume":  # a run killed at its first checkpoint, resumed twice at once
        killed = subprocess.run(
            [
                sys.executable,
                str(ROOT / "tests" / "kill_after_checkpoint.py"),
                "runners.run_concat_inputs_targets",
                *LONG,
                "--out",
                str(out),
            ],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
    else:
        assert start(*LONG, "--out", str(out)).wait(timeout=240) == 0  # an old run to replace, twice at once
    both = [start(*LONG, "--out", str(out), mode) for _ in range(2)]
    results = [(proc.wait(timeout=300), proc.communicate()[1]) for proc in both]
    assert sorted(code for code, _ in results) == [0, 2], results
    refused = next(err for code, err in results if code == 2)
    lines = [line for line in refused.splitlines() if line.strip()]
    assert len(lines) == 1 and "is being written by pid" in lines[0], refused
    summary = json.loads((out / "metrics_summary.json").read_text())
    assert summary["status"] == "complete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no staging, no lock left


def _hold_lock(out: Path) -> int:
    """Take the run directory's flock from this process on its own open file (as another run would)."""
    import fcntl
    from src.rundir.lock import lock_path

    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(out), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


@pytest.mark.parametrize("left_behind", ["", "a killed run's line"])
def test_the_refusal_names_a_holder_that_has_not_yet_written_its_line(left_behind, tmp_path):
    """The holder writes its line just after it takes the flock. A second command that arrives in
    that moment finds the file empty, or still naming a killed run's pid: it reads again and names
    the live holder (CI once saw 'another process' here)."""
    import threading
    from src.rundir.lock import RunBusy, RunDirLock

    out = tmp_path / "run"
    fd = _hold_lock(out)
    if left_behind:
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        os.write(fd, f"pid {dead.pid} (killed) since then\n".encode())
    line = f"pid {os.getpid()} (the holder) since now\n".encode()
    writer = threading.Timer(0.3, lambda: (os.ftruncate(fd, 0), os.pwrite(fd, line, 0)))
    writer.start()
    try:
        with pytest.raises(RunBusy, match=f"is being written by pid {os.getpid()} "):
            with RunDirLock(out, "second"):
                pass
    finally:
        writer.join()
        os.close(fd)


def test_a_holder_that_never_writes_its_line_is_called_another_process(tmp_path):
    from src.rundir.lock import RunBusy, RunDirLock

    fd = _hold_lock(tmp_path / "run")
    try:
        started = time.monotonic()
        with pytest.raises(RunBusy, match="is being written by another process; nothing was changed"):
            with RunDirLock(tmp_path / "run", "second"):
                pass
        assert time.monotonic() - started < 5
    finally:
        os.close(fd)
