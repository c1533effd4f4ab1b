"""GPT-2-style in-context regression with a pluggable attention mechanism (limits_of_icl, "Not All
Attention Is Created Equal"): the original's `python train.py --config FILE.yaml`.

    python -m runners.train --config configs/dummy.yaml
    python -m runners.train --config configs/quick.yaml --set model.attention_type=mqa
"""

import sys

from src.cli.gpt2 import main  # noqa: F401 - runners.train.main(argv)

if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
