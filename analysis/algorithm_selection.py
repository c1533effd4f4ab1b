"""Algorithm selection (Bai et al., NeurIPS 2023, "Transformers as Statisticians"): one model
evaluated on each noise level of noisy linear regression, beside ridge at each level's Bayes λ
and beside every fixed-λ ridge, for any run that predicts (x, y) pairs of a regression task.

    python -m analysis.algorithm_selection --run runs/<exp> [--noise-stds 0.1,0.5] [--context N]

For each σ of --noise-stds (default: the run's own levels when it trained on
noise_mixture_regression, else 0.1 and 0.5), --prompts fresh prompts of one level (N context pairs
and a query, N = --context, default d; x ~ N(0, I_d), w ~ N(0, I_d / d) unless the run trained on
Garg's unit prior), and the squared error of the query's prediction, (ŷ − y)² with y's noise in
it (Bai et al.'s measure, not divided by d), for
  model       the run's own prediction at the query
  ridge λ_k   ridge at each level k's Bayes λ_k = σ_k² / τ², τ² the prior's variance (dσ_k² under
              N(0, I/d)): at its own level it is the Bayes estimator, elsewhere a fixed wrong λ
and the selection gap: the model's error over the Bayes error at each level, and each fixed-λ
ridge's worst ratio over the levels (a single estimator's price for not selecting). The errors'
standard errors over prompts are given. Writes analysis/algorithm_selection.json.

Glossary: E prompts, N context pairs, d input dimensions, K noise levels.
"""

from __future__ import annotations

import argparse
import sys

import jax
import numpy as np

from analysis.common import AnalysisError, analysis_command, on_request, pairs_of, register_analysis
from baselines.bayes import ridge
from src import rundir as names
from src.flags import int_at_least
from src.process import guarded
from src.read_side import PredictsPairs, systems_with
from src.registry import registry
from src.rundir import RunDir
from src.tasks.garg import NoisyOptions
from src.tasks.noise_mixture import NoiseMixtureOptions
from src.tasks.objectives import objective_of

MODULE = "analysis.algorithm_selection"
TASK = "noise_mixture_regression"
DEFAULT_STDS = (0.1, 0.5)


def trained_levels(settings) -> tuple[tuple[float, ...] | None, bool]:
    """(the noise levels the run's task draws: its options' `noise_stds` (the mixture) or
    `noise_std` (Garg's noisy regression; the other Garg tasks carry that field unused), else None;
    whether its prior is Garg's unit one: every task's but the mixture's at its default)."""
    options = settings.task.options
    unit_prior = bool(getattr(options, "unit_prior", True))
    if getattr(options, "noise_stds", None) is not None:
        return tuple(float(s) for s in options.noise_stds), unit_prior
    if isinstance(options, NoisyOptions):
        return (float(options.noise_std),), unit_prior
    return None, unit_prior


def query_errors(prediction: np.ndarray, prompt) -> np.ndarray:
    """[E] squared error at the query (the last point)."""
    return (np.asarray(prediction, np.float64) - np.asarray(prompt.ys, np.float64)[:, -1]) ** 2


def ridge_at_query(prompt, lam: float) -> np.ndarray:
    """[E] ridge's prediction at the query from the N pairs before it, at λ (baselines/bayes.ridge)."""
    return np.asarray(ridge(prompt, float(np.sqrt(lam)), 1.0))[:, -1]


def mean_and_error(values: np.ndarray) -> tuple[float, float]:
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(len(values)))


