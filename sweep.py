"""What the sweep drivers (`eval_order`, `eval_noise`) share: grid flags, validation,
run planning, parallel resumable execution, and the results CSV.

A grid is the product of comma lists (models x orderings x noise modes x p x sigma x
placements x train/eval overrides x seeds). Every grid point is one run directory,
named deterministically from its settings, made by the user-facing runner CLI in a
subprocess (`python -m runners.<runner> ... --out <dir> --quiet`). The whole grid is
checked before anything runs (exit 2 and one line naming the flag, the value and what
is accepted). Rerunning a sweep skips finished runs, redoes incomplete ones, and
rewrites the CSV from the run directories after every finished run.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import io
import itertools
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
from typing import Sequence

from src import rundir as names
from src.config import MODEL_PRESETS, NOISE_MODES, ORDERINGS, PLACEMENTS
from src.provenance import code_fingerprint
from src.rundir import RUNNER_OF_MODEL, RunDir
from utils_log import atomic_write_text, to_jsonable

AUTO = "auto"
CLEAN = "clean"
# Runners that take --num_layers (the concatenated-token one).
RUNNER_TAKES_LAYERS = {"runners.run_concat_inputs_targets": True, "runners.run_softmax_copy": False}
# Child processes get one thread each when several run at once.
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
}
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
STDERR_TAIL_LINES = 15
LOGS = "logs"              # <runs-dir>/logs/<run>.log: each run's full output
JAX_CACHE = ".jax_cache"   # <runs-dir>/.jax_cache unless JAX_COMPILATION_CACHE_DIR is set

# CSV columns, in order: where the run is, its settings, its results.
SETTING_COLUMNS = ["model", "seed", "steps", "ordering", "noise_mode", "p", "sigma", "placement"]
PHASE_FIELDS = ("ordering", "noise_mode", "noise_p", "noise_sigma", "noise_placement")
PHASE_COLUMNS = [f"{phase}_{f}" for phase in ("train", "eval") for f in PHASE_FIELDS]
RESULT_COLUMNS = ["eval_loss", "gd_loss", "gd_eta", "align_cos", "l2_pred_diff", "model_diff",
                  "auroc", "train_loss", "train_seconds",
                  "copy_own", "copy_next", "copy_prev", "copy_other"]
CSV_COLUMNS = ["run_dir", "status"] + SETTING_COLUMNS + PHASE_COLUMNS + RESULT_COLUMNS


class GridError(Exception):
    """A bad flag value; the message is one line naming the flag, value and what is accepted."""


# ---------------------------------------------------------------------------
# Flags

@dataclass(frozen=True)
class DriverDefaults:
    """What differs between eval_order and eval_noise: defaults and text, not logic."""
    prog: str
    description: str
    ordering: str
    noise_mode: str
    p: str | None
    sigma: str | None
    placement: str
    out: str
    runs_dir: str
    figures: str                   # figure folder name under report/figures/ (for the hint)
    epilog: str = ""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(d: DriverDefaults) -> argparse.ArgumentParser:
    parser = OneLineParser(prog=d.prog, description=d.description, epilog=d.epilog,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    g = parser.add_argument_group("grid (comma-separated lists; the grid is their product)")
    g.add_argument("--models", default="lsa1,twolayer",
                   help=f"models, from: {', '.join(MODEL_PRESETS)} (default: lsa1,twolayer)")
    g.add_argument("--ordering", default=d.ordering,
                   help=f"context orderings, from: {', '.join(ORDERINGS)} (default: {d.ordering})")
    g.add_argument("--noise_mode", default=d.noise_mode,
                   help=f"noise modes, from: {', '.join(NOISE_MODES)} (default: {d.noise_mode})")
    g.add_argument("--p", "--noise_p", dest="p", default=d.p,
                   help="fractions of corrupted pairs in [0, 1]; required when a noise mode "
                        f"other than clean is in the grid (default: {d.p or 'none'})")
    g.add_argument("--sigma", "--noise_sigma", dest="sigma", default=d.sigma,
                   help="noise sigmas >= 0 (label-noise std / random label std) "
                        f"(default: {d.sigma or 'the runner default, 1.0'})")
    g.add_argument("--placement", "--noise_placement", dest="placement", default=d.placement,
                   help=f"placements of corrupted pairs, from: {', '.join(PLACEMENTS)} "
                        f"(default: {d.placement})")
    g.add_argument("--seeds", default="0", help="training seeds, integers >= 0 (default: 0)")
    o = parser.add_argument_group("train/eval overrides (comma lists; auto = the shared value)")
    for phase in ("train", "eval"):
        for f in PHASE_FIELDS:
            o.add_argument(f"--{phase}_{f}", default=AUTO, metavar="LIST",
                           help=f"{phase} {f.replace('_', ' ')} (default: auto)")
    t = parser.add_argument_group("training (passed to every run; default: the runner's)")
    t.add_argument("--steps", type=_int_flag("--steps", 1), default=None,
                   help="training steps (default: the paper's, per model)")
    t.add_argument("--batch_size", type=_int_flag("--batch_size", 1), default=None)
    t.add_argument("--eval_size", type=_int_flag("--eval_size", 1), default=None)
    t.add_argument("--log_every", type=_int_flag("--log_every", 1), default=None)
    t.add_argument("--lr", type=_float_flag("--lr"), default=None)
    t.add_argument("--save_attention", dest="save_attention", action="store_true", default=True,
                   help="save attention and compute AUROC in every run (default)")
    t.add_argument("--no_save_attention", dest="save_attention", action="store_false",
                   help="do not save attention (no AUROC column values)")
    s = parser.add_argument_group("sweep")
    s.add_argument("--out", default=d.out, help=f"results CSV (default: {d.out})")
    s.add_argument("--runs-dir", "--runs_dir", dest="runs_dir", default=d.runs_dir,
                   help=f"where the run directories go (default: {d.runs_dir})")
    s.add_argument("--jobs", type=_int_flag("--jobs", 1), default=os.cpu_count() or 1,
                   help="runs in parallel, one thread each when > 1 (default: os.cpu_count() "
                        f"= {os.cpu_count() or 1})")
    s.add_argument("--overwrite", action="store_true",
                   help="retrain runs in --runs-dir whose stored settings differ from this grid "
                        "(default: refuse)")
    s.add_argument("--dry_run", action="store_true",
                   help="print the plan (one line per run: status and command) and exit")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _int_flag(flag: str, minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer; accepted: an integer "
                                             f">= {minimum}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text} is out of range; accepted: an integer "
                                             f">= {minimum}")
        return value
    parse.__name__ = flag
    return parse


def _float_flag(flag: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r} is not accepted; accepted: a finite "
                                             "number > 0")
        return value
    parse.__name__ = flag
    return parse


# ---------------------------------------------------------------------------
# Grid lists

def _items(flag: str, text: str | None, what: str) -> list[str]:
    if text is None or not text.strip():
        raise GridError(f"{flag}={text or ''!r} is empty; accepted: a comma-separated list of {what}")
    items = [t.strip() for t in text.split(",")]
    if any(not t for t in items):
        raise GridError(f"{flag}={text!r} has an empty item; accepted: a comma-separated list of "
                        f"{what}")
    return list(dict.fromkeys(items))  # drop repeats, keep order


def choices_list(flag: str, text: str | None, accepted: Sequence[str]) -> list[str]:
    items = _items(flag, text, "values from: " + ", ".join(accepted))
    for item in items:
        if item not in accepted:
            raise GridError(f"{flag}={item!r} is unknown; accepted: {', '.join(accepted)}")
    return items


def number_list(flag: str, text: str | None, low: float, high: float, what: str,
                allow_auto: bool = False) -> list:
    items = _items(flag, text, what + (" (or auto)" if allow_auto else ""))
    out = []
    for item in items:
        if allow_auto and item == AUTO:
            out.append(AUTO)
            continue
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and low <= value <= high):
            raise GridError(f"{flag}={item!r} is out of range; accepted: {what}"
                            + (" (or auto)" if allow_auto else ""))
        out.append(value)
    return out


def seed_list(text: str | None) -> list[int]:
    out = []
    for item in _items("--seeds", text, "integers >= 0"):
        if not item.isdigit():
            raise GridError(f"--seeds={item!r} is not accepted; accepted: integers >= 0, e.g. 0,1")
        out.append(int(item))
    return out


# ---------------------------------------------------------------------------
# Grid points

def fmt_number(x: float) -> str:
    """0.25 -> '0.25', 1.0 -> '1' (exact: repr, not %g)."""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class GridPoint:
    """One run: a model, a seed, the shared curriculum and the explicit train/eval overrides."""
    model: str
    seed: int
    ordering: str
    noise_mode: str
    p: float | None            # None when no phase uses noise
    sigma: float | None        # None = the runner's default
    placement: str | None
    overrides: tuple = ()      # ((flag name without --, value), ...) for non-auto values

    @property
    def runner(self) -> str:
        return RUNNER_OF_MODEL[self.model]

    def name(self) -> str:
        parts = [self.model, f"ord-{self.ordering}"]
        noise = f"noise-{self.noise_mode}"
        if self.p is not None:
            sigma = 1.0 if self.sigma is None else self.sigma
            noise += f"-p{fmt_number(self.p)}-s{fmt_number(sigma)}-{self.placement}"
        parts.append(noise)
        for flag, value in self.overrides:
            parts.append(f"{flag}-{fmt_number(value) if isinstance(value, float) else value}")
        parts.append(f"seed{self.seed}")
        return "__".join(parts)

    def argv(self, training: Sequence[str]) -> list[str]:
        """The runner flags of this point (without --out/--overwrite/--quiet)."""
        argv = ["--seed", str(self.seed), "--ordering", self.ordering]
        if self.model != "lsa1" and RUNNER_TAKES_LAYERS.get(self.runner):
            argv += ["--num_layers", str(MODEL_PRESETS[self.model][1])]
        if self.noise_mode != CLEAN:
            argv += ["--noise_mode", self.noise_mode]
        if self.p is not None:
            argv += ["--noise_p", fmt_number(self.p)]
            if self.sigma is not None:
                argv += ["--noise_sigma", fmt_number(self.sigma)]
            if self.placement != "mixed":
                argv += ["--noise_placement", self.placement]
        for flag, value in self.overrides:
            argv += [f"--{flag}", fmt_number(value) if isinstance(value, float) else str(value)]
        return argv + list(training)


def base_model(model: str) -> str:
    """The model name a runner is started for (lsa_rec is lsa1's runner with --num_layers)."""
    return "lsa1" if model == "lsa_rec" else model


@dataclass
class Grid:
    points: list[GridPoint]
    training: list[str]            # flags every run gets
    save_attention: bool


def build_grid(args: argparse.Namespace) -> Grid:
    """Parse and check every list, then form the (deduplicated) grid points."""
    models = choices_list("--models", args.models, list(MODEL_PRESETS))
    orderings = choices_list("--ordering", args.ordering, ORDERINGS)
    modes = choices_list("--noise_mode", args.noise_mode, NOISE_MODES)
    seeds = seed_list(args.seeds)
    overrides = {}
    for phase in ("train", "eval"):
        flag = f"--{phase}_"
        overrides[f"{phase}_ordering"] = choices_list(flag + "ordering",
                                                      getattr(args, f"{phase}_ordering"),
                                                      ORDERINGS + (AUTO,))
        overrides[f"{phase}_noise_mode"] = choices_list(flag + "noise_mode",
                                                        getattr(args, f"{phase}_noise_mode"),
                                                        NOISE_MODES + (AUTO,))
        overrides[f"{phase}_noise_p"] = number_list(flag + "noise_p", getattr(args, f"{phase}_noise_p"),
                                                    0.0, 1.0, "numbers in [0, 1]", allow_auto=True)
        overrides[f"{phase}_noise_sigma"] = number_list(flag + "noise_sigma",
                                                        getattr(args, f"{phase}_noise_sigma"),
                                                        0.0, math.inf, "finite numbers >= 0",
                                                        allow_auto=True)
        overrides[f"{phase}_noise_placement"] = choices_list(flag + "noise_placement",
                                                             getattr(args, f"{phase}_noise_placement"),
                                                             PLACEMENTS + (AUTO,))
    placements = choices_list("--placement", args.placement, PLACEMENTS)
    sigmas = ([None] if args.sigma is None else
              number_list("--sigma", args.sigma, 0.0, math.inf, "finite numbers >= 0"))
    any_noise = any(m not in (CLEAN, AUTO) for m in modes + overrides["train_noise_mode"]
                    + overrides["eval_noise_mode"])
    if args.p is None:
        if any_noise:
            raise GridError("--p is missing but a noise mode other than clean is in the grid; "
                            "accepted: fractions of corrupted pairs in [0, 1], e.g. --p 0.0,0.25")
        ps = [None]
    else:
        ps = number_list("--p", args.p, 0.0, 1.0, "numbers in [0, 1]")

    training = []
    for flag in ("steps", "batch_size", "eval_size", "log_every", "lr"):
        value = getattr(args, flag)
        if value is not None:
            training += [f"--{flag}", repr(value) if isinstance(value, float) else str(value)]
    if args.save_attention:
        training.append("--save_attention")

    override_names = list(overrides)
    points: dict[str, GridPoint] = {}
    for model, ordering, mode, p, sigma, placement, *over, seed in itertools.product(
            models, orderings, modes, ps, sigmas, placements,
            *(overrides[k] for k in override_names), seeds):
        chosen = dict(zip(override_names, over))
        effective = {ph: mode if chosen[f"{ph}_noise_mode"] == AUTO else chosen[f"{ph}_noise_mode"]
                     for ph in ("train", "eval")}
        noisy = any(m != CLEAN for m in effective.values())
        explicit = []
        for key in override_names:
            value = chosen[key]
            if value == AUTO:
                continue
            phase, f = key.split("_", 1)
            shared = {"ordering": ordering, "noise_mode": mode}.get(f)
            if shared is not None and value == shared:
                continue                     # same as auto
            if f in ("noise_p", "noise_sigma", "noise_placement") and effective[phase] == CLEAN:
                continue                     # no meaning for a clean phase
            explicit.append((key, value))
        point = GridPoint(model=model, seed=seed, ordering=ordering, noise_mode=mode,
                          p=p if noisy else None, sigma=sigma if noisy else None,
                          placement=placement if noisy else None, overrides=tuple(explicit))
        points.setdefault(point.name(), point)
    return Grid(list(points.values()), training, args.save_attention)


# ---------------------------------------------------------------------------
# The runner's own view of a point: its settings (and its flag checks)

def runner_parse(point: GridPoint, argv: Sequence[str]):
    """(args, Settings) as the runner resolves `argv`; GridError with the runner's message."""
    from runners.common import UsageError, build_parser as runner_parser, settings_from_args
    model = base_model(point.model)
    parser = runner_parser(f"python -m {point.runner}", "", model,
                           RUNNER_TAKES_LAYERS[point.runner])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(list(argv))
        return args, settings_from_args(args, model)
    except SystemExit:
        message = err.getvalue().strip().splitlines()
        raise GridError(f"run {point.name()}: {message[-1] if message else 'rejected'}") from None
    except UsageError as e:
        raise GridError(f"run {point.name()}: {e}") from None


def _normalise(obj):
    return json.loads(json.dumps(to_jsonable(obj), sort_keys=True))


@dataclass
class PlannedRun:
    point: GridPoint
    run: RunDir
    argv: list[str]                # runner flags, without --out/--overwrite/--quiet
    settings: dict                 # the resolved settings, as stored in config.json
    state: str = "absent"          # absent | incomplete | complete | diverged | stale
    detail: str = ""

    @property
    def name(self) -> str:
        return self.point.name()

    def command(self, overwrite: bool) -> list[str]:
        return ([sys.executable, "-m", self.point.runner] + self.argv
                + ["--out", str(self.run.path), "--quiet"] + (["--overwrite"] if overwrite else []))


def run_state(planned: PlannedRun, save_attention: bool) -> tuple[str, str]:
    """What is on disk for a planned run, compared with what the grid asks for."""
    run = planned.run
    if not run.path.exists():
        return "absent", ""
    if not run.path.is_dir():
        return "incomplete", "not a directory"
    try:
        stored = run.load_config().get("settings")
    except (names.RunDirError, ValueError, OSError):
        return "incomplete", f"no readable {names.CONFIG}"
    final = run.is_trained() or run.is_diverged()
    if final and _normalise(stored) != planned.settings:
        return "stale", "its settings differ from this grid's"
    made_by = run.load_config().get("code_fingerprint")
    if final and made_by != code_fingerprint():
        return "stale", ("it was trained by different code (src/, baselines/ or runners/ changed "
                         "since, or it predates code fingerprints)")
    if run.is_diverged():
        return "diverged", ""
    missing = run.missing_outputs(with_attention=save_attention or None)
    if run.is_trained() and not missing:
        return "complete", ""
    return "incomplete", ("missing " + ", ".join(missing[:3]) + ("..." if len(missing) > 3 else "")
                          if missing else f"{names.SUMMARY} says not complete")


def plan(grid: Grid, runs_dir: Path) -> list[PlannedRun]:
    planned = []
    for point in grid.points:
        argv = point.argv(grid.training)
        _, settings = runner_parse(point, argv + ["--out", "x"])
        item = PlannedRun(point, RunDir(runs_dir / point.name()), argv, _normalise(settings.to_dict()))
        item.state, item.detail = run_state(item, grid.save_attention)
        planned.append(item)
    return planned


# ---------------------------------------------------------------------------
# Results CSV (always rebuilt from the run directories)

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


def csv_row(planned: PlannedRun) -> dict:
    """One CSV row, read from the run directory (config, summary, analysis outputs)."""
    run = planned.run
    config = run.load_config()
    summary = run.load_json(names.SUMMARY)
    shared, _ = runner_parse(planned.point, list(config.get("argv", [])))
    settings = config["settings"]
    noisy = any(settings[f"{ph}_curriculum"]["noise_mode"] != CLEAN for ph in ("train", "eval"))
    row = {"run_dir": str(run.path), "status": summary.get("status"),
           "model": settings["model"]["name"], "seed": settings["train"]["seed"],
           "steps": summary.get("steps"), "ordering": shared.ordering,
           "noise_mode": shared.noise_mode,
           "p": shared.noise_p if noisy else None,
           "sigma": (1.0 if shared.noise_sigma is None else shared.noise_sigma) if noisy else None,
           "placement": shared.noise_placement if noisy else None}
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
    if run.exists(names.ALIGNMENT):   # the analysis's numbers win over the training log's
        try:
            alignment = run.load_json(names.ALIGNMENT)
            for key in ("align_cos", "l2_pred_diff", "model_diff"):
                if alignment.get(key) is not None:
                    row[key] = alignment[key]
        except (ValueError, OSError):
            pass
    return row


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(value)
    return str(value)


def write_csv(path: Path, planned: Sequence[PlannedRun]) -> int:
    """Rewrite the CSV atomically with one row per finished run (grid order); returns rows."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    rows = 0
    for item in planned:
        if not (item.run.is_trained() or item.run.is_diverged()):
            continue
        try:
            row = csv_row(item)
        except (names.RunDirError, ValueError, OSError, KeyError, GridError):
            continue
        writer.writerow({k: _cell(row.get(k)) for k in CSV_COLUMNS})
        rows += 1
    atomic_write_text(path, buffer.getvalue())
    return rows


# ---------------------------------------------------------------------------
# Execution

def child_env(jobs: int, runs_dir: Path) -> dict:
    """The runners' environment: the repo on PYTHONPATH, a persistent XLA compilation cache
    shared by the runs of a sweep (they compile the same programs; this cuts a short run's
    time several-fold and does not change results), one thread each when jobs > 1."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if not env.get("JAX_COMPILATION_CACHE_DIR"):
        env["JAX_COMPILATION_CACHE_DIR"] = str((runs_dir / JAX_CACHE).resolve())
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    if jobs > 1:
        env.update(SINGLE_THREAD_ENV)
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA).strip()
    return env


