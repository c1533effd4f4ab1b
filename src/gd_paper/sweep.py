"""The sweep drivers' command line (`eval_order`, `eval_noise`): flags -> grid (src/gd_paper/sweep_grid.py)
-> the job engine (src/jobs/engine.py) -> the results CSV, rebuilt from the run directories.

The whole grid is checked before anything runs (exit 2 and one line naming the flag, the
value and what is accepted). Rerunning a sweep skips finished runs, redoes incomplete ones,
refuses (or with --overwrite retrains) runs made with other settings or code, and rewrites
the CSV after every finished run. `--grid PATH=V1,V2` sweeps any setting by its dotted path.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Sequence

from src.flags import UsageError, dry_run, fail, overwrite_hint
from src.jobs.engine import TODO_STATES, announce, run_jobs
from src.jobs.engine import plan as replan
from src.gd_paper.sweep_flags import PHASE_FIELDS, DriverDefaults, build_parser
from src.gd_paper.sweep_grid import CLEAN, GridError, SweepJob, build_grid, make_jobs
from src.jobs.results_csv import keep_foreign_csv, write_csv
from src.jobs.runs_lock import RunsDirBusy, RunsDirLock
from src.jobs.study import check_directory, executor_of
from src.registry import Choice
from src.rundir import RunDirError, names

# CSV columns, in order: where the run is, its settings, its results.
SETTING_COLUMNS = ["model", "seed", "steps", "ordering", "noise_mode", "p", "sigma", "placement"]
PHASE_COLUMNS = [f"{phase}_{f}" for phase in ("train", "eval") for f in PHASE_FIELDS]
RESULT_COLUMNS = [
    "eval_loss",
    "gd_loss",
    "gd_eta",
    "align_cos",
    "l2_pred_diff",
    "model_diff",
    "auroc",
    "train_loss",
    "train_seconds",
    "copy_own",
    "copy_next",
    "copy_prev",
    "copy_other",
]
CSV_COLUMNS = ["run_dir", "status"] + SETTING_COLUMNS + PHASE_COLUMNS + RESULT_COLUMNS


def _float(value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def last_layer_auroc(stats: dict) -> float:
    """Mean AUROC over the heads of the last layer that has entries; NaN if none is defined."""
    layers = stats.get("layers") or []
    if not layers:
        return math.nan
    last = max(entry.get("layer", 0) for entry in layers)
    values = [_float(e.get("auroc")) for e in layers if e.get("layer", 0) == last]
    values = [v for v in values if math.isfinite(v)]
    return sum(values) / len(values) if values else math.nan


def csv_row(job: SweepJob) -> dict:
    """One CSV row: the point's shared flags, then the run directory's settings and results."""
    run, point = job.run, job.point
    settings = run.load_config()["settings"]
    summary = run.load_json(names.SUMMARY)
    noisy = any(settings[f"{ph}_curriculum"]["noise_mode"] != CLEAN for ph in ("train", "eval"))
    row = {
        "run_dir": str(run.path),
        "status": summary.get("status"),
        "model": settings["model"]["name"],
        "seed": settings["train"]["seed"],
        "steps": summary.get("steps"),
        "ordering": point.ordering,
        "noise_mode": point.noise_mode,
        "p": point.p if noisy else None,
        "sigma": (1.0 if point.sigma is None else point.sigma) if noisy else None,
        "placement": point.placement if noisy else None,
    }
    row.update({path: value for path, value in point.sets})
    for phase in ("train", "eval"):
        c = settings[f"{phase}_curriculum"]
        for f in PHASE_FIELDS:
            value = c[f]
            if f in ("noise_p", "noise_sigma", "noise_placement") and c["noise_mode"] == CLEAN:
                value = None
            row[f"{phase}_{f}"] = value
    for key in RESULT_COLUMNS:
        row[key] = summary.get(key)
    row["auroc"] = math.nan
    if run.exists(names.ATTENTION_STATS):
        try:
            row["auroc"] = last_layer_auroc(run.load_json(names.ATTENTION_STATS))
        except (ValueError, OSError):
            pass
    if run.exists(names.ALIGNMENT):  # the analysis's numbers win over the training log's
        try:
            alignment = run.load_json(names.ALIGNMENT)
            for key in ("align_cos", "l2_pred_diff", "model_diff"):
                if alignment.get(key) is not None:
                    row[key] = alignment[key]
        except (ValueError, OSError):
            pass
    return row


def write_results(path: Path, jobs: Sequence[SweepJob]) -> int:
    """Rewrite the CSV with one row per finished run (grid order); returns the rows."""
    extra = list(dict.fromkeys(p for job in jobs for p, _ in job.point.sets))
    rows = []
    for job in jobs:
        if job.state not in ("complete", "diverged"):  # stale (other settings or code): no row
            continue
        try:
            rows.append(csv_row(job))
        except (RunDirError, ValueError, OSError, KeyError, TypeError):
            continue
    return write_csv(path, rows, CSV_COLUMNS + extra)


def execute(
    jobs: list[SweepJob], args: argparse.Namespace, out: Path, runs_dir: Path, executor: Choice | None = None
) -> int:
    from tqdm import tqdm

    todo = [j for j in jobs if j.state in TODO_STATES]
    done_before = len(jobs) - len(todo)
    workers = max(1, min(args.jobs, len(todo))) if todo else 1
    bar = tqdm(
        total=len(jobs),
        initial=done_before,
        unit="run",
        desc="runs",
        disable=args.quiet,
        dynamic_ncols=True,
        file=sys.stderr,
    )
    say = bar.write if not args.quiet else (lambda m: print(m, file=sys.stderr))
    announce(say, args.prog, "runs in the grid", jobs, todo, workers, runs_dir)

    def done(job: SweepJob) -> None:
        if job.returncode == 0 and job.state == "complete":
            row = csv_row(job)
            say(
                f"  done {job.name}: eval_loss {_float(row['eval_loss']):.4f} "
                f"gd_loss {_float(row['gd_loss']):.4f} ({job.seconds:.0f}s)"
            )
        write_results(out, jobs)
        bar.update(1)

    start = time.monotonic()
    try:
        report = run_jobs(todo, workers=workers, runs_dir=runs_dir, say=say, on_done=done, executor=executor)
    except KeyboardInterrupt:
        bar.close()
        rows = write_results(out, jobs)
        print(
            f"\n{args.prog}: interrupted; {rows} finished runs are in {out} and {runs_dir}. "
            "Rerun the same command to train only the missing runs.",
            file=sys.stderr,
        )
        return 130
    bar.close()
    rows = write_results(out, jobs)
    elapsed = time.monotonic() - start
    print(
        f"{args.prog}: {rows}/{len(jobs)} runs in {out} ({len(report.trained)} trained now, "
        f"{done_before} already finished, {len(report.failed)} failed"
        + (f", {len(report.diverged)} diverged" if report.diverged else "")
        + f") in {elapsed:.0f}s"
    )
    if report.failed:
        print(
            f"{args.prog}: failed runs (rerun the same command to retry them): "
            + ", ".join(f.name for f in report.failed),
            file=sys.stderr,
        )
        return 1
    return 0


# ---------------------------------------------------------------------------
# Entry point


def check_paths(args: argparse.Namespace) -> tuple[Path, Path]:
    out, runs_dir = Path(args.out), Path(args.runs_dir)
    if not args.out.endswith(".csv"):
        raise GridError(f"--out={args.out!r} is not accepted; accepted: a path ending in .csv")
    if out.is_dir():
        raise GridError(f"--out={args.out!r} is a directory; accepted: a .csv file path")
    check_directory("--out", out.parent if str(out.parent) else Path("."))
    check_directory("--runs-dir", runs_dir)
    return out, runs_dir


def main(defaults: DriverDefaults, argv: Sequence[str] | None = None) -> int:
    parser = build_parser(defaults)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.prog = parser.prog
    args.dry_run = args.dry_run or dry_run(parser.prog, "list the grid's runs (as --dry-run does)")
    with contextlib.ExitStack() as hold:
        try:
            out, runs_dir = check_paths(args)
            grid = build_grid(args)
            executor = executor_of(args, connect=not args.dry_run)
            planned = make_jobs(grid, runs_dir)
            if not args.dry_run:  # one sweep per runs directory; planned again under the lock
                hold.enter_context(RunsDirLock(runs_dir, shlex.join([parser.prog, *argv])))
                planned = replan(planned)
            stale = [p for p in planned if p.state == "stale"]
            if stale and not args.overwrite:
                raise GridError(
                    f"--runs-dir={args.runs_dir!r} holds {len(stale)} finished run(s) made "
                    f"with other settings or by other code (e.g. {stale[0].run.path}: "
                    f"{stale[0].detail}); accepted: another "
                    f"--runs-dir, or {overwrite_hint()} to retrain them"
                )
        except (GridError, RunsDirBusy, UsageError) as err:
            return fail(parser.prog, err)
        if args.dry_run:
            for item in planned:
                action = "skip" if item.state in ("complete", "diverged") else "train"
                redo = " --overwrite" if action == "train" and item.path.exists() else ""
                print(
                    f"{action:5s} {item.state:10s} {item.name} -> {item.path}{redo}"
                    + (f" ({item.detail})" if item.detail else "")
                )
            return 0
        if out.parent != Path(""):
            out.parent.mkdir(parents=True, exist_ok=True)
        backup = keep_foreign_csv(out, planned)
        if backup is not None:
            print(f"{parser.prog}: {out} held rows this sweep does not make; kept it as {backup}", file=sys.stderr)
        code = execute(planned, args, out, runs_dir, executor)
    if code == 0:
        stem = out.stem[len("results_") :] if out.stem.startswith("results_") else out.stem
        print(f"figures: python -m plots.fig_templates --from {out} --out report/figures/{stem or defaults.figures}")
    return code
