"""Training speed of the gpt2 family for every attention mechanism (limits_of_icl), at the study's
size (configs/mechanisms.yaml: width 64, 3 layers, 4 heads, batch 64, d = 5, 11 points = 22
tokens): median ms per training step after compilation, the GFLOP of a step (XLA's count), the
fraction of this machine's matmul rate at the model's shapes ([B·T, D] @ [D, D]) that the step
reaches, and the ms/step of the batched dense layout beside the default flat one (the speed-up is
batched / flat). Part of `make bench`.

    python -m scripts.bench.mechanisms
"""

from __future__ import annotations

import sys

from dataclasses import replace

from src.flags import OneLineParser, dry_run, summary
from src.formats.limits_of_icl import read_config
from src.device_rate import matmul_rate
from src.loop import ms_per_step, step_flops
from src.registry import choice, registry
from src.systems import build

PROTOTYPE_MS = 30.0  # the 40-line Haiku prototype at this size, 2 cores
HEADER = f"{'ms/step':>8} {'GFLOP/step':>10} {'GFLOP/s':>8} {'of matmul':>9} {'batched':>8} {'speed-up':>8}"


def speed_row(name: str, settings, rate: float, width: int, chunk_steps: int = 50, repeats: int = 3) -> str:
    """One line for the trainer of `settings` (a sequence-family model): ms/step, GFLOP per step,
    the GFLOP/s that makes and its fraction of `rate` (FLOP/s of the matmul yardstick), then the
    ms/step of the same settings in the batched dense layout and the ratio of the two."""
    trainer = build(settings)
    ms, flops = ms_per_step(trainer, chunk_steps, repeats), step_flops(trainer)
    batched = ms_per_step(
        build(replace(settings, model=replace(settings.model, dense_layout="batched"))), chunk_steps, repeats
    )
    layouts = f"{batched:8.2f} {batched / ms:7.2f}x"
    if flops is None:
        return f"{name:{width}} {ms:8.2f} {'n/a':>10} {'n/a':>8} {'n/a':>9} {layouts}"
    achieved = flops / (ms / 1000)
    return f"{name:{width}} {ms:8.2f} {flops / 1e9:10.4f} {achieved / 1e9:8.1f} {achieved / rate:9.2f} {layouts}"


def main(argv=None) -> int:
    OneLineParser(prog="python -m scripts.bench.mechanisms", description=summary(__doc__)).parse_args(
        list(sys.argv[1:] if argv is None else argv)
    )
    if dry_run("python -m scripts.bench.mechanisms", "time every mechanism"):
        return 0
    base, _ = read_config("configs/mechanisms.yaml")
    rows = base.train.batch_size * 2 * base.curriculum.points.end
    rate = matmul_rate((rows, base.model.width))
    print(
        f"{'mechanism':18} {HEADER}   (width 64, 3 layers, batch 64, 22 tokens; matmul [{rows}, 64] @ "
        f"[64, 64]: {rate / 1e9:.1f} GFLOP/s; prototype softmax: {PROTOTYPE_MS:.0f} ms/step)"
    )
    for name in registry("seq_mixer").names():
        settings = replace(base, model=replace(base.model, seq_mixer=choice("seq_mixer", name))).validate()
        print(speed_row(name, settings, rate, width=18))
    return 0


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
