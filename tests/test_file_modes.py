"""Artifacts follow the user's umask: 0644 under 022, 0664 under 002 (issue 16, point 6)."""

import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664)])
def test_run_artifacts_follow_the_umask(tmp_path, umask, mode):
    code = (
        "import os, sys; os.umask(%d); sys.path.insert(0, %r); "
        "from src.cli.lsa import main; "
        "sys.exit(main('lsa1', 't', ['--steps', '10', '--batch_size', '32', '--eval_size', '50', "
        "'--log_every', '10', '--quiet', '--out', %r]))"
    ) % (umask, str(ROOT), str(tmp_path / "run"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert len(files) >= 8
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {mode}
