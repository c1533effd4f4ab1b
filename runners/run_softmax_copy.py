"""Train the two-layer copy model on interleaved tokens x_1, ȳ_1, ..., x_q (model `twolayer`).

Layer 1 uses softmax attention and learns to copy each neighbour into its partner
token; layer 2 is linear and does the GD step. Tokens carry a concatenated
sinusoidal positional encoding of size 10 (model width 20).

    python -m runners.run_softmax_copy --out runs/twolayer --steps 10000
"""

import sys

from src.flags import summary
from src.process import guarded
from src.cli.lsa import main as lsa_main


def main(argv=None) -> int:
    return lsa_main("twolayer", summary(__doc__), argv)


if __name__ == "__main__":
    sys.exit(guarded(main))
