"""The evaluations of `scripts.reproduce`: one pure function per experiment.

Each experiment takes finished run directories (RunDir, one per seed) plus the
settings it needs and returns a JSON-ready result dict; nothing here trains a
model or writes a file. Numbers over seeds are summarised as {mean, std, n,
values} with the sample standard deviation (ddof=1; 0 for a single seed).

  one_step_gd    lsa1 vs one tuned GD step over training (SPEC §2–5)
  k_steps        recurrent LSA with K layers vs K-step GD and GD++ (paper §3)
  copy           the interleaved two-layer model vs one GD step, copy sensitivities (SPEC §3)
  ood            lsa1 and GD when the input range (α) or the weight scale changes (SPEC §6)
  distractors    lsa1 and GD with k random pairs among the N context pairs

Loss is the paper's ½ mean (ŷ − y_q)² throughout.
"""
from __future__ import annotations

import math
from dataclasses import replace
from functools import partial
from typing import Sequence

import jax
import numpy as np

from analysis.common import load_run, tuned_eta
from baselines.gd_plus import fit_gd_plus, gd_plus_predictions, gd_plus_sensitivity
from baselines.gd_step import gd_predictions, gd_sensitivity, tune_eta
from src.rundir import ATTENTION_TASKS
from src import rundir as names
from src.config import CurriculumConfig
from src.tasks.regression import take_tasks
from src.metrics import Reference, make_scorer
from src.rundir import RunDir
from src.train import draw_tasks, make_eval_set
from utils_attention import capture_attention

# The paper's / SPEC's reference numbers (SPEC §1, §3, §4).
PAPER_GD_LOSS = 0.206          # one tuned GD step, d = N = 10, a = 1
PAPER_ZERO_LOSS = 0.417        # predicting 0
CURVE_KEYS = ("eval_loss", "gd_loss", "align_cos", "model_diff", "l2_pred_diff")
# "The neighbour term dominates" (SPEC §3; issue 3 asks for 3×): copy_next, the sensitivity
# to token j+1, is at least this many times the mean other-token term. (Untrained, all
# terms are equal: ratio 1.)
NEIGHBOUR_DOMINANCE = 3.0
COPY_KEYS = ("copy_own", "copy_next", "copy_prev", "copy_other")


# ---------------------------------------------------------------------------
# Summaries over seeds

def stats(values: Sequence[float]) -> dict:
    """{mean, std, n, values}: sample std (ddof=1) over seeds, 0 for one value; NaN-safe."""
    vals = [float(v) for v in values if v is not None]
    finite = [v for v in vals if math.isfinite(v)]
    if not finite:
        return {"mean": math.nan, "std": math.nan, "n": 0, "values": vals}
    arr = np.asarray(finite, dtype=np.float64)
    std = float(np.std(arr, ddof=1)) if arr.size > 1 else 0.0
    return {"mean": float(np.mean(arr)), "std": std, "n": int(arr.size), "values": vals}


def curves(runs: Sequence[RunDir], keys: Sequence[str]) -> dict:
    """Metrics over training, on the steps every run logged: {step: [...], key: {mean, std}}."""
    tables = [{row["step"]: row for row in run.read_metrics()} for run in runs]
    steps = sorted(set.intersection(*(set(t) for t in tables))) if tables else []
    out: dict = {"step": steps}
    for key in keys:
        matrix = np.asarray([[_num(t[s].get(key)) for s in steps] for t in tables], dtype=np.float64)
        if matrix.size == 0 or np.all(np.isnan(matrix)):
            continue
        mean = np.nanmean(matrix, axis=0)
        std = np.nanstd(matrix, axis=0, ddof=1) if matrix.shape[0] > 1 else np.zeros_like(mean)
        out[key] = {"mean": mean.tolist(), "std": std.tolist()}
    return out


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _summary(run: RunDir) -> dict:
    return run.load_json(names.SUMMARY)


def _status(runs: Sequence[RunDir]) -> dict:
    return {str(run.path): _summary(run).get("status") for run in runs}


