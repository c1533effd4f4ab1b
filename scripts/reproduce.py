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
lsa_rec_k2_seed0, twolayer_seed0, sine_mlp_lsa_seed0, sine_features_gd_seed0, ...): the presets' Settings, trained by
the job engine in
subprocesses, --jobs at a time (one thread each, a shared persistent XLA compilation cache).
Rerunning skips finished runs whose settings match; incomplete runs, and runs made
with other settings, are retrained with --overwrite. The evaluations then run
in-process and write report/REPRODUCTION.md (one table), report/reproduce_results.json
and report/figures/paper/*.png, each atomically. The sizes and flag checks are
scripts/reproduce_plan.py's, the evaluation scripts/reproduce_eval.py's.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from plots.paper_report import FIG_DIR, REPORT, RESULTS, fmt_seconds
from scripts.reproduce_eval import evaluate, part_times
from scripts.reproduce_plan import (
    ALPHAS,
    DISTRACTORS,
    FULL,
    KS,
    NONLINEAR_BATCH,
    NONLINEAR_INIT,
    NONLINEAR_WARMUP,
    QUICK,
    SEEDS,
    STEP_FLAG_LABELS,
    WEIGHT_SCALES,
    Plan,
    make_plan,
)
from src.flags import OneLineParser, add_both_spellings, summary
from src.gd_paper.presets import preset_settings
from src.jobs.declared import Cell, CellJob, Study, StudyRun, cell_runs
from src.jobs.study import add_executor_flags, run_as_command, study_command
from src.gd_paper.presets import MODEL_PRESETS
from src.registry import choice

PROG = "python -m scripts.reproduce"


# ---------------------------------------------------------------------------
# Flags


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog=PROG,
        description=summary(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Sizes: explicit flags win over --steps-scale, which scales the "
        "mode's steps (the paper's, or --quick's).",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"reduced steps (lsa1 {QUICK['lsa1']}, lsa_rec {QUICK['lsa_rec']}, twolayer "
        f"{QUICK['twolayer']}, eval_size {QUICK['eval_size']}); default --runs-dir "
        "runs/reproduce_quick",
    )
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="training seeds (default: 0,1,2)")
    p.add_argument("--ks", default=",".join(map(str, KS)), help="depths K >= 2 of the recurrent LSA (default: 2,3,4)")
    _size_flags(p)
    _study_flags(p)
    add_both_spellings(
        p,
        "--runs-dir",
        default=None,
        help="where the run directories go (default: runs/reproduce, quick: runs/reproduce_quick)",
    )
    add_both_spellings(
        p,
        "--report-dir",
        default=None,
        help=f"where {REPORT}, {RESULTS} and {FIG_DIR}/ go (default: report; quick: "
        "report/quick, so a quick run never replaces the full report)",
    )
    p.add_argument(
        "--jobs",
        default=str(os.cpu_count() or 1),
        help=f"training runs in parallel (default: os.cpu_count() = {os.cpu_count() or 1})",
    )
    p.add_argument("--quiet", action="store_true", help="print only the summary lines")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="retrain runs of --runs-dir made with other settings or code (default: refuse, one line)",
    )
    add_executor_flags(p)
    return p


def _size_flags(p) -> None:
    """Steps (scaled or per model), batch, eval and log sizes, and the GD++ fit's."""
    add_both_spellings(
        p,
        "--steps-scale",
        default="1",
        help="multiply every model's steps by this (default: 1)",
    )
    for name, model in (("lsa1", "lsa1"), ("rec", "lsa_rec"), ("twolayer", "twolayer"), ("nonlinear", "nonlinear")):
        p.add_argument(
            f"--{name}-steps",
            f"--{name}_steps",
            dest=f"{name}_steps",
            default=None,
            help=f"training steps of {STEP_FLAG_LABELS.get(model, model)} "
            f"(default: {FULL[model]}, quick {QUICK[model]})",
        )
    add_both_spellings(
        p,
        "--batch_size",
        default="2048",
        help="tasks per training step (default: 2048)",
    )
    add_both_spellings(
        p,
        "--eval_size",
        default=None,
        help=f"fixed eval tasks (default: {FULL['eval_size']}, quick {QUICK['eval_size']})",
    )
    add_both_spellings(
        p,
        "--log_every",
        default=None,
        help="log every this many steps (default: 100, or steps/10 for runs < 1000 steps)",
    )
    add_both_spellings(
        p,
        "--gdpp-steps",
        default=None,
        help=f"Adam steps fitting GD++ per K (default: {FULL['gdpp_steps']}, quick {QUICK['gdpp_steps']})",
    )
    add_both_spellings(
        p,
        "--gdpp-batch",
        default="1024",
        help="tasks per GD++ fitting step (default: 1024)",
    )
    add_both_spellings(
        p,
        "--gdpp-lr",
        default="0.03",
        help="Adam learning rate of the GD++ fit (default: 0.03)",
    )


def _study_flags(p) -> None:
    """The out-of-distribution scales and the distractor counts the studies test."""
    p.add_argument(
        "--alphas",
        default=",".join(f"{a:g}" for a in ALPHAS),
        help="input-range scales for the OOD test (default: 0.5,0.625,...,2)",
    )
    add_both_spellings(
        p,
        "--weight-scales",
        default=",".join(f"{w:g}" for w in WEIGHT_SCALES),
        help="weight scales for the OOD test (default: 0.5,...,5)",
    )
    p.add_argument(
        "--distractors",
        default=",".join(map(str, DISTRACTORS)),
        help="numbers of random pairs among the N=10 context pairs (default: 0,2,4,6,8)",
    )


# ---------------------------------------------------------------------------
# Training jobs


def _log_every(plan: Plan, steps: int) -> int:
    if plan.log_every is not None:
        return min(plan.log_every, steps)
    return 100 if steps >= 1000 else max(1, steps // 10)


def study_cells(plan: Plan) -> list[Cell]:
    """The presets' settings at the plan's sizes, one run per model, depth and seed (whole runs; tags:
    its part, one_step_gd | k_steps | copy | nonlinear, its model, a preset or a non-linear model, and
    k, its layers)."""
    cells = []

    def add(part: str, model: str, seed: int, k: int, name: str) -> None:
        steps = plan.steps[model]
        spec = MODEL_PRESETS[model]
        settings = preset_settings(
            model,
            num_layers=None if spec.fixed_depth else k,
            seed=seed,
            steps=steps,
            batch_size=plan.batch_size,
            eval_size=plan.eval_size,
            log_every=_log_every(plan, steps),
        )
        cells.append(Cell(name, settings, {"part": part, "model": model, "k": k}, cost=spec.relative_cost(k, steps)))

    for seed in plan.seeds:
        add("one_step_gd", "lsa1", seed, 1, f"lsa1_seed{seed}")
        for k in plan.ks:
            add("k_steps", "lsa_rec", seed, k, f"lsa_rec_k{k}_seed{seed}")
        add("copy", "twolayer", seed, 2, f"twolayer_seed{seed}")
        for model in ("mlp_lsa", "features_gd"):
            name = f"sine_{model}_seed{seed}"
            steps = plan.steps["nonlinear"]
            tags = {"part": "nonlinear", "model": model, "k": 1}
            cells.append(Cell(name, nonlinear_settings(plan, model, seed), tags, cost=steps * 0.5))
    return cells


def make_jobs(plan: Plan) -> list[CellJob]:
    return cell_runs(study_cells(plan), None, plan.runs_dir)


def nonlinear_settings(plan: Plan, model: str, seed: int):
    """The non-linear part's settings: sine tasks (the notebook's), one model, the plan's sizes."""
    from src.systems.nonlinear import NonlinearSettings, NonlinearTrain

    steps = plan.steps["nonlinear"]
    train = NonlinearTrain(
        steps=steps,
        batch_size=NONLINEAR_BATCH,
        warmup_fraction=NONLINEAR_WARMUP,
        seed=seed,
        eval_size=plan.eval_size,
        log_every=_log_every(plan, steps),
    )
    return NonlinearSettings(model=choice("nonlinear_model", model, init_scale=NONLINEAR_INIT), train=train).validate()


# ---------------------------------------------------------------------------
# Evaluation, figures, report


def write_everything(run: StudyRun) -> list[Path]:
    """After training (run.seconds of it): every experiment evaluated in-process, the checks, the
    figures, report/REPRODUCTION.md and reproduction_results.json; the paths written."""
    from src.gd_paper.study.paper_checks import checks as compute_checks
    from plots.paper_report import write_figures, write_report
    from src.files import atomic_write_json

    plan, jobs, seconds, command, head = make_plan(run.flags), run.jobs, run.seconds, run.command, run.head
    say = (lambda m: None) if plan.quiet else (lambda m: print(m, flush=True))

    say(f"{PROG}: training done ({fmt_seconds(seconds)}); evaluating")
    start = time.monotonic()
    results, eval_seconds = evaluate(plan, jobs, say)
    checks = compute_checks(results)
    parts = part_times(jobs, eval_seconds)
    figures = write_figures(plan, results)
    total = seconds + time.monotonic() - start
    atomic_write_json(
        plan.report_dir / RESULTS,
        {
            "command": command,
            "quick": plan.quick,
            "seeds": list(plan.seeds),
            "ks": list(plan.ks),
            "steps": plan.steps,
            "batch_size": plan.batch_size,
            "eval_size": plan.eval_size,
            "runs": {
                j.name: {
                    "path": str(j.path),
                    "part": j.part,
                    "state": j.state,
                    "subprocess_seconds": round(j.seconds, 3),
                }
                for j in jobs
            },
            "results": results,
            "checks": checks,
            "seconds": {"total": total, "training_wall": seconds, "parts": parts, "evaluation": eval_seconds},
            "figures": [p for p, _ in figures],
        },
    )
    write_report(plan, jobs, results, checks, parts, figures, total, command, QUICK if plan.quick else FULL, head)
    for c in checks:
        print(f"{c['status']:8s} {c['name']}: {c['detail']}")
    return [plan.report_dir / REPORT, plan.report_dir / RESULTS, plan.report_dir / FIG_DIR]


def workers(flags) -> None:
    """--jobs of its own parser (a string, os.cpu_count() by default) as the frame's number of workers."""
    flags.jobs = make_plan(flags).jobs


STUDY = Study(
    "reproduce",
    __doc__,
    "the quick sizes (a smoke test)",
    cells=lambda flags, runs_dir: study_cells(make_plan(flags)),
    report=write_everything,
    seeds=lambda flags: None,  # whole runs: each seed's models in the plan's order
    check=make_plan,  # every flag checked (one line), the sizes resolved
    prepare=workers,
    parser=build_parser,  # the paper's sizes per model (--lsa1-steps, ...) beside the frame's flags
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
