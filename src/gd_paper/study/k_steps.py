"""K recurrent LSA layers vs K steps of GD and GD++ (paper §3, Fig. 4): for every K, the
trained weight-shared LSA (one result per seed) vs K steps of GD (η tuned for K steps on
held-out tasks) and GD++ (fitted from that η), on the runs' eval tasks.
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

import jax
import numpy as np

from analysis.common import load_run, tuned_eta
from src.gd_paper.study.seed_runs import curves, half_sq_se, statuses, summary
from baselines.gd_plus import fit_gd_plus, gd_plus_predictions, gd_plus_sensitivity
from baselines.gd_step import gd_predictions, gd_sensitivity, tune_eta
from src.gd_paper.metrics import Reference, make_scorer
from src.rundir import RunDir
from src.stats import over_seeds
from src.gd_paper.eval_set import draw_tasks, make_eval_set


def _aligned(scores: dict) -> dict:
    return {
        "loss": scores["gd_loss"],
        "align_cos": scores["align_cos"],
        "l2_pred_diff": scores["l2_pred_diff"],
        "model_diff": scores["model_diff"],
    }


@partial(jax.jit, static_argnames="steps")
def gd_reference(tasks, eta: float, steps: int) -> Reference:
    """`steps` GD steps with step size `eta`: predictions and sensitivities."""
    return Reference(gd_predictions(tasks, eta, steps), gd_sensitivity(tasks, eta, steps))


@jax.jit
def gd_plus_reference(tasks, params) -> Reference:
    return Reference(gd_plus_predictions(tasks, params), gd_plus_sensitivity(tasks, params))


def k_steps(
    runs_by_k: dict[int, Sequence[RunDir]], *, gdpp_steps: int, gdpp_batch: int, gdpp_lr: float, gdpp_seed: int = 0
) -> dict:
    """For every K: the trained recurrent LSA (one result per seed) vs K steps of GD (η tuned
    for K steps on held-out tasks) and GD++ (fitted from that η), on the runs' eval tasks."""
    fit = {"steps": gdpp_steps, "batch_size": gdpp_batch, "lr": gdpp_lr, "seed": gdpp_seed}
    return {str(k): k_result(k, runs, fit) for k, runs in sorted(runs_by_k.items())}


def k_result(k: int, runs: Sequence[RunDir], fit: dict) -> dict:
    """One K's result: the runs (one per seed) against one GD step, K GD steps and GD++ (fitted
    with `fit`: steps, batch_size, lr, seed)."""
    loaded = [load_run(r) for r in runs]
    settings = loaded[0].settings
    tr = settings.train
    # Held-out tasks (eval seed + 1, as for the one-step η), never the eval tasks.
    _, held_out = draw_tasks(jax.random.key(tr.eval_seed + 1), tr.eval_size, settings.task, settings.eval_curriculum)
    eta_k, heldout_loss_k = tune_eta(held_out.tasks, steps=k)
    eta_1 = tuned_eta(runs[0])
    gdpp, gdpp_train = fit_gd_plus(
        settings.task, k, eta_k, seed=fit["seed"], steps=fit["steps"], batch_size=fit["batch_size"], lr=fit["lr"]
    )
    eval_set = make_eval_set(settings, gd_eta=eta_1)  # the runs' eval tasks, GD-1 reference
    tasks = eval_set.tasks
    ref_k = gd_reference(tasks, eta_k, k)
    ref_pp = gd_plus_reference(tasks, gdpp)
    per_seed, gd_losses = per_seed_scores(loaded, eval_set, ref_k, ref_pp)
    align = {
        ref: {m: over_seeds([row[m] for row in per_seed[ref]]) for m in ("align_cos", "l2_pred_diff", "model_diff")}
        for ref in ("vs_gd1", "vs_gdk", "vs_gdpp")
    }
    return {
        "k": k,
        "seeds": [item.settings.train.seed for item in loaded],
        "status": statuses(runs),
        "steps": summary(runs[0]).get("steps"),
        "lr": tr.learning_rate,
        "clip_value": settings.model.clip_value,
        "tf_loss": over_seeds(per_seed["loss"]),
        "gd1_loss": gd_losses["gd1"],
        "gd1_eta": eta_1,
        "gdk_loss": gd_losses["gdk"],
        "gdk_eta": eta_k,
        "gdk_heldout_loss": heldout_loss_k,
        "gdk_loss_se": half_sq_se(ref_k.prediction, tasks.query_y),
        "gdpp_loss": gd_losses["gdpp"],
        "gdpp_eta": np.asarray(gdpp.eta).tolist(),
        "gdpp_gamma": np.asarray(gdpp.gamma).tolist(),
        "gdpp_fit": {**fit, "final_train_loss": float(np.mean(gdpp_train[-50:]))},
        "align": align,
        "curves": curves(runs, ("eval_loss",)),
    }


def per_seed_scores(loaded: list, eval_set, ref_k: Reference, ref_pp: Reference) -> tuple[dict, dict]:
    """({loss, vs_gd1, vs_gdk, vs_gdpp}: one entry per seed, the references' losses {gd1, gdk, gdpp})."""
    per_seed = {"loss": [], "vs_gd1": [], "vs_gdk": [], "vs_gdpp": []}
    gd_losses = {}
    scorer = make_scorer(loaded[0].model)  # same architecture for every seed
    for item in loaded:
        s1 = scorer(item.params, eval_set.tasks, eval_set.reference)
        sk = scorer(item.params, eval_set.tasks, ref_k)
        sp = scorer(item.params, eval_set.tasks, ref_pp)
        per_seed["loss"].append(sk["eval_loss"])
        per_seed["vs_gd1"].append(_aligned(s1))
        per_seed["vs_gdk"].append(_aligned(sk))
        per_seed["vs_gdpp"].append(_aligned(sp))
        gd_losses = {"gd1": s1["gd_loss"], "gdk": sk["gd_loss"], "gdpp": sp["gd_loss"]}
    return per_seed, gd_losses
