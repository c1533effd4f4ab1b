"""Training speed of the gpt2 family for every attention mechanism (seed 000), at the study's
size (configs/mechanisms.yaml: width 64, 3 layers, 4 heads, batch 64, d = 5, 11 points = 22
tokens): median ms per training step after compilation. Part of `make bench`.

    PYTHONPATH=. python -m scripts.bench_mechanisms
"""
from __future__ import annotations

import sys

from src.gpt2_cli import settings_from_argv
from src.registry import registry
from src.seq_train import ms_per_step

PROTOTYPE_MS = 30.0   # the 40-line Haiku prototype at this size, 2 cores


def main(argv=None) -> int:
    print(f"{'mechanism':16} {'ms/step':>8}   (width 64, 3 layers, batch 64, 22 tokens; prototype "
          f"softmax: {PROTOTYPE_MS:.0f} ms/step)")
    for name in registry("seq_mixer").names():
        settings = settings_from_argv(["--config", "configs/mechanisms.yaml",
                                       "--set", f"model.attention_type={name}"])
        print(f"{name:16} {ms_per_step(settings):8.2f}")
    return 0


if __name__ == "__main__":
    from src.cli import guarded

    sys.exit(guarded(main))