def run(run_dir: RunDir, noise_stds=None, context: int | None = None, prompts: int = 4000, seed: int = 0) -> dict:
    settings = run_dir.load_settings(*systems_with(PredictsPairs))
    if not objective_of(settings.task.name).continuous_labels:
        raise AnalysisError(f"the task {settings.task.name!r} has no real labels; accepted: a regression task")
    pairs = pairs_of(settings)
    model, params, state = pairs.restore(run_dir)
    trained_points, dims = pairs.trained_shape()
    levels, unit_prior = trained_levels(settings)
    stds = tuple(noise_stds or levels or DEFAULT_STDS)
    n_context = context or dims
    limit = pairs.points_limit()
    if limit is not None and n_context + 1 > limit:
        raise AnalysisError(
            f"--context {n_context}: the model reads at most {limit} points; accepted: up to {limit - 1}"
        )
    prior_variance = 1.0 if unit_prior else 1.0 / dims
    lambdas = [s**2 / prior_variance for s in stds]  # λ_k = σ_k² / τ²: dσ_k² under N(0, I/d)
    predict = pairs.predictor(model, params, state, n_context + 1, prompts)
    rows = []
    for k, sigma in enumerate(stds):
        options = NoiseMixtureOptions(noise_stds=(sigma,), unit_prior=unit_prior)
        sample = registry("task").get(TASK).build(options, n_points=n_context + 1, n_dims=dims)
        key = jax.random.fold_in(jax.random.key(seed), k)
        prompt = jax.jit(lambda key: sample(key, prompts, dims, n_context + 1))(key)
        model_error = mean_and_error(query_errors(np.asarray(predict(prompt))[:, -1], prompt))
        ridges = [mean_and_error(query_errors(ridge_at_query(prompt, lam), prompt)) for lam in lambdas]
        rows.append(
            {
                "noise_std": sigma,
                "model": model_error[0],
                "model_se": model_error[1],
                "bayes": ridges[k][0],
                "bayes_se": ridges[k][1],
                "ridge": {f"{lam:g}": err[0] for lam, err in zip(lambdas, ridges)},
                "model_over_bayes": model_error[0] / ridges[k][0],
            }
        )
    worst = {f"{lam:g}": max(row["ridge"][f"{lam:g}"] / row["bayes"] for row in rows) for lam in lambdas}
    out = {
        "task": settings.task.name,
        "trained_noise_stds": list(levels) if levels else None,
        "mixer": settings.model.mixer_label(),
        "dims": dims,
        "context": n_context,
        "trained_points": trained_points,
        "prompts": prompts,
        "prior": "N(0, I)" if unit_prior else "N(0, I/d)",
        "lambdas": lambdas,
        "levels": rows,
        "fixed_ridge_worst_ratio": worst,
        "model_worst_ratio": max(row["model_over_bayes"] for row in rows),
    }
    run_dir.write_json(names.ALGORITHM_SELECTION_JSON, out)
    return out


register_analysis(
    "algorithm_selection",
    run,
    "the model on each noise level beside ridge at each level's Bayes lambda (Bai et al.; on request)",
    on_request,
    files=[names.ALGORITHM_SELECTION_JSON],
)


def noise_list(text: str) -> tuple[float, ...]:
    """--noise-stds: a comma list of distinct numbers >= 0 (argparse's one-line refusal otherwise)."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or any(not np.isfinite(v) or v < 0 for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted; accepted: a comma list of distinct numbers >= 0")
    return values


def _flags(parser) -> None:
    parser.add_argument("--noise-stds", type=noise_list, default=None, help="σ levels (default: the run's, or 0.1,0.5)")
    parser.add_argument("--context", type=int_at_least(1, 4096), default=None, help="context pairs N (default d)")
    parser.add_argument("--prompts", type=int_at_least(10, 1_000_000), default=4000, help="prompts per level")


def _print(args, run_dir: RunDir) -> None:
    out = run(run_dir, args.noise_stds, args.context, args.prompts)
    for row in out["levels"]:
        ridges = ", ".join(f"λ {lam} {err:.3f}" for lam, err in row["ridge"].items())
        print(
            f"σ {row['noise_std']:g}: model {row['model']:.3f} ± {row['model_se']:.3f}, Bayes {row['bayes']:.3f} "
            f"(model/Bayes {row['model_over_bayes']:.2f}); ridge {ridges}"
        )
    print(f"-> {run_dir.file(names.ALGORITHM_SELECTION_JSON)}")


main = analysis_command(MODULE, __doc__, _flags, _print)


if __name__ == "__main__":
    sys.exit(guarded(main))
