"""Time a command and record it where the docs can cite it: report/measurements/<name>.json holds
the command, its exit status, wall time (s), the peak resident memory of its largest process (GiB),
the commit (and whether the tree was dirty), the machine, the load before it started and the date.

    python -m scripts.bench.record_timing make_demo -- make demo
    python -m scripts.bench.record_timing make_test --note "fresh clone" -- make test

A command that fails is recorded too (its exit status says so) and this exits with its status.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # scripts/bench/record_timing.py -> the repository
MEASUREMENTS = ROOT / "report" / "measurements"


def timed(argv: list[str], cwd: Path = ROOT) -> dict:
    """Run argv; its wall time (s), the peak resident memory of its largest process (GiB; Linux's
    ru_maxrss over the child and the descendants it waited for, so never below this recording
    process's own size, about 0.15 GiB: the child starts as its copy) and its exit status."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd)
    _, status, usage = os.wait4(child.pid, 0)
    return {
        "command": " ".join(argv),
        "exit": os.waitstatus_to_exitcode(status),
        "seconds": round(time.perf_counter() - start, 1),
        "peak_rss_gib": round(usage.ru_maxrss * 1024 / 2**30, 2),
    }  # ru_maxrss: KiB on Linux


def provenance() -> dict:
    """Date, commit, dirty flag, machine and load: what every record opens with."""
    from plots.provenance import machine
    from src.provenance import git_commit

    head = git_commit()
    return {
        "produced": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": head.get("commit"),
        "dirty": head.get("dirty"),
        "machine": machine(),
        "load_before": round(os.getloadavg()[0], 2),
    }


def main(argv=None) -> int:
    from src.flags import OneLineParser, dry_run, summary

    parser = OneLineParser(prog="python -m scripts.bench.record_timing", description=summary(__doc__))
    parser.add_argument("name", help="the record's name: report/measurements/<name>.json")
    parser.add_argument("--note", default="", help="what the docs should know about the conditions")
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1 :]
    if not re.fullmatch(r"[a-z0-9_]+", args.name) or not command:
        parser.error(
            f"name {args.name!r} and command {' '.join(command)!r}: accepted a name of lower-case "
            "letters, digits and _, then -- and the command to time"
        )
    if dry_run(
        "python -m scripts.bench.record_timing", f"time {' '.join(command)} into report/measurements/{args.name}.json"
    ):
        return 0
    record = provenance()
    if args.note:
        record["note"] = args.note
    record.update(timed(command))
    from src.files import atomic_write_text

    MEASUREMENTS.mkdir(parents=True, exist_ok=True)
    atomic_write_text(MEASUREMENTS / f"{args.name}.json", json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    return record["exit"]


if __name__ == "__main__":
    sys.exit(main())