def half_sq_se(prediction: jax.Array, target: jax.Array) -> float:
    """Standard error of the loss ½ mean (ŷ − y)² over the tasks (sampling error of the eval set)."""
    per_task = 0.5 * (np.asarray(prediction, np.float64) - np.asarray(target, np.float64)) ** 2
    return float(np.std(per_task, ddof=1) / math.sqrt(per_task.size)) if per_task.size > 1 else 0.0


# ---------------------------------------------------------------------------
# 1. One layer = one GD step

def one_step_gd(lsa1_runs: Sequence[RunDir]) -> dict:
    """Final loss and alignment of the trained lsa1 models vs one tuned GD step, and their
    curves over training (all read from the run directories)."""
    summaries = [_summary(r) for r in lsa1_runs]
    settings = lsa1_runs[0].load_settings()
    eval_set = make_eval_set(settings, gd_eta=tuned_eta(lsa1_runs[0]))
    zero_loss = float(0.5 * np.mean(np.asarray(eval_set.tasks.query_y, np.float64) ** 2))
    final = {k: stats([s.get(k) for s in summaries]) for k in CURVE_KEYS}
    gd = final["gd_loss"]["mean"]
    rel_gap = stats([(s["eval_loss"] - s["gd_loss"]) / s["gd_loss"] for s in summaries])
    return {
        "seeds": [s.get("seed") for s in summaries],
        "status": _status(lsa1_runs),
        "steps": summaries[0].get("steps"),
        "eval_size": settings.train.eval_size,
        "gd_eta": stats([s.get("gd_eta") for s in summaries]),
        "final": final,
        "gd_loss": gd,
        "gd_loss_se": half_sq_se(eval_set.reference.prediction, eval_set.tasks.query_y),
        "zero_loss": zero_loss,
        "rel_gap": rel_gap,          # (model − GD) / GD per seed
        "curves": curves(lsa1_runs, CURVE_KEYS),
        "paper": {"gd_loss": PAPER_GD_LOSS, "zero_loss": PAPER_ZERO_LOSS, "rel_gap_max": 0.02,
                  "align_cos_min": 0.99},
    }


# ---------------------------------------------------------------------------
# 2. K layers ≈ K GD steps, and GD++

def _aligned(scores: dict) -> dict:
    return {"loss": scores["gd_loss"], "align_cos": scores["align_cos"],
            "l2_pred_diff": scores["l2_pred_diff"], "model_diff": scores["model_diff"]}


@partial(jax.jit, static_argnames="steps")
def gd_reference(tasks, eta: float, steps: int) -> Reference:
    """`steps` GD steps with step size `eta`: predictions and sensitivities."""
    return Reference(gd_predictions(tasks, eta, steps), gd_sensitivity(tasks, eta, steps))


@jax.jit
def gd_plus_reference(tasks, params) -> Reference:
    return Reference(gd_plus_predictions(tasks, params), gd_plus_sensitivity(tasks, params))


