"""Distractors over seeds: the trained lsa1 models and one GD step (η tuned on clean tasks)
when k of the N context pairs are random pairs (fresh x', label y' ~ N(0, σ²)).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from analysis.common import load_run, tuned_eta
from src.gd_paper.study.seed_runs import zero_loss
from src.gd_paper.config import CurriculumConfig
from src.gd_paper.metrics import make_scorer
from src.rundir import RunDir
from src.stats import over_seeds
from src.gd_paper.eval_set import make_eval_set


def distractors(lsa1_runs: Sequence[RunDir], counts: Sequence[int], sigma: float = 1.0) -> dict:
    """Loss of the trained lsa1 models and of one GD step (η tuned on clean tasks) when k of
    the N context pairs are random pairs (fresh x', label y' ~ N(0, σ²)), k in `counts`."""
    loaded = [load_run(r) for r in lsa1_runs]
    eta = tuned_eta(lsa1_runs[0])
    base = loaded[0].settings
    n = base.task.num_context
    scorer = make_scorer(loaded[0].model)
    rows = []
    for k in counts:
        curriculum = (
            CurriculumConfig()
            if k == 0
            else CurriculumConfig(noise_mode="random_pairs", noise_p=k / n, noise_sigma=sigma)
        )
        eval_set = make_eval_set(replace(base, eval_curriculum=curriculum), gd_eta=eta)
        corrupted = float(np.mean(np.sum(eval_set.noise_mask, axis=1)))
        scores = [scorer(item.params, eval_set.tasks, eval_set.reference) for item in loaded]
        rows.append(
            {
                "k": int(k),
                "corrupted_per_task": corrupted,
                "tf_loss": over_seeds([s["eval_loss"] for s in scores]),
                "gd_loss": scores[0]["gd_loss"],
                "zero_loss": zero_loss(eval_set.tasks),
                "align_cos": over_seeds([s["align_cos"] for s in scores]),
            }
        )
    return {
        "seeds": [item.settings.train.seed for item in loaded],
        "gd_eta": eta,
        "num_context": n,
        "sigma": sigma,
        "rows": rows,
    }
