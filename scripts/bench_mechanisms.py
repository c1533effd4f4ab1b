"""Training speed of the gpt2 family for every attention mechanism (limits_of_icl), at the study's
size (configs/mechanisms.yaml: width 64, 3 layers, 4 heads, batch 64, d = 5, 11 points = 22
tokens): median ms per training step after compilation. Part of `make bench`.

    python -m scripts.bench_mechanisms
"""
from __future__ import annotations

import sys

from dataclasses import replace

from src.cli import OneLineParser, dry_run, summary
from src.cli.gpt2 import read_config
from src.loop import ms_per_step
from src.registry import choice, registry
from src.systems import build

PROTOTYPE_MS = 30.0   # the 40-line Haiku prototype at this size, 2 cores


def main(argv=None) -> int:
    OneLineParser(prog="python -m scripts.bench_mechanisms", description=summary(__doc__)).parse_args(
        list(sys.argv[1:] if argv is None else argv))
    if dry_run("python -m scripts.bench_mechanisms", "time every mechanism"):
        return 0
    print(f"{'mechanism':16} {'ms/step':>8}   (width 64, 3 layers, batch 64, 22 tokens; prototype "
          f"softmax: {PROTOTYPE_MS:.0f} ms/step)")
    base, _ = read_config("configs/mechanisms.yaml")
    for name in registry("seq_mixer").names():
        settings = replace(base, model=replace(base.model, seq_mixer=choice("seq_mixer", name))).validate()
        print(f"{name:16} {ms_per_step(build(settings)):8.2f}")
    return 0


if __name__ == "__main__":
    from src.cli import guarded

    sys.exit(guarded(main))
