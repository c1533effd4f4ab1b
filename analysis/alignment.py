"""Alignment of a trained model with one step of GD on the run's own eval tasks (SPEC §5).

    python -m analysis.alignment --run runs/<exp> [--eta 0.1]

Runs of the paper's system (runners.run_*) and regression runs of the systems that predict pairs
(Garg et al.'s GPT-2 family, the ICL benchmark's lm on its pair tasks; any sequence mixer; there
the last point of each eval prompt is the query and the points before it the
context). Writes runs/<exp>/analysis/alignment.json:
  model_loss    ½ mean (ŷ_TF − y_q)²         gd_loss     ½ mean (ŷ_GD − y_q)²
  l2_pred_diff  mean |ŷ_TF − ŷ_GD|
  align_cos     mean cos(s_TF, s_GD), s = ∂ŷ/∂x_q ∈ R^d per task
  model_diff    mean ‖s_TF − s_GD‖
  eta, eta_source ("tuned": the run's gd_eta, tuned at α = 1; "flag": --eta), num_tasks
Pair runs also get least_squares_loss and zero_loss (the same loss of least squares on the
context and of predicting 0); their η is tuned on held-out prompts of the run's task (a grid of
0.001 to 25 in steps of 0.1, SPEC §2) drawn from TUNE_SEED. Pair runs get the file at the end of
training on von Oswald et al.'s task (`data: von_oswald`); on any other regression run this
command writes it.
"""

from __future__ import annotations

import sys

from analysis.common import (
    AnalysisError,
    for_capability,
    analysis_command,
    pairs_of,
    register_analysis,
    regression_task,
    tuned_eta,
)
from src.read_side import PredictsPairs, ScoredAgainstGD, has, read_side, systems_with
from src.rundir import names
from src.flags import positive_number
from src.process import guarded
from src.gd_paper.metrics import make_scorer
from src.rundir import RunDir
from src.gd_paper.eval_set import EvalSet
from src.gd_paper.models.attention_only import Model

MODULE = "analysis.alignment"


def alignment_metrics(model: Model, params, eval_set: EvalSet) -> dict:
    """Model vs GD (step size eval_set.gd_eta) on eval_set.tasks [E tasks]: a JSON-ready dict."""
    scores = make_scorer(model)(params, eval_set.tasks, eval_set.reference)
    return {
        "model_loss": scores["eval_loss"],
        "gd_loss": scores["gd_loss"],
        "align_cos": scores["align_cos"],
        "l2_pred_diff": scores["l2_pred_diff"],
        "model_diff": scores["model_diff"],
        "eta": float(eval_set.gd_eta),
        "num_tasks": int(eval_set.tasks.query_y.shape[0]),
    }


TUNE_SEED = 20231  # held-out prompts that tune a pair run's GD step (not its eval seed)


