"""Rerun a run from its config.json alone (or train any attention-only Settings JSON).

    PYTHONPATH=. python -m runners.run --config runs/lsa1_seed0/config.json --out runs/lsa1_again
    PYTHONPATH=. python -m runners.run --config runs/x/config.json --set train.steps=200 --out runs/y

`--config` takes a run's config.json (schema 1 or 2; its "settings" are used) or a bare
settings mapping. Same settings and seed give the same metrics, bit for bit.
"""
import sys

from src.lsa_cli import rerun_main

from src.cli import guarded  # noqa: E402

if __name__ == "__main__":
    sys.exit(guarded(lambda: rerun_main(__doc__.splitlines()[0])))
