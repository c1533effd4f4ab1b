"""Out of distribution over seeds (SPEC §6; paper Fig. 3): the trained lsa1 models and one GD
step (η tuned at α = 1, weight scale 1) when the eval tasks' input range is scaled by α, or
their weight std is changed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from analysis.common import load_run, tuned_eta
from src.gd_paper.study.seed_runs import zero_loss
from src.gd_paper.metrics import make_scorer
from src.rundir import RunDir
from src.stats import over_seeds
from src.gd_paper.eval_set import make_eval_set


def ood(lsa1_runs: Sequence[RunDir], alphas: Sequence[float], weight_scales: Sequence[float]) -> dict:
    """Loss of the trained lsa1 models and of one GD step (η tuned at α = 1, weight scale 1)
    when the eval tasks' input range is scaled by α, or their weight std is changed."""
    loaded = [load_run(r) for r in lsa1_runs]
    eta = tuned_eta(lsa1_runs[0])
    base = loaded[0].settings
    scorer = make_scorer(loaded[0].model)  # same architecture for every seed

    def sweep(variants):
        rows = []
        for value, settings, alpha in variants:
            eval_set = make_eval_set(settings, alpha=alpha, gd_eta=eta)
            scores = [scorer(item.params, eval_set.tasks, eval_set.reference) for item in loaded]
            rows.append(
                {
                    "x": value,
                    "tf_loss": over_seeds([s["eval_loss"] for s in scores]),
                    "gd_loss": scores[0]["gd_loss"],
                    "zero_loss": zero_loss(eval_set.tasks),
                    "tf_over_gd": over_seeds([s["eval_loss"] / s["gd_loss"] for s in scores]),
                }
            )
        return rows

    alpha_rows = sweep([(float(a), base, float(a)) for a in alphas])
    weight_rows = sweep(
        [(float(w), replace(base, task=replace(base.task, weight_scale=float(w))), 1.0) for w in weight_scales]
    )
    return {
        "seeds": [item.settings.train.seed for item in loaded],
        "gd_eta": eta,
        "train_alpha": 1.0,
        "train_weight_scale": base.task.weight_scale,
        "alpha": alpha_rows,
        "weight_scale": weight_rows,
    }
