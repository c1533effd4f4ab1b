"""Training speed of seed 001's recipe for every sequence mixer (with the MLP state mixer):
median ms per training step after compilation, at two cells. Part of `make bench`.

  recipe default   MQAR V = 256, T = 64, κ = 8; width 64, 2 layers, 4 heads, batch 64
  study cell       the same with one head (scripts.mixers' MQAR protocol, its widest model)

    PYTHONPATH=. python -m scripts.bench_recipe
"""
from __future__ import annotations

import sys

from src.recipe_cli import SEQ_MIXERS, parse
from src.recipe_train import ms_per_step

CELLS = {"recipe default (4 heads)": [], "study cell (1 head)": ["--model.n_head", "1"]}


def main(argv=None) -> int:
    print(f"{'seq_mixer':18} " + " ".join(f"{cell:>26}" for cell in CELLS) + "   ms/step; MQAR V=256 T=64 "
          "kappa=8, width 64, 2 layers, batch 64")
    for name in SEQ_MIXERS:
        times = [ms_per_step(parse(["task:mqar", f"model.seq_mixer:{name}", "model.state_mixer:mlp", *extra])[0])
                 for extra in CELLS.values()]
        print(f"{name:18} " + " ".join(f"{t:26.2f}" for t in times))
    return 0


if __name__ == "__main__":
    from src.cli import guarded

    sys.exit(guarded(main))