def k_steps(runs_by_k: dict[int, Sequence[RunDir]], *, gdpp_steps: int, gdpp_batch: int,
            gdpp_lr: float, gdpp_seed: int = 0) -> dict:
    """For every K: the trained recurrent LSA (one result per seed) vs K steps of GD (η tuned
    for K steps on held-out tasks) and GD++ (fitted from that η), on the runs' eval tasks."""
    out = {}
    for k, runs in sorted(runs_by_k.items()):
        loaded = [load_run(r) for r in runs]
        settings = loaded[0].settings
        tr = settings.train
        # Held-out tasks (eval seed + 1, as for the one-step η), never the eval tasks.
        _, held_out = draw_tasks(jax.random.key(tr.eval_seed + 1), tr.eval_size, settings.task,
                                 settings.eval_curriculum)
        eta_k, heldout_loss_k = tune_eta(held_out.tasks, steps=k)
        eta_1 = tuned_eta(runs[0])
        gdpp, gdpp_train = fit_gd_plus(settings.task, k, eta_k, seed=gdpp_seed, steps=gdpp_steps,
                                       batch_size=gdpp_batch, lr=gdpp_lr)
        eval_set = make_eval_set(settings, gd_eta=eta_1)     # the runs' eval tasks, GD-1 reference
        tasks = eval_set.tasks
        ref_k = gd_reference(tasks, eta_k, k)
        ref_pp = gd_plus_reference(tasks, gdpp)
        per_seed = {"loss": [], "vs_gd1": [], "vs_gdk": [], "vs_gdpp": []}
        gd_losses = {}
        scorer = make_scorer(loaded[0].model)   # same architecture for every seed
        for item in loaded:
            s1 = scorer(item.params, tasks, eval_set.reference)
            sk = scorer(item.params, tasks, ref_k)
            sp = scorer(item.params, tasks, ref_pp)
            per_seed["loss"].append(sk["eval_loss"])
            per_seed["vs_gd1"].append(_aligned(s1))
            per_seed["vs_gdk"].append(_aligned(sk))
            per_seed["vs_gdpp"].append(_aligned(sp))
            gd_losses = {"gd1": s1["gd_loss"], "gdk": sk["gd_loss"], "gdpp": sp["gd_loss"]}
        align = {ref: {m: stats([row[m] for row in per_seed[ref]])
                       for m in ("align_cos", "l2_pred_diff", "model_diff")}
                 for ref in ("vs_gd1", "vs_gdk", "vs_gdpp")}
        out[str(k)] = {
            "k": k,
            "seeds": [item.settings.train.seed for item in loaded],
            "status": _status(runs),
            "steps": _summary(runs[0]).get("steps"),
            "lr": tr.lr, "clip_value": settings.model.clip_value,
            "tf_loss": stats(per_seed["loss"]),
            "gd1_loss": gd_losses["gd1"], "gd1_eta": eta_1,
            "gdk_loss": gd_losses["gdk"], "gdk_eta": eta_k, "gdk_heldout_loss": heldout_loss_k,
            "gdk_loss_se": half_sq_se(ref_k.prediction, tasks.query_y),
            "gdpp_loss": gd_losses["gdpp"],
            "gdpp_eta": np.asarray(gdpp.eta).tolist(), "gdpp_gamma": np.asarray(gdpp.gamma).tolist(),
            "gdpp_fit": {"steps": gdpp_steps, "batch_size": gdpp_batch, "lr": gdpp_lr,
                         "seed": gdpp_seed, "final_train_loss": float(np.mean(gdpp_train[-50:]))},
            "align": align,
            "curves": curves(runs, ("eval_loss",)),
        }
    return out


# ---------------------------------------------------------------------------
# 3. Token construction: the interleaved copy model

def first_layer_attention(run: RunDir) -> np.ndarray:
    """Mean first-layer attention of a trained interleaved model over the first
    ATTENTION_TASKS eval tasks (the ones `--save_attention` saves): [T, S] (rows: every
    token as query, cols: context tokens)."""
    item = load_run(run)
    eval_set = make_eval_set(item.settings, gd_eta=tuned_eta(run))
    tasks = take_tasks(eval_set.tasks, slice(0, ATTENTION_TASKS))
    return capture_attention(item.model, item.params, tasks)[0].mean(axis=(0, 1))  # tasks, heads


