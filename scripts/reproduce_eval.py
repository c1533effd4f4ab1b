"""The reproduction's evaluation (scripts/reproduce.py, after training): every experiment run
in-process over the trained run directories (one_step_gd, k_steps, copy, ood, distractors,
nonlinear; analysis/), and the seconds each experiment took, training plus evaluation.
"""

from __future__ import annotations

import time

from scripts.reproduce_plan import Plan
from src.jobs.engine import Job


def evaluate(plan: Plan, jobs: list[Job], say) -> tuple[dict, dict]:
    """Run every experiment in-process: (results, seconds per experiment)."""
    from src.gd_paper.study import copy_model, distractors, k_steps, nonlinear, ood_scales, one_step_gd
    from src.rundir import RunDir

    def runs(part: str, k: int | None = None, model: str | None = None) -> list:
        return [
            RunDir(j.path)
            for j in jobs
            if j.part == part and (k is None or j.k == k) and (model is None or j.model == model)
        ]

    experiments = {
        "one_step_gd": lambda: one_step_gd.one_step_gd(runs("one_step_gd")),
        "k_steps": lambda: k_steps.k_steps(
            {k: runs("k_steps", k) for k in plan.ks},
            gdpp_steps=plan.gdpp_steps,
            gdpp_batch=plan.gdpp_batch,
            gdpp_lr=plan.gdpp_lr,
        ),
        "copy": lambda: copy_model.copy_model(runs("copy")),
        "ood": lambda: ood_scales.ood(runs("one_step_gd"), plan.alphas, plan.weight_scales),
        "distractors": lambda: distractors.distractors(runs("one_step_gd"), plan.distractors),
        "nonlinear": lambda: nonlinear.nonlinear({m: runs("nonlinear", model=m) for m in ("mlp_lsa", "features_gd")}),
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
        seconds = max(seconds, job.seconds)  # a run trained now: its whole subprocess time
        train[job.part] = train.get(job.part, 0.0) + seconds
    train["ood"] = train["distractors"] = 0.0  # they reuse the lsa1 runs
    return {part: train.get(part, 0.0) + eval_seconds.get(part, 0.0) for part in eval_seconds}
