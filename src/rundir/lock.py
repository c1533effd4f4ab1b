"""One writer per run directory: an exclusive lock on `.<name>.lock` beside the run directory,
held from the check of the target to the last file written (fresh runs, replacements, resumes and
groups trained together alike). A second command on the same directory is refused in one line,
naming the holder, before any work; the kernel drops the lock when its holder dies (flock), so a
killed run never leaves a stale one. The lock sits beside the directory, not in it, because a
replacement swaps the directory itself.

    with RunDirLock(out, "python -m runners.train ..."):     # RunBusy (one line) if taken
        ...check the target, train, write...

A dry run (`check_only`) takes no lock and writes nothing: it only asks whether the place is
writable.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from src.files import FILE_MODE
from src.rundir.staging import RunDirError, unsafe_target

LOCK_SUFFIX = ".lock"  # .<name>.lock beside the run directory <name>


class RunBusy(RunDirError):
    """Another live process is writing this run directory (one-line message)."""


def lock_path(out: Path) -> Path:
    out = Path(out)
    name = out.name or out.resolve().name
    return out.parent / f".{name}{LOCK_SUFFIX}"


def _names_a_live_holder(text: str) -> bool:
    """True when `text` is a holder's line ("pid N (...) since ...") naming a process that lives."""
    words = text.split()
    if len(words) < 2 or words[0] != "pid" or not words[1].isdigit():
        return False
    try:
        os.kill(int(words[1]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def _read_holder(fd: int, patience_s: float = 2.0) -> str:
    """The holder's line of a lock file whose flock is taken. The holder writes its line just after
    it takes the flock, so for a moment the file is empty, or still names a killed run's pid: read
    again until it names a live process, for at most `patience_s`; '' if it never does."""
    deadline = time.monotonic() + patience_s
    while True:
        text = os.pread(fd, 400, 0).decode(errors="replace").strip().replace("\n", " ")
        if _names_a_live_holder(text):
            return text
        if time.monotonic() >= deadline:
            return ""
        time.sleep(0.02)


class RunDirLock:
    """flock on `.<name>.lock`, created if missing and removed on release (while still held, and a
    lock taken on a file that was removed meanwhile is retaken on the new one, so two holders can
    never both believe they hold it)."""

    def __init__(self, out: Path, command: str = "", check_only: bool = False):
        self.out, self.path, self.command, self.check_only = Path(out), lock_path(Path(out)), command, check_only
        self.fd: int | None = None
        self.made: list[Path] = []  # parents this lock created: removed at the end if still empty

    def __enter__(self) -> "RunDirLock":
        if unsafe_target(self.out):
            return self  # never a run directory: the target's check refuses it
        try:
            if self.check_only:
                self._check_writable()
            else:
                self._take()
        except OSError as err:
            raise RunDirError(
                f"--out {self.out}: cannot be written ({err.strerror or err}: "
                f"{err.filename or self.path}); nothing was changed; accepted: a place "
                "this user may write"
            ) from None
        return self

    def _check_writable(self) -> None:
        existing = next(p for p in (self.path.parent, *self.path.parent.parents) if p.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), str(existing))

    def _take(self) -> None:
        import fcntl

        missing = [p for p in (self.path.parent, *self.path.parent.parents) if not p.exists()]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.made = missing
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunBusy(
                    f"--out {self.out} is being written by {holder or 'another process'}; "
                    "nothing was changed; accepted: wait for it to finish, or another --out"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the holder before us removed it as we opened it: again
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} ({self.command[:200]}) since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
        self.fd = fd

    def __exit__(self, *exc) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)  # releases the flock
        self.fd = None
        for folder in self.made:  # the parents this lock made, nearest first, if nothing went in
            try:
                folder.rmdir()
            except OSError:
                break


class RunDirLocks:
    """Locks on several run directories (a group trained together), all or none (RunBusy)."""

    def __init__(self, outs, command: str = "", check_only: bool = False):
        self.locks = [RunDirLock(out, command, check_only) for out in outs]
        self.held: list[RunDirLock] = []

    def __enter__(self) -> "RunDirLocks":
        try:
            for lock in self.locks:
                self.held.append(lock.__enter__())
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        while self.held:
            self.held.pop().__exit__()
