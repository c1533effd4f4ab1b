"""The runs-directory lock: one sweep or study trains into a runs directory at a time
(`<runs-dir>/.lock`, an flock the kernel drops when its holder dies); a second one is refused in
one line (RunsDirBusy) naming the holder."""

from __future__ import annotations

import os
import time
from pathlib import Path


LOCK = ".lock"  # <runs-dir>/.lock: held (flock) by the one sweep or study using the folder


class RunsDirBusy(Exception):
    """Another live sweep or study holds the runs directory (one-line message)."""


class RunsDirLock:
    """An exclusive lock on a runs directory for as long as a sweep or study trains into it.
    The kernel releases it when the holder dies (flock), so a killed driver never leaves a
    stale lock; the file names the holder (pid, command, start) for the refusal message."""

    def __init__(self, runs_dir: Path, command: str):
        self.path = runs_dir / LOCK
        self.command = command
        self.handle = None

    def __enter__(self) -> "RunsDirLock":
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip().replace("\n", " ") or "another process"
            handle.close()
            raise RunsDirBusy(
                f"--runs-dir={str(self.path.parent)!r} is in use by {holder}; "
                "accepted: wait for it to finish, or another --runs-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} ({self.command[:200]}) since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        self.handle = handle
        return self

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.close()  # releases the flock
            self.handle = None
