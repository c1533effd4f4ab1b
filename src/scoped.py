"""A context variable set for the duration of a `with` block: what the workbench's switches that
act at trace or read time share (recording attention weights, the fused attention kernel, reading a
run back, the analyses' progress bars and their budget lifted).

    with holding(_RECORDING, True):      # inside: _RECORDING.get() is True
        ...                              # after (an exception too): what it held before
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator


@contextlib.contextmanager
def holding(var: contextvars.ContextVar, value: Any) -> Iterator[None]:
    """Inside: `var` holds `value`; after it, what it held before, also when the block raises."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)
