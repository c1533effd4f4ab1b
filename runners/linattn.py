"""The earlier name of `python -m runners.dynamics` (Zhang et al.'s `python train.py`), kept so that
scripts typed before the rename still run: it says so on stderr, then runs runners.dynamics
(whose default run directory is runs/dynamics/, where this name's was runs/linattn/)."""

import sys

if __name__ == "__main__":
    from src.cli.dynamics import main
    from src.process import guarded

    print("runners.linattn is now runners.dynamics (the same flags; runs under runs/dynamics/)", file=sys.stderr)
    sys.exit(guarded(main))
