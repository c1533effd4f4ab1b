"""Order-sensitivity sweep: train and evaluate every model under each context ordering.

    python -m eval_order \\
      --models lsa1,twolayer --ordering random,smallnorm2largenorm \\
      --train_ordering auto --eval_ordering auto \\
      --seeds 0,1 --out results_order.csv --runs-dir runs/eval_order

One run directory per grid point under --runs-dir (made by the runner CLIs), one CSV
row per finished run. Rerunning the same command trains only what is missing.
Curriculum vs. inference-time sensitivity: keep --train_ordering auto and give
--eval_ordering a list (or the reverse). lsa1 has no positional information, so it
is exactly invariant to the order of its context (SPEC §7).
"""

import sys

from src.gd_paper.config import ORDERINGS
from src.gd_paper.sweep import main
from src.gd_paper.sweep_flags import DriverDefaults
from src.process import guarded

DEFAULTS = DriverDefaults.of("eval_order", __doc__, figures="order", ordering=",".join(ORDERINGS))

if __name__ == "__main__":
    sys.exit(guarded(lambda: main(DEFAULTS)))
