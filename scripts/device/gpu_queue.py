"""The GPU queue: device jobs prepared to the minute, one per lent device command, recorded here
and built into report/PAPER_SCALE.md job by job.

    python -m scripts.device.gpu_queue next                     # the next job and the exact device call
    python -m scripts.device.gpu_queue list                     # every job: state, expected device seconds
    python -m scripts.device.gpu_queue run JOB --out DIR        # on the device: the call `next` prints
    python -m scripts.device.gpu_queue record JOB --from DIR    # here: the files that came back, with provenance
    python -m scripts.device.gpu_queue report                   # report/PAPER_SCALE.md from every recorded job
    python -m scripts.device.gpu_queue all                      # a GPU of your own: every job not recorded, in order

A job fits one device command of at most JOB_LIMIT_S (9 minutes: the program's start, compilation
and evaluation included). It writes each finished piece under --out the moment it exists (job.json,
rewritten atomically after every piece, and its log); its training stops early enough to evaluate
what trained (a run still training at the training deadline is stopped and evaluated from its last
checkpoint); it brings back a few JSON files and no parameters, so a command killed at its limit
still returns every finished piece. `--rehearse` runs the same code path at a tiny size on a CPU
(the suite's study tier rehearses every job).

The jobs are declared in scripts/device/gpu_queue_jobs.py. Kinds: `mechanisms` (limits_of_icl's runs trained
together, each evaluated the moment it ends), `speed` (scripts/device/paper_scale.py) and `study` (a
study's own command, each run a piece the moment it finishes: scripts/device/gpu_study.py).

Expected seconds: the recorded H200 timings (report/measurements/gpu_2026-11-27b, gpu_2026-11-27);
a study job's scaled from the paper cell's step by work (scripts/device/gpu_job.py, Shape).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Sequence

from scripts.device.gpu_job import JOB_LIMIT_S, ORIGINALS, WHEELS, Job, git_like, planned_steps
from scripts.device.gpu_queue_jobs import BY_NAME, JOBS
from src.files import TMP_SUFFIX, atomic_write_json
from src.flags import OneLineParser, UsageError, add_both_spellings, dry_run, summary

PROG = "python -m scripts.device.gpu_queue"
DEVICE_TIMEOUT_S = 600  # the device call's timeout: the job's 540 s and the wheels' install
RECORDS = Path("report/measurements/gpu")
PAPER_SCALE = Path("report/PAPER_SCALE.md")
INSTALL = (
    "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "
    f"--target /tmp/site {WHEELS}/*.whl && export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 && "
)


def git(*args: str) -> str:
    return git_like(["git", *args])


def head() -> tuple[str, bool]:
    """(commit, clean tree) of this checkout."""
    return git("rev-parse", "--short=7", "HEAD") or "unknown", not git("status", "--porcelain", "--untracked-files=no")


def records(job: str, records_dir: Path = RECORDS) -> list[dict]:
    """The job's records, oldest first (report/measurements/gpu/<job>/<stamp>/record.json)."""
    from plots.paper_scale import records as read

    return read(job, records_dir)


def write_report(records_dir: Path, path: Path) -> Path:
    """report/PAPER_SCALE.md from every recorded job (plots/paper_scale.py)."""
    from plots.paper_scale import write_report as write
    from scripts.paper_mechanisms import ORIGINAL

    return write(
        records_dir,
        path,
        [(job.name, job.title, job.expected.total) for job in JOBS],
        JOB_LIMIT_S,
        ORIGINAL,
        [job.name for job in JOBS if job.kind == "study"],
    )


def next_job(records_dir: Path = RECORDS) -> Job | None:
    """The first job no lent device has run yet (none recorded), or None."""
    return next((job for job in JOBS if not records(job.name, records_dir)), None)


def device_call(job: Job, commit: str, clean: bool) -> dict:
    """The device tool's run: command, carry, timeout_s."""
    command = (
        INSTALL
        + f"python3 -m scripts.device.gpu_queue run {job.name} --out $OUT --commit {commit}"
        + ("" if clean else " --dirty")
    )
    return {"command": command, "carry": list(job.carry), "timeout_s": DEVICE_TIMEOUT_S}


