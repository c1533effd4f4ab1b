"""What every study and sweep shares: the executor flags, a study's flags and directories, and the
one front end — a study is a list of Jobs (each one Settings), planned under the runs-directory
lock, trained by an executor, then reported.

    jobs = [Job(name, settings, runs_dir / name, cost=...), ...]
    return finish_study(PROG, argv, args, runs_dir, report_dir, lambda: jobs, write_report)

`write_report(run)` gets the StudyRun (src/jobs/declared.py): the jobs, the report directory and how
the study ran. A study declared as data (src/jobs/declared.py's Study) comes here through its
command.

Every output location (runs directory, report directory) is checked before any work.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from src.flags import OneLineParser, UsageError, dry_run, fail, int_at_least, number_in, read_user_file, summary
from src.flags import add_both_spellings
from src.jobs.declared import Study, StudyRun, grid_jobs, prog_of
from src.jobs.engine import TODO_STATES, Job, announce, plan, refuse_stale, run_jobs, use_compilation_cache
from src.jobs.runs_lock import RunsDirBusy, RunsDirLock
from src.registry import Choice, registry
from src.settings import SettingsError


def add_executor_flags(parser) -> None:
    """--executor, --address, --cpus-per-run, --seeds-together, --share-cores: the same on every sweep
    and study."""
    group = parser.add_argument_group("executor")
    group.add_argument(
        "--executor",
        choices=registry("executor").names(),
        default="local",
        help="local child processes (default) or one Ray task per run",
    )
    group.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray instance)")
    add_both_spellings(
        group,
        "--cpus-per-run",
        default=None,
        type=number_in(0, 1024, low_open=True),
        help="Ray CPUs per run (default 1)",
    )
    add_both_spellings(
        group,
        "--seeds-together",
        action="store_const",
        const=True,
        default=None,
        help="local: train the runs that differ only in their seed as one program "
        "(src/together.py; pays on a GPU, not on a CPU; equal to float32 rounding)",
    )
    add_both_spellings(
        group,
        "--share-cores",
        action="store_const",
        const=True,
        default=None,
        help="local: runs side by side share every core, unpinned, as they did before "
        "(default: one core each: faster, and rounded alike on any machine)",
    )


def executor_of(args, connect: bool = True) -> Choice:
    """The executor of parsed flags: its registry entry with the options the flags set
    (UsageError, one line, for a flag the executor does not take or one it cannot honour)."""
    entry = registry("executor").get(getattr(args, "executor", "local"))
    flags = {
        "address": "--address",
        "cpus_per_run": "--cpus-per-run",
        "seeds_together": "--seeds-together",
        "share_cores": "--share-cores",
    }
    given = {k: getattr(args, k, None) for k in flags}
    fields = set(entry.options.__dataclass_fields__)
    for key, value in given.items():
        if value is not None and key not in fields:
            takers = [e.name for e in registry("executor") if key in e.options.__dataclass_fields__]
            raise UsageError(f"{flags[key]}={value!r} needs --executor {' or '.join(takers)}")
    options = entry.options(**{k: v for k, v in given.items() if v is not None})
    try:
        if hasattr(options, "check"):
            options.check()
        if hasattr(options, "prepare"):
            options.prepare(connect)
    except (ValueError, ConnectionError) as err:
        raise UsageError(str(err)) from None
    return Choice(entry.name, options)


def read_settings(path: str):
    """A study's base Settings from a file in the workbench's own schema, YAML (safe loader) or
    JSON: the `settings` mapping of a run's config.json, with `system` and any keys whose defaults
    differ (the rest take their defaults), read and validated by its system. UsageError (one
    line, naming the file, the key, the value and what is accepted) for anything else."""
    from src.systems import settings_from_file

    return settings_from_file(read_settings_mapping(path), f"--config={path!r}")


def read_settings_mapping(path: str):
    """The raw mapping of read_settings' file, not yet validated (a study that keeps keys of its own
    beside the settings takes them out before settings_from_file); UsageError, one line, for a file
    that is not one."""
    from src.files import loads_json
    from src.provenance import checkout_path
    from src.yaml_includes import load

    if str(path).endswith(".json"):  # JSON by its suffix: YAML 1.1 reads a JSON number such as 1e-05 as text
        text = read_user_file(checkout_path(path), "--config", "a run's config.json `settings`")
        try:
            raw = loads_json(text)
        except ValueError as err:  # JSONDecodeError, or nested too deeply
            raise UsageError(
                f"--config={path!r} is not JSON ({err}); accepted: a run's config.json `settings`"
            ) from None
    else:  # a regular file, safe loader, bounded (like every YAML config here)
        raw = load(path)
    if isinstance(raw, dict) and "system" not in raw:
        raise UsageError(
            f"--config={path!r} holds no settings mapping with a `system` key; accepted: a run's "
            "config.json `settings` (any key left out takes its default)"
        )
    return raw


def study_parser(prog: str, doc: str, quick_help: str) -> OneLineParser:
    """The flags every study takes: --quick, --runs-dir, --report-dir, --jobs, --overwrite."""
    parser = OneLineParser(prog=prog, description=summary(doc))
    parser.add_argument("--quick", action="store_true", help=quick_help)
    add_both_spellings(
        parser,
        "--runs-dir",
        default=None,
        help="run directories (default: runs/<study>, quick: runs/<study>_quick)",
    )
    add_both_spellings(
        parser,
        "--report-dir",
        default=None,
        help="report (default: report; quick: report/quick)",
    )
    parser.add_argument("--jobs", type=int_at_least(1), default=2, help="runs in parallel")
    parser.add_argument(
        "--overwrite", action="store_true", help="retrain runs made with other settings or code (otherwise refused)"
    )
    add_executor_flags(parser)
    return parser


def check_directory(flag: str, path: Path) -> None:
    """UsageError (one line) unless `path` is, or can be made, a directory this process can write
    in: a probe file is written and removed in it, or in the folder it would be created in
    (nothing is left behind)."""
    import tempfile

    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise UsageError(f"{flag}={str(path)!r}: {existing} is a file; accepted: a directory path")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".probe-"):
            pass
    except OSError as err:
        raise UsageError(
            f"{flag}={str(path)!r} cannot be written ({err.strerror or err}); accepted: a writable directory"
        ) from None


def study_dirs(args, study: str) -> tuple[Path, Path]:
    """(runs_dir, report_dir) of a study's flags, both checked before any work."""
    runs_dir = Path(args.runs_dir or (f"runs/{study}_quick" if args.quick else f"runs/{study}"))
    report_dir = Path(args.report_dir or ("report/quick" if args.quick else "report"))
    check_directory("--runs-dir", runs_dir)
    check_directory("--report-dir", report_dir)
    return runs_dir, report_dir


