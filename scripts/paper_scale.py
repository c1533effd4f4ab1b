"""A study at its paper's own scale (configs/paper/<study>.yaml) on whatever device JAX finds,
after printing the time and memory it expects. `make paper_scale STUDY=mechanisms` runs it.

    python -m scripts.paper_scale --study mechanisms               # estimate, then the study
    python -m scripts.paper_scale --study mixers --estimate        # the estimate alone
    python -m scripts.paper_scale --study lengthgen --only rope,fire
    python -m scripts.paper_scale --study mechanisms --tiny        # the config at a tiny size (seconds)

The estimate, before any run is written:
1. memory: src/bounds.training_bytes of the largest run (an over-estimate on purpose: activations
   kept for the backward pass, the eval set in one batch, parameters with Adam's moments), plus
   the logits of token models, times the runs in parallel (--jobs), against the device's free
   memory (a GPU's allocator limit less what is in use; on a CPU, MemAvailable). Over 80 % of it:
   refused in one line, exit 2, before anything is compiled.
2. time: the largest run (most work per step) is built, compiled and timed for a few steps on this
   device; every other run is scaled by its work per step (6 x parameters x tokens, plus attention's
   T^2 terms) and its steps. Its peak memory (GPU: the allocator's peak; CPU: the process's peak
   resident set) is checked against the free memory the same way.

The study then runs as `python -m scripts.<study> --config configs/paper/<study>.yaml` would, into
runs/paper_scale/<study> (its report under runs/paper_scale/<study>/report, so the shipped
reports stay as they are). Finished runs are reused, as in every study. `--tiny` shrinks the
model (width 16, 2 layers, 2 heads; the mixers' grid to width 16 and one short cell) and runs the
study's --quick form on two of its rows: what the test suite runs to keep every paper config working.
"""

from __future__ import annotations

import importlib
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from src.bounds import FLOAT_BYTES, HEADROOM, available_bytes, training_bytes
from src.flags import OneLineParser, UsageError, add_both_spellings, dry_run, fail, int_at_least, summary
from src.process import guarded

PROG = "python -m scripts.paper_scale"


@dataclass(frozen=True)
class PaperStudy:
    """How paper_scale drives one study: its module, its paper config, the flag that selects its
    rows, the flags it always gets at paper scale, the rows --tiny trains, how --tiny shrinks the
    config, its rows (what --only accepts) and its jobs (runs_dir, rows or None for all, quick,
    config) as the study makes them with those flags."""

    module: str
    config: str
    select_flag: str
    fixed: tuple[str, ...]
    tiny_rows: str
    shrink: Callable[[dict], dict]
    known_rows: Callable[[], list[str]]
    jobs: Callable[[Path, Sequence[str] | None, bool, str], list]


def _seeds(study, quick: bool):
    return study.SEEDS[:1] if quick else study.SEEDS


def _mechanism_rows() -> list[str]:
    from src.registry import registry

    return registry("seq_mixer").names()


def _mechanism_jobs(runs_dir, rows, quick, config) -> list:
    from scripts import mechanisms

    return mechanisms.make_jobs(runs_dir, rows or mechanisms.MECHANISMS, _seeds(mechanisms, quick), quick, config)


def _position_rows() -> list[str]:
    from scripts import lengthgen
    from src.registry import registry

    return [*registry("position").names(), lengthgen.MAMBA]


def _position_jobs(runs_dir, rows, quick, config) -> list:
    from scripts import lengthgen

    return lengthgen.make_jobs(
        runs_dir,
        rows or list(lengthgen.LIN_POSITIONS),
        ["linear_regression"],
        _seeds(lengthgen, quick),
        quick,
        None,
        config,
    )


def _mixer_rows() -> list[str]:
    from scripts import mixers

    return list(mixers.SEQ_MIXERS)


def _mixer_jobs(runs_dir, rows, quick, config) -> list:
    from scripts import mixers, mixers_grid

    return mixers.make_jobs(runs_dir, rows or mixers.SEQ_MIXERS, [0], quick, mixers_grid.read_grid(config))


def _tiny_gpt2(raw: dict) -> dict:
    model = {**raw["model"], "n_embd": 16, "n_head": 2, "n_layer": 2}
    return {**raw, "model": model}


