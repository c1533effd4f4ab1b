"""The one job engine: plan -> launch -> (the caller collects results from the run directories).

A `Job` is one run directory to produce from one Settings (any system). `plan` compares each
job with what is on disk (the settings config.json stores, and the training-code fingerprint):

  absent      nothing there yet                      -> train
  incomplete  started, or lost an output              -> retrain (--overwrite)
  stale       finished, but other settings or code    -> retrain only when the caller allows
  complete    finished with every expected output     -> skip
  diverged    finished with a non-finite loss (final) -> skip

`run_jobs` trains the jobs that need it with an executor (registry "executor": src/jobs/local.py,
src/jobs/ray.py), `workers` at a time, longest first; every run is `python -m runners.run
--config - --out DIR` reading its settings on standard input, its output in
`<runs_dir>/logs/<name>.log`. SIGINT/SIGTERM stop only its own children.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from src.flags import UsageError, overwrite_hint
from src.process import PARENT_ENV
from src.files import to_jsonable
from src.provenance import ROOT, code_fingerprint
from src.registry import Choice, registry
from src.rundir import RunDir, RunDirError, names
from src.settings import Settings

LOGS = "logs"  # <runs-dir>/logs/<run>.log: each run's full output
JAX_CACHE = ".jax_cache"  # <runs-dir>/.jax_cache unless JAX_COMPILATION_CACHE_DIR is set
TODO_STATES = ("absent", "incomplete", "stale")
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
}
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
TAIL_LINES = 15
RUNNER = "runners.run"  # every job runs through the one command that reads settings


def normalise(obj) -> dict:
    """A settings mapping as config.json stores it (JSON round trip), for comparisons."""
    return json.loads(json.dumps(to_jsonable(obj), sort_keys=True))


@dataclass
class Job:
    name: str  # the run directory's name (under the runs directory)
    settings: Settings  # validated
    path: Path
    cost: float = 1.0  # relative cost, to start the longest jobs first
    analyses: tuple[str, ...] | None = None  # the analyses it runs at the end (None: every one that applies)
    state: str = "absent"
    detail: str = ""
    seconds: float = 0.0  # wall time of its process when trained now
    returncode: int | None = None
    output: str = ""

    @property
    def run(self) -> RunDir:
        return RunDir(self.path)

    @property
    def paths(self) -> list[Path]:
        """The run directories this job writes."""
        return [self.path]

    @property
    def expected(self) -> dict:
        """The settings as its config.json must store them."""
        return normalise(self.settings.to_dict())

    def settings_json(self) -> str:
        return json.dumps({"settings": self.expected})

    def command(self, overwrite: bool, out: Path | None = None) -> list[str]:
        """The child command; its settings arrive on standard input (`settings_json`). `out`: where
        it writes, the job's own path unless given (a Ray worker's temporary directory)."""
        return (
            [sys.executable, "-m", RUNNER, "--config", "-", "--out", str(out or self.path), "--quiet"]
            + (["--overwrite"] if overwrite else [])
            + self.analyses_flag()
        )

    def analyses_flag(self) -> list[str]:
        """The runner's flag for `analyses`: none (every one that applies), --skip_analysis (()),
        or --analyses NAMES."""
        if self.analyses is None:
            return []
        return ["--analyses", ",".join(self.analyses)] if self.analyses else ["--skip_analysis"]


@dataclass
class GroupJob(Job):
    """Runs that differ only in their seed, trained as one program in one process (src/together.py):
    `python -m runners.run --together - --quiet` reading every member's settings and directory."""

    members: list = field(default_factory=list)

    @property
    def paths(self) -> list[Path]:
        return [m.path for m in self.members]

    def settings_json(self) -> str:
        return json.dumps({"runs": [{"settings": m.expected, "out": str(m.path)} for m in self.members]})

    def command(self, overwrite: bool, out: Path | None = None) -> list[str]:
        if out is not None:
            raise ValueError("a group's runs are written to their own paths (its settings name them)")
        return (
            [sys.executable, "-m", RUNNER, "--together", "-", "--quiet"]
            + (["--overwrite"] if overwrite else [])
            + self.analyses_flag()
        )


