"""The training-dynamics study (Zhang et al., ICML 2025): the merged and separate key-query models,
the cubic MLP, the rank sweep and the in-context fraction at the original's sizes. `make dynamics`
runs it.

    python -m scripts.dynamics            # the original's sizes
    python -m scripts.dynamics --quick    # small sizes, for a smoke test

(a) ATTN_M (as it is, and restricted to the MLP's function) vs the cubic MLP (the original's
defaults); (b) ATTN_S with rank-one heads at D = 4: the staircase, under the original's
initialisation and under every-entry-std-init; (c) the rank sweep R in {8, 4, 2, 1} at D = 8; (d) the in-context
fraction
sweep c in {0, 0.2, ..., 1} with in-context and in-weight test losses. Every run is a
`python -m runners.dynamics` run directory made by the job engine (src/jobs/: finished
runs are reused, changed ones redone); the report is report/DYNAMICS.md,
report/dynamics_results.json and report/figures/dynamics/*.png. The runs are the original's README
commands (quoted beside each part) as the Settings they mean.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from plots.dynamics_report import write_report
from src.jobs.declared import Cell, CellJob, Study, cell_runs, quick_cells
from src.jobs.study import run_as_command, study_command
from src.registry import choice
from src.systems.dynamics import DynamicsSettings, DynamicsTrain
from src.tasks.dynamics import DynamicsTaskConfig


def run(model: str, options: dict, *, task: dict | None = None, show: bool = False, **train) -> DynamicsSettings:
    """The settings of one of the original's commands (its defaults for what it does not set)."""
    return DynamicsSettings(
        task=DynamicsTaskConfig(**(task or {})),
        model=choice("dynamics_model", model, **options),
        train=DynamicsTrain(**train),
        show=show,
    ).validate()


# part -> [(run name, settings)], each the original's README command quoted beside it. The
# initialisation (src/models/dynamics.py INIT_CONVENTIONS): the original's current code for the
# merged/MLP, staircase and icl parts; the code of the paper's time for the rank sweep (under the
# current code no rank leaves the first plateau in the README's 20,001 epochs); the staircase's
# `uniform` companion keeps this workbench's earlier convention for comparison. The staircase
# runs to 80,001 epochs: the fourth drop comes at ~58,000 under the original's initialisation.
PARTS = {
    "merged_vs_mlp": [  # train.py --model attnM | mlp --cubic_feat --head 8 --init 1e-6 --show
        ("attnM", run("attn_merged", {"heads": 8}, init=1e-6, show=True)),
        ("attnM_restricted", run("attn_merged", {"heads": 8, "restricted": True}, init=1e-6, show=True)),
        ("mlp", run("cubic_mlp", {"heads": 8}, init=1e-6, show=True)),
    ],
    "staircase": [  # --model attnS --head 5 --init 1e-2 --epoch 10001 --lr 0.02 (run to 80001)
        (
            "attnS_rank1_D4",
            run(
                "attn_separate",
                {"heads": 5, "rank": 1},
                init=1e-2,
                learning_rate=0.02,
                epochs=80001,
                log_every=100,
                show=True,
            ),
        )
    ],
    "staircase_uniform": [  # the same with every entry ~ init·N(0, 1)
        (
            "attnS_rank1_D4_uniform",
            run(
                "attn_separate",
                {"heads": 5, "rank": 1},
                init=1e-2,
                init_convention="uniform",
                learning_rate=0.02,
                epochs=80001,
                log_every=100,
            ),
        )
    ],
    "rank_sweep": [  # --model attnS --head 9 --KQ_dim R --in_dim 8 --seq_len 32 --init 5e-3 --trainset_size 80000
        (
            f"attnS_D8_R{r}",
            run(
                "attn_separate",
                {"heads": 9, "rank": r},
                task={"in_dim": 8, "seq_len": 32, "trainset_size": 80000},
                init=5e-3,
                init_convention="paper",
                learning_rate=0.02,
                epochs=20001,
                log_every=50,
            ),
        )
        for r in (8, 4, 2, 1)
    ],
    "icl_sweep": [  # --model attnM --icl "$c" --head 8 --testset 5000 --init 1e-6 --white_cov --lr 0.0005 --epoch 4001
        (
            f"attnM_icl{c}",
            run(
                "attn_merged",
                {"heads": 8},
                task={"icl": float(c), "testset_size": 5000, "white_cov": True},
                init=1e-6,
                learning_rate=0.0005,
                epochs=4001,
            ),
        )
        for c in ("0", "0.2", "0.4", "0.6", "0.8", "1")
    ],
}
QUICK = {"trainset_size": 600, "testset_size": 200, "log_every": 20}
QUICK_EPOCHS = {
    "merged_vs_mlp": 3001,
    "staircase": 4001,
    "staircase_uniform": 4001,
    "rank_sweep": 1001,
    "icl_sweep": 401,
}


def quick(settings: DynamicsSettings, part: str) -> DynamicsSettings:
    """The smoke-test size of a run: a small set, fewer epochs, records every 20 epochs."""
    t = settings.task
    task = replace(t, trainset_size=QUICK["trainset_size"], testset_size=QUICK["testset_size"] if t.testset_size else 0)
    train = replace(settings.train, epochs=QUICK_EPOCHS[part], log_every=QUICK["log_every"])
    return replace(settings, task=task, train=train).validate()


def study_cells(is_quick: bool) -> list[Cell]:
    """Every run of PARTS (whole runs: the original's commands carry their seeds), its part a tag;
    cost: epochs x training-set size."""
    cells = []
    for part, runs in PARTS.items():
        for name, settings in runs:
            settings = quick(settings, part) if is_quick else settings
            cost = settings.train.epochs * settings.task.trainset_size
            cells.append(Cell(name, settings, {"part": part}, cost=cost))
    return cells


def make_jobs(runs_dir: Path, is_quick: bool) -> list[CellJob]:
    return cell_runs(study_cells(is_quick), None, runs_dir)


STUDY = Study(
    "dynamics",
    __doc__,
    "small sizes (a smoke test, ~1 min)",
    cells=quick_cells(study_cells),
    report=write_report,
    seeds=lambda flags: None,
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