@dataclass
class Outcome:
    planned: PlannedRun
    returncode: int | None
    output: str
    seconds: float
    state: str = ""


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

    def terminate_all(self) -> None:
        with self.lock:
            self.stopping.set()
            procs = list(self.live)
        stop_processes(procs)


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


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    kept = [line for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return "\n".join("    " + line for line in kept[-lines:])


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def execute(planned: list[PlannedRun], args: argparse.Namespace, save_attention: bool,
            out: Path, runs_dir: Path) -> int:
    from tqdm import tqdm

    todo = [p for p in planned if p.state in ("absent", "incomplete", "stale")]
    done_before = len(planned) - len(todo)
    jobs = max(1, min(args.jobs, len(todo))) if todo else 1
    runner = Launcher(child_env(jobs, runs_dir), runs_dir / LOGS)

    def train(item: PlannedRun) -> Outcome:
        command = item.command(overwrite=item.run.path.exists())
        return Outcome(item, *runner.run(command, item.name))

    bar = tqdm(total=len(planned), initial=done_before, unit="run", desc="runs",
               disable=args.quiet, dynamic_ncols=True, file=sys.stderr)
    say = bar.write if not args.quiet else (lambda m: print(m, file=sys.stderr))
    say(f"{args.prog}: {len(planned)} runs in the grid: {done_before} already finished, "
        f"{len(todo)} to train ({jobs} at a time) -> {runs_dir}")
    for item in todo:
        if item.state != "absent":
            say(f"  redo {item.name} ({item.state}: {item.detail}) with --overwrite")
    failed, diverged, trained = [], [], 0
    start = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [pool.submit(train, item) for item in todo]
        for future in as_completed(futures):
            outcome = future.result()
            item = outcome.planned
            state, _ = run_state(item, save_attention)
            if outcome.returncode == 0 and state == "complete":
                trained += 1
                row = csv_row(item)
                say(f"  done {item.name}: eval_loss {_float(row['eval_loss']):.4f} "
                    f"gd_loss {_float(row['gd_loss']):.4f} ({outcome.seconds:.0f}s)")
            elif state == "diverged":
                trained += 1
                diverged.append(item)
                say(f"  diverged {item.name} (kept; its summary says status 'diverged')")
            else:
                why = (f"exit code {outcome.returncode}" if outcome.returncode
                       else f"finished but incomplete ({run_state(item, save_attention)[1]})")
                failed.append(item)
                say(f"  FAILED {item.name}: {why}; log {runner.log_dir / (item.name + '.log')}\n"
                    + _tail(outcome.output))
            write_csv(out, planned)
            bar.update(1)
    except KeyboardInterrupt:
        runner.terminate_all()
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
        rows = write_csv(out, planned)
        print(f"\n{args.prog}: interrupted; {rows} finished runs are in {out} and {runs_dir}. "
              "Rerun the same command to train only the missing runs.", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    pool.shutdown(wait=True)
    bar.close()
    rows = write_csv(out, planned)
    elapsed = time.monotonic() - start
    print(f"{args.prog}: {rows}/{len(planned)} runs in {out} ({trained} trained now, "
          f"{done_before} already finished, {len(failed)} failed"
          + (f", {len(diverged)} diverged" if diverged else "") + f") in {elapsed:.0f}s")
    if failed:
        print(f"{args.prog}: failed runs (rerun the same command to retry them): "
              + ", ".join(f.name for f in failed), file=sys.stderr)
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
    if runs_dir.exists() and not runs_dir.is_dir():
        raise GridError(f"--runs-dir={args.runs_dir!r} is a file; accepted: a directory path")
    return out, runs_dir


def main(defaults: DriverDefaults, argv: Sequence[str] | None = None) -> int:
    parser = build_parser(defaults)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    args.prog = parser.prog
    try:
        out, runs_dir = check_paths(args)
        grid = build_grid(args)
        planned = plan(grid, runs_dir)
        stale = [p for p in planned if p.state == "stale"]
        if stale and not args.overwrite:
            raise GridError(f"--runs-dir={args.runs_dir!r} holds {len(stale)} finished run(s) made "
                            f"with other settings or by other code (e.g. {stale[0].run.path}: "
                            f"{stale[0].detail}); accepted: another "
                            "--runs-dir, or --overwrite to retrain them")
    except GridError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    if args.dry_run:
        for item in planned:
            action = "skip" if item.state in ("complete", "diverged") else "train"
            print(f"{action:5s} {item.state:10s} "
                  + " ".join(shlex.quote(c) for c in item.command(item.run.path.exists())[1:]))
        return 0
    runs_dir.mkdir(parents=True, exist_ok=True)
    if out.parent != Path(""):
        out.parent.mkdir(parents=True, exist_ok=True)
    code = execute(planned, args, grid.save_attention, out, runs_dir)
    if code == 0:
        stem = out.stem[len("results_"):] if out.stem.startswith("results_") else out.stem
        print(f"figures: PYTHONPATH=. python -m plots.fig_templates --from {out} "
              f"--out report/figures/{stem or defaults.figures}")
    return code
