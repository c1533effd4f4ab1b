"""A sweep's results CSV: rows written atomically (missing keys empty, floats exact, non-finite
empty), and a CSV that holds anything but this sweep's own rows backed up before it is rewritten."""

from __future__ import annotations

import csv
import io
import math
import time
from pathlib import Path
from typing import Sequence

from src.files import atomic_write_bytes, atomic_write_text
from src.jobs.engine import Job


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(value)
    return str(value)


def write_csv(path: Path, rows: Sequence[dict], columns: Sequence[str]) -> int:
    """Write `rows` (missing keys empty, floats exact, non-finite empty) atomically; returns
    the number of rows."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in columns})
    atomic_write_text(path, buffer.getvalue())
    return len(rows)


def keep_foreign_csv(path: Path, jobs: Sequence[Job]) -> Path | None:
    """Before a sweep rewrites its CSV: when `path` holds anything but rows of this sweep's own
    run directories (another sweep's results, a hand-edited file), copy it to
    `<stem>.backup-<time>.csv` first and return that path; None when nothing needed keeping."""
    if not path.is_file():
        return None
    ours = {str(job.path) for job in jobs}
    try:
        rows = csv.DictReader(io.StringIO(path.read_text()))
        foreign = any(row.get("run_dir") not in ours for row in rows)
    except (OSError, UnicodeDecodeError, csv.Error):
        foreign = True
    if not foreign:
        return None
    stamp = f"{path.stem}.backup-{time.strftime('%Y%m%d-%H%M%S')}"
    backup, n = path.with_name(stamp + path.suffix), 1
    while backup.exists():
        backup, n = path.with_name(f"{stamp}-{n}{path.suffix}"), n + 1
    atomic_write_bytes(backup, path.read_bytes())
    return backup
