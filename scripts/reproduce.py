"""Reproduce the paper's main results end to end: train, evaluate, write report/REPRODUCTION.md.

    python -m scripts.reproduce            # the paper's steps, 3 seeds (make reproduce)
    python -m scripts.reproduce --quick    # reduced steps (make reproduce_quick)

1. One layer = one GD step        lsa1 vs one tuned GD step (loss, alignment over training)
2. K layers ≈ K GD steps, GD++    recurrent LSA, K = 2, 3, 4, vs K-step GD and GD++
3. Token construction             twolayer copy model vs one GD step, copy sensitivities
4. Out of distribution            lsa1 and GD vs input range α and vs weight scale
5. Distractors                    lsa1 and GD vs the number of random pairs in the context
6. Non-linear regression          an MLP block + LSA on sine tasks vs GD on learned features,
                                  one GD step on raw inputs and RBF kernel baselines

Training jobs are standard run directories under --runs-dir (<job> = lsa1_seed0,
lsa_rec_k2_seed0, twolayer_seed0, sine_mlp_lsa_seed0, sine_features_gd_seed0, ...): the presets' Settings, trained by the job engine in
subprocesses, --jobs at a time (one thread each, a shared persistent XLA compilation cache).
Rerunning skips finished runs whose settings match; incomplete runs, and runs made
with other settings, are retrained with --overwrite. The evaluations then run
in-process and write report/REPRODUCTION.md (one table), report/reproduce_results.json
and report/figures/paper/*.png, each atomically.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from plots.paper_report import FIG_DIR, REPORT, RESULTS, fmt_seconds
from src.flags import OneLineParser, UsageError, fail, summary
from src.process import guarded
from src.presets import preset_settings
from src.jobs.engine import Job
from src.jobs.study import add_executor_flags, check_directory, finish_study
from src.presets import MODEL_PRESETS
from src.registry import choice

PROG = "python -m scripts.reproduce"
SEEDS = (0, 1, 2)
KS = (2, 3, 4)
ALPHAS = tuple(0.5 + 0.125 * i for i in range(13))            # 0.5, 0.625, ..., 2.0
WEIGHT_SCALES = (0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0)
DISTRACTORS = (0, 2, 4, 6, 8)
# Steps per model: the paper's (SPEC §4; lsa_rec as lsa1) and the --quick ones.
# The non-linear part trains at batch NONLINEAR_BATCH (the notebook: 20,000 steps at 2,048).
FULL = {"lsa1": 5000, "lsa_rec": 5000, "twolayer": 10_000, "nonlinear": 8000, "eval_size": 10_000,
        "gdpp_steps": 1000}
QUICK = {"lsa1": 1000, "lsa_rec": 600, "twolayer": 1000, "nonlinear": 300, "eval_size": 2000,
         "gdpp_steps": 300}
STEP_FLAG_LABELS = {"nonlinear": "each sine model (mlp_lsa, features_gd)"}
NONLINEAR_BATCH = 512
# A constant learning rate, the notebook's: with a 5 % warm-up and cosine decay over 6,000 steps
# two of three seeds were still leaving the transformer's plateau when the rate ran out
# (docs/gd_paper.md).
NONLINEAR_WARMUP = None
# Both sine models start from VarianceScaling(0.02), the notebook's GD model's scale. Its
# transformer's 0.002 sits on a plateau for ~5,000 steps at batch 512 (docs/gd_paper.md).
NONLINEAR_INIT = 0.02


FlagError = UsageError   # a bad flag value: one line naming the flag, the value and what is accepted


# ---------------------------------------------------------------------------
# Flags

def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description=summary(__doc__),
                      formatter_class=argparse.RawDescriptionHelpFormatter,
                      epilog="Sizes: explicit flags win over --steps-scale, which scales the "
                             "mode's steps (the paper's, or --quick's).")
    p.add_argument("--quick", action="store_true",
                   help=f"reduced steps (lsa1 {QUICK['lsa1']}, lsa_rec {QUICK['lsa_rec']}, twolayer "
                        f"{QUICK['twolayer']}, eval_size {QUICK['eval_size']}); default --runs-dir "
                        "runs/reproduce_quick")
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="training seeds (default: 0,1,2)")
    p.add_argument("--ks", default=",".join(map(str, KS)),
                   help="depths K >= 2 of the recurrent LSA (default: 2,3,4)")
    p.add_argument("--steps-scale", "--steps_scale", dest="steps_scale", default="1",
                   help="multiply every model's steps by this (default: 1)")
    for name, model in (("lsa1", "lsa1"), ("rec", "lsa_rec"), ("twolayer", "twolayer"),
                        ("nonlinear", "nonlinear")):
        p.add_argument(f"--{name}-steps", f"--{name}_steps", dest=f"{name}_steps", default=None,
                       help=f"training steps of {STEP_FLAG_LABELS.get(model, model)} "
                            f"(default: {FULL[model]}, quick {QUICK[model]})")
    p.add_argument("--batch_size", "--batch-size", dest="batch_size", default="2048",
                   help="tasks per training step (default: 2048)")
    p.add_argument("--eval_size", "--eval-size", dest="eval_size", default=None,
                   help=f"fixed eval tasks (default: {FULL['eval_size']}, quick {QUICK['eval_size']})")
    p.add_argument("--log_every", "--log-every", dest="log_every", default=None,
                   help="log every this many steps (default: 100, or steps/10 for runs < 1000 steps)")
    p.add_argument("--gdpp-steps", "--gdpp_steps", dest="gdpp_steps", default=None,
                   help=f"Adam steps fitting GD++ per K (default: {FULL['gdpp_steps']}, "
                        f"quick {QUICK['gdpp_steps']})")
    p.add_argument("--gdpp-batch", "--gdpp_batch", dest="gdpp_batch", default="1024",
                   help="tasks per GD++ fitting step (default: 1024)")
    p.add_argument("--gdpp-lr", "--gdpp_lr", dest="gdpp_lr", default="0.03",
                   help="Adam learning rate of the GD++ fit (default: 0.03)")
    p.add_argument("--alphas", default=",".join(f"{a:g}" for a in ALPHAS),
                   help="input-range scales for the OOD test (default: 0.5,0.625,...,2)")
    p.add_argument("--weight-scales", "--weight_scales", dest="weight_scales",
                   default=",".join(f"{w:g}" for w in WEIGHT_SCALES),
                   help="weight scales for the OOD test (default: 0.5,...,5)")
    p.add_argument("--distractors", default=",".join(map(str, DISTRACTORS)),
                   help="numbers of random pairs among the N=10 context pairs (default: 0,2,4,6,8)")
    p.add_argument("--runs-dir", "--runs_dir", dest="runs_dir", default=None,
                   help="where the run directories go (default: runs/reproduce, quick: "
                        "runs/reproduce_quick)")
    p.add_argument("--report-dir", "--report_dir", dest="report_dir", default=None,
                   help=f"where {REPORT}, {RESULTS} and {FIG_DIR}/ go (default: report; quick: "
                        "report/quick, so a quick run never replaces the full report)")
    p.add_argument("--jobs", default=str(os.cpu_count() or 1),
                   help=f"training runs in parallel (default: os.cpu_count() = {os.cpu_count() or 1})")
    p.add_argument("--quiet", action="store_true", help="print only the summary lines")
    p.add_argument("--overwrite", action="store_true",
                   help="retrain runs of --runs-dir made with other settings or code (default: refuse, one line)")
    add_executor_flags(p)
    return p


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
    steps: dict                 # model -> steps
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
    for flag, model in (("lsa1", "lsa1"), ("rec", "lsa_rec"), ("twolayer", "twolayer"),
                        ("nonlinear", "nonlinear")):
        given = getattr(args, f"{flag}_steps")
        steps[model] = (_int(f"--{flag}-steps", given, 1) if given is not None
                        else max(1, int(round(base[model] * scale))))
    n = 10  # N of the reference task (SPEC §1); the distractor counts index its pairs
    distractors = _list("--distractors", args.distractors, lambda f, t: _int(f, t, 0),
                        f"integers in [0, {n}]")
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
        eval_size=(_int("--eval_size", args.eval_size, 2) if args.eval_size is not None
                   else base["eval_size"]),
        log_every=_int("--log_every", args.log_every, 1) if args.log_every is not None else None,
        gdpp_steps=(_int("--gdpp-steps", args.gdpp_steps, 1) if args.gdpp_steps is not None
                    else base["gdpp_steps"]),
        gdpp_batch=_int("--gdpp-batch", args.gdpp_batch, 1),
        gdpp_lr=_pos_float("--gdpp-lr", args.gdpp_lr),
        alphas=tuple(sorted(_list("--alphas", args.alphas, _pos_float, "finite numbers > 0"))),
        weight_scales=tuple(sorted(_list("--weight-scales", args.weight_scales, _pos_float,
                                         "finite numbers > 0"))),
        distractors=tuple(sorted(distractors)),
        runs_dir=runs_dir, report_dir=report_dir,
        jobs=_int("--jobs", args.jobs, 1), quiet=args.quiet)


# ---------------------------------------------------------------------------
# Training jobs

@dataclass
class ReproJob(Job):
    part: str = ""          # which experiment needs it: one_step_gd | k_steps | copy | nonlinear
    model: str = ""         # a preset (lsa1 | lsa_rec | twolayer) or a non-linear model (mlp_lsa | features_gd)
    seed: int = 0
    k: int = 1              # layers


def _log_every(plan: Plan, steps: int) -> int:
    if plan.log_every is not None:
        return min(plan.log_every, steps)
    return 100 if steps >= 1000 else max(1, steps // 10)


def make_jobs(plan: Plan) -> list[ReproJob]:
    """The presets' settings at the plan's sizes, one job per model, depth and seed."""
    jobs = []

    def add(part: str, model: str, seed: int, k: int, name: str) -> None:
        steps = plan.steps[model]
        spec = MODEL_PRESETS[model]
        settings = preset_settings(model, num_layers=None if spec.fixed_depth else k, seed=seed,
                                steps=steps, batch_size=plan.batch_size, eval_size=plan.eval_size,
                                log_every=_log_every(plan, steps))
        jobs.append(ReproJob(name, settings, plan.runs_dir / name, cost=spec.relative_cost(k, steps),
                             part=part, model=model, seed=seed, k=k))

    for seed in plan.seeds:
        add("one_step_gd", "lsa1", seed, 1, f"lsa1_seed{seed}")
        for k in plan.ks:
            add("k_steps", "lsa_rec", seed, k, f"lsa_rec_k{k}_seed{seed}")
        add("copy", "twolayer", seed, 2, f"twolayer_seed{seed}")
        for model in ("mlp_lsa", "features_gd"):
            name = f"sine_{model}_seed{seed}"
            steps = plan.steps["nonlinear"]
            jobs.append(ReproJob(name, nonlinear_settings(plan, model, seed), plan.runs_dir / name,
                                 cost=steps * 0.5, part="nonlinear", model=model, seed=seed))
    return jobs


def nonlinear_settings(plan: Plan, model: str, seed: int):
    """The non-linear part's settings: sine tasks (the notebook's), one model, the plan's sizes."""
    from src.systems.nonlinear import NonlinearSettings, NonlinearTrain
    steps = plan.steps["nonlinear"]
    train = NonlinearTrain(steps=steps, batch_size=NONLINEAR_BATCH, warmup_fraction=NONLINEAR_WARMUP,
                           seed=seed, eval_size=plan.eval_size, log_every=_log_every(plan, steps))
    return NonlinearSettings(model=choice("nonlinear_model", model, init_scale=NONLINEAR_INIT),
                             train=train).validate()


