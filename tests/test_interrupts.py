"""Ctrl-C (src/interrupts.py): raised within moments while a compiled chunk computes, deferred out
of a weakref finalizer instead of being dropped there, and raised again by the training loop when a
library swallowed it (the fault suite's Ctrl-C test failed once in CI that way: the run trained on)."""

import os
import signal
import threading
import time
import weakref

import jax
import jax.numpy as jnp
import pytest

from conftest import small
from src import interrupts
from src.loop import train
from src.systems import build


@pytest.fixture
def handler(monkeypatch):
    """Our SIGINT handler for the test, no interrupt recorded before or after."""
    monkeypatch.setattr(interrupts, "_requested", False)
    previous = signal.signal(signal.SIGINT, interrupts._handler)
    yield
    signal.signal(signal.SIGINT, previous)


def ctrl_c_in(seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


@jax.jit
def slow(x):
    """About a second or more of work on one CPU core, with no Python in between."""
    return jax.lax.fori_loop(0, 3000, lambda i, a: jnp.tanh(a @ a) * 0.5, x)


def test_ctrl_c_is_honoured_while_a_chunk_computes(handler):
    x = jnp.eye(256) * 0.1
    start = time.perf_counter()
    jax.block_until_ready(slow(x))
    alone = time.perf_counter() - start
    assert alone > 0.5, f"the computation must outlast the signal ({alone:.2f} s)"
    timer = ctrl_c_in(0.1)
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        interrupts.wait(slow(x + 1.0))
    assert time.perf_counter() - start < 0.1 + alone / 2
    timer.join()
    assert interrupts.requested()


def test_a_ctrl_c_inside_a_finalizer_is_raised_after_it():
    """Python prints and drops an exception raised in a weakref finalizer; ours waits it out."""
    previous = signal.signal(signal.SIGINT, interrupts._handler)
    try:

        class Owner:
            pass

        def finalizer():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # bytecodes, where the handler runs
                pass

        owner = Owner()
        weakref.finalize(owner, finalizer)
        with pytest.raises(KeyboardInterrupt):
            del owner  # the finalizer runs here and returns normally
            time.sleep(2.0)  # the deferred signal lands in here
    finally:
        signal.signal(signal.SIGINT, previous)
        interrupts._requested = False


def test_a_swallowed_ctrl_c_stops_the_training_loop_before_its_next_chunk(handler):
    try:  # what jax/_src/core.py's bare `except:` does to it
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1.0)
    except:  # noqa: E722
        pass
    assert interrupts.requested()
    with pytest.raises(KeyboardInterrupt):
        train(build(small("lsa1", steps=20, batch_size=64, log_every=10, eval_size=50)))


def test_without_a_ctrl_c_nothing_is_raised(handler):
    interrupts.check()
    interrupts.wait(slow(jnp.eye(8)))
    result = train(build(small("lsa1", steps=20, batch_size=64, log_every=10, eval_size=50)))
    assert result.step == 20 and not interrupts.requested()
