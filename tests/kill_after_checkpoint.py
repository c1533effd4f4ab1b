"""Run a runner's command line in this process and SIGKILL it the moment its first checkpoint is
on disk: `python tests/kill_after_checkpoint.py RUNNER ARG...` (KILL_SIGNAL=INT: a Ctrl-C instead).

Killing from outside when checkpoint.npz appears is a race: a fast system (the dynamics paper's
small runs take well under a millisecond an epoch) can write its next checkpoint, at a log point,
before the signal lands. Here the kill comes right after the first write returns, so the
checkpoint left behind is always the first one."""
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
    pipeline.write_checkpoint = _write_then_die
    runner, argv = sys.argv[1], sys.argv[2:]
    sys.exit(importlib.import_module(runner).main(argv))
