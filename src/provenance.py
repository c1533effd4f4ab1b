"""Which code made a run: the git commit, and a fingerprint of the source that determines
training results.

`code_fingerprint()` hashes every Python file of src/, baselines/ and runners/. The runners record it in config.json;
sweeps treat a
finished run made by different training code as stale instead of silently mixing
results of two code versions in one CSV. (The git commit in config.json cannot catch
uncommitted edits; this can.)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import shlex
import subprocess
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parent.parent
TRAINING_SOURCES = ("src", "baselines", "runners")


def checkout_path(path: str | Path) -> Path:
    """A relative path that names nothing from the working directory but names a file of this
    checkout (`configs/mechanisms.yaml`) is read from the checkout, so the docs' commands and the
    studies' default configs work from any directory; anything else is `path` as given."""
    given = Path(path)
    if not given.is_absolute() and not given.exists() and (ROOT / given).exists():
        return ROOT / given
    return given


def code_fingerprint() -> str:
    """sha256 (first 16 hex digits) over the training code's file names and contents."""
    files = sorted(p for folder in TRAINING_SOURCES for p in (ROOT / folder).rglob("*.py"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


# untracked files (not ignored) under these folders make a run or report dirty: code git does not
# know, e.g. a new mixer not yet committed, that a commit alone would not reproduce
CODE_FOLDERS = ("src", "baselines", "runners", "analysis", "plots", "scripts")
UNTRACKED_LISTED = 20  # names kept in the record; the count is always whole


def git_commit() -> dict:
    """{"commit": full hash or None, "dirty": tracked files changed since it or untracked files
    under CODE_FOLDERS, or None without git, "untracked": those untracked files (at most
    UNTRACKED_LISTED named), "untracked_count": how many}."""

    def git(*cmd):
        return subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=10)

    try:
        head = git("rev-parse", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
        others = git("ls-files", "--others", "--exclude-standard", "--", *CODE_FOLDERS)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    if head.returncode != 0:
        return {"commit": None, "dirty": None}
    untracked = sorted(line for line in others.stdout.splitlines() if line.strip()) if others.returncode == 0 else []
    record = {"commit": head.stdout.strip(), "dirty": bool(changed.stdout.strip() or untracked)}
    if untracked:
        record.update(untracked=untracked[:UNTRACKED_LISTED], untracked_count=len(untracked))
    return record


def library_versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("jax", "jaxlib", "dm-haiku", "optax", "numpy"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def run_record(settings: dict, runner: str, argv: Sequence[str], out: Path) -> dict:
    """The config.json of a run: its settings (a JSON mapping), the command that made it and
    reruns it, library versions, git commit, the training-code fingerprint and XLA_FLAGS."""
    command = "python -m " + runner + " " + " ".join(shlex.quote(a) for a in argv)
    return {
        "settings": settings,
        "runner": runner,
        "argv": list(argv),
        "command": command,
        "rerun": f"python -m runners.run --config {Path(out) / 'config.json'} --out NEW_DIR",
        "out": str(out),
        "versions": library_versions(),
        "git": git_commit(),
        "code_fingerprint": code_fingerprint(),
        "platform": platform.platform(),
        # XLA's CPU code rounds differently with its thread count: the job engine trains parallel
        # runs on one thread each (XLA_FLAGS) and one core each (cpus: 1), and a rerun or resume
        # adopts what is recorded here
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "cpus": usable_cpus(),
    }


def usable_cores() -> tuple[int, ...]:
    """The cores this process may run on, by its Linux affinity; () where there is none to set."""
    if not hasattr(os, "sched_setaffinity"):
        return ()
    return tuple(sorted(os.sched_getaffinity(0)))


def usable_cpus() -> int:
    """How many CPUs this process may run on (its Linux affinity, else the machine's count): the
    size of XLA's CPU thread pool."""
    return len(usable_cores()) or os.cpu_count() or 1
