"""Run a runner's command line in this process and SIGKILL it the moment its first checkpoint is
on disk: `python tests/kill_after_checkpoint.py RUNNER ARG...` (KILL_SIGNAL=INT: a Ctrl-C instead).

Killing from outside when checkpoint.npz appears is a race: a fast system (the dynamics paper's
small runs take well under a millisecond an epoch) can write its next checkpoint, at a log point,
before the signal lands. Here the kill comes right after the first write returns, so the
checkpoint left behind is always the first one. SIGINT is handled as a command's entry point
handles it (src.interrupts.install), whatever the suite was started from: a shell that starts
it in the background leaves SIGINT ignored in every process below it, and the Ctrl-C runs then
trained on to their end (the fast tier at 0fee530, started with `make test &`)."""

from __future__ import annotations

import importlib
import os
import signal
import sys

import src.pipeline as pipeline

_write_checkpoint = pipeline.write_checkpoint


def _write_then_die(*args, **kwargs) -> None:
    _write_checkpoint(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT if os.environ.get("KILL_SIGNAL") == "INT" else signal.SIGKILL)


if __name__ == "__main__":
    from src import interrupts

    signal.signal(signal.SIGINT, signal.default_int_handler)  # not the SIG_IGN of a background shell
    interrupts.install()  # as a command's entry point does (src.process.guarded)
    pipeline.write_checkpoint = _write_then_die
    runner, argv = sys.argv[1], sys.argv[2:]
    sys.exit(importlib.import_module(runner).main(argv))
