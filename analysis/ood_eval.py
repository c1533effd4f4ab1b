"""Out-of-distribution scaling of the input range (SPEC §6).

    python -m analysis.ood_eval --run runs/<exp> --alphas 1 1.5 2 3

For every α the run's eval tasks are redrawn from the same eval seed with context
and query inputs x ~ U(−α·a/2, α·a/2)^d (the eval curriculum applied as in
training), and the trained model and one GD step (η tuned at α = 1, the run's
gd_eta) are scored with the paper's loss ½ mean (ŷ − y_q)². At α = 1 these are
exactly the run's eval tasks, so tf_loss equals its final eval_loss.

Writes runs/<exp>/analysis/ood.csv with columns alpha,tf_loss,gd_loss (one row per
α, ascending; numbers as '%.9g').
"""

from __future__ import annotations

import math
import sys
from typing import Sequence

from analysis.common import analysis_command, for_capability, load_run, register_analysis, tuned_eta
from src.read_side import ScoredAgainstGD
from src.rundir import names
from src.flags import positive_number
from src.process import guarded
from src.gd_paper.metrics import make_scorer
from src.rundir import RunDir
from src.gd_paper.eval_set import make_eval_set
from src.gd_paper.models.attention_only import Model

MODULE = "analysis.ood_eval"
DEFAULT_ALPHAS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)
COLUMNS = ("alpha", "tf_loss", "gd_loss")


def ood_losses(settings, model: Model, params, alphas: Sequence[float], eta: float) -> list[dict]:
    """[{alpha, tf_loss, gd_loss}] for the distinct `alphas` in ascending order."""
    scorer = make_scorer(model)
    rows = []
    for alpha in sorted(set(float(a) for a in alphas)):
        eval_set = make_eval_set(settings, alpha=alpha, gd_eta=eta)
        scores = scorer(params, eval_set.tasks, eval_set.reference)
        rows.append({"alpha": alpha, "tf_loss": scores["eval_loss"], "gd_loss": scores["gd_loss"]})
    return rows


def to_csv(rows: list[dict]) -> str:
    """alpha,tf_loss,gd_loss rows; floats as '%.9g' (non-finite as 'nan'/'inf')."""
    lines = [",".join(COLUMNS)]
    lines += [",".join("%.9g" % row[c] for c in COLUMNS) for row in rows]
    return "\n".join(lines) + "\n"


def check_alphas(alphas: Sequence[float]) -> list[float]:
    """Raise ValueError (one line) unless every α is a finite number > 0."""
    alphas = list(alphas)
    if not alphas:
        raise ValueError("--alphas is empty; accepted: one or more finite numbers > 0")
    for a in alphas:
        try:
            ok = math.isfinite(float(a)) and float(a) > 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"--alphas value {a!r} is out of range; accepted: a finite number > 0")
    return [float(a) for a in alphas]


def run(run_dir: RunDir, alphas: Sequence[float] = DEFAULT_ALPHAS) -> list[dict]:
    """Compute and write analysis/ood.csv."""
    alphas = check_alphas(alphas)
    loaded = load_run(run_dir)
    eta = tuned_eta(run_dir)
    rows = ood_losses(loaded.settings, loaded.model, loaded.params, alphas, eta)
    run_dir.write_text(names.OOD, to_csv(rows))
    return rows


register_analysis(
    "ood", run, "loss of the model and of GD vs the input range alpha", for_capability(ScoredAgainstGD), [names.OOD]
)


def _alphas_flag(parser) -> None:
    parser.add_argument(
        "--alphas",
        type=positive_number(),
        nargs="+",
        default=list(DEFAULT_ALPHAS),
        help="input-range scale factors (finite, > 0)",
    )


def _print_table(args, run_dir) -> None:
    rows = run(run_dir, args.alphas)
    print("alpha  tf_loss   gd_loss")
    print("\n".join(f"{r['alpha']:<6g} {r['tf_loss']:.5f}  {r['gd_loss']:.5f}" for r in rows))
    print(f"-> {run_dir.file(names.OOD)}")


main = analysis_command(MODULE, __doc__, _alphas_flag, _print_table)


if __name__ == "__main__":
    sys.exit(guarded(main))
