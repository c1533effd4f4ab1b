"""The device side of the GPU queue (scripts/device/gpu_queue.py; scripts/device/gpu_queue_jobs.py
declares the jobs): what a job is, its plan from the recorded H200 timings, and one job run into a
folder the device call brings back, each finished piece written the moment it exists (the module
docstring there says how); a study job's device side is scripts/device/gpu_study.py.

    python -m scripts.device.gpu_queue run JOB --out DIR [--rehearse]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from src.files import atomic_write_json

JOB_LIMIT_S = 540  # one job: at most 9 minutes of one device command (10 at most)
WHEELS = ".whl"  # dm-haiku and jmp for the device's Python (make gpu_wheels)
ORIGINALS = ".originals/limits_of_icl"  # limits_of_icl's src/ at 040e95d (make originals)

# The paper-size table's protocol (scripts/device/paper_cell_plan.py: SWEEP and SETTING_SETS) and its
# measured cost: four runs sharing the H200 took 324-377 s for 7,000 steps (53.9 ms a step each at
# worst), so a run's step costs about 13.5 ms per run sharing the device.
PROTOCOL = "adam1e-3_b256_warm"
SETTING = "bfloat16_fused_flat"
PAPER_STEPS = 7000
MS_PER_STEP_PER_RUN = 377.0 / 7000 * 1000 / 4
START_S = 30.0  # the job's Python and the parent's imports
COMPILE_S = 60.0  # each run's start and compilation (runs start together)
EVALUATE_S = 60.0  # each run's evaluation: a process of its own, then one compilation
MARGIN_S = 15.0  # what the plan leaves unused
CHECKPOINTS = 10  # checkpoints per run: a run stopped at the deadline loses < 1/10


@dataclass(frozen=True)
class Seconds:
    """A job's expected device seconds, by part."""

    start: float
    compile: float
    train: float
    evaluate: float

    @property
    def total(self) -> float:
        return self.start + self.compile + self.train + self.evaluate

    def words(self) -> str:
        return (
            f"{self.total:.0f} s (start {self.start:.0f}, compile {self.compile:.0f}, train "
            f"{self.train:.0f}, evaluate {self.evaluate:.0f})"
        )


@dataclass(frozen=True)
class Run:
    """One training run of a mechanisms job: `runners.train --config configs/paper/mechanisms.yaml`
    with model.attention_type=`mechanism` and the further overrides `sets`."""

    name: str
    mechanism: str
    sets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Shape:
    """One run's size, for its work per step (scripts.paper_scale.work_of): width, layers, tokens
    per sequence, batch and vocabulary (0: a regression read-out)."""

    width: int
    layers: int
    tokens: int
    batch: int
    vocab: int = 0

    @property
    def ms_per_run_step(self) -> float:
        """Its step's expected milliseconds on the H200 with others sharing it: the paper cell's
        recorded MS_PER_STEP_PER_RUN scaled by work, at least SMALL_STEP_MS (a small model's step
        is bound by its kernels' launches, not by its work)."""
        from scripts.paper_scale import work_of

        ratio = work_of(self.width, self.layers, self.tokens, self.batch, self.vocab) / work_of(*PAPER_CELL)
        return max(SMALL_STEP_MS, MS_PER_STEP_PER_RUN * ratio)


PAPER_CELL = (256, 12, 82, 256, 0)  # limits_of_icl's cell: width, layers, tokens (41 points), batch, vocabulary
SMALL_STEP_MS = 1.0


@dataclass(frozen=True)
class Study:
    """A study job: `python -m <args>` (the study's command at the device's size; the job adds
    --runs-dir and --report-dir), `rehearsal` the same study at a CPU's size; its plan: `runs`
    runs of `steps` steps of size `shape` sharing the device, then `report_s` for the study's
    analyses and report (scripts/device/gpu_study.py runs it)."""

    args: tuple[str, ...]
    rehearsal: tuple[str, ...]
    runs: int
    steps: int
    shape: Shape
    report_s: float = 60.0


@dataclass(frozen=True)
class Job:
    name: str
    title: str
    kind: str  # mechanisms | speed | study
    runs: tuple[Run, ...] = ()
    carry: tuple[str, ...] = (WHEELS,)
    study: Study | None = None

    @property
    def expected(self) -> Seconds:
        if self.kind == "speed":  # device_paper_scale's own limits: bench 200 + 100, original 2 x 90
            return Seconds(START_S, 0.0, 300.0, 180.0)
        if self.kind == "study":
            s = self.study
            return Seconds(START_S, COMPILE_S, s.runs * s.steps * s.shape.ms_per_run_step / 1000, s.report_s)
        steps = planned_steps(len(self.runs), JOB_LIMIT_S)
        return Seconds(START_S, COMPILE_S, steps * MS_PER_STEP_PER_RUN * len(self.runs) / 1000, EVALUATE_S)


def planned_steps(runs: int, budget_s: float) -> int:
    """The steps each of `runs` runs sharing the device can train within budget_s, after the start,
    compilation, evaluation and the margin: at most the recorded protocol's PAPER_STEPS, in
    hundreds, at least 100."""
    seconds = budget_s - START_S - COMPILE_S - EVALUATE_S - MARGIN_S
    steps = int(seconds * 1000 / (MS_PER_STEP_PER_RUN * runs)) // 100 * 100
    return max(100, min(PAPER_STEPS, steps))


# --- on the device ---------------------------------------------------------------------------------