def record(job: Job, source: Path, records_dir: Path = RECORDS) -> Path:
    """File what a device call brought back under records_dir/<job>/<stamp>/ with record.json."""
    manifest_file = source / "job.json"
    try:
        manifest = json.loads(manifest_file.read_text())
    except (OSError, ValueError):
        raise UsageError(
            f"--from={str(source)!r} holds no readable job.json; accepted: the folder a device "
            "call of this job brought back"
        ) from None
    if manifest.get("job") != job.name:
        raise UsageError(f"--from={str(source)!r} holds job {manifest.get('job')!r}; accepted: a run of {job.name}")
    if manifest.get("rehearsal") and records_dir == RECORDS:
        raise UsageError(
            f"--from={str(source)!r} is a rehearsal; accepted: a device run (a rehearsal is "
            "recorded only into another --records-dir)"
        )
    stamp = f"{manifest.get('began_utc', '?')[:10]}_{manifest.get('commit', 'unknown')}"
    target = records_dir / job.name / stamp
    staging = target.with_name(f".{stamp}.staging")
    if target.exists():
        raise UsageError(f"{target} exists: this device run is recorded already")
    staging.mkdir(parents=True, exist_ok=False)
    for path in sorted(source.iterdir()):
        if path.is_file() and not path.name.endswith(TMP_SUFFIX):  # not a write a kill cut short
            shutil.copyfile(path, staging / path.name)
    provenance = {
        "job": job.name,
        "commit": manifest.get("commit"),
        "clean": manifest.get("clean"),
        "device": manifest.get("device"),
        "jax": manifest.get("jax"),
        "date": manifest.get("began_utc"),
        "device_seconds": manifest.get("wall_s"),
        "state": manifest.get("state"),
        "rehearsal": bool(manifest.get("rehearsal")),
        "recorded_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "recorded_at": head()[0],
        "files": sorted(p.name for p in staging.iterdir()),
    }
    atomic_write_json(staging / "record.json", provenance)
    os.replace(staging, target)
    return target


def plan(commit: str) -> dict:
    """The queue's expected device seconds, as a record the docs quote (report/measurements/gpu_queue_plan.json)."""
    return {
        "commit": commit,
        "produced": time.strftime("%Y-%m-%d", time.gmtime()),
        "job_limit_seconds": JOB_LIMIT_S,
        "machine": "one lent NVIDIA H200: estimates from report/measurements/gpu_2026-11-27b and gpu_2026-11-27; "
        "the study jobs' steps scaled from the paper cell's by work (scripts/device/gpu_job.py Shape), "
        "not yet measured on a device",
        "jobs": {
            job.name: {
                "expected_seconds": round(job.expected.total, 1),
                "start_seconds": job.expected.start,
                "compile_seconds": job.expected.compile,
                "train_seconds": round(job.expected.train, 1),
                "evaluate_seconds": job.expected.evaluate,
                "steps": (
                    planned_steps(len(job.runs), JOB_LIMIT_S) if job.runs else job.study.steps if job.study else None
                ),
            }
            for job in JOBS
        },
    }


def states(records_dir: Path = RECORDS) -> list[str]:
    lines = []
    for job in JOBS:
        done = records(job.name, records_dir)
        state = (
            f"recorded {len(done)}x, last {done[-1]['date']} at {done[-1]['commit']} on {done[-1]['device']}"
            if done
            else "waiting"
        )
        lines.append(f"{job.name:22s} {job.expected.words():58s} {state}")
    return lines


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("verb", choices=("next", "list", "run", "record", "report", "all"))
    parser.add_argument("job", nargs="?", default=None, help="a job's name (run, record)")
    parser.add_argument("--out", default=None, help="run: where the job writes its pieces")
    parser.add_argument("--from", dest="source", default=None, help="record: the folder the device call brought back")
    parser.add_argument("--commit", default=None, help="run: the commit the device's copy was made from")
    parser.add_argument("--dirty", action="store_true", help="run: that copy had uncommitted changes")
    add_both_spellings(parser, "--budget-s", type=float, default=JOB_LIMIT_S)
    parser.add_argument("--steps", type=int, default=None, help="run: every run's steps (default: the plan's)")
    parser.add_argument("--rehearse", action="store_true", help="run: the same code path at a tiny size (a CPU)")
    add_both_spellings(
        parser,
        "--runs-dir",
        default="runs/gpu_queue",
        help="run, all: the training runs' folder (lost with the device)",
    )
    add_both_spellings(parser, "--records-dir", default=str(RECORDS))
    parser.add_argument("--report", default=str(PAPER_SCALE), help="report: the Markdown file")
    parser.add_argument("--json", default=None, help="list: also write the expected seconds as a record here")
    return parser


