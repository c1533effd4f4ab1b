"""The sequence-mixer study (Zoology's figure, on the ICL benchmark of miniseq): MQAR accuracy vs model width
for each sequence mixer at two numbers of key-value pairs κ, and boolean-task accuracy vs the
number of in-context examples per mixer. `make mixers` runs it.

    python -m scripts.mixers                # widths 16, 32, 64; κ 4 and 8; seed 0
    python -m scripts.mixers --seeds 0,1    # the same grid for every seed listed
    python -m scripts.mixers --quick        # width 16, κ 4, conjunction, 40 steps (smoke test)

MQAR follows Zoology's protocol (V = 256, T = 64, one head per mixer, 2 layers) with the ICL benchmark's
MLP state mixer (`mamba`, the selective state space of src/models/state_space.py, takes the
sequence mixer's place in the same block: Zoology's attention-vs-recurrence question); κ = 4 is Zoology's basic cell and κ = 8 the original's default. MQAR trains for the
original's default 3,000 steps: at 1,500, one head's attention stalled below its induction jump in
one seed of two at width 32 (0.31). The boolean runs use the recipe's default model (width 64,
4 heads), d = 10 and 40 examples, 2,000 steps.

Each run is the recipe's settings (`python -m runners.recipe task:... model.seq_mixer:...
model.state_mixer:mlp ...` makes the same), made by the job engine (finished runs are reused). Report: report/MIXERS.md,
report/mixers_results.json and report/figures/mixers/*.png (quick: under report/quick), with
the study's checks (CHECKS below) evaluated on the runs: each says pass, FAIL or n/a.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from plots.mixers_report import Check, write_report
from src.cli import UsageError, fail, guarded, seed_list
from src.cli.recipe import entry_of, lm_settings
from src.jobs.engine import Job, plan
from src.jobs.study import finish_study, study_dirs, study_parser
from src.registry import Choice, choice
from src.systems.lm import LMTrain, PairShape

PROG = "python -m scripts.mixers"
SEQ_MIXERS = ("attention", "linear_attention", "gated_linear_attn", "mamba")   # the original's names, and Mamba
WIDTHS, PAIRS, MQAR_STEPS, MQAR_HEADS = (16, 32, 64), (4, 8), 3000, 1
BOOLEAN = {"conjunction": PairShape(n_points=40, n_dims=10), "parity": PairShape(n_points=40, n_dims=10)}
BOOLEAN_STEPS = 2000
QUICK = {"widths": (16,), "pairs": (4,), "mqar_steps": 40, "boolean_steps": 40, "boolean": ("conjunction",)}
REFERENCE = "attention"          # the mixer the Zoology gap is measured against


def make_checks(mixers: Sequence[str], widths: Sequence[int], pairs: Sequence[int]) -> list[Check]:
    """The issue's targets for this study, fixed before the runs are read (never tuned to them)."""
    checks = [Check(f"{REFERENCE} solves MQAR at every width >= 32 (each κ, each seed)",
                    where={"task": "mqar", "mixer": REFERENCE}, minimum={"width": 32}, metric="accuracy",
                    low=0.97),
              Check(f"{REFERENCE} learns conjunction: accuracy at the last prediction point",
                    where={"task": "conjunction", "mixer": REFERENCE}, metric="last_point_accuracy", low=0.95),
              Check("parity (d = 10) stays near chance for every mixer: mean accuracy over the points",
                    where={"task": "parity"}, metric="mean_point_accuracy", low=0.45, high=0.55)]
    for other in mixers:
        if other != REFERENCE:
            checks.append(Check(f"the Zoology gap: {other} at width {min(widths)}, κ = {max(pairs)} stays at "
                                f"least 0.2 below {REFERENCE}",
                                where={"task": "mqar", "mixer": other, "width": min(widths), "kappa": max(pairs)},
                                metric="accuracy", high=-0.2, reference={"mixer": REFERENCE}))
    return checks


