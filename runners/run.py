"""Rerun any run from its config.json alone, for every system (or train any settings JSON).

    python -m runners.run --config runs/lsa1_seed0/config.json --out runs/lsa1_again
    python -m runners.run --config runs/x/config.json --set train.steps=200 --out runs/y
    python -m runners.run --together group.json    # {"runs": [{"settings": ..., "out": DIR}, ...]}

`--config` takes a run's config.json (any system, any schema; its "settings" are used) or a
bare settings mapping. Same settings and seed give the same metrics, bit for bit.
"""

import sys

from src.flags import summary
from src.process import guarded
from src.cli.rerun import main as rerun_main


def main(argv=None) -> int:
    return rerun_main(argv, summary(__doc__))


if __name__ == "__main__":
    sys.exit(guarded(main))
