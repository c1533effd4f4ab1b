"""Zoology's mixer zoo on MQAR (Arora et al. 2023, figure 2, at a CPU's scale): attention beside
the gated convolutions (BaseConv, Hyena, H3) and the input-dependent mixers with a small recurrent
state (Zoology's Based model, a BaseConv layer then Based; DeltaNet, Gated DeltaNet, Mamba-2,
RWKV-7), over sequence lengths and widths, each cell the best of a small learning-rate sweep
(Zoology's protocol). `make zoo` runs configs/zoo.yaml for seed 0.

    python -m scripts.zoo                              # configs/zoo.yaml, every mixer, seed 0
    python -m scripts.zoo --mixers attention,hyena     # any registered mixers, or hybrids a+b
    python -m scripts.zoo --mixers base_conv:kernel_size=5   # name:option=value sets an option
    python -m scripts.zoo --quick                      # width 16, T 64, κ 4, 40 steps (smoke test)
    python -m scripts.zoo --config configs/paper/zoo.yaml   # Zoology's own grid (a GPU study)
    python -m scripts.zoo --config configs/zoo_zoology_block.yaml   # the grid under Zoology's own block

A grid's `block: zoology` trains every model in Zoology's own block (src/models/sequence_presets.py
with_block: layer norm, no MLP, positions for attention only, dropout 0.1); its runs are named
..._zoology_block_seed<s> and the report's Model line says so.

Each run is the recipe's settings (`python -m runners.recipe task:mqar model.seq_mixer:<mixer>
model.state_mixer:mlp ...`; a hybrid adds --model.seq_mixers a,b), 2 layers, 1 head, made by the
job engine (finished runs are reused). Report: report/ZOO.md, report/zoo_results.json and
report/figures/zoo/accuracy_state.png (plots/zoo_report.py; quick: under report/quick).
"""

from __future__ import annotations

from dataclasses import replace

from plots.zoo_report import write_report
from scripts.mixers import mixer_cells
from scripts.mixers_grid import Cell as GridCell, Grid, mixer_choices, read_grid
from src.flags import UsageError, refuse_repeats, seed_list
from src.jobs.declared import Study
from src.jobs.study import run_as_command, study_command

CONFIG = "configs/zoo.yaml"
# Zoology's figure-2 models (BaseConv alternates a short and the long convolution by layer, as its
# configs do) and the Based paper's, as the study spells them (a+b: a hybrid stack; name:option=value)
ZOO = (
    "attention",
    "base_conv+base_conv:kernel_size=-1",
    "hyena",
    "h3",
    "rwkv7",
    "base_conv+based",
    "delta_net",
    "gated_delta_net",
    "mamba2",
)
QUICK_GRID = Grid(cells=(GridCell(seq_len=64, kappa=4, steps=40),), widths=(16,), learning_rates=(3e-3,))


def mixer_names(text: str | None) -> list[str]:
    """--mixers: registered sequence mixers (attention for causal softmax), each `name` or
    `name:option=value[:...]`, or hybrids a+b of them (UsageError, one line, for a bad one)."""
    names = [m.strip() for m in (text or ",".join(ZOO)).split(",") if m.strip()]
    if not names:
        raise UsageError(
            f"--mixers={text!r} is not accepted; accepted: a comma list of mixers "
            "(python -m runners.recipe --choices), name:option=value, or hybrids a+b"
        )
    refuse_repeats("--mixers", text, names)
    for name in names:
        mixer_choices(name)
    return names


def grid_of(flags) -> Grid:
    """The grid of the flags, one head per mixer (UsageError for a grid with the boolean tasks)."""
    grid = QUICK_GRID if flags.quick and not flags.config else read_grid(flags.config or CONFIG)
    if grid.boolean:
        raise UsageError(
            f"--config={flags.config!r}: boolean=true is not accepted here; accepted: MQAR cells "
            "only (the boolean tasks are scripts.mixers')"
        )
    return replace(grid, heads=1)


def add_flags(parser) -> None:
    parser.add_argument("--mixers", default=None, help=f"comma list (default: {', '.join(ZOO)})")
    parser.add_argument("--seeds", default="0", help="comma list of training seeds (default: 0)")
    parser.add_argument("--config", default=None, help=f"a YAML grid (scripts.mixers_grid's keys; default {CONFIG})")


STUDY = Study(
    "zoo",
    __doc__,
    "width 16, T 64, κ 4, 40 steps (a smoke test)",
    cells=lambda flags, runs_dir: mixer_cells(mixer_names(flags.mixers), seed_list(flags.seeds), False, grid_of(flags)),
    report=write_report,
    seeds=lambda flags: None,  # whole runs: the mixers study's grid, seeds inside it
    flags=add_flags,
    check=lambda flags: (mixer_names(flags.mixers), seed_list(flags.seeds), grid_of(flags)),
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