def parse_study(parser: OneLineParser, argv: Sequence[str] | None, study: str):
    """A study's command line: argv (sys.argv's when None) parsed by `parser` (study_parser's, with
    any flags of the study's own), then its (runs_dir, report_dir) checked (UsageError, one line).
    Returns (argv as a list, the flags, runs_dir, report_dir)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    return (argv, args, *study_dirs(args, study))


def headline(path: Path) -> str:
    """A run's headline number from its metrics_summary.json: eval_loss, else the first eval_*
    number, else '' (no summary, or nothing to quote)."""
    from src.files import read_json
    from src.rundir import names

    try:
        summary = read_json(path / names.SUMMARY)
    except (OSError, ValueError):
        return ""
    numbers = {
        k: v
        for k, v in summary.items()
        if k.startswith("eval_") and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    key = "eval_loss" if "eval_loss" in numbers else next(iter(numbers), None)
    return f" {key} {numbers[key]:.4g}" if key else ""


def finished_line(say: Callable[[str], None], todo: Sequence[Job], start: float) -> Callable[[Job], None]:
    """on_done for run_jobs: one line per run trained now, `  done NAME (12s; eval_loss 0.1234)
    [3/10, about 2 min left]`, the time left from the jobs' costs done so far and the wall time."""
    total = sum(j.cost for j in todo) or 1.0
    done: list[Job] = []

    def line(job: Job) -> None:
        done.append(job)
        if job.returncode != 0 or job.state not in ("complete", "diverged"):
            return  # run_jobs says FAILED with its log
        spent = sum(j.cost for j in done)
        left = (time.monotonic() - start) * (total - spent) / spent if spent < total else 0.0
        eta = f", about {_duration(left)} left" if left > 0 else ""
        say(f"  done {job.name} ({job.seconds:.0f}s;{headline(job.path)}) [{len(done)}/{len(todo)}{eta}]")

    return line


