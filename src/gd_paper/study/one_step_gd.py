"""One LSA layer = one GD step, over seeds (paper Fig. 2; SPEC §2–5): final loss and
alignment of the trained lsa1 models vs one tuned GD step, and their curves over training,
all read from the run directories.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from analysis.common import settings_with, tuned_eta
from src.read_side import ScoredAgainstGD
from src.gd_paper.study.seed_runs import curves, half_sq_se, statuses, summary
from src.rundir import RunDir
from src.stats import over_seeds
from src.gd_paper.eval_set import make_eval_set

# The paper's / SPEC's reference numbers (SPEC §1, §4).
PAPER_GD_LOSS = 0.206  # one tuned GD step, d = N = 10, a = 1
PAPER_ZERO_LOSS = 0.417  # predicting 0
CURVE_KEYS = ("eval_loss", "gd_loss", "align_cos", "model_diff", "l2_pred_diff")


def one_step_gd(lsa1_runs: Sequence[RunDir]) -> dict:
    """Final loss and alignment of the trained lsa1 models vs one tuned GD step, and their
    curves over training (all read from the run directories)."""
    summaries = [summary(r) for r in lsa1_runs]
    settings = settings_with(lsa1_runs[0], ScoredAgainstGD)
    eval_set = make_eval_set(settings, gd_eta=tuned_eta(lsa1_runs[0]))
    zero_loss = float(0.5 * np.mean(np.asarray(eval_set.tasks.query_y, np.float64) ** 2))
    final = {k: over_seeds([s.get(k) for s in summaries]) for k in CURVE_KEYS}
    gd = final["gd_loss"]["mean"]
    rel_gap = over_seeds([(s["eval_loss"] - s["gd_loss"]) / s["gd_loss"] for s in summaries])
    return {
        "seeds": [s.get("seed") for s in summaries],
        "status": statuses(lsa1_runs),
        "steps": summaries[0].get("steps"),
        "eval_size": settings.train.eval_size,
        "gd_eta": over_seeds([s.get("gd_eta") for s in summaries]),
        "final": final,
        "gd_loss": gd,
        "gd_loss_se": half_sq_se(eval_set.reference.prediction, eval_set.tasks.query_y),
        "zero_loss": zero_loss,
        "rel_gap": rel_gap,  # (model − GD) / GD per seed
        "curves": curves(lsa1_runs, CURVE_KEYS),
        "paper": {"gd_loss": PAPER_GD_LOSS, "zero_loss": PAPER_ZERO_LOSS, "rel_gap_max": 0.02, "align_cos_min": 0.99},
    }