def _tiny_llama(raw: dict) -> dict:
    model = {**raw["model"], "hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 2}
    return {**raw, "model": model}


def _tiny_grid(raw: dict) -> dict:
    first = {**raw["cells"][0], "batch_size": 8}
    return {**raw, "vocab_size": 64, "cells": [first], "widths": [16], "learning_rates": raw["learning_rates"][:2]}


STUDIES = {
    "mechanisms": PaperStudy(
        "scripts.mechanisms",
        "configs/paper/mechanisms.yaml",
        "--mechanisms",
        (),
        "softmax_causal,linear",
        _tiny_gpt2,
        _mechanism_rows,
        _mechanism_jobs,
    ),
    # linear regression only: conjunction needs a fixed dimension, the paper's curriculum grows it
    "lengthgen": PaperStudy(
        "scripts.lengthgen",
        "configs/paper/lengthgen.yaml",
        "--positions",
        ("--tasks", "linear_regression"),
        "rope,fire",
        _tiny_llama,
        _position_rows,
        _position_jobs,
    ),
    "mixers": PaperStudy(
        "scripts.mixers",
        "configs/paper/mixers.yaml",
        "--mixers",
        ("--seeds", "0"),
        "attention,mamba",
        _tiny_grid,
        _mixer_rows,
        _mixer_jobs,
    ),
}


def device_free_bytes() -> tuple[int | None, str]:
    """(free bytes, what the device is): a GPU's allocator limit less its bytes in use, else the
    machine's available memory."""
    import jax

    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(
            stats.get("bytes_in_use", 0)
        ), f"{device.device_kind} ({device.platform})"
    return available_bytes(), f"this machine's memory ({device.platform}, {os.cpu_count()} cores)"


def tokens_of(settings) -> int:
    """Tokens per training sequence: two per point at the curriculum's end, else the model's length."""
    curriculum = getattr(settings, "curriculum", None)
    return 2 * curriculum.points.end if curriculum is not None else settings.model.max_tokens


def step_work(settings) -> float:
    """Work of one training step of `settings` (work_of)."""
    m = settings.model
    return work_of(m.width, m.n_layer, tokens_of(settings), settings.train.batch_size, m.vocab_size)


def work_of(width: int, layers: int, tokens: int, batch: int, vocab: int = 0) -> float:
    """Work of one training step in FLOP-like units: 6 x parameters x tokens for the dense layers
    (about 12 D^2 parameters per layer), 12 x T^2 x D per layer for attention scores and their
    use, and the token read-out over the vocabulary; times the batch."""
    per_sequence = (
        6 * 12 * width**2 * layers * tokens + 12 * layers * tokens * tokens * width + 6 * tokens * width * max(vocab, 1)
    )
    return float(batch * per_sequence)


def run_bytes(settings) -> int:
    """src/bounds' over-estimate of one run's memory, plus logits and their gradients for token models."""
    m, tr = settings.model, settings.train
    t = tokens_of(settings)
    logits = 3 * tr.batch_size * t * m.vocab_size + tr.eval_size * t * m.vocab_size
    return (
        training_bytes(
            batch_size=tr.batch_size, eval_size=tr.eval_size, tokens=t, width=m.width, layers=m.n_layer, heads=m.n_head
        )
        + FLOAT_BYTES * logits
    )


def probe(settings, steps: int) -> tuple[float, int | None]:
    """(ms per step, peak bytes) of `settings`' own training chunk on this device: compiled, then
    the median of three chunks of `steps` steps."""
    import statistics
    import jax
    from src.systems import build

    trainer = build(settings)
    with trainer.context():
        state = trainer.init_state()
        jax.block_until_ready(trainer.run_chunk(state, 0, steps).losses)
        times = []
        for r in range(3):
            begin = time.perf_counter()
            jax.block_until_ready(trainer.run_chunk(state, steps * (r + 1), steps).losses)
            times.append(time.perf_counter() - begin)
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    peak = (
        int(stats["peak_bytes_in_use"])
        if stats and "peak_bytes_in_use" in stats
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )
    return 1000.0 * statistics.median(times) / steps, peak


def duration(hours: float) -> str:
    return f"{hours:.1f} h" if hours >= 1 else f"{60 * hours:.0f} min"


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def check_fits(needed: int, free: int | None, where: str, what: str, jobs: int) -> None:
    if free is not None and needed * jobs > HEADROOM * free:
        raise UsageError(
            f"{what} needs about {gib(needed)} per run x {jobs} in parallel but {where} has "
            f"{gib(free)} free (at most {HEADROOM:.0%} is used); accepted: fewer --jobs, "
            "a device with more memory, or --tiny"
        )


def estimate(study: PaperStudy, runs_dir: Path, rows, quick: bool, config: str, jobs: int, probe_steps: int) -> list:
    """Print the estimate (one paragraph) and return the study's jobs; UsageError when it cannot fit."""
    from src.jobs.engine import TODO_STATES

    known = study.known_rows()
    if rows and any(r not in known for r in rows):
        raise UsageError(f"--only={','.join(rows)!r} is not accepted; accepted: a comma list of {', '.join(known)}")
    planned = study.jobs(runs_dir, rows, quick, config)
    free, where = device_free_bytes()
    largest = max(planned, key=lambda j: (run_bytes(j.settings), step_work(j.settings)))
    check_fits(run_bytes(largest.settings), free, where, f"{largest.name} (estimate)", jobs)
    heaviest = max(planned, key=lambda j: step_work(j.settings))
    todo = [j for j in planned if j.state in TODO_STATES]
    ms, peak = probe(heaviest.settings, probe_steps)
    check_fits(peak, free, where, f"{heaviest.name} (measured)", jobs)
    unit = ms / step_work(heaviest.settings)
    hours = sum(j.settings.train.steps * step_work(j.settings) * unit for j in todo) / 1000 / 3600 / jobs
    m = heaviest.settings.model
    print(
        f"{PROG}: {len(planned)} runs ({len(planned) - len(todo)} already done) from {config} on {where}, "
        f"{gib(free) if free is not None else 'unknown memory'} free.\n"
        f"  heaviest run {heaviest.name}: width {m.width}, {m.n_layer} layers, {m.n_head} heads, "
        f"{tokens_of(heaviest.settings)} tokens, batch {heaviest.settings.train.batch_size}: "
        f"{ms:.1f} ms/step measured here, peak memory {gib(peak) if peak else 'unknown'} "
        f"(estimate {gib(run_bytes(largest.settings))} for the largest run).\n"
        f"  training time of the runs to do, {jobs} at a time: about {duration(hours)} "
        f"(every run scaled from the heaviest by its work per step; evaluation and compilation not counted).",
        flush=True,
    )
    return planned


def tiny_config(study: PaperStudy, folder: Path) -> str:
    """The study's paper config with its model (or grid) shrunk, written into `folder`."""
    import yaml
    from src.yaml_includes import load
    from src.files import atomic_write_text

    path = folder / Path(study.config).name
    atomic_write_text(path, yaml.safe_dump(study.shrink(load(study.config)), sort_keys=False))
    return str(path)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--study", required=True, choices=sorted(STUDIES), help="which study")
    parser.add_argument("--estimate", action="store_true", help="print the estimate and stop")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="the config at a tiny size, the study's --quick form on two rows (a smoke test)",
    )
    parser.add_argument(
        "--only", default=None, help="comma list of the study's rows (mechanisms / positions / mixers; default: all)"
    )
    parser.add_argument(
        "--jobs", type=int_at_least(1), default=1, help="runs in parallel (default 1: a paper-scale run fills a device)"
    )
    add_both_spellings(
        parser,
        "--runs-dir",
        default=None,
        help="run directories (default: runs/paper_scale/<study>, --tiny: <study>_tiny)",
    )
    add_both_spellings(
        parser,
        "--probe-steps",
        type=int_at_least(1),
        default=5,
        help="steps per timed chunk of the estimate (default 5)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="retrain runs made with other settings or code (otherwise refused)"
    )
    return parser


