"""Training dynamics of in-context learning in linear attention (Zhang, Singh, Latham & Saxe,
ICML 2025): the original's `python train.py` command lines, as `python -m runners.dynamics`.

    python -m runners.dynamics --model attnM --head 8 --init 1e-6 --show
"""

import sys

from src.cli.dynamics import main  # noqa: F401 - runners.dynamics.main(argv)

if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
