"""The mechanisms study (limits_of_icl): every attention mechanism at one size, 3 seeds, under
every stress test of the workbench. `make mechanisms` runs it.

    python -m scripts.mechanisms            # configs/mechanisms.yaml, 3 seeds
    python -m scripts.mechanisms --quick    # 150 steps, 1 seed (a smoke test)
    python -m scripts.mechanisms --config configs/paper/mechanisms.yaml   # the paper's scale (a GPU study)

Each run is configs/mechanisms.yaml (read as `python -m runners.train` reads it) with its
mechanism and seed, made by the job engine (src/jobs/: finished runs are reused); the report is
report/MECHANISMS.md, report/mechanisms_results.json and report/figures/mechanisms/*.png (quick:
under report/quick).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

from plots.mechanisms_report import write_report
from src.flags import UsageError
from src.formats.limits_of_icl import read_config
from src.jobs.declared import Cell, CellJob, Study, cell_runs, quick_seeds
from src.jobs.study import run_as_command, study_command
from src.registry import choice, registry

CONFIG = "configs/mechanisms.yaml"
SEEDS = (0, 1, 2)
# the mechanisms of limits_of_icl (its attention_type names) and plain causal linear attention; any
# other registered sequence mixer (the ICL benchmark's, Mamba) with --mechanisms
MECHANISMS = ("softmax_causal", "local", "mqa", "rela", "favor", "rebased", "linear")
QUICK = {"steps": 150, "log_every": 50, "checkpoint_every": 150, "eval_size": 300}


def mechanism_cells(mechanisms: Sequence[str], quick: bool, config: str = CONFIG) -> list[Cell]:
    """One cell per mechanism: the config's settings with its seq_mixer (QUICK's train sizes when quick)."""
    base, _ = read_config(config)
    train = replace(base.train, **(QUICK if quick else {}))
    return [
        Cell(
            m, replace(base, model=replace(base.model, seq_mixer=choice("seq_mixer", m)), train=train), {"mechanism": m}
        )
        for m in mechanisms
    ]


def make_jobs(
    runs_dir: Path, mechanisms: Sequence[str], seeds: Sequence[int], quick: bool, config: str = CONFIG
) -> list[CellJob]:
    """Every mechanism x seed of `config`, `<mechanism>_seed<seed>` (the grid other studies reuse)."""
    return cell_runs(mechanism_cells(mechanisms, quick, config), seeds, runs_dir)


def mechanisms_of(flags) -> list[str]:
    known = registry("seq_mixer").names()
    mechanisms = [m.strip() for m in (flags.mechanisms or ",".join(MECHANISMS)).split(",") if m.strip()]
    if [m for m in mechanisms if m not in known] or not mechanisms:
        raise UsageError(
            f"--mechanisms={flags.mechanisms!r} is not accepted; accepted: a comma list of {', '.join(known)}"
        )
    return mechanisms


def add_flags(parser) -> None:
    parser.add_argument(
        "--mechanisms", default=None, help=f"comma list of seq_mixer names (default: {', '.join(MECHANISMS)})"
    )
    parser.add_argument(
        "--config",
        default=CONFIG,
        help=f"every run's config file, read as runners.train reads it (default: {CONFIG}; "
        "configs/paper/mechanisms.yaml is the paper's scale)",
    )


STUDY = Study(
    "mechanisms",
    __doc__,
    "150 steps, seed 0 (a smoke test)",
    cells=lambda flags, runs_dir: mechanism_cells(mechanisms_of(flags), flags.quick, flags.config),
    report=write_report,
    seeds=quick_seeds(SEEDS),
    flags=add_flags,
    check=mechanisms_of,
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