# ---------------------------------------------------------------------------
# Evaluation, figures, report

def evaluate(plan: Plan, jobs: list[Job], say) -> tuple[dict, dict]:
    """Run every experiment in-process: (results, seconds per experiment)."""
    from analysis import copy_model, distractors, k_steps, nonlinear, ood_scales, one_step_gd
    from src.rundir import RunDir

    def runs(part: str, k: int | None = None, model: str | None = None) -> list:
        return [RunDir(j.path) for j in jobs if j.part == part and (k is None or j.k == k)
                and (model is None or j.model == model)]

    experiments = {
        "one_step_gd": lambda: one_step_gd.one_step_gd(runs("one_step_gd")),
        "k_steps": lambda: k_steps.k_steps({k: runs("k_steps", k) for k in plan.ks},
                                           gdpp_steps=plan.gdpp_steps, gdpp_batch=plan.gdpp_batch,
                                           gdpp_lr=plan.gdpp_lr),
        "copy": lambda: copy_model.copy_model(runs("copy")),
        "ood": lambda: ood_scales.ood(runs("one_step_gd"), plan.alphas, plan.weight_scales),
        "distractors": lambda: distractors.distractors(runs("one_step_gd"), plan.distractors),
        "nonlinear": lambda: nonlinear.nonlinear({m: runs("nonlinear", model=m)
                                                  for m in ("mlp_lsa", "features_gd")}),
    }
    results, seconds = {}, {}
    for name, work in experiments.items():
        start = time.monotonic()
        results[name] = work()
        seconds[name] = time.monotonic() - start
        say(f"  evaluated {name} ({seconds[name]:.1f}s)")
    return results, seconds