def _duration(seconds: float) -> str:
    return (
        f"{seconds:.0f} s"
        if seconds < 120
        else (f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h")
    )


def run_study(
    prog: str,
    jobs: Sequence[Job],
    runs_dir: Path,
    workers: int,
    write_report: Callable[[float, dict], list[Path]],
    executor: Choice | None = None,
    quiet: bool = False,
) -> int:
    """Train what a study's plan needs, then `write_report(seconds, git state at the start)`;
    the exit code (0, 1 when runs failed, 130 when interrupted). `quiet`: no progress lines."""
    from src.provenance import git_commit

    use_compilation_cache(runs_dir)
    head, start = git_commit(), time.monotonic()  # git state before anything is written
    todo = [j for j in jobs if j.state in TODO_STATES]
    workers = max(1, min(workers, len(todo)))
    say = (lambda message: None) if quiet else (lambda message: print(message, flush=True))
    announce(say, prog, "runs", jobs, todo, workers, runs_dir)
    try:
        report = run_jobs(
            todo,
            workers=workers,
            runs_dir=runs_dir,
            say=say,
            executor=executor,
            on_done=finished_line(say, todo, start),
        )
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted; finished runs are kept in {runs_dir}; rerun to continue", file=sys.stderr)
        return 130
    if report.failed:
        print(f"{prog}: {len(report.failed)} runs failed: " + ", ".join(j.name for j in report.failed), file=sys.stderr)
        return 1
    written = write_report(time.monotonic() - start, head)
    print(f"{prog}: wrote {', '.join(str(p) for p in written)} ({time.monotonic() - start:.0f}s)")
    return 0


def finish_study(
    prog: str,
    argv: Sequence[str],
    args,
    runs_dir: Path,
    report_dir: Path,
    make_jobs: Callable[[], list[Job]],
    write_report: Callable[[StudyRun], list[Path]],
    quiet: bool = False,
) -> int:
    """Plan (one-line refusal of stale runs), train what is missing, write the report:
    write_report(StudyRun(jobs, report_dir, quick, seconds, command, head, args))."""
    command = " ".join([prog, shlex.join(argv)]).strip()
    with contextlib.ExitStack() as hold:
        try:  # one study or sweep per runs directory; planned again under the lock
            executor = executor_of(args)
            jobs = make_jobs()  # every run's settings validated before the lock
            if dry_run(prog, f"make {len(jobs)} runs in {runs_dir} and write the report into {report_dir}"):
                return 0
            hold.enter_context(RunsDirLock(runs_dir, command))
            jobs = plan(jobs)  # what is on disk now that no one else writes there
            refuse_stale(jobs, runs_dir, args.overwrite)
        except (UsageError, RunsDirBusy, SettingsError) as err:  # e.g. a run that cannot be made
            return fail(prog, err)
        return run_study(
            prog,
            jobs,
            runs_dir,
            args.jobs,
            lambda seconds, head: write_report(StudyRun(jobs, report_dir, args.quick, seconds, command, head, args)),
            executor=executor,
            quiet=quiet,
        )


def study_command(study: Study) -> Callable[[Sequence[str] | None], int]:
    """main(argv) of the study's command line: its flags (study_parser's and its own), then plan,
    train and report (src.jobs.study.finish_study)."""

    def main(argv: Sequence[str] | None = None) -> int:
        prog = prog_of(study)
        parser = study.parser() if study.parser else study_parser(prog, study.doc, study.quick_help)
        study.flags(parser)
        argv_ = list(sys.argv[1:] if argv is None else argv)
        flags = parser.parse_args(argv_)
        try:
            study.prepare(flags)  # before the places are checked: it may set their defaults
            runs_dir, report_dir = study_dirs(flags, study.runs_name(flags) if study.runs_name else study.name)
            study.check(flags), study.seeds(flags), study.learning_rates(flags)  # one line, before any work
        except UsageError as err:
            return fail(prog, err)
        return finish_study(
            prog,
            argv_,
            flags,
            runs_dir,
            report_dir,
            lambda: grid_jobs(study, flags, runs_dir),
            study.report,
            quiet=bool(getattr(flags, "quiet", False)),
        )

    main.__doc__ = f"The command line of {prog_of(study)} (src/jobs/declared.py)."
    return main


def run_as_command(study: Study) -> None:
    """The study's command as a module's entry point: its exit code through the process guard
    (src/process.py)."""
    from src.process import guarded

    sys.exit(guarded(study_command(study)))
