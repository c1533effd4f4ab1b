"""The fault suite: killed runners and drivers, concurrent sweeps, read-only and full output
directories, corrupted run directories. Each case asserts that nothing is lost (the old run, its
files and the CSV survive) and that the user reads one line, never a traceback."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--steps", "20", "--eval_size", "50", "--batch_size", "64", "--quiet"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def default_sigint() -> None:
    """A shell that started pytest in the background ignores SIGINT, and children inherit that;
    the Ctrl-C test needs Python's own handler in the runner."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def runner(*args: str, module: str = "runners.run_concat_inputs_targets", **kw):
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def finish(proc, timeout: float = 240) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"still running after {timeout:g} s; it printed: {err[-2000:]!r}") from None
    return proc.returncode, out, err


def run(*args: str, module: str = "runners.run_concat_inputs_targets") -> tuple[int, str, str]:
    return finish(runner(*args, module=module))


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def wait_for(predicate, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("faults") / "good"
    code, _, err = run("--out", str(path), *TINY)
    assert code == 0, err
    return path


# -- killed runners ---------------------------------------------------------------------------


def test_sigkill_during_a_rerun_keeps_the_old_run_and_the_next_run_cleans_up(good_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(good_run, out)
    before = digest(out)
    proc = runner("--out", str(out), "--overwrite", "--steps", "200000", "--eval_size", "50", "--quiet")
    staging = lambda: list(tmp_path.glob(".run.staging-*"))
    wait_for(lambda: any((s / "config.json").exists() for s in staging()))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert digest(out) == before  # the old run is whole
    assert staging()  # the killed replacement's leftover
    code, _, err = run("--out", str(out), "--overwrite", *TINY[:-1], "--steps", "30", "--quiet")
    assert code == 0, err
    assert json.loads((out / "metrics_summary.json").read_text())["steps"] == 30
    assert not staging() and not list(tmp_path.glob(".run.replaced-*"))


def test_ctrl_c_during_a_rerun_keeps_the_old_run(good_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(good_run, out)
    before = digest(out)
    proc = runner(
        "--out", str(out), "--overwrite", "--steps", "200000", "--eval_size", "50", "--quiet", preexec_fn=default_sigint
    )
    wait_for(lambda: any((s / "config.json").exists() for s in tmp_path.glob(".run.staging-*")))
    proc.send_signal(signal.SIGINT)
    code, _, err = finish(proc)
    assert code == 130 and "previous run" in one_line(err) and "kept" in err
    assert digest(out) == before
    assert not list(tmp_path.glob(".run.staging-*"))  # its own partial run is discarded


def test_dead_writers_temporaries_are_removed_and_live_ones_kept(tmp_path):
    out = tmp_path / "run"
    dead = tmp_path / ".results.csv.999999999.abcdefgh.tmp"  # no such pid
    live = tmp_path / f".results.csv.{os.getpid()}.abcdefgh.tmp"
    foreign = tmp_path / ".notes.tmp"  # not ours: no pid
    for p in (dead, live, foreign):
        p.write_text("x")
    code, _, err = run("--out", str(out), *TINY)
    assert code == 0, err
    assert not dead.exists() and live.exists() and foreign.exists()


# -- sweeps: a killed driver, two at once, the CSV ----------------------------------------------

SWEEP = [
    "--models",
    "lsa1",
    "--ordering",
    "random",
    "--eval_size",
    "50",
    "--batch_size",
    "64",
    "--log_every",
    "10",
    "--jobs",
    "1",
    "--quiet",
    "--no_save_attention",
]


def test_sigkill_of_a_sweep_driver_takes_its_runners_with_it(tmp_path):
    csv, runs = tmp_path / "r.csv", tmp_path / "runs"
    proc = runner(
        *SWEEP, "--seeds", "0", "--steps", "200000", "--out", str(csv), "--runs-dir", str(runs), module="eval_order"
    )
    children = []

    def child_started() -> bool:
        found = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
        children[:] = [int(p) for p in found.stdout.split()]
        return bool(children)

    if shutil.which("pgrep") is None:
        proc.kill()
        pytest.skip("pgrep is not available")
    wait_for(child_started)
    time.sleep(2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    if sys.platform.startswith("linux"):
        wait_for(lambda: all(gone(p) for p in children), timeout=30)
    code, _, err = run(
        *SWEEP, "--seeds", "0", "--steps", "20", "--out", str(csv), "--runs-dir", str(runs), module="eval_order"
    )
    assert code == 0, err
    assert len(csv.read_text().strip().splitlines()) == 2


def test_a_second_sweep_on_the_same_runs_dir_is_refused_in_one_line(tmp_path):
    runs = tmp_path / "runs"
    first = runner(
        *SWEEP,
        "--seeds",
        "0",
        "--steps",
        "200000",
        "--out",
        str(tmp_path / "a.csv"),
        "--runs-dir",
        str(runs),
        module="eval_order",
        preexec_fn=default_sigint,
    )
    try:
        wait_for(lambda: (runs / ".lock").exists() and (runs / ".lock").read_text().strip())
        code, _, err = run(
            *SWEEP,
            "--seeds",
            "0",
            "--steps",
            "20",
            "--out",
            str(tmp_path / "b.csv"),
            "--runs-dir",
            str(runs),
            module="eval_order",
        )
        line = one_line(err)
        assert code == 2 and "in use by pid" in line and str(first.pid) in line
        assert not (tmp_path / "b.csv").exists()
    finally:
        first.send_signal(signal.SIGINT)
        try:
            finish(first, timeout=60)
        except subprocess.TimeoutExpired:
            first.kill()
            finish(first)


def test_a_sweep_backs_up_a_csv_it_did_not_write(tmp_path):
    csv = tmp_path / "results.csv"
    csv.write_text("run_dir,eval_loss\n/elsewhere/run,0.5\n")
    code, _, err = run(
        *SWEEP,
        "--seeds",
        "0",
        "--steps",
        "20",
        "--out",
        str(csv),
        "--runs-dir",
        str(tmp_path / "runs"),
        module="eval_order",
    )
    assert code == 0, err
    backups = list(tmp_path.glob("results.backup-*.csv"))
    assert len(backups) == 1 and backups[0].read_text() == "run_dir,eval_loss\n/elsewhere/run,0.5\n"
    assert "kept it as" in err
    # a rerun rewrites its own CSV without another backup
    code, _, err = run(
        *SWEEP,
        "--seeds",
        "0",
        "--steps",
        "20",
        "--out",
        str(csv),
        "--runs-dir",
        str(tmp_path / "runs"),
        module="eval_order",
    )
    assert code == 0 and len(list(tmp_path.glob("results.backup-*.csv"))) == 1


# -- read-only and full filesystems --------------------------------------------------------------


def _mount_tmpfs(target: Path, options: str) -> bool:
    if os.geteuid() != 0 or not sys.platform.startswith("linux") or shutil.which("mount") is None:
        return False
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True)
    return done.returncode == 0


def _unmount(target: Path) -> None:
    subprocess.run(["umount", str(target)], capture_output=True)


def test_read_only_output_directory_is_one_line(tmp_path):
    target = tmp_path / "ro"
    if os.geteuid() != 0:
        target.mkdir()
        target.chmod(0o555)
        mounted = False
    elif _mount_tmpfs(target, "ro,size=1m"):
        mounted = True
    else:
        pytest.skip("root without permission to mount a read-only tmpfs")
    try:
        code, _, err = run("--out", str(target / "run"), *TINY)
        line = one_line(err)
        assert code != 0 and str(target) in line and ("Read-only" in line or "Permission" in line)
    finally:
        if mounted:
            _unmount(target)


def test_full_output_directory_is_one_line_and_keeps_the_old_run(good_run, tmp_path):
    target = tmp_path / "full"
    if not _mount_tmpfs(target, "size=48k"):
        pytest.skip("needs root and tmpfs (Linux) to make a small full filesystem")
    try:
        out = target / "run"
        (target / "keep.txt").write_text("user data")
        code, _, err = run("--out", str(out), *TINY, "--save_attention")  # a run: ~140k
        line = one_line(err)
        assert code == 1 and "No space left" in line
        assert (target / "keep.txt").read_text() == "user data"
    finally:
        _unmount(target)


# -- corrupted run directories ------------------------------------------------------------------


def _truncate(name: str, keep: int):
    return lambda run: (run / name).write_bytes((run / name).read_bytes()[:keep])


CORRUPTIONS = {
    "config truncated": ("config.json", _truncate("config.json", 40)),
    "config not a mapping": ("config.json", lambda run: (run / "config.json").write_text("[1, 2]")),
    "config wrong types": (
        "config.json",
        lambda run: (run / "config.json").write_text(json.dumps({"settings": {"model": "lsa1", "task": 3}})),
    ),
    "params garbage": ("params.npz", lambda run: (run / "params.npz").write_bytes(b"not a zip" * 9)),
    "params object array": (
        "params.npz",
        lambda run: np.savez(run / "params.npz", **{"a/b": np.array([{"x": 1}], dtype=object)}),
    ),
    "params wrong shapes": (
        "params.npz",
        lambda run: np.savez(run / "params.npz", **{k: np.zeros(3) for k in np.load(run / "params.npz").files}),
    ),
    "params foreign keys": ("params.npz", lambda run: np.savez(run / "params.npz", w=np.zeros(3))),
    "summary truncated": ("metrics_summary.json", _truncate("metrics_summary.json", 5)),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_a_corrupted_run_file_is_named_in_one_line_and_nothing_changes(good_run, tmp_path, case):
    name, corrupt = CORRUPTIONS[case]
    run_dir = tmp_path / "run"
    shutil.copytree(good_run, run_dir)
    corrupt(run_dir)
    before = digest(run_dir)
    code, _, err = run("--run", str(run_dir), module="analysis.alignment")
    line = one_line(err)
    assert code != 0 and name in line and "unexpected" not in line, line
    assert digest(run_dir) == before


# -- divergence is visible ----------------------------------------------------------------------


def test_an_analysis_of_a_diverged_run_says_so_and_exits_non_zero(tmp_path):
    run_dir = tmp_path / "run"
    code, _, err = run("--out", str(run_dir), *TINY, "--lr", "1e30")
    assert code == 1 and "training stopped" in one_line(err)
    assert json.loads((run_dir / "metrics_summary.json").read_text())["status"] == "diverged"
    code, _, err = run("--run", str(run_dir), module="analysis.alignment")
    assert code == 3 and "diverged" in one_line(err)


def test_an_interrupt_during_a_write_leaves_no_temporary(tmp_path, monkeypatch, capsys):
    """Ctrl-C can land inside an atomic write (after mkstemp made the temporary, before the
    handler that removes it runs); the command's interrupt path removes this process's own
    temporaries, and never those of a live writer."""
    import src.cli.command as command
    from src.gd_paper.presets import preset

    out = tmp_path / "run"
    live = out / f".other.{os.getppid()}.x.tmp"  # a live process's (our parent's)

    def interrupted_execute(settings, path, **kwargs):
        (path / "analysis").mkdir(parents=True)
        (path / f".metrics.jsonl.{os.getpid()}.abc.tmp").write_text("half")
        (path / "analysis" / f".a.json.{os.getpid()}.def.tmp").write_text("half")
        live.write_text("busy")
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "execute", interrupted_execute)
    code = command.train_command("prog", preset("lsa1").validate(), out, runner="runners.x", argv=[])
    assert code == 130 and "interrupted" in capsys.readouterr().err
    assert sorted(p.name for p in out.rglob("*.tmp")) == [live.name]
