"""The local executor (registry "executor" entry `local`): each run is a child process
`python -m runners.run --config - --out DIR --quiet` reading its settings on standard input,
one thread and one core each when several run at once (src.process.pin_to_cpu), dying with its
driver (src.process.die_with_parent).
"""

from __future__ import annotations

import shlex
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from src.process import CPU_ENV
from src.files import atomic_write_text
from src.jobs.engine import child_env, stop_processes
from src.provenance import usable_cores
from src.registry import registry
from src.settings import require


@dataclass
class Launcher:
    """Runs jobs as child processes (several threads may call `run_job` at once), writes each
    one's output to `log_dir/<name>.log`, and stops only its own children on request. With
    `cores`, each child is given the core that the fewest running children have."""

    env: dict
    log_dir: Path
    cores: tuple[int, ...] = ()
    stopping: threading.Event = field(default_factory=threading.Event)
    live: set = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    running_on: Counter = field(default_factory=Counter)  # core -> children running there

    def run_job(self, job, overwrite: bool) -> tuple[int | None, str, float]:
        """(exit code, output, seconds); exit code None when stopping had begun."""
        command = job.command(overwrite)
        start = time.monotonic()
        with self.lock:  # no process starts once terminate_all has begun
            if self.stopping.is_set():
                return None, "", 0.0
            env, core = self.env, None
            if self.cores:
                core = min(self.cores, key=self.running_on.__getitem__)
                self.running_on[core] += 1
                env = {**env, CPU_ENV: str(core)}
            proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.PIPE, text=True, env=env
            )
            self.live.add(proc)
        try:
            output, _ = proc.communicate(input=job.settings_json())
        finally:
            with self.lock:
                self.live.discard(proc)
                if core is not None:
                    self.running_on[core] -= 1
        seconds = time.monotonic() - start
        try:
            atomic_write_text(self.log_dir / f"{job.name}.log", "$ " + shlex.join(command) + "\n" + (output or ""))
        except OSError:
            pass
        return proc.returncode, output or "", seconds

    def terminate_all(self) -> None:
        with self.lock:
            self.stopping.set()
            procs = list(self.live)
        stop_processes(procs)


@dataclass(frozen=True)
class LocalExecutorOptions:
    seeds_together: bool = False  # runs that differ only in their seed as one program (GroupJob)
    share_cores: bool = False  # runs side by side share every core, unpinned (the earlier way)

    def check(self) -> None:
        require(isinstance(self.seeds_together, bool), "seeds_together", self.seeds_together, "true or false")
        require(isinstance(self.share_cores, bool), "share_cores", self.share_cores, "true or false")


@registry("executor").register(
    "local",
    LocalExecutorOptions,
    doc="child processes on this machine (--jobs at a time, "
    "one core each; --seeds-together: a run's seeds as one program)",
)
def build_local(options: LocalExecutorOptions, *, runs_dir: Path, log_dir: Path, workers: int) -> Launcher:
    several = workers > 1
    cores = usable_cores() if several and not options.share_cores else ()
    return Launcher(child_env(runs_dir, single_thread=several), log_dir, cores)
