"""Noise/outlier-robustness sweep: train and evaluate every model under corrupted contexts.

    python -m eval_noise \\
      --models lsa1,twolayer --noise_mode label_noise,random_pairs \\
      --p 0.0,0.25 --sigma 0.5 --placement clean_first,noisy_first \\
      --train_noise_mode auto --eval_noise_mode auto \\
      --ordering random --seeds 0 --out results_noise.csv --runs-dir runs/eval_noise

One run directory per grid point under --runs-dir (made by the runner CLIs), one CSV
row per finished run; attention is saved so every row gets its AUROC (clean vs.
corrupted pairs). Inference-only noise: --train_noise_mode clean (the grid's modes
then act on the eval set only). Rerunning the same command trains only what is missing.
"""

import sys

from src.gd_paper.sweep import main
from src.gd_paper.sweep_flags import DriverDefaults
from src.process import guarded

DEFAULTS = DriverDefaults.of(
    "eval_noise",
    __doc__,
    figures="noise",
    noise_mode="label_noise,random_pairs",
    p="0.0,0.25",
    sigma="0.5",
    placement="clean_first,noisy_first",
)

if __name__ == "__main__":
    sys.exit(guarded(lambda: main(DEFAULTS)))
