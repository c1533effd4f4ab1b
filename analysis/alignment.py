"""Alignment of a trained model with one step of GD on the run's own eval tasks (SPEC §5).

    python -m analysis.alignment --run runs/<exp> [--eta 0.1]

Writes runs/<exp>/analysis/alignment.json:
  model_loss    ½ mean (ŷ_TF − y_q)²         gd_loss     ½ mean (ŷ_GD − y_q)²
  l2_pred_diff  mean |ŷ_TF − ŷ_GD|
  align_cos     mean cos(s_TF, s_GD), s = ∂ŷ/∂x_q ∈ R^d per task
  model_diff    mean ‖s_TF − s_GD‖
  eta, eta_source ("tuned": the run's gd_eta, tuned at α = 1; "flag": --eta), num_tasks
"""
from __future__ import annotations

import sys
from typing import Sequence

from analysis.common import for_system, load_run, main_frame, register_analysis, tuned_eta
from src.rundir import names
from src.flags import positive_number
from src.process import guarded
from src.metrics import make_scorer
from src.rundir import RunDir
from src.eval_set import EvalSet, make_eval_set
from src.models.attention_only import Model

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


def run(run_dir: RunDir, eta: float | None = None) -> dict:
    """Compute and write analysis/alignment.json; `eta` overrides the run's tuned step size."""
    loaded = load_run(run_dir)
    eta_source = "flag" if eta is not None else "tuned"
    eta = tuned_eta(run_dir) if eta is None else float(eta)
    eval_set = make_eval_set(loaded.settings, gd_eta=eta)
    result = {**alignment_metrics(loaded.model, loaded.params, eval_set), "eta_source": eta_source}
    run_dir.write_json(names.ALIGNMENT, result)
    return result


register_analysis("alignment", run, "model vs one GD step: align_cos, l2_pred_diff, model_diff",
                  for_system("lsa"), [names.ALIGNMENT])


def _eta_flag(parser) -> None:
    parser.add_argument("--eta", type=positive_number(), default=None,
                        help="GD step size (default: the run's gd_eta, tuned at alpha = 1)")


def _report(args, run_dir) -> None:
    r = run(run_dir, args.eta)
    print(f"align_cos {r['align_cos']:.6f} | l2_pred_diff {r['l2_pred_diff']:.6f} | model_loss "
          f"{r['model_loss']:.6f} | gd_loss {r['gd_loss']:.6f} (eta {r['eta']:g}, {r['eta_source']})"
          f" -> {run_dir.file(names.ALIGNMENT)}")


def main(argv: Sequence[str] | None = None) -> int:
    return main_frame(MODULE, __doc__, _eta_flag, _report, argv)


if __name__ == "__main__":
    sys.exit(guarded(main))
