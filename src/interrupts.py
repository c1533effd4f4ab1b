"""Ctrl-C for long computations: SIGINT becomes KeyboardInterrupt within moments, and is never lost.

Python runs a signal handler only between bytecodes of the main thread, wherever that thread is.
Two things follow, and this module answers both:
- A KeyboardInterrupt raised inside a garbage-collector callback, a weakref finalizer or a
  `__del__` is printed and dropped by Python ("Exception ignored in: ..."), and JAX's tracing has
  bare `except:` clauses that drop it silently (measured: 1 Ctrl-C in 80 sent during a run's first
  seconds was lost and the run trained on to its end). So the handler defers itself out of the
  contexts it can see (the signal is sent again 50 ms later), records the interrupt it raises, and
  `check()` raises it again where it was swallowed: the training loop calls it before each chunk.
- While the main thread waits in C++ for a compiled chunk, no handler runs: `np.asarray` of a
  computing array took 2.45 s to answer a Ctrl-C sent 0.1 s into a 1.6 s computation, and a chunk
  of minutes delays it by minutes. `wait(tree)` blocks on another thread and waits on an event,
  which a signal interrupts at once (0.07 s), whatever the jaxlib version does in its own wait.

    install()                         # a command's entry point (src.process.guarded)
    check()                           # KeyboardInterrupt if a Ctrl-C was swallowed
    wait(chunk.losses)                # block until computed, Ctrl-C honoured meanwhile
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import weakref

_requested = False  # set once our SIGINT handler has raised KeyboardInterrupt


def _unsafe(frame) -> bool:
    """`frame` runs where Python drops exceptions: a gc callback, a weakref finalizer, a __del__."""
    hooks = {getattr(hook, "__code__", None) for hook in gc.callbacks}
    hooks.add(weakref.finalize.__call__.__code__)
    while frame is not None:
        if frame.f_code in hooks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _handler(signum, frame) -> None:
    global _requested
    if _unsafe(frame):  # the same signal again in 50 ms, once out of there
        threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()
        return
    _requested = True
    raise KeyboardInterrupt


def install() -> None:
    """Handle SIGINT here, unless it is ignored or someone else already handles it."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _handler)


def requested() -> bool:
    """A Ctrl-C reached this process (through `install`'s handler)."""
    return _requested


def check() -> None:
    """Raise the KeyboardInterrupt a library swallowed, if any; otherwise nothing."""
    if _requested:
        raise KeyboardInterrupt


def wait(tree) -> None:
    """Block until every array in `tree` is computed, with Ctrl-C honoured meanwhile (on the main
    thread; elsewhere plain `jax.block_until_ready`). Errors of the computation surface when the
    caller reads the arrays."""
    import jax

    if all(getattr(leaf, "is_ready", lambda: True)() for leaf in jax.tree_util.tree_leaves(tree)):
        return  # already computed (a seed group's chunk waits inside): no thread
    if threading.current_thread() is not threading.main_thread():
        jax.block_until_ready(tree)
        return
    done = threading.Event()

    def block() -> None:
        try:
            jax.block_until_ready(tree)
        except Exception:  # noqa: BLE001 - re-raised where the caller reads the arrays
            pass
        finally:
            done.set()

    threading.Thread(target=block, name="icl-wait", daemon=True).start()
    done.wait()
