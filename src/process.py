"""The guards every command's process runs under (src/process.py, below everything): dying with
the job engine's driver, keeping to the core it was given, Ctrl-C and a closed pipe handled at
once, and every error one line (`guarded`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from src.flags import UsageError, fail


PARENT_ENV = "ICL_WORKBENCH_PARENT_PID"  # set by the job engine for the runners it starts


def die_with_parent() -> None:
    """A runner started by the job engine (PARENT_ENV set) asks Linux for SIGTERM when its
    driver dies, even by SIGKILL, so no orphan keeps writing into a run directory that a rerun
    replaces; if the driver is already gone it exits at once. Elsewhere: nothing."""
    import os

    expected = os.environ.get(PARENT_ENV)
    if not expected or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != expected:
        raise SystemExit(143)


CPU_ENV = "ICL_WORKBENCH_CPU"  # the core the job engine gives a runner when several run at once


def pin_to_cpu() -> None:
    """A runner given a core by the job engine (CPU_ENV set) keeps to it, before JAX starts: XLA's
    CPU thread pool then has one thread, so runs trained side by side do not contend for the
    cores, and round alike on any machine. Elsewhere, or where Linux affinity is missing:
    nothing (config.json records the CPUs the run had, `src.provenance.usable_cpus`)."""
    import os

    core = os.environ.get(CPU_ENV)
    if not core or not hasattr(os, "sched_setaffinity"):
        return
    try:
        os.sched_setaffinity(0, {int(core)})
    except (OSError, ValueError):
        pass


def _leave_now(code: int) -> None:
    """Exit at once after an interrupt: JAX's threads may still be running the computation the
    interrupt cut short, and a normal interpreter teardown under them can segfault (observed:
    exit -11 after the "kept unchanged" note was printed). Everything the command writes is
    already closed and renamed into place, so only the standard streams need flushing."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _reader_gone() -> None:
    """Standard output's reader went away (`--choices | head`): stop at once and quietly, with
    the exit status of a process that SIGPIPE ended (141), as other command-line tools do."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    os._exit(141)


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_gone()
    except (OSError, ValueError):
        pass


DEBUG_ENV = "WORKBENCH_DEBUG"  # set (e.g. WORKBENCH_DEBUG=1): a crash's traceback is printed too


def failing_entry(tb) -> tuple[str, bool]:
    """(" in <kind> <name> (<file>:<line>)" for the innermost frame of the checkout that defines a
    registered entry, or "" for none; whether the failing code is ours: a file git tracks here, or
    no frame of the checkout at all). A crash in a user's new, untracked mixer is theirs to fix,
    named, and not "ours to report"."""
    import subprocess
    import traceback
    from src.provenance import ROOT
    from src.registry import entries_in

    for frame in reversed(traceback.extract_tb(tb)):
        path = Path(frame.filename).resolve()
        if not path.is_relative_to(ROOT) or path.is_relative_to(ROOT / ".venv"):
            continue
        entries = entries_in(frame.filename)
        if not entries:
            continue
        names = ", ".join(f"{e.kind} {e.name!r}" for e in entries[:3]) + (" ..." if len(entries) > 3 else "")
        try:
            tracked = (
                subprocess.run(
                    ["git", "ls-files", "--error-unmatch", str(path)], cwd=ROOT, capture_output=True, timeout=10
                ).returncode
                == 0
            )
        except (OSError, subprocess.SubprocessError):
            tracked = True
        return f" in {names} ({path.relative_to(ROOT)}:{frame.lineno})", tracked
    return "", True


def _unexpected(prog: str, err: Exception) -> int:
    """One line naming an exception nothing expected (and where it rose: the user's code or
    ours), its full traceback in a file; exit code 1."""
    import os
    import tempfile
    import traceback

    fd, log = tempfile.mkstemp(prefix="icl-workbench-traceback-", suffix=".log")
    with os.fdopen(fd, "w") as handle:
        handle.write(f"$ {prog} {' '.join(sys.argv[1:])}\n{traceback.format_exc()}")
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if os.environ.get(DEBUG_ENV):
        traceback.print_exc(file=sys.stderr)
    where, ours = failing_entry(err.__traceback__)
    print(
        f"{prog}: error: {'unexpected ' if ours else ''}{type(err).__name__}{where}: {first[:300]} (full "
        f"traceback: {log}{'; please report it' if ours else ''})",
        file=sys.stderr,
    )
    return 1


def guarded(main: Callable[[], int]) -> int:
    """Run a command line's `main()`: a UsageError it raises is one line and exit 2 (fail's); an
    unexpected exception becomes ONE line naming the error and a file with the full traceback
    (exit 1), never a 30-line trace on the terminal."""
    import os
    import traceback

    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    prog = f"python -m {spec.name}" if spec is not None else os.path.basename(sys.argv[0])
    from src import interrupts

    die_with_parent()
    pin_to_cpu()
    interrupts.install()
    try:
        code = main()
    except KeyboardInterrupt:
        if not interrupts.requested():
            raise
        print(f"\n{prog}: interrupted", file=sys.stderr)
        _leave_now(130)
    except SystemExit:
        _flush_stdout()
        raise
    except UsageError as err:  # a bad flag found inside main: one line, exit 2, as fail() says it
        if os.environ.get(DEBUG_ENV) and err.__cause__ is not None:  # e.g. a mixer that raised
            traceback.print_exception(err.__cause__, file=sys.stderr)
        return fail(prog, err)
    except BrokenPipeError:
        _reader_gone()
    except OSError as err:  # the filesystem said no (read-only, full, not a directory, ...)
        where = f": {err.filename}" if getattr(err, "filename", None) else ""
        print(
            f"{prog}: error: cannot write or read{where}: {err.strerror or err}; nothing else "
            "was changed (a run being replaced keeps its old version)",
            file=sys.stderr,
        )
        return 1
    except MemoryError:
        print(
            f"{prog}: error: out of memory; accepted: smaller --batch_size / --eval_size / model sizes", file=sys.stderr
        )
        return 1
    except Exception as err:  # noqa: BLE001 - the whole point: nothing escapes as a trace
        return _unexpected(prog, err)
    if code == 130 and interrupts.requested():
        _leave_now(code)
    _flush_stdout()
    return code
