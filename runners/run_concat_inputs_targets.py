"""Train linear self-attention on concatenated tokens e_i = [x_i, y_i] (model `lsa1`).

One LSA layer (or, with --num_layers K, one weight-shared layer applied K times)
is compared with one (K) step(s) of gradient descent on the same eval tasks.

    python -m runners.run_concat_inputs_targets --out runs/lsa1 --steps 5000
"""

import sys

from src.flags import summary
from src.process import guarded
from src.cli.lsa import main as lsa_main


def main(argv=None) -> int:
    return lsa_main("lsa1", summary(__doc__), argv)


if __name__ == "__main__":
    sys.exit(guarded(main))
