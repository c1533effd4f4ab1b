"""Ctrl-C on a run started with --overwrite loses nothing: the previous run stays whole, the new one
is kept with its checkpoint beside it (.<name>.replacement), and `--overwrite --resume` continues
it there and swaps it in when it finishes, every file the uninterrupted run's but for wall-clock
times (src/rundir/run.py keep, src/pipeline.py check_target)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.test_resume import ENV, ROOT, RUNS, call, tree_digest, without_times

RUNNER, ARGV = RUNS["gpt2"]
OLD = [*ARGV, "--set", "training.seed=5"]  # the run that --overwrite replaces


def interrupted_after_a_checkpoint(argv: list[str]) -> subprocess.CompletedProcess:
    """The command in a process that Ctrl-Cs itself right after its first checkpoint is written."""
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "kill_after_checkpoint.py"), RUNNER, *argv],
        cwd=ROOT,
        env={**ENV, "KILL_SIGNAL": "INT"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ctrl_c_on_overwrite_keeps_both_runs_and_overwrite_resume_finishes_the_new_one(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out, reference = tmp_path / "run", tmp_path / "uninterrupted"
    assert call(RUNNER, [*OLD, "--out", str(out)]) == 0  # the same replacement, uninterrupted
    assert call(RUNNER, [*ARGV, "--out", str(out), "--overwrite"]) == 0
    out.rename(reference)
    assert call(RUNNER, [*OLD, "--out", str(out)]) == 0
    old = tree_digest(out)
    done = interrupted_after_a_checkpoint([*ARGV, "--out", str(out), "--overwrite"])
    assert done.returncode == 130, done.stderr[-2000:]
    kept = tmp_path / ".run.replacement"
    lines = done.stderr.strip().splitlines()
    assert f"the new one is kept with its checkpoint in {kept}" in lines[-1] and "--overwrite --resume" in lines[-1]
    assert tree_digest(out) == old  # the previous run untouched
    assert (kept / "checkpoint.npz").is_file() and not (kept / "metrics_summary.json").exists()
    assert not any(p.name.endswith(".tmp") for p in kept.rglob("*"))
    assert call(RUNNER, [*ARGV, "--out", str(out), "--resume"]) != 0  # the finished old run: refused
    assert tree_digest(out) == old
    assert call(RUNNER, [*ARGV, "--out", str(out), "--overwrite", "--resume"]) == 0
    assert not kept.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".run")]
    resumed, uninterrupted = without_times(out), without_times(reference)
    assert sorted(resumed) == sorted(uninterrupted)
    assert [name for name in resumed if resumed[name] != uninterrupted[name]] == []


def test_overwrite_resume_with_nothing_kept_or_other_settings_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "run"
    assert call(RUNNER, [*OLD, "--out", str(out)]) == 0
    old = tree_digest(out)
    assert call(RUNNER, [*ARGV, "--out", str(out), "--overwrite", "--resume"]) == 2
    assert "none is kept" in capsys.readouterr().err
    done = interrupted_after_a_checkpoint([*ARGV, "--out", str(out), "--overwrite"])
    assert done.returncode == 130, done.stderr[-2000:]
    assert call(RUNNER, [*OLD, "--out", str(out), "--overwrite", "--resume"]) == 2  # the kept one is seed 0
    assert "other settings" in capsys.readouterr().err
    assert tree_digest(out) == old and (tmp_path / ".run.replacement" / "checkpoint.npz").is_file()
    assert os.environ.get("KILL_SIGNAL") is None and signal.SIGINT