@dataclass
class MixerJob(Job):
    mixer: str = ""
    task: str = ""
    width: int = 0
    pairs: int = 0
    seed: int = 0
    heads: int = 0
    steps: int = 0
    learning_rate: float = 0.0
    batch_size: int = 0


def _job(runs_dir: Path, name: str, mixer: str, task_choice: Choice, *, width: int, heads: int,
         steps: int, seed: int, shape: PairShape = PairShape(), **labels) -> MixerJob:
    seq = entry_of("seq_mixer", mixer)
    settings = lm_settings(task_choice, Choice(seq.name, seq.default_options()), choice("state_mixer", "mlp"),
                           width=width, n_layer=2, n_head=heads, train=LMTrain(steps=steps, seed=seed),
                           pairs=shape)
    model, train = settings.model, settings.train
    return MixerJob(name, settings, runs_dir / name, cost=train.steps * model.width, mixer=mixer,
                    width=model.width, heads=model.n_head, steps=train.steps, seed=train.seed,
                    learning_rate=train.learning_rate, batch_size=train.batch_size, **labels)


def grid(quick: bool) -> tuple[Sequence[int], Sequence[int]]:
    """(MQAR widths, κ values) of the full study or of --quick."""
    return (QUICK["widths"], QUICK["pairs"]) if quick else (WIDTHS, PAIRS)


def make_jobs(runs_dir: Path, mixers: Sequence[str], seeds: Sequence[int], quick: bool) -> list[Job]:
    widths, pairs = grid(quick)
    mqar_steps = QUICK["mqar_steps"] if quick else MQAR_STEPS
    boolean_steps = QUICK["boolean_steps"] if quick else BOOLEAN_STEPS
    boolean = {task: BOOLEAN[task] for task in (QUICK["boolean"] if quick else BOOLEAN)}
    jobs = []
    for mixer in mixers:
        for seed in seeds:
            for kappa in pairs:
                for width in widths:
                    task = choice("task", "mqar", vocab_size=256, num_pairs=kappa)
                    jobs.append(_job(runs_dir, f"mqar_k{kappa}_{mixer}_w{width}_seed{seed}", mixer, task,
                                     width=width, heads=MQAR_HEADS, steps=mqar_steps, seed=seed,
                                     task="mqar", pairs=kappa))
            for task, shape in boolean.items():
                jobs.append(_job(runs_dir, f"{task}_{mixer}_seed{seed}", mixer, choice("task", task),
                                 width=64, heads=4, steps=boolean_steps, seed=seed, shape=shape,
                                 task=task, pairs=0))
    return plan(jobs)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = study_parser(PROG, __doc__, "width 16, κ 4, conjunction only, 40 steps (a smoke test)")
    parser.add_argument("--mixers", default=None, help=f"comma list of {', '.join(SEQ_MIXERS)} (default: all)")
    parser.add_argument("--seeds", default="0", help="comma list of training seeds (default: 0)")
    args = parser.parse_args(argv)
    try:
        runs_dir, report_dir = study_dirs(args, "mixers")
        mixers = [m.strip() for m in (args.mixers or ",".join(SEQ_MIXERS)).split(",") if m.strip()]
        if not mixers or any(m not in SEQ_MIXERS for m in mixers):
            raise UsageError(f"--mixers={args.mixers!r} is not accepted; accepted: a comma list of "
                             f"{', '.join(SEQ_MIXERS)}")
        seeds = seed_list(args.seeds)
    except UsageError as err:
        return fail(PROG, err)
    checks = make_checks(mixers, *grid(args.quick))
    return finish_study(PROG, argv, args, runs_dir, report_dir,
                        lambda: make_jobs(runs_dir, mixers, seeds, args.quick),
                        functools.partial(write_report, checks=checks))


if __name__ == "__main__":
    sys.exit(guarded(main))