def group_seeds(todo: Sequence[Job]) -> list[Job]:
    """`todo` with the jobs that differ only in their seed (and whose system trains seeds
    together) merged into GroupJobs; every other job as it was."""
    from src.together import settings_without_seed, together_refusal

    groups: dict[str, list[Job]] = {}
    for job in todo:
        key = json.dumps(to_jsonable(settings_without_seed(job.settings)), sort_keys=True)
        groups.setdefault(key, []).append(job)
    out: list[Job] = []
    for members in groups.values():
        if len(members) > 1 and together_refusal([m.settings for m in members]) is None:
            out.append(
                GroupJob(
                    f"{members[0].name}+{len(members) - 1}",
                    members[0].settings,
                    members[0].path,
                    cost=sum(m.cost for m in members),
                    members=members,
                    analyses=members[0].analyses,
                )
            )
        else:
            out.extend(members)
    return out


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
    except (RunDirError, ValueError, OSError, AttributeError):
        return "incomplete", f"no readable {names.CONFIG}"
    finished = run.is_trained() or run.is_diverged()
    expected = {k: v for k, v in job.expected.items() if k != "schema_version"}
    if finished and {k: v for k, v in normalise(stored).items() if k != "schema_version"} != expected:
        return "stale", "its settings differ from this plan's"
    if finished and config.get("code_fingerprint") != code_fingerprint():
        return "stale", (
            "it was trained by different code (src/, baselines/ or runners/ changed "
            "since, or it predates code fingerprints)"
        )
    if run.is_diverged():
        return "diverged", ""
    missing = run.missing_outputs()
    if run.is_trained() and not missing:
        return "complete", ""
    return "incomplete", (
        "missing " + ", ".join(missing[:3]) + ("..." if len(missing) > 3 else "")
        if missing
        else f"{names.SUMMARY} says not complete"
    )


def plan(jobs: Sequence[Job]) -> list[Job]:
    for job in jobs:
        job.state, job.detail = job_state(job)
    return list(jobs)


def child_env(runs_dir: Path, single_thread: bool) -> dict:
    """The runs' environment: the repo on PYTHONPATH, a persistent XLA compilation cache shared
    by the runs (same programs, same results, much less compile time), one thread each when
    several run at once (`single_thread`)."""
    env = dict(os.environ)
    env[PARENT_ENV] = str(os.getpid())  # the runner dies with this driver (src.process.guarded)
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
    for var, option, cast in (
        ("JAX_COMPILATION_CACHE_DIR", "jax_compilation_cache_dir", str),
        ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "jax_persistent_cache_min_compile_time_secs", float),
        ("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "jax_persistent_cache_min_entry_size_bytes", int),
    ):
        if var not in os.environ:
            if var == "JAX_COMPILATION_CACHE_DIR":
                Path(env[var]).mkdir(parents=True, exist_ok=True)
            jax.config.update(option, cast(env[var]))


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


def announce(
    say: Callable[[str], None],
    prog: str,
    what: str,
    jobs: Sequence[Job],
    todo: Sequence[Job],
    workers: int,
    runs_dir: Path,
) -> None:
    """The plan in words: how many runs are done and to train, and why each redo."""
    say(
        f"{prog}: {len(jobs)} {what}: {len(jobs) - len(todo)} already finished, "
        f"{len(todo)} to train ({workers} at a time) -> {runs_dir}"
    )
    for job in todo:
        if job.state != "absent":
            say(f"  redo {job.name} ({job.state}: {job.detail}) with --overwrite")


@dataclass
class Report:
    trained: list[Job] = field(default_factory=list)
    diverged: list[Job] = field(default_factory=list)
    failed: list[Job] = field(default_factory=list)