def query_predictor(settings, model, params, state):
    """predict(prompt: a PairPrompt of E prompts) -> (ŷ [E], s [E, d]): a pair model's prediction at
    the last point (the query) and its sensitivity s = ∂ŷ/∂x_q to the query's input (SPEC §5), a
    block of prompts at a time. Prompts are independent, so the gradient of Σ ŷ holds each one's."""
    import jax
    import jax.numpy as jnp
    from src.batched import in_blocks

    def last(xs, ys):
        total = lambda x: (lambda p: (jnp.sum(p), p))(model.apply(params, state, x, ys)[:, -1])
        grad, prediction = jax.grad(total, has_aux=True)(xs)
        return prediction, grad[:, -1]

    # the backward pass keeps the forward's activations beside its own: a third of the forward's rows
    at_query = jax.jit(last)
    return in_blocks(lambda prompt: at_query(prompt.xs, prompt.ys), max(1, pairs_of(settings).rows() // 3))


def pair_alignment(settings, model, params, state, eta: float | None = None) -> dict:
    """A pair run's alignment with one GD step on its eval prompts [E, n, d] (the last
    point the query): a JSON-ready dict; `eta` None tunes it on E held-out prompts."""
    import jax
    import jax.numpy as jnp
    from baselines.gd_step import gd_reference, tune_eta
    from baselines.regression import least_squares
    from src.gd_paper.metrics import alignment, loss

    pairs = pairs_of(settings)
    batch = pairs.prompts()
    size, points, dims = batch.xs.shape
    eta_source = "flag" if eta is not None else "tuned"
    if eta is None:
        held_out = jax.jit(lambda key: pairs.sampler()(key, size, dims, points))(jax.random.key(TUNE_SEED))
        eta, _ = tune_eta(held_out)
    prediction, sensitivity = query_predictor(settings, model, params, state)(batch)
    scores = alignment(prediction, sensitivity, gd_reference(batch, float(eta)), batch.query_y)
    squares = least_squares(batch)[:, -1]
    return {
        "model_loss": float(scores["eval_loss"]),
        "gd_loss": float(scores["gd_loss"]),
        "least_squares_loss": float(loss(squares, batch.query_y)),
        "zero_loss": float(loss(jnp.zeros_like(batch.query_y), batch.query_y)),
        **{k: float(scores[k]) for k in ("align_cos", "l2_pred_diff", "model_diff")},
        "eta": float(eta),
        "eta_source": eta_source,
        "num_tasks": int(size),
    }


def run(run_dir: RunDir, eta: float | None = None) -> dict:
    """Compute and write analysis/alignment.json; `eta` overrides the run's tuned step size."""
    settings = run_dir.load_settings(*systems_with(ScoredAgainstGD), *systems_with(PredictsPairs))
    if has(PredictsPairs, settings):
        model, params, state = pairs_of(settings).restore(run_dir)
        if not regression_task(settings):
            raise AnalysisError(
                f"{run_dir.path} trained on {settings.task.name}, whose labels are not real "
                "numbers; accepted: a regression run (GD's step is a regression estimator)"
            )
        result = pair_alignment(settings, model, params, state, eta)
        run_dir.write_json(names.ALIGNMENT, result)
        return result
    side = read_side(ScoredAgainstGD, settings)
    model, params = side.restore(run_dir)
    eta_source = "flag" if eta is not None else "tuned"
    eta = tuned_eta(run_dir) if eta is None else float(eta)
    result = {**alignment_metrics(model, params, side.eval_set(gd_eta=eta)), "eta_source": eta_source}
    run_dir.write_json(names.ALIGNMENT, result)
    return result


def _paper_task(settings) -> bool:
    """A pair run on von Oswald et al.'s inputs (the matrix study's task)."""
    from src.tasks.garg import GD_PAPER_INPUTS

    return getattr(settings.task.options, "data", None) in GD_PAPER_INPUTS and regression_task(settings)


def _applies(settings) -> bool:
    return for_capability(ScoredAgainstGD)(settings) or for_capability(PredictsPairs, when=_paper_task)(settings)


register_analysis(
    "alignment",
    run,
    "model vs one GD step: align_cos, l2_pred_diff, model_diff (the paper's "
    "system; runs that predict pairs on von Oswald et al.'s task)",
    _applies,
    [names.ALIGNMENT],
)


def _eta_flag(parser) -> None:
    parser.add_argument(
        "--eta",
        type=positive_number(),
        default=None,
        help="GD step size (default: the run's gd_eta, tuned at alpha = 1)",
    )


def _report(args, run_dir) -> None:
    r = run(run_dir, args.eta)
    print(
        f"align_cos {r['align_cos']:.6f} | l2_pred_diff {r['l2_pred_diff']:.6f} | model_loss "
        f"{r['model_loss']:.6f} | gd_loss {r['gd_loss']:.6f} (eta {r['eta']:g}, {r['eta_source']})"
        f" -> {run_dir.file(names.ALIGNMENT)}"
    )


main = analysis_command(MODULE, __doc__, _eta_flag, _report)


if __name__ == "__main__":
    sys.exit(guarded(main))
