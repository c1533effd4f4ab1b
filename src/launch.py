"""The one job engine: plan -> launch -> (the caller collects results from the run directories).

A `Job` is one run directory to produce by one runner command. `plan` compares each job with
what is on disk (settings as config.json stores them, and the training-code fingerprint):

  absent      nothing there yet                      -> train
  incomplete  started, or lost an output              -> retrain (--overwrite)
  stale       finished, but other settings or code    -> retrain only when the caller allows
  complete    finished with every expected output     -> skip
  diverged    finished with a non-finite loss (final) -> skip

`run_jobs` trains the jobs that need it as child processes (`python -m <runner> ...`),
`workers` at a time (one thread each when several run, a persistent XLA compilation cache
shared by the runs), longest first, each one's output in `<runs_dir>/logs/<name>.log`;
SIGINT/SIGTERM stop only its own children. eval_order, eval_noise and the reproduction use it.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from src import rundir as names
from src.cli import PARENT_ENV
from src.provenance import ROOT, code_fingerprint
from src.rundir import RunDir
from utils_log import atomic_write_text, to_jsonable

LOGS = "logs"              # <runs-dir>/logs/<run>.log: each run's full output
JAX_CACHE = ".jax_cache"   # <runs-dir>/.jax_cache unless JAX_COMPILATION_CACHE_DIR is set
TODO_STATES = ("absent", "incomplete", "stale")
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
}
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
TAIL_LINES = 15


def normalise(obj) -> dict:
    """A settings mapping as config.json stores it (JSON round trip), for comparisons."""
    return json.loads(json.dumps(to_jsonable(obj), sort_keys=True))


@dataclass
class Job:
    name: str                       # the run directory's name (under the runs directory)
    runner: str                     # python -m <runner>
    argv: list[str]                 # runner flags, without --out/--overwrite/--quiet
    path: Path
    settings: dict                  # the settings the runner will resolve (normalised)
    with_attention: bool | None = None   # attention outputs expected (None: as the run says)
    cost: float = 1.0               # relative cost, to start the longest jobs first
    state: str = "absent"
    detail: str = ""
    seconds: float = 0.0            # wall time of its process when trained now
    returncode: int | None = None
    output: str = ""

    @property
    def run(self) -> RunDir:
        return RunDir(self.path)

    def command(self, overwrite: bool) -> list[str]:
        return ([sys.executable, "-m", self.runner] + list(self.argv)
                + ["--out", str(self.path), "--quiet"] + (["--overwrite"] if overwrite else []))


def job_state(job: Job) -> tuple[str, str]:
    """(state, detail): what is on disk for `job`, compared with what it asks for."""
    run = job.run
    if not run.path.exists():
        return "absent", ""
    if not run.path.is_dir():
        return "incomplete", "not a directory"
    try:
        config = run.load_config()
        stored = config.get("settings")
    except (names.RunDirError, ValueError, OSError, AttributeError):
        return "incomplete", f"no readable {names.CONFIG}"
    finished = run.is_trained() or run.is_diverged()
    if finished and normalise(stored) != job.settings:
        return "stale", "its settings differ from this plan's"
    if finished and config.get("code_fingerprint") != code_fingerprint():
        return "stale", ("it was trained by different code (src/, baselines/ or runners/ changed "
                         "since, or it predates code fingerprints)")
    if run.is_diverged():
        return "diverged", ""
    missing = run.missing_outputs(with_attention=job.with_attention or None)
    if run.is_trained() and not missing:
        return "complete", ""
    return "incomplete", ("missing " + ", ".join(missing[:3]) + ("..." if len(missing) > 3 else "")
                          if missing else f"{names.SUMMARY} says not complete")


def plan(jobs: Sequence[Job]) -> list[Job]:
    for job in jobs:
        job.state, job.detail = job_state(job)
    return list(jobs)


def child_env(runs_dir: Path, single_thread: bool) -> dict:
    """The runners' environment: the repo on PYTHONPATH, a persistent XLA compilation cache
    shared by the runs (same programs, same results, much less compile time), one thread
    each when several run at once (`single_thread`)."""
    env = dict(os.environ)
    env[PARENT_ENV] = str(os.getpid())     # the runner dies with this driver (src.cli.guarded)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if not env.get("JAX_COMPILATION_CACHE_DIR"):
        env["JAX_COMPILATION_CACHE_DIR"] = str((runs_dir / JAX_CACHE).resolve())
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    if single_thread:
        env.update(SINGLE_THREAD_ENV)
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA).strip()
    return env


def use_compilation_cache(runs_dir: Path) -> None:
    """This process uses the persistent XLA compilation cache its runs share (child_env's);
    settings from the environment win."""
    import jax
    env = child_env(runs_dir, single_thread=False)
    for var, option, cast in (("JAX_COMPILATION_CACHE_DIR", "jax_compilation_cache_dir", str),
                              ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                               "jax_persistent_cache_min_compile_time_secs", float),
                              ("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
                               "jax_persistent_cache_min_entry_size_bytes", int)):
        if var not in os.environ:
            if var == "JAX_COMPILATION_CACHE_DIR":
                Path(env[var]).mkdir(parents=True, exist_ok=True)
            jax.config.update(option, cast(env[var]))


LOCK = ".lock"      # <runs-dir>/.lock: held (flock) by the one sweep or study using the folder


class RunsDirBusy(Exception):
    """Another live sweep or study holds the runs directory (one-line message)."""


class RunsDirLock:
    """An exclusive lock on a runs directory for as long as a sweep or study trains into it.
    The kernel releases it when the holder dies (flock), so a killed driver never leaves a
    stale lock; the file names the holder (pid, command, start) for the refusal message."""

    def __init__(self, runs_dir: Path, command: str):
        self.path = runs_dir / LOCK
        self.command = command
        self.handle = None

    def __enter__(self) -> "RunsDirLock":
        import fcntl
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip().replace("\n", " ") or "another process"
            handle.close()
            raise RunsDirBusy(f"--runs-dir={str(self.path.parent)!r} is in use by {holder}; "
                              "accepted: wait for it to finish, or another --runs-dir") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} ({self.command[:200]}) since "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        self.handle = handle
        return self

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.close()     # releases the flock
            self.handle = None


@dataclass
class Launcher:
    """Runs commands as child processes (several threads may call `run` at once), writes each
    one's output to `log_dir/<name>.log`, and stops only its own children on request."""
    env: dict
    log_dir: Path
    stopping: threading.Event = field(default_factory=threading.Event)
    live: set = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, command: list[str], name: str) -> tuple[int | None, str, float]:
        """(exit code, output, seconds); exit code None when stopping had begun."""
        start = time.monotonic()
        with self.lock:   # no process starts once terminate_all has begun
            if self.stopping.is_set():
                return None, "", 0.0
            # the runner dies with this process: child_env's PARENT_ENV, src.cli.die_with_parent
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, text=True, env=self.env)
            self.live.add(proc)
        try:
            output, _ = proc.communicate()
        finally:
            with self.lock:
                self.live.discard(proc)
        seconds = time.monotonic() - start
        try:
            atomic_write_text(self.log_dir / f"{name}.log",
                              "$ " + shlex.join(command) + "\n" + (output or ""))
        except OSError:
            pass
        return proc.returncode, output or "", seconds

    def run_job(self, job: Job, overwrite: bool) -> tuple[int | None, str, float]:
        return self.run(job.command(overwrite), job.name)

    def terminate_all(self) -> None:
        with self.lock:
            self.stopping.set()
            procs = list(self.live)
        stop_processes(procs)


EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Executor:
    """Where runs execute: `local` child processes (default) or Ray tasks (src/ray_executor.py)."""
    name: str = "local"
    address: str | None = None     # Ray: a running cluster's address; None starts a local instance
    cpus_per_run: float = 1.0


def add_executor_flags(parser) -> None:
    """--executor, --address, --cpus-per-run: the same on every sweep and study."""
    from src.cli import number_in
    group = parser.add_argument_group("executor")
    group.add_argument("--executor", choices=EXECUTORS, default="local",
                       help="local child processes (default) or one Ray task per run")
    group.add_argument("--address", default=None,
                       help="Ray cluster address (default: start a local Ray instance)")
    group.add_argument("--cpus-per-run", "--cpus_per_run", dest="cpus_per_run", default=1.0,
                       type=number_in(0, 1024, low_open=True), help="Ray CPUs per run (default 1)")


def executor_of(args, connect: bool = True) -> Executor:
    """The Executor of parsed flags (UsageError, one line, when Ray is asked for but missing)."""
    from src.cli import UsageError
    executor = Executor(getattr(args, "executor", "local"), getattr(args, "address", None),
                        getattr(args, "cpus_per_run", 1.0))
    if executor.address and executor.name != "ray":
        raise UsageError(f"--address={executor.address!r} needs --executor ray")
    if executor.name == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise UsageError("--executor ray: Ray is not installed; accepted: pip install -r "
                             "requirements.txt, or --executor local") from None
        if connect and executor.address:     # a cluster must answer before any work starts
            from src.ray_executor import connect as join
            try:
                join(executor.address)
            except ConnectionError as err:
                raise UsageError(str(err)) from None
    return executor


