"""The device's yardstick for make bench: the FLOP/s it reaches on the matrix products a model of a
given shape makes (x [*shape] @ W [D, D], D = shape[-1]), timed inside one compiled lax.scan."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np


def matmul_rate(shape: tuple[int, ...], repeats: int = 5, chain: int = 50) -> float:
    """FLOP/s this device reaches on the products a model of this shape makes: x [*shape] @ W
    [D, D] (D = shape[-1]), twice in a row, `chain` times in one lax.scan (so that a call's
    dispatch is not timed, as a training chunk's is not), the median of `repeats` timings (make
    bench's yardstick)."""
    width = shape[-1]
    x = jnp.ones(shape, jnp.float32)
    w = jnp.full((width, width), 1.0 / width, jnp.float32)  # keeps the values where they are

    def products(x, w):
        return jax.lax.scan(lambda h, _: ((h @ w) @ w, None), x, None, length=chain)[0]

    seconds = median_seconds(jax.jit(products), (x, w), repeats)
    return 2 * 2 * chain * int(np.prod(shape)) * width / seconds


def median_seconds(f, args: tuple, repeats: int, warmups: int = 1) -> float:
    """The median wall time (s) of `f(*args)` over `repeats` calls, each waited for, after
    `warmups` calls that compile it and are not timed."""
    import statistics

    for _ in range(warmups):
        jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - begin)
    return statistics.median(times)
