"""Training speed of the ICL benchmark's recipe for every sequence mixer (with the MLP state mixer):
median ms per training step after compilation, at two cells. Part of `make bench`.

  recipe default   MQAR V = 256, T = 64, κ = 8; width 64, 2 layers, 4 heads, batch 64
  study cell       the same with one head (scripts.mixers' MQAR protocol, its widest model)

    python -m scripts.bench_recipe
"""
from __future__ import annotations

import sys

from src.cli import OneLineParser, dry_run, summary
from src.cli.recipe import entry_of, lm_settings
from src.loop import ms_per_step
from src.registry import Choice, choice
from src.systems import build

SEQ_MIXERS = ("attention", "linear_attention", "gated_linear_attn", "mamba")   # the original's names
CELLS = {"recipe default (4 heads)": 4, "study cell (1 head)": 1}      # cell -> heads


def main(argv=None) -> int:
    OneLineParser(prog="python -m scripts.bench_recipe", description=summary(__doc__)).parse_args(
        list(sys.argv[1:] if argv is None else argv))
    if dry_run("python -m scripts.bench_recipe", "time every mechanism"):
        return 0
    print(f"{'seq_mixer':18} " + " ".join(f"{cell:>26}" for cell in CELLS) + "   ms/step; MQAR V=256 T=64 "
          "kappa=8, width 64, 2 layers, batch 64")
    for name in SEQ_MIXERS:
        mixer = entry_of("seq_mixer", name)
        times = [ms_per_step(build(lm_settings(choice("task", "mqar", vocab_size=256),
                                               Choice(mixer.name, mixer.default_options()),
                                               choice("state_mixer", "mlp"), width=64, n_layer=2,
                                               n_head=heads)), chunk_steps=20)
                 for heads in CELLS.values()]
        print(f"{name:18} " + " ".join(f"{t:26.2f}" for t in times))
    return 0


if __name__ == "__main__":
    from src.cli import guarded

    sys.exit(guarded(main))