def attention_pattern(mean_attention: np.ndarray) -> dict:
    """What the first layer attends to. `partner`: mean weight from each x token (position
    2i) to its own label token 2i+1 (1 for a perfect copy); `fixed_pair`: the largest mean
    weight that all tokens put on one and the same context pair x_i, ȳ_i (1 when every
    token reads one fixed example instead of its own partner; ≈ 0.1 for a copy)."""
    num_context = mean_attention.shape[1]
    x_rows = np.arange(0, num_context, 2)
    per_pair = mean_attention.reshape(mean_attention.shape[0], num_context // 2, 2).sum(axis=2)
    return {"partner": float(mean_attention[x_rows, x_rows + 1].mean()),
            "fixed_pair": float(per_pair.mean(axis=0).max())}


def copy_model(twolayer_runs: Sequence[RunDir]) -> dict:
    """Final loss vs one GD step, the first layer's copy sensitivities with their curves,
    and its mean attention map."""
    summaries = [_summary(r) for r in twolayer_runs]
    maps = [first_layer_attention(r) for r in twolayer_runs]
    patterns = [attention_pattern(m) for m in maps]
    final = {k: stats([s.get(k) for s in summaries]) for k in ("eval_loss", "gd_loss") + COPY_KEYS}
    neighbour = stats([s["copy_next"] for s in summaries if s.get("copy_next") is not None])
    ratio = stats([s["copy_next"] / s["copy_other"] for s in summaries if s.get("copy_other")])
    return {
        "seeds": [s.get("seed") for s in summaries],
        "status": _status(twolayer_runs),
        "steps": summaries[0].get("steps"),
        "final": final,
        "gap": stats([s["eval_loss"] - s["gd_loss"] for s in summaries]),
        "neighbour": neighbour,              # copy_next per seed
        "neighbour_over_other": ratio,
        "curves": curves(twolayer_runs, ("eval_loss", "gd_loss") + COPY_KEYS),
        "attention_partner": stats([p["partner"] for p in patterns]),
        "attention_fixed_pair": stats([p["fixed_pair"] for p in patterns]),
        "attention_tasks": ATTENTION_TASKS,
        "attention_map_seed": summaries[0].get("seed"),
        "attention_map": np.round(maps[0], 4).tolist(),   # [T, S] of the first seed
        "paper": {"gd_loss": PAPER_GD_LOSS, "max_gap": 0.05},
    }


# ---------------------------------------------------------------------------
# 4. Out of distribution

def _zero_loss(tasks) -> float:
    return float(0.5 * np.mean(np.asarray(tasks.query_y, np.float64) ** 2))


def ood(lsa1_runs: Sequence[RunDir], alphas: Sequence[float],
        weight_scales: Sequence[float]) -> dict:
    """Loss of the trained lsa1 models and of one GD step (η tuned at α = 1, weight scale 1)
    when the eval tasks' input range is scaled by α, or their weight std is changed."""
    loaded = [load_run(r) for r in lsa1_runs]
    eta = tuned_eta(lsa1_runs[0])
    base = loaded[0].settings
    scorer = make_scorer(loaded[0].model)   # same architecture for every seed

    def sweep(variants):
        rows = []
        for value, settings, alpha in variants:
            eval_set = make_eval_set(settings, alpha=alpha, gd_eta=eta)
            scores = [scorer(item.params, eval_set.tasks, eval_set.reference) for item in loaded]
            rows.append({"x": value, "tf_loss": stats([s["eval_loss"] for s in scores]),
                         "gd_loss": scores[0]["gd_loss"], "zero_loss": _zero_loss(eval_set.tasks),
                         "tf_over_gd": stats([s["eval_loss"] / s["gd_loss"] for s in scores])})
        return rows

    alpha_rows = sweep([(float(a), base, float(a)) for a in alphas])
    weight_rows = sweep([(float(w), replace(base, task=replace(base.task, weight_scale=float(w))), 1.0)
                         for w in weight_scales])
    return {"seeds": [item.settings.train.seed for item in loaded], "gd_eta": eta,
            "train_alpha": 1.0, "train_weight_scale": base.task.weight_scale,
            "alpha": alpha_rows, "weight_scale": weight_rows}


# ---------------------------------------------------------------------------
# 5. Distractors

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
        curriculum = (CurriculumConfig() if k == 0 else
                      CurriculumConfig(noise_mode="random_pairs", noise_p=k / n, noise_sigma=sigma))
        eval_set = make_eval_set(replace(base, eval_curriculum=curriculum), gd_eta=eta)
        corrupted = float(np.mean(np.sum(eval_set.noise_mask, axis=1)))
        scores = [scorer(item.params, eval_set.tasks, eval_set.reference) for item in loaded]
        rows.append({"k": int(k), "corrupted_per_task": corrupted,
                     "tf_loss": stats([s["eval_loss"] for s in scores]),
                     "gd_loss": scores[0]["gd_loss"], "zero_loss": _zero_loss(eval_set.tasks),
                     "align_cos": stats([s["align_cos"] for s in scores])})
    return {"seeds": [item.settings.train.seed for item in loaded], "gd_eta": eta,
            "num_context": n, "sigma": sigma, "rows": rows}


# ---------------------------------------------------------------------------
# The checks (computed from the numbers above; thresholds are the paper's / the brief's)

def checks(results: dict) -> list[dict]:
    """[{name, status: PASS|MISMATCH, detail}] for every check whose inputs exist."""
    out = []

    def add(name: str, ok: bool, detail: str) -> None:
        out.append({"name": name, "status": "PASS" if ok else "MISMATCH", "detail": detail})

    one = results.get("one_step_gd")
    if one:
        f = one["final"]
        gap = one["rel_gap"]
        add("lsa1 loss within 2 % of one-step GD",
            abs(gap["mean"]) <= 0.02,
            f"lsa1 {_pm(f['eval_loss'])} vs GD {one['gd_loss']:.4f}: "
            f"{100 * gap['mean']:+.2f} ± {100 * gap['std']:.2f} % (threshold |gap| ≤ 2 %)")
        add("lsa1 align_cos ≥ 0.99", f["align_cos"]["mean"] >= 0.99,
            f"align_cos {_pm(f['align_cos'])} (threshold ≥ 0.99)")
        add("one-step GD loss ≈ 0.206 (within 5 %)",
            abs(one["gd_loss"] / PAPER_GD_LOSS - 1) <= 0.05,
            f"GD {one['gd_loss']:.4f} ± {one['gd_loss_se']:.4f} (standard error over "
            f"{one['eval_size']} eval tasks) vs paper 0.206")
    for key, r in (results.get("k_steps") or {}).items():
        tf = r["tf_loss"]["mean"]
        add(f"K={key}: recurrent LSA loss ≤ {key}-step GD loss", tf <= r["gdk_loss"],
            f"TF {_pm(r['tf_loss'])} vs {key}-step GD {r['gdk_loss']:.4f} (GD++ {r['gdpp_loss']:.4f})")
        add(f"K={key}: recurrent LSA loss closer to GD++ than to {key}-step GD",
            abs(tf - r["gdpp_loss"]) < abs(tf - r["gdk_loss"]),
            f"|TF − GD++| = {abs(tf - r['gdpp_loss']):.4f}, |TF − GD| = {abs(tf - r['gdk_loss']):.4f}")
        a = r["align"]
        add(f"K={key}: recurrent LSA sensitivities closer to GD++ than to {key}-step GD",
            a["vs_gdpp"]["model_diff"]["mean"] < a["vs_gdk"]["model_diff"]["mean"],
            f"model_diff vs GD++ {_pm(a['vs_gdpp']['model_diff'])}, vs GD "
            f"{_pm(a['vs_gdk']['model_diff'])}")
    cp = results.get("copy")
    if cp:
        add("copy model loss within 0.05 of one-step GD", abs(cp["gap"]["mean"]) <= 0.05,
            f"twolayer {_pm(cp['final']['eval_loss'])} vs GD {cp['final']['gd_loss']['mean']:.4f} "
            f"(gap {cp['gap']['mean']:+.4f}, threshold 0.05)")
        add(f"copy model: neighbour (j+1) sensitivity ≥ {NEIGHBOUR_DOMINANCE:g}× other-token "
            "sensitivity", cp["neighbour_over_other"]["mean"] >= NEIGHBOUR_DOMINANCE,
            f"next {_pm(cp['neighbour'])} vs other {_pm(cp['final']['copy_other'])} "
            f"(ratio {_pm(cp['neighbour_over_other'], 2)}, threshold ≥ {NEIGHBOUR_DOMINANCE:g})")
    return out


def _pm(s: dict, digits: int = 4) -> str:
    if s.get("n", 0) == 0:
        return "n/a"
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"