def study_command(study: PaperStudy, args, runs_dir: Path, rows: list[str] | None, config: str) -> list[str]:
    """The study command's arguments: the (paper or tiny) config, its folders and the rows asked for."""
    return [
        "--config",
        config,
        "--runs-dir",
        str(runs_dir),
        "--report-dir",
        str(runs_dir / "report"),
        "--jobs",
        str(args.jobs),
        *study.fixed,
        *(["--quick"] if args.tiny else []),
        *([study.select_flag, ",".join(rows)] if rows else []),
        *(["--overwrite"] if args.overwrite else []),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    study = STUDIES[args.study]
    runs_dir = Path(args.runs_dir or f"runs/paper_scale/{args.study}" + ("_tiny" if args.tiny else ""))
    rows = [r.strip() for r in (args.only or (study.tiny_rows if args.tiny else "")).split(",") if r.strip()] or None
    with tempfile.TemporaryDirectory(prefix="paper-scale-") as scratch:
        config = tiny_config(study, Path(scratch)) if args.tiny else study.config
        study_argv = study_command(study, args, runs_dir, rows, config)
        module = importlib.import_module(study.module)
        try:
            if args.only is not None and not rows:
                raise UsageError(
                    f"--only={args.only!r} is not accepted; accepted: a comma list of {', '.join(study.known_rows())}"
                )
            if dry_run(PROG, f"estimate and run {study.module} {' '.join(study_argv)}"):
                return 0
            estimate(study, runs_dir, rows, args.tiny, config, args.jobs, args.probe_steps)
        except UsageError as err:
            return fail(PROG, err)
        except ValueError as err:  # a settings refusal (SettingsError) of the paper config
            return fail(PROG, err)
        if args.estimate:
            return 0
        if args.jobs > 1:  # every child process would otherwise take 75 % of a GPU's memory
            os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{0.9 / args.jobs:.2f}")
        return module.main(study_argv)


if __name__ == "__main__":
    sys.exit(guarded(main))