def git_like(command: list[str]) -> str:
    """A command's stripped output, or "" when it fails or is missing."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
        return done.stdout.strip() if done.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def run_sets(job: Job, run: Run, steps: int, rehearse: bool) -> list[str]:
    """runners.train overrides of one run: the protocol, the setting (float32 when rehearsing),
    the steps with the curriculum compressed into their first 30 %, CHECKPOINTS checkpoints (10x
    as many when rehearsing, so that a rehearsal stopped at its deadline has one on any CPU)."""
    from scripts.device.paper_cell_plan import SETTING_SETS, SWEEP, step_sets

    save_every = max(1, steps // (CHECKPOINTS * (10 if rehearse else 1)))
    sets = [
        *SWEEP[PROTOCOL],
        *([] if rehearse else SETTING_SETS[SETTING]),
        *run.sets,
        *step_sets(steps, max(1, steps // 10), save_every),
    ]
    if rehearse:  # the same code path at a size a CPU trains in seconds
        sets += [
            "model.n_embd=16",
            "model.n_layer=2",
            "model.n_head=2",
            "training.batch_size=8",
            "training.eval_size=32",
        ]
    return sets


def device_words() -> str:
    gpu = git_like(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])
    return gpu.splitlines()[0] if gpu else f"CPU ({os.cpu_count()} cores)"


def jax_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jax")
    except PackageNotFoundError:
        return "?"


def train_mechanisms(
    job: Job, began: float, budget_s: float, rehearse: bool, steps: int | None, runs_dir: Path, log, save
) -> None:
    """A `mechanisms` job: its runs trained together under runs_dir/<job>/ until the training
    deadline, each evaluated the moment it ends and saved as a piece."""
    from scripts.device.gpu_study import set_aside
    from scripts.paper_mechanisms import run_all, train_command

    steps = steps or planned_steps(len(job.runs), budget_s)
    runs_dir = runs_dir / job.name
    set_aside(runs_dir, log)  # an earlier try's runs are kept aside, never deleted
    jobs = [
        (
            r.name,
            train_command(
                "configs/paper/mechanisms.yaml", r.mechanism, run_sets(job, r, steps, rehearse), runs_dir / r.name
            ),
        )
        for r in job.runs
    ]
    for name, command in jobs:
        log(f"  {name}: {' '.join(command[2:])}")
    save(
        plan={
            "steps": steps,
            "protocol": PROTOCOL,
            "setting": "float32" if rehearse else SETTING,
            "train_until_s": round(budget_s - EVALUATE_S - MARGIN_S, 1),
        }
    )

    def on_result(results):
        save(pieces=results)
        last = results[-1]
        errors = last.get("errors", {})
        log(
            f"piece {last['name']}: exit {last['exit']}, {last.get('steps')} steps, standard "
            f"{errors.get('standard', {}).get('model')}, 10 flipped {errors.get('10 dims flipped', {}).get('model')}"
            + (f"; {last['evaluate_error'][:200]}" if "evaluate_error" in last else "")
        )

    run_all(
        jobs,
        parallel=len(jobs),
        deadline=began + budget_s - 5,
        train_deadline=began + budget_s - EVALUATE_S - MARGIN_S,
        on_result=on_result,
        log=log,
    )


def run_speed_job(out: Path, began: float, budget_s: float, commit: str, rehearse: bool, log, save) -> None:
    """The `speed` job: scripts.device.paper_scale without its sweep, its files the pieces."""
    command = [
        sys.executable,
        "-m",
        "scripts.device.paper_scale",
        "--out",
        str(out),
        "--commit",
        commit,
        "--skip",
        "sweep",
        "--budget-s",
        str(budget_s - START_S),
    ]
    if rehearse:
        command += ["--bench-args=--tiny --variants float32,bfloat16_fused_flat"]  # the two it traces
    elif Path(ORIGINALS, "src", "wrapper_model.py").is_file():
        command += ["--original", ORIGINALS]
    log(" ".join(command[2:]))
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=max(10.0, budget_s - (time.time() - began) - 5)
        )
        log(f"exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-1500:]}")
    except subprocess.TimeoutExpired:
        log("stopped at the job's deadline")
    save(pieces=sorted(p.name for p in out.iterdir() if p.suffix == ".json" and p.name != "job.json"))


def run_job(
    job: Job,
    out: Path,
    budget_s: float,
    commit: str,
    clean: bool,
    rehearse: bool,
    steps: int | None = None,
    runs_dir: Path = Path("runs/gpu_queue"),
) -> dict:
    """Run `job` into `out` within budget_s (module docstring), its training runs under
    runs_dir/<job>/; returns job.json's content."""
    began = time.time()
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "job": job.name,
        "title": job.title,
        "commit": commit,
        "clean": clean,
        "rehearsal": rehearse,
        "device": device_words(),
        "jax": jax_version(),
        "budget_s": budget_s,
        "began_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(began)),
        "state": "running",
        "pieces": [],
    }
    log_file = out / "job.log"

    def log(text: str) -> None:
        line = f"[{time.time() - began:6.1f} s] {text}"
        print(line, flush=True)
        with open(log_file, "a") as f:
            f.write(line + "\n")

    def save(**changes) -> None:
        manifest.update(changes, wall_s=round(time.time() - began, 1))
        atomic_write_json(out / "job.json", manifest)  # a reader, or a kill, sees the old file or the new

    save()
    log(f"{job.name}: {job.title}; budget {budget_s:.0f} s; {manifest['device']}")
    if job.kind == "mechanisms":
        train_mechanisms(job, began, budget_s, rehearse, steps, runs_dir, log, save)
    elif job.kind == "study":
        from scripts.device.gpu_study import run_study

        run_study(job, out, began, began + budget_s - job.study.report_s - MARGIN_S, rehearse, runs_dir, log, save)
    else:
        run_speed_job(out, began, budget_s, commit, rehearse, log, save)
    save(state="done", ended_utc=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
    log(f"done in {time.time() - began:.0f} s")
    return manifest
