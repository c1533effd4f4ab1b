"""The Ray executor (registry "executor" entry `ray`): each run is one Ray task, so a sweep or
study spreads over a cluster (`--executor ray --address ADDR`) or a local Ray instance
(`--executor ray`).

No shared filesystem is needed. The task runs the same command as the local executor on the
worker (`python -m runners.run --config - ...`, the settings on standard input), into a
temporary directory there, and returns the run directory as a tar archive; the driver unpacks
it beside the target and swaps it in atomically (src.rundir.install_archive).
The code travels as Ray's `working_dir` (the repository without .venv, runs, .git). A worker that
dies is retried (`max_retries`), and the runner dies with its worker (src.process.die_with_parent).
Results are those of the local executor: the same command, one thread per run.
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from src.process import PARENT_ENV
from src.files import atomic_write_text
from src.jobs.engine import SINGLE_THREAD_ENV, child_env
from src.provenance import ROOT
from src.registry import registry
from src.rundir import install_archive

RETRIES = 3
EXCLUDES = [".venv", "runs", ".git", "report/figures", "report/quick", "*.csv", "__pycache__", ".pytest_cache"]


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None  # a running cluster's address; None starts a local instance
    cpus_per_run: float = 1.0

    def check(self) -> None:
        if not (isinstance(self.cpus_per_run, (int, float)) and 0 < self.cpus_per_run <= 1024):
            raise ValueError(f"cpus_per_run={self.cpus_per_run!r} is out of range; accepted: a number in (0, 1024]")

    def prepare(self, join: bool) -> None:
        """Before any work: Ray must be installed, and a cluster at `address` must answer
        (ValueError / ConnectionError, one line)."""
        try:
            import ray  # noqa: F401 - only whether it is installed
        except ImportError:
            raise ValueError(
                "--executor ray: Ray is not installed; accepted: pip install -r requirements.txt, or --executor local"
            ) from None
        if join and self.address:
            connect(self.address)


def run_on_worker(job, env: dict) -> tuple[int, str, float, bytes | None]:
    """(exit code, output, seconds, the run directory as .tar.gz or None): the task body, the job's
    own command (src.jobs.engine.Job.command) written into a temporary directory on the worker."""
    with tempfile.TemporaryDirectory(prefix="icl-ray-") as tmp:
        out = Path(tmp) / job.path.name
        here = os.getcwd()  # Ray's working_dir: the repository
        child = {
            **os.environ,
            **env,
            PARENT_ENV: str(os.getpid()),
            "PYTHONPATH": here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
            "JAX_COMPILATION_CACHE_DIR": os.path.join(tempfile.gettempdir(), "icl-workbench-jax-cache"),
        }
        command = job.command(overwrite=False, out=out)
        start = time.monotonic()
        done = subprocess.run(
            command,
            cwd=here,
            env=child,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            input=job.settings_json(),
            text=True,
        )
        seconds = time.monotonic() - start
        archive = None
        if out.is_dir():
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
                tar.add(out, arcname=".")
            archive = buffer.getvalue()
        return done.returncode, "$ " + shlex.join(command) + "\n" + (done.stdout or ""), seconds, archive


# HTTP/2's client preface and an empty SETTINGS frame: what a gRPC client (Ray's, to its cluster's
# GCS server) sends first; a gRPC server answers with a SETTINGS frame of its own.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _reachable(address: str, timeout_s: float = 3.0) -> None:
    """ConnectionError (one line) unless a server at host:port answers Ray's handshake within
    timeout_s: a TCP connection, then the HTTP/2 preface of a gRPC client, answered by a SETTINGS
    frame. A port that accepts connections but says nothing, or speaks another protocol, is refused
    here, where Ray itself would retry it for minutes."""
    import socket

    host, _, port = address.rpartition(":")
    accepted = "host:port of a running `ray start --head`"
    try:
        connection = socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s)
    except (OSError, ValueError) as err:
        raise ConnectionError(f"--address={address!r}: nothing answers there ({err}); accepted: {accepted}") from None
    with connection:
        try:
            connection.settimeout(timeout_s)
            connection.sendall(HTTP2_PREFACE)
            answer = b""
            while len(answer) < 9:
                more = connection.recv(9 - len(answer))
                if not more:
                    break
                answer += more
        except OSError as err:
            answer, why = b"", f"{err.strerror or err}"
        else:
            why = "it closed the connection" if len(answer) < 9 else ""
    if len(answer) == 9 and answer[3] == 4 and answer[5:9] == bytes(4):  # a SETTINGS frame, stream 0
        return
    why = why or f"it answered {answer[:9]!r}, not a gRPC server's SETTINGS frame"
    raise ConnectionError(
        f"--address={address!r}: the server there is not a Ray cluster (no answer to Ray's "
        f"handshake within {timeout_s:g} s: {why}); accepted: {accepted}"
    )


def connect(address: str | None) -> None:
    """Start a local Ray instance (address None) or join a cluster, shipping this repository as
    the working directory; ConnectionError with one line when no cluster answers there."""
    import ray

    if ray.is_initialized():
        return
    if address and address != "auto" and not address.startswith("ray://"):
        _reachable(address)  # Ray itself retries a dead address for minutes
    try:
        ray.init(
            address=address or None,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={"working_dir": str(ROOT), "excludes": EXCLUDES},
        )
    except (ConnectionError, RuntimeError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise ConnectionError(
            f"--address={address!r}: no Ray cluster answered ({first}); accepted: "
            "the address `ray start --head` printed, with RAY_AUTH_MODE=token and "
            "its token (ray get-auth-token) when the cluster uses tokens"
        ) from None


@dataclass
class RayLauncher:
    """The local Launcher's interface (`run_job`, `terminate_all`) over Ray tasks."""

    env: dict
    log_dir: Path
    address: str | None = None
    cpus_per_run: float = 1.0
    stopping: threading.Event = field(default_factory=threading.Event)
    pending: set = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        import ray

        connect(self.address)
        self.task = ray.remote(num_cpus=self.cpus_per_run, max_retries=RETRIES)(run_on_worker)
        # what travels to the worker: the thread and cache settings of child_env, not paths
        keep = set(SINGLE_THREAD_ENV) | {
            "XLA_FLAGS",
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
            "JAX_ENABLE_X64",
        }
        self.worker_env = {k: v for k, v in self.env.items() if k in keep}

    def run_job(self, job, overwrite: bool) -> tuple[int | None, str, float]:
        import ray

        with self.lock:
            if self.stopping.is_set():
                return None, "", 0.0
            ref = self.task.remote(job, self.worker_env)
            self.pending.add(ref)
        try:
            code, output, seconds, archive = ray.get(ref)
        except ray.exceptions.RayError as err:  # retries exhausted, or cancelled
            code, output, seconds, archive = 1, f"Ray task failed: {type(err).__name__}: {err}", 0.0, None
        finally:
            with self.lock:
                self.pending.discard(ref)
        if archive is not None:  # atomic swap beside the target; never a partial over a finished run
            install_archive(job.path, archive)
        try:
            atomic_write_text(self.log_dir / f"{job.name}.log", output)
        except OSError:
            pass
        return code, output, seconds

    def terminate_all(self) -> None:
        import ray

        with self.lock:
            self.stopping.set()
            refs = list(self.pending)
        for ref in refs:
            ray.cancel(ref, force=True)


@registry("executor").register(
    "ray", RayOptions, doc="one Ray task per run (a local instance, or a cluster at --address)"
)
def build_ray(options: RayOptions, *, runs_dir: Path, log_dir: Path, workers: int) -> RayLauncher:
    return RayLauncher(
        child_env(runs_dir, single_thread=True), log_dir, options.address, options.cpus_per_run
    )  # one thread per task