def part_times(jobs: list[Job], eval_seconds: dict) -> dict:
    """Per experiment: training seconds (sum over its runs) + evaluation seconds."""
    from src.rundir import RunDir, names
    train = {}
    for job in jobs:
        try:
            seconds = float(RunDir(job.path).load_json(names.SUMMARY).get("train_seconds") or 0.0)
        except Exception:  # noqa: BLE001
            seconds = 0.0
        seconds = max(seconds, job.seconds)   # a run trained now: its whole subprocess time
        train[job.part] = train.get(job.part, 0.0) + seconds
    train["ood"] = train["distractors"] = 0.0   # they reuse the lsa1 runs
    return {part: train.get(part, 0.0) + eval_seconds.get(part, 0.0) for part in eval_seconds}


def write_everything(plan: Plan, jobs: list[Job], say, seconds: float, command: str, head) -> list[Path]:
    """After training (`seconds` of it): every experiment evaluated in-process, the checks, the
    figures, report/REPRODUCTION.md and reproduction_results.json; the paths written."""
    from analysis.paper_checks import checks as compute_checks
    from plots.paper_report import write_figures, write_report
    from src.files import atomic_write_json
    say(f"{PROG}: training done ({fmt_seconds(seconds)}); evaluating")
    start = time.monotonic()
    results, eval_seconds = evaluate(plan, jobs, say)
    checks = compute_checks(results)
    parts = part_times(jobs, eval_seconds)
    figures = write_figures(plan, results)
    total = seconds + time.monotonic() - start
    atomic_write_json(plan.report_dir / RESULTS, {
        "command": command, "quick": plan.quick, "seeds": list(plan.seeds), "ks": list(plan.ks),
        "steps": plan.steps, "batch_size": plan.batch_size, "eval_size": plan.eval_size,
        "runs": {j.name: {"path": str(j.path), "part": j.part, "state": j.state,
                          "subprocess_seconds": round(j.seconds, 3)} for j in jobs},
        "results": results, "checks": checks,
        "seconds": {"total": total, "training_wall": seconds, "parts": parts,
                    "evaluation": eval_seconds},
        "figures": [p for p, _ in figures]})
    write_report(plan, jobs, results, checks, parts, figures, total, command,
                 QUICK if plan.quick else FULL, head)
    for c in checks:
        print(f"{c['status']:8s} {c['name']}: {c['detail']}")
    return [plan.report_dir / REPORT, plan.report_dir / RESULTS, plan.report_dir / FIG_DIR]


def main(argv: Sequence[str] | None = None) -> int:
    """The study frame (src/jobs/study.py): flags checked, runs planned under the runs-directory
    lock (finished runs reused, runs of other settings refused unless --overwrite), trained, then
    evaluated and reported."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        plan = make_plan(args)
    except FlagError as err:
        return fail(PROG, err)
    say = (lambda m: None) if plan.quiet else (lambda m: print(m, flush=True))
    frame_args = argparse.Namespace(**{**vars(args), "jobs": plan.jobs})
    return finish_study(PROG, argv, frame_args, plan.runs_dir, plan.report_dir, lambda: make_jobs(plan),
                        lambda jobs, report_dir, quick, seconds, command, head: write_everything(
                            plan, jobs, say, seconds, command, head), quiet=plan.quiet)

if __name__ == "__main__":
    sys.exit(guarded(main))
