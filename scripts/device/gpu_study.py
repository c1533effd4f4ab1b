"""The GPU queue's study jobs on the device (scripts/device/gpu_queue_jobs.py declares them): a study's own
command (scripts.zoo, scripts.task_diversity, scripts.lengthgen) run as its user types it, each run
it finishes written into job.json as a piece the moment its metrics_summary.json exists, the study
stopped with Ctrl-C (as a user stops it) early enough to write its report, the report brought back
when it comes, and every run still training at the stop returned with its training's last
evaluations.

    python -m scripts.device.gpu_queue run zoo_T64_a --out DIR [--rehearse]

Files under --out: job.json (rewritten atomically after every piece), job.log, study.log (the
study's own output) and the study's report (its Markdown and results JSON, at most REPORT_FILES).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 2.0  # how often the runs' folder is read
STOP_GRACE_S = 30.0  # from Ctrl-C to a kill, while the study stops its runs
REPORT_FILES = 4  # the report's Markdown and JSON files brought back (8 files come back at most)
KEPT_ROWS = 5  # the training's last evaluations kept in a piece
SETTINGS_KEPT = ("learning_rate", "steps", "batch_size", "seed", "num_tasks")  # of the run's train settings


def last_rows(path: Path, count: int = KEPT_ROWS) -> list[dict]:
    """The last `count` JSON rows of a metrics.jsonl (none when it is missing or unreadable)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    rows = []
    for line in lines[-count:]:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def piece(run: Path, finished: bool) -> dict:
    """One run's piece: its name, whether it finished or was stopped, the steps it trained, its
    training's last evaluations, a few of its training settings and, when finished, the numbers of
    its metrics_summary.json."""
    rows = last_rows(run / "metrics.jsonl")
    out = {
        "name": run.name,
        "finished": finished,
        "stopped_at_deadline": not finished,
        "steps": rows[-1].get("step", 0) if rows else 0,
        "metrics": rows,
    }
    try:
        train = json.loads((run / "config.json").read_text())["settings"].get("train", {})
        out["settings"] = {k: train[k] for k in SETTINGS_KEPT if k in train}
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    if finished:
        try:
            summary = json.loads((run / "metrics_summary.json").read_text())
        except (OSError, ValueError):
            summary = {}
        out["summary"] = {k: v for k, v in summary.items() if isinstance(v, (int, float, str, bool)) or v is None}
    return out


def set_aside(folder: Path, log) -> None:
    """An earlier try's folder is moved beside it with a time stamp, never deleted."""
    if folder.exists() and any(folder.iterdir()):
        stale = folder.with_name(f"{folder.name}.{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(folder, stale)
        log(f"an earlier try's {folder.name} moved to {stale}")


def study_command(job, rehearse: bool, runs: Path, report: Path) -> list[str]:
    study = job.study
    return [
        sys.executable,
        "-m",
        *(study.rehearsal if rehearse else study.args),
        "--runs-dir",
        str(runs),
        "--report-dir",
        str(report),
    ]


def collect_pieces(runs: Path, pieces: dict[str, dict], finished_only: bool, log, save) -> None:
    """Add each run under `runs` not yet a piece (only the finished ones when finished_only) to
    `pieces`, saving job.json, then logging, after each."""
    for run in sorted(p.parent for p in runs.glob("*/metrics.jsonl") if not p.parent.name.startswith(".")):
        finished = (run / "metrics_summary.json").exists()
        if run.name in pieces or (finished_only and not finished):
            continue
        pieces[run.name] = piece(run, finished)
        save(pieces=list(pieces.values()))  # saved, then logged: a kill between keeps it
        p = pieces[run.name]
        log(
            f"piece {run.name}: {'finished' if finished else 'stopped'} at step {p['steps']}"
            f"{'' if not p['metrics'] else ', last ' + json.dumps(p['metrics'][-1])[:160]}"
        )


def run_until(command: list[str], out: Path, stop_at: float, collect, log) -> tuple[int | None, bool]:
    """Run the study's command (its output in out/study.log), calling collect() every POLL_S, and
    stop it with Ctrl-C at `stop_at` if it has not ended: (its exit code, whether it was stopped)."""
    from scripts.paper_mechanisms import device_env

    with open(out / "study.log", "w") as sink:
        proc = subprocess.Popen(
            command, env=device_env(), stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        stopped = False
        while proc.poll() is None:
            collect()
            if not stopped and time.time() > stop_at:
                stopped = True
                log("the study's deadline: stopped with Ctrl-C, as a user stops it")
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                break
            time.sleep(POLL_S)
    return proc.returncode, stopped


def copy_report(report: Path, out: Path) -> list[str]:
    """The report's Markdown and JSON files (not its index), at most REPORT_FILES, copied into out."""
    copied = []
    for path in sorted(report.glob("*.md")) + sorted(report.glob("*.json")):
        if path.name != "README.md" and len(copied) < REPORT_FILES:
            shutil.copyfile(path, out / path.name)
            copied.append(path.name)
    return copied


def run_study(job, out: Path, began: float, stop_at: float, rehearse: bool, runs_dir: Path, log, save) -> None:
    """Run the study job `job` into `out` (module docstring), stopping it at `stop_at` (time.time())
    if it has not ended; its runs under runs_dir/<job>, its report under runs_dir/<job>_report,
    then copied into `out`."""
    runs, report = runs_dir / job.name, runs_dir / f"{job.name}_report"
    for folder in (runs, report):
        set_aside(folder, log)
    command = study_command(job, rehearse, runs, report)
    save(
        plan={
            "command": " ".join(command[2:]),
            "runs": job.study.runs,
            "steps": job.study.steps,
            "stop_training_at_s": round(stop_at - began, 1),
        }
    )
    log(" ".join(command[2:]))
    pieces: dict[str, dict] = {}
    returncode, stopped = run_until(command, out, stop_at, lambda: collect_pieces(runs, pieces, True, log, save), log)
    collect_pieces(runs, pieces, True, log, save)
    collect_pieces(runs, pieces, False, log, save)  # the runs stopped at the deadline
    copied = copy_report(report, out)
    save(pieces=list(pieces.values()), exit=returncode, stopped_at_deadline=stopped, report_files=copied)
    log(
        f"study exit {returncode}; {sum(p['finished'] for p in pieces.values())} of {len(pieces)} runs finished; "
        f"report: {', '.join(copied) or 'none'}"
    )