def check_args(args) -> None:
    if args.verb in ("run", "record"):
        if args.job not in BY_NAME:
            raise UsageError(f"job={args.job!r} is not accepted; accepted: {', '.join(BY_NAME)}")
    elif args.job is not None:
        raise UsageError(f"job={args.job!r} is not accepted with {args.verb}; accepted: none")
    if args.verb == "run" and not args.out:
        raise UsageError("--out is required with run; accepted: a folder (the device's $OUT)")
    if args.verb == "record" and not (args.source and Path(args.source).is_dir()):
        raise UsageError(f"--from={args.source!r} is not a folder; accepted: the folder a device call brought back")
    if not 60 <= args.budget_s <= JOB_LIMIT_S:
        raise UsageError(f"--budget-s={args.budget_s:g} is not accepted; accepted: 60 to {JOB_LIMIT_S} seconds")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps={args.steps} is not accepted; accepted: an integer >= 1")


def next_text(records_dir: Path) -> str:
    """What `next` prints: the next job and its exact device call, or that none waits."""
    job = next_job(records_dir)
    if job is None:
        return "every job is recorded (python -m scripts.device.gpu_queue list); none waits"
    commit, clean = head()
    call = device_call(job, commit, clean)
    return (
        f"next: {job.name}: {job.title}\nexpected: {job.expected.words()} of the {JOB_LIMIT_S} s a job may take\n"
        f"device call (the device tool's run):\n  command: {call['command']}\n"
        f"  carry: {json.dumps(call['carry'])}\n"
        f"  timeout_s: {call['timeout_s']}\n"
        f"before it, here: make gpu_wheels{' originals' if ORIGINALS in job.carry else ''} (the carried paths)"
        f"{'' if clean else '; commit first: this tree has uncommitted changes'}\n"
        f"after it, here: {PROG} record {job.name} --from <files_at>; make paper_scale_report"
    )


def run_here(args) -> None:
    """`run`: the job on this (device) machine, into --out."""
    from scripts.device.gpu_job import run_job

    run_job(
        BY_NAME[args.job],
        Path(args.out),
        args.budget_s,
        args.commit or head()[0],
        not args.dirty if args.commit else head()[1],
        args.rehearse,
        args.steps,
        Path(args.runs_dir),
    )


def run_all(args, records_dir: Path) -> None:
    """`all`: a GPU of one's own, every job not recorded, in order, each recorded, then the report."""
    commit, clean = head()
    for job in JOBS:
        if records(job.name, records_dir):
            print(f"{job.name}: recorded already")
            continue
        out = Path(args.runs_dir) / f"{job.name}_out"
        if out.exists():
            os.replace(out, out.with_name(f"{out.name}.{time.strftime('%Y%m%d-%H%M%S')}"))
        from scripts.device.gpu_job import run_job

        run_job(job, out, args.budget_s, commit, clean, args.rehearse, args.steps, Path(args.runs_dir))
        print(f"recorded {record(job, out, records_dir)}")
    print(f"wrote {write_report(records_dir, Path(args.report))}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    records_dir = Path(args.records_dir)
    check_args(args)
    if args.verb == "list":
        if args.json:
            atomic_write_json(Path(args.json), plan(head()[0]))
        print("\n".join(states(records_dir)))
    elif args.verb == "next":
        print(next_text(records_dir))
    elif args.verb == "report":
        print(f"wrote {write_report(records_dir, Path(args.report))}")
    elif args.verb == "record":
        print(f"recorded {record(BY_NAME[args.job], Path(args.source), records_dir)}")
    elif args.verb == "run":
        if not dry_run(PROG, f"run {args.job} into {args.out} within {args.budget_s:g} s"):
            run_here(args)
    else:
        run_all(args, records_dir)
    return 0


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
