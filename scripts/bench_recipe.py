"""Training speed of seed 001's recipe for every sequence mixer (with the MLP state mixer) at the
recipe's default cell (MQAR: V = 256, T = 64, κ = 8; width 64, 2 layers, 4 heads, batch 64):
median ms per training step after compilation. Part of `make bench`.

    PYTHONPATH=. python -m scripts.bench_recipe
"""
from __future__ import annotations

import sys

from src.recipe_cli import SEQ_MIXERS, parse
from src.recipe_train import ms_per_step


def main(argv=None) -> int:
    print(f"{'seq_mixer':18} {'ms/step':>8}   (recipe default: MQAR V=256 T=64 kappa=8, width 64, "
          "2 layers, batch 64)")
    for name in SEQ_MIXERS:
        settings = parse(["task:mqar", f"model.seq_mixer:{name}", "model.state_mixer:mlp"])[0]
        print(f"{name:18} {ms_per_step(settings):8.2f}")
    return 0


if __name__ == "__main__":
    from src.cli import guarded

    sys.exit(guarded(main))