def launcher_of(executor: Choice, runs_dir: Path, workers: int):
    """The executor's launcher: `run_job(job, overwrite) -> (exit code, output, seconds)` and
    `terminate_all()`; its logs under <runs_dir>/logs."""
    entry = registry("executor").get(executor.name)
    return entry.build(executor.options, runs_dir=runs_dir, log_dir=runs_dir / LOGS, workers=workers)


def run_jobs(
    todo: Sequence[Job],
    *,
    workers: int,
    runs_dir: Path,
    say: Callable[[str], None],
    on_done: Callable[[Job], None] | None = None,
    executor: Choice | None = None,
) -> Report:
    """Train `todo` (longest first), `workers` at a time; when the executor's options say
    `seeds_together`, the jobs that differ only in their seed as one program each (`group_seeds`).
    After each job its state is re-planned and `on_done(job)` is called (for every member of a
    group). KeyboardInterrupt (SIGINT, or SIGTERM turned into it) stops the children and propagates."""
    report = Report()
    if not todo:
        return report
    executor = executor or Choice("local", registry("executor").get("local").default_options())
    if getattr(executor.options, "seeds_together", False):
        todo = group_seeds(todo)
    runs_dir.mkdir(parents=True, exist_ok=True)
    launcher = launcher_of(executor, runs_dir, workers)
    log_of = {m.name: g.name for g in todo if isinstance(g, GroupJob) for m in g.members}

    def finished(job: Job) -> None:
        record_finished(job, report, runs_dir / LOGS / (log_of.get(job.name, job.name) + ".log"), say)
        if on_done is not None:
            on_done(job)

    train_in_pool(todo, launcher, workers, finished)
    return report


def record_finished(job: Job, report: Report, log: Path, say: Callable[[str], None]) -> None:
    """Re-plan a trained job's state and file it in `report` as trained, diverged or failed."""
    job.state, job.detail = job_state(job)
    if job.returncode == 0 and job.state == "complete":
        report.trained.append(job)
    elif job.state == "diverged":
        report.trained.append(job)
        report.diverged.append(job)
        say(f"  diverged {job.name} (kept; its summary says status 'diverged')")
    else:
        why = f"exit code {job.returncode}" if job.returncode else f"finished but incomplete ({job.detail})"
        report.failed.append(job)
        say(f"  FAILED {job.name}: {why}; log {log}\n" + tail(job.output))


def train_in_pool(todo: Sequence[Job], launcher, workers: int, finished: Callable[[Job], None]) -> None:
    """Train `todo` (longest first), `workers` at a time, calling `finished` for each job as it ends (for
    each member of a group). KeyboardInterrupt stops the children and propagates."""

    def train(job: Job) -> Job:
        job.returncode, job.output, job.seconds = launcher.run_job(job, overwrite=any(p.exists() for p in job.paths))
        return job

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(train, j) for j in sorted(todo, key=lambda j: j.cost, reverse=True)]
        for future in as_completed(futures):
            done = future.result()
            if isinstance(done, GroupJob):  # each member as if it had run alone
                for job in done.members:
                    job.returncode, job.output = done.returncode, done.output
                    job.seconds = done.seconds / len(done.members)
                    finished(job)
            else:
                finished(done)
    except KeyboardInterrupt:
        launcher.terminate_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    pool.shutdown(wait=True)


def refuse_stale(jobs: Sequence[Job], runs_dir: Path, overwrite: bool) -> None:
    """UsageError (one line) when finished runs were made with other settings or code and
    `overwrite` does not allow retraining them."""
    stale = [j for j in jobs if j.state == "stale"]
    if stale and not overwrite:
        raise UsageError(
            f"--runs-dir={str(runs_dir)!r} holds {len(stale)} run(s) made with other "
            f"settings or code (e.g. {stale[0].path}: {stale[0].detail}); accepted: "
            f"another --runs-dir, or {overwrite_hint()} to retrain them"
        )
