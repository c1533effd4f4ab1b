"""Atomic file writes and a JSONL metrics logger (every file of a run directory is written here).

Every artifact is written to a temporary file in the same directory and moved
into place with `os.replace`, so a reader (or an interrupted run) never sees a
half-written file.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Temporary files are `.<name>.<pid>.<random>.tmp` beside their target: the pid lets the next
# run tell a dead writer's leftover (src/rundir.py removes it) from a live writer's file.
TMP_SUFFIX = ".tmp"

# Read once, at import (os.umask can only be read by setting it, which is not thread-safe).
FILE_MODE = 0o666 & ~_read_umask()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to a temporary file beside `path` and move it into place. The file gets the
    mode an ordinary `open` would give it (0666 minus the umask: 0644 under umask 022, 0664
    under 002), not mkstemp's private 0600, so collaborators can read a run."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.errno is not None and not err.filename:
            raise OSError(err.errno, err.strerror, str(path)) from None  # a full disk names the file
        raise


def to_jsonable(value: Any) -> Any:
    """numpy/jax scalars and arrays -> plain Python; non-finite floats -> None."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return to_jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(path, text.encode())


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    atomic_write_bytes(path, buffer.getvalue())


def atomic_save_npz(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    atomic_write_bytes(path, buffer.getvalue())


class JsonlLogger:
    """Keeps every row and rewrites the whole file atomically on each `log`, so the
    file on disk is always a complete JSONL document (one object per line)."""

    def __init__(self, path: str | os.PathLike, rows: Iterable[dict] = ()):
        self.path = Path(path)
        self.rows: list[dict] = [dict(r) for r in rows]

    def log(self, row: dict) -> None:
        self.rows.append(to_jsonable(dict(row)))
        self.write()

    def write(self) -> None:
        """The file as the rows stand (empty when there are none)."""
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in self.rows)
        atomic_write_text(self.path, text)


MAX_JSON_NESTING = 100  # levels of objects and arrays a JSON file of ours may have (it has < 10)


def loads_json(text: str | bytes) -> Any:
    """json.loads, with nesting bounded: ValueError (one line) for a document nested deeper than
    MAX_JSON_NESTING levels (a hostile config.json of 100,000 levels would otherwise exhaust the
    recursion of the parser or of the code that walks it)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_JSON_NESTING} levels") from None
    level, frontier = 0, [value]
    while frontier:
        level += 1
        if level > MAX_JSON_NESTING:
            raise ValueError(f"nested deeper than {MAX_JSON_NESTING} levels")
        frontier = [
            child
            for node in frontier
            if isinstance(node, (dict, list))
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, (dict, list))
        ]
    return value


def read_json(path: str | os.PathLike) -> Any:
    """The JSON document of a file (OSError, UnicodeDecodeError, ValueError as loads_json)."""
    with open(path, "rb") as handle:
        return loads_json(handle.read().decode("utf-8"))


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    with open(path) as handle:
        return [loads_json(line) for line in handle if line.strip()]
