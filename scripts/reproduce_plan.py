"""The reproduction's sizes and flag checks (scripts/reproduce.py): the paper's steps per model and
the --quick ones (FULL, QUICK; training steps, eval tasks and GD++ fitting steps), the sweeps' values
(seeds, depths K, input scales α, weight scales, distractor counts), the non-linear part's batch and
initialisation, and `make_plan`, which checks every flag of build_parser's namespace into a `Plan`
(FlagError: one line naming the flag, the value and what is accepted).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

from src.flags import UsageError
from src.jobs.study import check_directory

SEEDS = (0, 1, 2)
KS = (2, 3, 4)
ALPHAS = tuple(0.5 + 0.125 * i for i in range(13))  # 0.5, 0.625, ..., 2.0
WEIGHT_SCALES = (0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0)
DISTRACTORS = (0, 2, 4, 6, 8)
# Steps per model: the paper's (SPEC §4; lsa_rec as lsa1) and the --quick ones.
# The non-linear part trains at batch NONLINEAR_BATCH (the notebook: 20,000 steps at 2,048).
FULL = {"lsa1": 5000, "lsa_rec": 5000, "twolayer": 10_000, "nonlinear": 8000, "eval_size": 10_000, "gdpp_steps": 1000}
QUICK = {"lsa1": 1000, "lsa_rec": 600, "twolayer": 1000, "nonlinear": 300, "eval_size": 2000, "gdpp_steps": 300}
STEP_FLAG_LABELS = {"nonlinear": "each sine model (mlp_lsa, features_gd)"}
NONLINEAR_BATCH = 512
# A constant learning rate, the notebook's: with a 5 % warm-up and cosine decay over 6,000 steps
# two of three seeds were still leaving the transformer's plateau when the rate ran out
# (docs/gd_paper.md).
NONLINEAR_WARMUP = None
# Both sine models start from VarianceScaling(0.02), the notebook's GD model's scale. Its
# transformer's 0.002 sits on a plateau for ~5,000 steps at batch 512 (docs/gd_paper.md).
NONLINEAR_INIT = 0.02


FlagError = UsageError  # a bad flag value: one line naming the flag, the value and what is accepted


def _int(flag: str, text, low: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise FlagError(f"{flag}={text!r} is not an integer; accepted: an integer >= {low}") from None
    if value < low:
        raise FlagError(f"{flag}={text} is out of range; accepted: an integer >= {low}")
    return value


def _pos_float(flag: str, text) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise FlagError(f"{flag}={text!r} is not accepted; accepted: a finite number > 0")
    return value


def _list(flag: str, text: str, parse, what: str) -> list:
    items = [t.strip() for t in str(text).split(",")]
    if not text.strip() or any(not t for t in items):
        raise FlagError(f"{flag}={text!r} has an empty item; accepted: a comma-separated list of {what}")
    values = [parse(flag, t) for t in items]
    if len(set(values)) != len(values):
        raise FlagError(f"{flag}={text!r} repeats a value; accepted: distinct {what}")
    return values


@dataclass(frozen=True)
class Plan:
    quick: bool
    seeds: tuple[int, ...]
    ks: tuple[int, ...]
    steps: dict  # model -> steps
    batch_size: int
    eval_size: int
    log_every: int | None
    gdpp_steps: int
    gdpp_batch: int
    gdpp_lr: float
    alphas: tuple[float, ...]
    weight_scales: tuple[float, ...]
    distractors: tuple[int, ...]
    runs_dir: Path
    report_dir: Path
    jobs: int
    quiet: bool


def make_plan(args: argparse.Namespace) -> Plan:
    """Check every flag (FlagError with one line) and resolve the sizes."""
    base = QUICK if args.quick else FULL
    scale = _pos_float("--steps-scale", args.steps_scale)
    steps = {}
    for flag, model in (("lsa1", "lsa1"), ("rec", "lsa_rec"), ("twolayer", "twolayer"), ("nonlinear", "nonlinear")):
        given = getattr(args, f"{flag}_steps")
        steps[model] = (
            _int(f"--{flag}-steps", given, 1) if given is not None else max(1, int(round(base[model] * scale)))
        )
    n = 10  # N of the reference task (SPEC §1); the distractor counts index its pairs
    distractors = _list("--distractors", args.distractors, lambda f, t: _int(f, t, 0), f"integers in [0, {n}]")
    for k in distractors:
        if k > n:
            raise FlagError(f"--distractors={k} is out of range; accepted: integers in [0, {n}]")
    runs_dir = Path(args.runs_dir or ("runs/reproduce_quick" if args.quick else "runs/reproduce"))
    report_dir = Path(args.report_dir or ("report/quick" if args.quick else "report"))
    check_directory("--runs-dir", runs_dir)
    check_directory("--report-dir", report_dir)
    return Plan(
        quick=args.quick,
        seeds=tuple(_list("--seeds", args.seeds, lambda f, t: _int(f, t, 0), "integers >= 0")),
        ks=tuple(sorted(_list("--ks", args.ks, lambda f, t: _int(f, t, 2), "integers >= 2"))),
        steps=steps,
        batch_size=_int("--batch_size", args.batch_size, 1),
        eval_size=(_int("--eval_size", args.eval_size, 2) if args.eval_size is not None else base["eval_size"]),
        log_every=_int("--log_every", args.log_every, 1) if args.log_every is not None else None,
        gdpp_steps=(_int("--gdpp-steps", args.gdpp_steps, 1) if args.gdpp_steps is not None else base["gdpp_steps"]),
        gdpp_batch=_int("--gdpp-batch", args.gdpp_batch, 1),
        gdpp_lr=_pos_float("--gdpp-lr", args.gdpp_lr),
        alphas=tuple(sorted(_list("--alphas", args.alphas, _pos_float, "finite numbers > 0"))),
        weight_scales=tuple(sorted(_list("--weight-scales", args.weight_scales, _pos_float, "finite numbers > 0"))),
        distractors=tuple(sorted(distractors)),
        runs_dir=runs_dir,
        report_dir=report_dir,
        jobs=_int("--jobs", args.jobs, 1),
        quiet=args.quiet,
    )
