"""Training speed of the ICL benchmark's recipe for every sequence mixer (with the MLP state mixer):
median ms per training step after compilation, GFLOP per step (XLA's count) and the fraction of
this machine's matmul rate at the model's shapes ([B·T, D] @ [D, D]) that the step reaches, at two
cells. Part of `make bench`.

  recipe default   MQAR V = 256, T = 64, κ = 8; width 64, 2 layers, 4 heads, batch 64
  study cell       the same with one head (scripts.mixers' MQAR protocol, its widest model)
  original default the original recipe's own default cell, attention only: V = 8,192, width 128,
                   8 heads, batch 256 (3-step chunks: about 2 s a step)

Zoology's mixers (src/models/mixers/) at the study cell, beside attention's row there, each at
its registry defaults, and the zoo study's hybrid stacks (scripts/zoo.py's spellings): Zoology's
Based model (a base_conv layer, then based) and figure 2's BaseConv (kernel 3, then the long
convolution).

    python -m scripts.bench.recipe
"""

from __future__ import annotations

import sys

from scripts.bench.mechanisms import HEADER, speed_row
from src.flags import OneLineParser, dry_run, summary
from src.mixer_spec import mixer_stack, registry_entry
from src.device_rate import matmul_rate
from src.registry import Choice, choice
from src.systems.lm import LMTrain, lm_settings

SEQ_MIXERS = ("attention", "linear_attention", "gated_linear_attn", "mamba")  # the original's names
CELLS = {"recipe default (4 heads)": 4, "study cell (1 head)": 1}  # cell -> heads
ZOO = ("short_conv", "base_conv", "hyena", "h3", "based", "delta_net", "gated_delta_net", "mamba2", "rwkv7")
HYBRIDS = ("base_conv+based", "base_conv+base_conv:kernel_size=-1")


def original_default_cell(dense_layout: str = "flat", logits: str = "scored"):
    """The ICL benchmark recipe's own default cell, attention + MLP (MQAR V = 8,192, T = 64, κ = 8;
    width 128, 2 layers, 8 heads, batch 256), validated settings."""
    mixer = registry_entry("seq_mixer", "attention")
    return lm_settings(
        choice("task", "mqar"),
        Choice(mixer.name, mixer.default_options()),
        choice("state_mixer", "mlp"),
        width=128,
        n_layer=2,
        n_head=8,
        train=LMTrain(batch_size=256, logits=logits),
        dense_layout=dense_layout,
    )


def main(argv=None) -> int:
    OneLineParser(prog="python -m scripts.bench.recipe", description=summary(__doc__)).parse_args(
        list(sys.argv[1:] if argv is None else argv)
    )
    if dry_run("python -m scripts.bench.recipe", "time every mechanism"):
        return 0
    rate = matmul_rate((64 * 64, 64))
    print(
        f"{'seq_mixer':18} {'cell':26} {HEADER}   MQAR V=256 T=64 kappa=8, width 64, 2 layers, batch 64; "
        f"matmul [4096, 64] @ [64, 64]: {rate / 1e9:.1f} GFLOP/s"
    )
    for name in SEQ_MIXERS:
        mixer = registry_entry("seq_mixer", name)
        for cell, heads in CELLS.items():
            settings = lm_settings(
                choice("task", "mqar", vocab_size=256),
                Choice(mixer.name, mixer.default_options()),
                choice("state_mixer", "mlp"),
                width=64,
                n_layer=2,
                n_head=heads,
            )
            print(speed_row(f"{name:18} {cell:26}", settings, rate, width=45))
    for name in (*ZOO, *HYBRIDS):
        layers = mixer_stack(name, "+", "HYBRIDS")
        settings = lm_settings(
            choice("task", "mqar", vocab_size=256),
            layers[-1],
            choice("state_mixer", "mlp"),
            width=64,
            n_layer=2,
            n_head=1,
            seq_mixers=layers if len(layers) > 1 else (),
        )
        print(speed_row(f"{name:18} {'study cell (1 head)':26}", settings, rate, width=45))
    settings = original_default_cell()
    big_rate = matmul_rate((256 * 64, 128))
    print(
        f"{'attention':18} {'original default (8 heads)':26} (V 8192, width 128, batch 256; matmul "
        f"[16384, 128] @ [128, 128]: {big_rate / 1e9:.1f} GFLOP/s)"
    )
    print(
        speed_row(
            f"{'attention':18} {'original default (8 heads)':26}",
            settings,
            big_rate,
            width=45,
            chunk_steps=3,
            repeats=3,
        )
    )
    return 0


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