def stop_processes(procs, grace_s: float = 30.0) -> None:
    """SIGTERM every process still running, wait up to `grace_s` for each, then SIGKILL."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()


def tail(text: str, lines: int = TAIL_LINES) -> str:
    kept = [line for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return "\n".join("    " + line for line in kept[-lines:])


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def announce(say: Callable[[str], None], prog: str, what: str, jobs: Sequence[Job],
             todo: Sequence[Job], workers: int, runs_dir: Path) -> None:
    """The plan in words: how many runs are done and to train, and why each redo."""
    say(f"{prog}: {len(jobs)} {what}: {len(jobs) - len(todo)} already finished, "
        f"{len(todo)} to train ({workers} at a time) -> {runs_dir}")
    for job in todo:
        if job.state != "absent":
            say(f"  redo {job.name} ({job.state}: {job.detail}) with --overwrite")


@dataclass
class Report:
    trained: list[Job] = field(default_factory=list)
    diverged: list[Job] = field(default_factory=list)
    failed: list[Job] = field(default_factory=list)


def run_jobs(todo: Sequence[Job], *, workers: int, runs_dir: Path,
             say: Callable[[str], None],
             on_done: Callable[[Job], None] | None = None,
             executor: Executor = Executor()) -> Report:
    """Train `todo` (longest first), `workers` at a time. After each job its state is
    re-planned and `on_done(job)` is called. KeyboardInterrupt (SIGINT, or SIGTERM turned
    into it) stops the children and propagates."""
    report = Report()
    if not todo:
        return report
    runs_dir.mkdir(parents=True, exist_ok=True)
    if executor.name == "ray":
        from src.ray_executor import RayLauncher
        launcher = RayLauncher(child_env(runs_dir, single_thread=True), runs_dir / LOGS,
                               executor.address, executor.cpus_per_run)   # one thread per task
    else:
        launcher = Launcher(child_env(runs_dir, single_thread=workers > 1), runs_dir / LOGS)

    def train(job: Job) -> Job:
        job.returncode, job.output, job.seconds = launcher.run_job(job, overwrite=job.path.exists())
        return job

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(train, j) for j in sorted(todo, key=lambda j: j.cost, reverse=True)]
        for future in as_completed(futures):
            job = future.result()
            job.state, job.detail = job_state(job)
            if job.returncode == 0 and job.state == "complete":
                report.trained.append(job)
            elif job.state == "diverged":
                report.trained.append(job)
                report.diverged.append(job)
                say(f"  diverged {job.name} (kept; its summary says status 'diverged')")
            else:
                why = (f"exit code {job.returncode}" if job.returncode
                       else f"finished but incomplete ({job.detail})")
                report.failed.append(job)
                say(f"  FAILED {job.name}: {why}; log {launcher.log_dir / (job.name + '.log')}\n"
                    + tail(job.output))
            if on_done is not None:
                on_done(job)
    except KeyboardInterrupt:
        launcher.terminate_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    pool.shutdown(wait=True)
    return report


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
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n",
                            extrasaction="ignore")
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
    from utils_log import atomic_write_bytes
    atomic_write_bytes(backup, path.read_bytes())
    return backup


def refuse_stale(jobs: Sequence[Job], runs_dir: Path, overwrite: bool) -> None:
    """UsageError (one line) when finished runs were made with other settings or code and
    `overwrite` does not allow retraining them."""
    from src.cli import UsageError
    stale = [j for j in jobs if j.state == "stale"]
    if stale and not overwrite:
        raise UsageError(f"--runs-dir={str(runs_dir)!r} holds {len(stale)} run(s) made with other "
                         f"settings or code (e.g. {stale[0].path}); accepted: another --runs-dir, "
                         "or --overwrite to retrain them")


def run_study(prog: str, jobs: Sequence[Job], runs_dir: Path, workers: int,
              write_report: Callable[[float, dict], list[Path]],
              executor: Executor = Executor()) -> int:
    """Train what a study's plan needs, then `write_report(seconds, git state at the start)`;
    the exit code (0, 1 when runs failed, 130 when interrupted)."""
    from src.provenance import git_commit
    use_compilation_cache(runs_dir)
    head, start = git_commit(), time.monotonic()     # git state before anything is written
    todo = [j for j in jobs if j.state in TODO_STATES]
    workers = max(1, min(workers, len(todo)))
    say = lambda message: print(message, flush=True)
    announce(say, prog, "runs", jobs, todo, workers, runs_dir)
    try:
        report = run_jobs(todo, workers=workers, runs_dir=runs_dir, say=say, executor=executor)
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted; finished runs are kept in {runs_dir}; rerun to continue",
              file=sys.stderr)
        return 130
    if report.failed:
        print(f"{prog}: {len(report.failed)} runs failed: "
              + ", ".join(j.name for j in report.failed), file=sys.stderr)
        return 1
    written = write_report(time.monotonic() - start, head)
    print(f"{prog}: wrote {', '.join(str(p) for p in written)} ({time.monotonic() - start:.0f}s)")
    return 0


def study_parser(prog: str, doc: str, quick_help: str):
    """The flags every study takes: --quick, --runs-dir, --report-dir, --jobs, --overwrite."""
    from src.cli import OneLineParser, int_at_least
    parser = OneLineParser(prog=prog, description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--runs-dir", "--runs_dir", dest="runs_dir", default=None,
                        help="run directories (default: runs/<study>, quick: runs/<study>_quick)")
    parser.add_argument("--report-dir", "--report_dir", dest="report_dir", default=None,
                        help="report (default: report; quick: report/quick)")
    parser.add_argument("--jobs", type=int_at_least(1), default=2, help="runs in parallel")
    parser.add_argument("--overwrite", action="store_true",
                        help="retrain runs made with other settings or code (otherwise refused)")
    add_executor_flags(parser)
    return parser


def study_dirs(args, study: str) -> tuple[Path, Path]:
    """(runs_dir, report_dir) of a study's flags; UsageError when one is a file."""
    from src.cli import UsageError
    runs_dir = Path(args.runs_dir or (f"runs/{study}_quick" if args.quick else f"runs/{study}"))
    report_dir = Path(args.report_dir or ("report/quick" if args.quick else "report"))
    for flag, path in (("--runs-dir", runs_dir), ("--report-dir", report_dir)):
        if path.exists() and not path.is_dir():
            raise UsageError(f"{flag}={str(path)!r} is a file; accepted: a directory path")
    return runs_dir, report_dir


def finish_study(prog: str, argv: Sequence[str], args, runs_dir: Path, report_dir: Path,
                 make_jobs: Callable[[], list[Job]], write_report: Callable[..., list[Path]]) -> int:
    """Plan (one-line refusal of stale runs), train what is missing, write the report."""
    import shlex

    from src.cli import UsageError, fail
    command = " ".join([prog, shlex.join(argv)]).strip()
    with contextlib.ExitStack() as hold:
        try:   # one study or sweep per runs directory; planned again under the lock
            executor = executor_of(args)
            jobs = make_jobs()            # validates every run's settings before the lock
            hold.enter_context(RunsDirLock(runs_dir, command))
            jobs = plan(jobs)             # what is on disk now that no one else writes there
            refuse_stale(jobs, runs_dir, args.overwrite)
        except (UsageError, RunsDirBusy) as err:
            return fail(prog, err)
        return run_study(prog, jobs, runs_dir, args.jobs, lambda seconds, head: write_report(
            jobs, report_dir, quick=args.quick, seconds=seconds, command=command, head=head),
            executor=executor)
