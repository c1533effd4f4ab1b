"""The provenance lines every study report opens with: the date, the commit it was produced from
(a tree with uncommitted changes is marked in bold as not reproducible from any commit), the
machine, the summed training time of the runs it aggregates (not the wall time of the last
invocation, which may have trained none of them) and the command.

    lines = header("Sequence mixers on the ICL benchmark (Zoology)", run)   # run: the study's StudyRun
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from typing import Sequence

from src import rundir as names


def machine() -> str:
    """What trained and evaluated: OS, CPU kind and cores, JAX and its devices."""
    import jax

    devices = sorted({f"{d.platform}" + (f" ({d.device_kind})" if d.platform != "cpu" else "") for d in jax.devices()})
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores, "
        f"jax {jax.__version__} on {', '.join(devices)}"
    )


def commit_line(head: dict) -> str:
    """The commit a report comes from; loud when the tree had uncommitted changes."""
    commit = (head.get("commit") or "unknown")[:12]
    if head.get("dirty"):
        untracked = head.get("untracked") or []
        more = head.get("untracked_count", len(untracked)) - len(untracked)
        files = (
            f" (untracked: {', '.join(untracked)}" + (f" and {more} more" if more > 0 else "") + ")"
            if untracked
            else ""
        )
        return (
            f"commit {commit} **with uncommitted changes{files}: this report cannot be reproduced from "
            "any commit; do not ship it**"
        )
    return f"commit {commit} (clean tree)"


def training_seconds(jobs: Sequence) -> tuple[float, int]:
    """(the runs' training loops in seconds, summed; how many runs recorded one)."""
    total, counted = 0.0, 0
    for job in jobs:
        try:
            seconds = job.run.load_json(names.SUMMARY).get("train_seconds")
        except (OSError, ValueError, AttributeError, names.RunDirError):
            seconds = None
        if isinstance(seconds, (int, float)):
            total, counted = total + float(seconds), counted + 1
    return total, counted


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def study_fields(run) -> dict:
    """The keys every study's results JSON opens with: its command, --quick and seconds."""
    return {"command": run.command, "quick": run.quick, "seconds": run.seconds}


def header(title: str, run) -> list[str]:
    """The report's title and provenance lines (Markdown), ending with a blank line, of a study's
    run (src/jobs/declared.py's StudyRun: its jobs, quick, head, command and seconds)."""
    jobs, quick, head, command, seconds = run.jobs, run.quick, run.head, run.command, run.seconds
    total, counted = training_seconds(jobs)
    trained_now = sum(1 for j in jobs if getattr(j, "seconds", 0) > 0)
    return [
        f"# {title}{' — QUICK (a smoke test, not a result)' if quick else ''}",
        "",
        f"- Produced {dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')} from {commit_line(head)}",
        f"- Machine: {machine()}",
        f"- Training: {len(jobs)} runs; their training loops took {duration(total)} in all "
        f"({'' if total < 120 else f'{total:.0f} s, '}one process per run"
        f"{'' if counted == len(jobs) else f'; {counted} runs recorded it'}). "
        f"This command trained {trained_now} of them in {duration(seconds)} of wall time; the others "
        "were finished runs of the same settings and code, reused",
        f"- Command: `{command}`",
        "",
    ]
